// TerminateOnNonFinite and Diagnostics in fit: a NaN put into a weight mid-run stops fit naming
// the step, layer and tensor; a NaN in the data names the input; Diagnostics prints the chosen
// steps' layer tables and changes nothing in what is trained.
#include <doctest/doctest.h>

#include <oar/train/callbacks/diagnostics.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include <oar/oar.hpp>  // Adam

#include "support/text.hpp"       // oar_test::read_all, count: what the callbacks printed
#include "support/toy_model.hpp"  // oar_test::toy_set, ToyNet

namespace {

using oar_test::count;
using oar_test::read_all;

/// After global step `at`, sets element 5 of 1.weight to NaN (a bad update, simulated).
struct PoisonWeight {
    std::uint64_t at;
    template <class M>
    void on_train_batch_end(M& model, const oar::Logs& l) {
        if (l.global_step != at) return;
        auto& p = model.network().parameters();
        p.value(p.entry("1.weight"))[5] = std::numeric_limits<float>::quiet_NaN();
    }
};

}  // namespace

TEST_CASE("TerminateOnNonFinite stops fit at the first NaN, naming the training step, the layer and the tensor") {
    const auto train = oar_test::toy_set(80);
    oar_test::ToyNet net(1);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::Model model(net);
    model.prepare(opt);
    oar::TerminateOnNonFinite guard;
    std::uint64_t last_step = 0;
    struct Last {
        std::uint64_t* step;
        void on_train_batch_end(const oar::Logs& l) { *step = l.global_step; }
    } last{&last_step};
    // The poison lands after step 3 (0-based step 2): the guard's own check of that step ran
    // first, so the next forward, training step 3, meets it in layer 1's parameters.
    CHECK_THROWS_WITH_AS(model.fit(train, {.epochs = 2, .batch_size = 10}, guard, last, PoisonWeight{3}),
                         doctest::Contains("non-finite value at training step 3, layer 1 (Linear), forward: parameter "
                                           "1.weight element 5 of [36, 16] (at [0, 5]) is nan"),
                         oar::non_finite_error);
    CHECK(last_step == 3);               // no step after the bad one finished
    CHECK(model.num_layer_hooks() == 0);  // the guard's hook ended with fit

    // A NaN pixel in the data: named as layer 0's input, with its sample.
    std::vector<float> images(36 * 20, 0.5f);
    std::vector<std::int64_t> labels(20, 1);
    images[36 * 13 + 4] = std::numeric_limits<float>::quiet_NaN();
    const oar::data::InMemoryDataset bad(images, labels, oar::make_dims(1, 6, 6));
    oar_test::ToyNet net2(1);
    oar::SGD sgd(net2.parameters());
    oar::Model m2(net2);
    m2.prepare(sgd);
    CHECK_THROWS_WITH_AS(m2.fit(bad, {.epochs = 1, .batch_size = 20, .shuffle = false}, oar::TerminateOnNonFinite{}),
                         doctest::Contains("training step 0, layer 0 (Flatten), forward: input element"),
                         oar::non_finite_error);
}

TEST_CASE("with the layers unwatched, TerminateOnNonFinite still stops at the bad weight after the update, naming it") {
    const auto train = oar_test::toy_set(80);
    oar_test::ToyNet net(1);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::Model model(net);
    model.prepare(opt);
    oar::TerminateOnNonFinite guard({.layers = false});
    CHECK_THROWS_WITH_AS(model.fit(train, {.epochs = 2, .batch_size = 10}, PoisonWeight{3}, guard),
                         doctest::Contains("non-finite value after the optimizer step of training step 2: parameter "
                                           "1.weight element 5 of [36, 16] (at [0, 5]) is nan"),
                         oar::non_finite_error);
    CHECK(model.num_layer_hooks() == 0);
}

TEST_CASE("without TerminateOnNonFinite a NaN weight trains on silently, so the guard is what stops it") {
    const auto train = oar_test::toy_set(80);
    oar_test::ToyNet net(1);
    oar::Adam opt(net.parameters(), {.learning_rate = 0.01f});
    oar::Model model(net);
    model.prepare(opt);
    CHECK_NOTHROW(model.fit(train, {.epochs = 1, .batch_size = 10}, PoisonWeight{3}));
    bool any_nan = false;
    for (const float v : net.parameters().values()) any_nan = any_nan || std::isnan(v);
    CHECK(any_nan);
}

TEST_CASE("Diagnostics prints the layer tables of steps 0, N, 2N and leaves training bit for bit unchanged") {
    const auto train = oar_test::toy_set(120);
    oar_test::ToyNet a(4), b(4);
    oar::Adam opt_a(a.parameters(), {.learning_rate = 0.01f}), opt_b(b.parameters(), {.learning_rate = 0.01f});
    oar::Model ma(a), mb(b);
    ma.prepare(opt_a);
    mb.prepare(opt_b);
    std::FILE* f = std::tmpfile();
    REQUIRE(f);
    oar::Diagnostics diag(5, f);
    ma.fit(train, {.epochs = 1, .batch_size = 10}, diag);  // 12 steps: 0, 5 and 10 are shown
    mb.fit(train, {.epochs = 1, .batch_size = 10});
    const std::string out = read_all(f);
    std::fclose(f);
    INFO(out);
    CHECK(count(out, "layer statistics of training step ") == 3);
    CHECK(count(out, "layer statistics of training step 5 (epoch 0, batch 5):") == 1);
    // per step: input and output of 5 layers; dy of 5, dx of 4 (not layer 0), 4 parameter gradients
    CHECK(diag.printed() == 3 * (10 + 5 + 4 + 4));
    CHECK(count(out, "1 Linear") == 3 * (2 + 1 + 1 + 2));
    CHECK(count(out, "[10, 16]") > 0);  // the hidden layer's batch shape
    CHECK(oar_test::bitwise_equal(oar_test::weights_of(a), oar_test::weights_of(b)));
}
