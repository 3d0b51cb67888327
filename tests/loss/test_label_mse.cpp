// LabelMSELoss: MSE between one value per sample and the label taken as a number, its gradient,
// and the error for a prediction that is not one value per sample.
#include <doctest/doctest.h>

#include <oar/loss/label_mse.hpp>  // under test

#include <cstdint>  // std::int64_t
#include <string>   // std::string
#include <vector>   // std::vector

TEST_CASE("LabelMSELoss is the mean squared difference to the labels as numbers, with MSE's gradient") {
    oar::LabelMSELoss loss;
    const std::vector<float> y{1.0f, 2.5f, 7.0f, 0.0f};
    const std::vector<std::int64_t> labels{1, 2, 9, 3};
    const float l = loss.forward(oar::TensorView(y.data(), 4, oar::make_dims(1)), labels);
    CHECK(l == doctest::Approx((0.0 + 0.25 + 4.0 + 9.0) / 4.0));
    const auto g = loss.backward();
    REQUIRE(g.size() == 4);
    const std::vector<float> expected{0.0f, 2 * 0.5f / 4, 2 * -2.0f / 4, 2 * -3.0f / 4};
    for (std::size_t i = 0; i < 4; ++i) CHECK(g[i] == doctest::Approx(expected[i]));
}

TEST_CASE("LabelMSELoss names a prediction that is not one value per sample") {
    oar::LabelMSELoss loss;
    const std::vector<float> y(6, 0.0f);
    const std::vector<std::int64_t> labels{0, 1, 2};
    try {
        (void)loss.forward(oar::TensorView(y.data(), 3, oar::make_dims(2)), labels);
        FAIL("no shape_error");
    } catch (const oar::shape_error& e) {
        CHECK(std::string(e.what()).find("LabelMSELoss: prediction") != std::string::npos);
        CHECK(std::string(e.what()).find("for 3 labels (one value per sample)") != std::string::npos);
    }
}
