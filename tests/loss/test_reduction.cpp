// Reduction: "sum" is "mean" times the number of reduced values, for both losses.
#include <oar/loss/reduction.hpp>

#include <doctest/doctest.h>

#include <oar/loss/cross_entropy.hpp>
#include <oar/loss/mse.hpp>

#include <vector>

using namespace oar;

TEST_CASE("sum reduction is mean reduction times the count, for values and gradients") {
    Tensor z(3, make_dims(4)), t(3, make_dims(4));
    for (std::size_t i = 0; i < z.size(); ++i) {
        z[i] = 0.1f * float(i) - 0.4f;
        t[i] = 0.05f * float(i % 5);
    }
    const std::vector<std::int64_t> y{3, 0, 1};
    CrossEntropyLoss<> mean_ce(Reduction::mean), sum_ce(Reduction::sum);
    CHECK(sum_ce(z, y) == doctest::Approx(3 * mean_ce(z, y)));
    for (std::size_t i = 0; i < z.size(); ++i) CHECK(sum_ce.backward()[i] == doctest::Approx(3 * mean_ce.backward()[i]));
    MSELoss<> mean_mse(Reduction::mean), sum_mse(Reduction::sum);
    CHECK(sum_mse(z, t) == doctest::Approx(12 * mean_mse(z, t)));
    for (std::size_t i = 0; i < z.size(); ++i)
        CHECK(sum_mse.backward()[i] == doctest::Approx(12 * mean_mse.backward()[i]));
    static_assert(Reduction::mean != Reduction::sum);
}
