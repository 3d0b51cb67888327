// Tests of include/oar/fwd.hpp: the forward declarations are enough to name oar's types in
// declarations (pointers, references, aliases) without any definition, and they declare the
// templates the way their definitions do.
//
// Only fwd.hpp is included: this file proves the header stands alone and defines nothing.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <type_traits>  // std::is_same_v

#include <oar/fwd.hpp>  // under test

// What a header that only names oar's types can declare with fwd.hpp alone (never defined here).
namespace fwd_test {
struct SomeLayer;
using Net = oar::Network<oar::Sequential<SomeLayer>, oar::Shape<1, 28, 28>, oar::cpu>;
void train_one_epoch(Net& net, const oar::Tensor& images);
const oar::Dims* first_dims(const oar::basic_tensor_view<const float>& v);
void report(const oar::error& e);
}  // namespace fwd_test
using fwd_test::Net;

namespace {

template <class T>
concept complete = requires { sizeof(T); };

template <class T>
concept names_basic_cpu = requires { typename oar::basic_cpu<T>; };

struct Holder {
    Net* net = nullptr;
    oar::Tensor* batch = nullptr;
    const oar::basic_tensor<double>* checks = nullptr;
    oar::basic_tensor_view<float>* view = nullptr;
};

}  // namespace

static_assert(std::is_same_v<oar::cpu, oar::basic_cpu<float>>);
static_assert(std::is_same_v<oar::Tensor, oar::basic_tensor<float>>);
static_assert(!std::is_same_v<oar::Shape<1, 28>, oar::Shape<28, 1>>);

// fwd.hpp declares, it does not define (it "includes nothing heavy").
static_assert(!complete<oar::Dims>);
static_assert(!complete<oar::Shape<3>>);
static_assert(!complete<oar::cpu>);
static_assert(!complete<oar::Tensor>);
static_assert(!complete<oar::error>);
static_assert(!complete<Net>);

TEST_CASE("forward-declared types can be held by pointer and passed by reference") {
    Holder h;
    CHECK(h.net == nullptr);
    CHECK(h.batch == nullptr);
    CHECK(h.checks == nullptr);
    CHECK(h.view == nullptr);
    Net* other = nullptr;
    h.net = other;
    CHECK(h.net == other);
}

// backend.hpp defines `template <std::floating_point T> struct basic_cpu`. A redeclaration must
// carry the same constraint, or a translation unit that includes fwd.hpp and backend.hpp (in
// either order) fails to compile ("declaration of template parameter 'T' with different
// constraints"). With the matching declaration, basic_cpu<int> cannot even be named here.
TEST_CASE("fwd.hpp constrains basic_cpu like its definition, so both headers can be included together") {
    CHECK(names_basic_cpu<float>);
    CHECK(names_basic_cpu<double>);
    CHECK_FALSE(names_basic_cpu<int>);
}
