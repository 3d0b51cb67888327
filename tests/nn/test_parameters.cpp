// Tests of include/oar/nn/parameters.hpp: the flat parameter/gradient buffers, their named
// entries, state_dict views and load_state_dict (all-or-nothing, every failure naming the key).
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <cstddef>  // std::size_t
#include <cstdint>  // std::uintptr_t
#include <string>   // std::string
#include <vector>   // std::vector

#include <oar/nn/parameters.hpp>  // under test

#include "support/errors.hpp"  // oar_test::message_of, contains: checking the error messages

using oar::make_dims;
using oar_test::contains;
using oar_test::message_of;

namespace {

/// Three tensors laid out as a network would: each at a multiple of 16 floats.
std::vector<oar::ParamEntry> layout() {
    return {{"0.weight", make_dims(2, 3), 0, 6}, {"0.bias", make_dims(3), 16, 3}, {"2.weight", make_dims(3, 1), 32, 3}};
}
constexpr std::size_t buffer_size = 48;

/// A parameter set whose entry k holds base + 10 k + i at element i.
template <class T = float>
oar::basic_parameter_set<T> filled(T base) {
    oar::basic_parameter_set<T> p(buffer_size, layout());
    for (std::size_t k = 0; k < p.entries().size(); ++k) {
        auto v = p.value(p.entries()[k]);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = base + T(10 * k + i);
    }
    return p;
}

std::vector<float> snapshot(const oar::ParameterSet& p) { return {p.values().begin(), p.values().end()}; }

/// Loads the state_dict of filled(50), changed by edit(state), into filled(1): requires that to throw
/// E, checks that it left the values unchanged, and returns the message.
template <class E, class Edit>
std::string failed_load(Edit edit) {
    oar::ParameterSet dst = filled(1.0f);
    const auto before = snapshot(dst);
    const oar::ParameterSet src = filled(50.0f);
    auto state = src.state_dict();
    edit(state);
    const std::string what = message_of<E>([&] { dst.load_state_dict(state); });
    CHECK(snapshot(dst) == before);
    return what;
}

}  // namespace

TEST_CASE("a parameter set holds zeroed, 64-byte aligned value and gradient buffers") {
    oar::ParameterSet p(buffer_size, layout());
    CHECK(p.values().size() == buffer_size);
    CHECK(p.grads().size() == buffer_size);
    CHECK(reinterpret_cast<std::uintptr_t>(p.values().data()) % 64 == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(p.grads().data()) % 64 == 0);
    for (float v : p.values()) CHECK(v == 0.0f);
    for (float g : p.grads()) CHECK(g == 0.0f);
    CHECK(p.values().data() != p.grads().data());
}

TEST_CASE("entries keep their order and count() sums their sizes without the padding") {
    const oar::ParameterSet p(buffer_size, layout());
    REQUIRE(p.entries().size() == 3);
    CHECK(p.entries()[0].key == "0.weight");
    CHECK(p.entries()[1].key == "0.bias");
    CHECK(p.entries()[2].key == "2.weight");
    CHECK(p.count() == 6 + 3 + 3);
    CHECK(oar::ParameterSet{}.count() == 0);
}

TEST_CASE("value(e) and grad(e) are views at the entry's offset in the flat buffers") {
    oar::ParameterSet p(buffer_size, layout());
    const auto& bias = p.entry("0.bias");
    CHECK(bias.offset == 16);
    auto v = p.value(bias);
    auto g = p.grad(bias);
    CHECK(v.data() == p.values().data() + 16);
    CHECK(g.data() == p.grads().data() + 16);
    CHECK(v.size() == 3);
    v[2] = 5.0f;
    g[0] = -1.0f;
    CHECK(p.values()[18] == 5.0f);
    CHECK(p.grads()[16] == -1.0f);
    const oar::ParameterSet& cp = p;
    CHECK(cp.value(bias)[2] == 5.0f);
    CHECK(cp.grad(bias)[0] == -1.0f);
}

TEST_CASE("entry() of an unknown key throws value_error naming the key") {
    const oar::ParameterSet p(buffer_size, layout());
    const std::string what = message_of<oar::value_error>([&] { (void)p.entry("9.weight"); });
    CHECK(contains(what, "'9.weight'"));
    CHECK(contains(what, "3 parameter tensors"));
}

TEST_CASE("clear_grad zeroes every gradient and leaves the values alone") {
    oar::ParameterSet p = filled(1.0f);
    for (auto& g : p.grads()) g = 3.0f;
    const auto before = snapshot(p);
    p.clear_grad();
    for (float g : p.grads()) CHECK(g == 0.0f);
    CHECK(snapshot(p) == before);
}

TEST_CASE("state_dict gives, in order, views of each tensor's values with key and shape") {
    const oar::ParameterSet p = filled(100.0f);
    const auto sd = p.state_dict();
    REQUIRE(sd.size() == 3);
    for (std::size_t k = 0; k < 3; ++k) {
        const auto& e = p.entries()[k];
        CHECK(sd[k].key == e.key);
        CHECK(sd[k].dims == e.dims);
        CHECK(sd[k].values.data() == p.values().data() + e.offset);  // a view, not a copy
        CHECK(sd[k].values.size() == e.size);
        for (std::size_t i = 0; i < e.size; ++i) CHECK(sd[k].values[i] == 100.0f + static_cast<float>(10 * k + i));
    }
}

TEST_CASE("load_state_dict copies every tensor in, whatever the order of the entries") {
    const oar::ParameterSet src = filled(7.0f);
    oar::ParameterSet dst(buffer_size, layout());
    for (auto& g : dst.grads()) g = 2.0f;
    auto state = src.state_dict();
    std::swap(state[0], state[2]);  // keys, not positions, decide
    dst.load_state_dict(state);
    CHECK(snapshot(dst) == snapshot(src));
    for (float g : dst.grads()) CHECK(g == 2.0f);  // gradients untouched
    // Padding between tensors stays zero.
    for (std::size_t i : {6u, 15u, 19u, 31u, 35u, 47u}) CHECK(dst.values()[i] == 0.0f);
}

TEST_CASE("load_state_dict works for double parameter sets") {
    const auto src = filled<double>(0.25);
    oar::basic_parameter_set<double> dst(buffer_size, layout());
    dst.load_state_dict(src.state_dict());
    CHECK(dst.value(dst.entry("2.weight"))[2] == doctest::Approx(0.25 + 22.0));
}

TEST_CASE("load_state_dict with a missing key throws value_error naming it and changes nothing") {
    const std::string what = failed_load<oar::value_error>([](auto& state) {
        state.erase(state.begin() + 1);  // no "0.bias"
    });
    CHECK(contains(what, "missing"));
    CHECK(contains(what, "'0.bias'"));
}

TEST_CASE("load_state_dict with an unexpected key throws value_error naming it and changes nothing") {
    const float extra[2] = {1.0f, 2.0f};
    const std::string what = failed_load<oar::value_error>([&](auto& state) {
        state.push_back({"5.weight", make_dims(2), extra});  // appended last: all others are valid and would load
    });
    CHECK(contains(what, "unexpected"));
    CHECK(contains(what, "'5.weight'"));
}

TEST_CASE("load_state_dict with a duplicated key throws value_error naming it and changes nothing") {
    const std::string what = failed_load<oar::value_error>([](auto& state) { state.push_back(state[2]); });
    CHECK(contains(what, "'2.weight'"));
    CHECK(contains(what, "twice"));
}

TEST_CASE("load_state_dict with a wrong shape throws shape_error naming key and shapes and changes nothing") {
    oar::ParameterSet dst = filled(1.0f);
    const auto before = snapshot(dst);
    const oar::ParameterSet src = filled(50.0f);

    SUBCASE("same size, other dims") {
        auto state = src.state_dict();
        state[0].dims = make_dims(3, 2);  // 6 values, transposed shape
        const std::string what = message_of<oar::shape_error>([&] { dst.load_state_dict(state); });
        CHECK(contains(what, "'0.weight'"));
        CHECK(contains(what, "[3, 2]"));
        CHECK(contains(what, "[2, 3]"));
    }
    SUBCASE("right dims, too few values") {
        auto state = src.state_dict();
        state[2].values = state[2].values.first(2);
        const std::string what = message_of<oar::shape_error>([&] { dst.load_state_dict(state); });
        CHECK(contains(what, "'2.weight'"));
        CHECK(contains(what, "2 values"));
    }
    SUBCASE("the last tensor wrong, after valid ones") {
        auto state = src.state_dict();
        state[2].dims = make_dims(3);
        CHECK_THROWS_AS(dst.load_state_dict(state), oar::shape_error);
    }
    CHECK(snapshot(dst) == before);
}

TEST_CASE("loading an empty state into an empty parameter set is a no-op, into a full one an error") {
    oar::ParameterSet empty;
    CHECK_NOTHROW(empty.load_state_dict({}));
    oar::ParameterSet p = filled(1.0f);
    CHECK_THROWS_AS(p.load_state_dict({}), oar::value_error);
}
