// Tests of include/oar/core/context.hpp: Context defaults and its backend constraint.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <type_traits>  // std::is_same_v

#include <oar/core/context.hpp>  // under test

template <class B>
concept has_context = requires { typename oar::Context<B>; };

static_assert(has_context<oar::cpu> && has_context<oar::cpu64>);
static_assert(!has_context<int>);  // Context is constrained on Backend
static_assert(std::is_same_v<oar::Context<oar::cpu>::value_type, float>);
static_assert(std::is_same_v<oar::Context<oar::cpu64>::value_type, double>);
static_assert(std::is_same_v<oar::Context<oar::cpu64>::backend, oar::cpu64>);
static_assert(std::is_same_v<decltype(oar::Context<oar::cpu64>::params), const double*>);
static_assert(std::is_same_v<decltype(oar::Context<oar::cpu64>::grads), double*>);

TEST_CASE("a default Context is in training mode with nothing attached") {
    const oar::Context<oar::cpu> ctx;
    CHECK(ctx.mode == oar::Mode::train);
    CHECK(ctx.rng.seed == 0);
    CHECK(ctx.step == 0);
    CHECK(ctx.layer_index == 0);
    CHECK(ctx.params == nullptr);
    CHECK(ctx.grads == nullptr);
    CHECK(ctx.workspace == nullptr);
    CHECK(ctx.workspace_size == 0);
}

TEST_CASE("a Context's random streams follow its seed") {
    oar::Context<oar::cpu64> a, b;
    a.rng.seed = 11;
    b.rng.seed = 11;
    CHECK(a.rng.uniform(0, 3) == b.rng.uniform(0, 3));
    b.rng.seed = 12;
    CHECK(a.rng.bits(0, 3) != b.rng.bits(0, 3));
    a.mode = oar::Mode::eval;
    CHECK(a.mode != b.mode);
}
