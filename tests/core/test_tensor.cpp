// Tests of include/oar/core/tensor.hpp: owning tensors, views, alignment and resize.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <cstddef>      // std::size_t
#include <cstdint>      // std::uintptr_t
#include <type_traits>  // std::is_convertible_v

#include <oar/core/tensor.hpp>  // under test

using oar::make_dims;

namespace {
bool aligned64(const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 64 == 0; }
}  // namespace

TEST_CASE("a Tensor is zero-initialised with batch times sample size elements") {
    oar::Tensor t(100, make_dims(1, 28, 28));
    CHECK(t.batch() == 100);
    CHECK(t.dims() == make_dims(1, 28, 28));
    CHECK(t.size() == 100u * 784u);
    CHECK(t.span().size() == t.size());
    bool all_zero = true;
    for (float v : t.span()) all_zero = all_zero && v == 0.0f;
    CHECK(all_zero);
}

TEST_CASE("a default Tensor is empty") {
    const oar::Tensor t;
    CHECK(t.size() == 0);
    CHECK(t.batch() == 0);
    CHECK(t.dims().rank == 0);
    CHECK(t.view().size() == 0);
}

TEST_CASE("a double tensor is zero-initialised too") {
    oar::basic_tensor<double> t(3, make_dims(5));
    CHECK(t.size() == 15);
    for (std::size_t i = 0; i < t.size(); ++i) CHECK(t[i] == 0.0);
}

TEST_CASE("tensor data is 64-byte aligned for every size") {
    for (std::size_t n = 1; n <= 70; ++n) {
        oar::Tensor t(n, make_dims(3));
        CHECK(aligned64(t.data()));
        oar::basic_tensor<double> d(1, make_dims(n));
        CHECK(aligned64(d.data()));
    }
    oar::Tensor t(2, make_dims(5));
    t.resize(1000, make_dims(7));  // grown: a new allocation, still aligned
    CHECK(aligned64(t.data()));
}

TEST_CASE("element access writes and reads the same storage") {
    oar::Tensor t(2, make_dims(3));
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(i) * 1.5f;
    const oar::Tensor& ct = t;
    for (std::size_t i = 0; i < t.size(); ++i) CHECK(ct[i] == static_cast<float>(i) * 1.5f);
    CHECK(ct.data() == t.data());
    CHECK(ct.span().data() == t.data());
}

TEST_CASE("a mutable view aliases the tensor and converts to a const view") {
    oar::Tensor t(4, make_dims(2, 3));
    oar::MutableTensorView mv = t;
    CHECK(mv.data() == t.data());
    CHECK(mv.batch() == 4);
    CHECK(mv.dims() == make_dims(2, 3));
    CHECK(mv.sample_size() == 6);
    CHECK(mv.size() == 24);
    mv[7] = 42.0f;
    CHECK(t[7] == 42.0f);

    oar::TensorView cv = mv;  // float -> const float
    CHECK(cv.data() == t.data());
    CHECK(cv.batch() == 4);
    CHECK(cv.dims() == make_dims(2, 3));
    CHECK(cv[7] == 42.0f);
    CHECK(cv.span().size() == 24);

    const oar::Tensor& ct = t;
    oar::TensorView from_const = ct;
    CHECK(from_const.data() == t.data());

    static_assert(std::is_convertible_v<oar::MutableTensorView, oar::TensorView>);
    static_assert(!std::is_convertible_v<oar::TensorView, oar::MutableTensorView>);
    static_assert(std::is_convertible_v<oar::Tensor&, oar::MutableTensorView>);
    static_assert(std::is_convertible_v<const oar::Tensor&, oar::TensorView>);
    static_assert(!std::is_convertible_v<const oar::Tensor&, oar::MutableTensorView>);
    static_assert(std::is_same_v<decltype(ct.view()), oar::TensorView>);
}

TEST_CASE("shape_string puts the batch in front of the per-sample dims") {
    oar::Tensor t(100, make_dims(1, 28, 28));
    CHECK(t.view().shape_string() == "[100, 1, 28, 28]");
    CHECK(oar::TensorView(nullptr, 7, make_dims(10)).shape_string() == "[7, 10]");
    CHECK(oar::TensorView(nullptr, 5, oar::Dims{}).shape_string() == "[5]");
    CHECK(oar::TensorView{}.shape_string() == "[0]");
}

TEST_CASE("sample(i) points at the i-th sample of the batch") {
    oar::Tensor t(5, make_dims(2, 3));
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(i);
    const oar::TensorView v = t;
    for (std::size_t s = 0; s < 5; ++s) {
        CHECK(v.sample(s) == t.data() + s * 6);
        CHECK(*v.sample(s) == static_cast<float>(s * 6));
    }
}

// A std::vector that grows allocates the new block while the old one is still alive, so the new
// block cannot start at the old address: an unchanged data() proves that nothing was reallocated.
TEST_CASE("resize updates batch and dims and never reallocates within the capacity") {
    oar::Tensor t(64, make_dims(1, 28, 28));
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = 1.0f;
    const float* before = t.data();

    t.resize(10, make_dims(1, 28, 28));  // shrink
    CHECK(t.batch() == 10);
    CHECK(t.dims() == make_dims(1, 28, 28));
    CHECK(t.size() == 10u * 784u);
    CHECK(t.view().size() == 10u * 784u);
    CHECK(t.data() == before);
    CHECK(t[0] == 1.0f);  // kept elements keep their values

    t.resize(64, make_dims(784));  // back up to the original element count, other dims
    CHECK(t.batch() == 64);
    CHECK(t.dims() == make_dims(784));
    CHECK(t.size() == 64u * 784u);
    CHECK(t.data() == before);

    t.resize(32, make_dims(2, 784));  // same count, different split between batch and sample
    CHECK(t.data() == before);
    CHECK(t.view().shape_string() == "[32, 2, 784]");

    t.resize(65, make_dims(784));  // beyond the capacity: reallocates, stays aligned
    CHECK(t.data() != before);
    CHECK(aligned64(t.data()));
    CHECK(t.size() == 65u * 784u);
}
