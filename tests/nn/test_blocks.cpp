// Tests of oar/nn/blocks.hpp: Residual (identity and projection shortcuts) and Concat against the
// same layers run as separate networks, finite-difference gradients in training and evaluation
// mode (nested blocks, BatchNorm inside), the blocks' facts, nested state-dict keys, buffers
// updated only in training, and the nested summary. Also a projection Residual inside a Concat
// branch, whose shortcut input gradient must stay in the block's own arena (it once overwrote the
// next branch's saved activations), and Dropout inside a Residual body and Concat branches.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/nn/blocks.hpp>  // the header under test

#include <cmath>    // std::abs
#include <cstddef>  // std::size_t
#include <string>       // std::string
#include <type_traits>  // std::conditional_t, std::is_void_v
#include <vector>       // std::vector

#include <oar/layers/activation.hpp>  // ReLU
#include <oar/layers/batch_norm.hpp>  // BatchNorm2D
#include <oar/layers/conv2d.hpp>      // Conv2D
#include <oar/layers/dropout.hpp>     // Dropout
#include <oar/layers/flatten.hpp>     // Identity
#include <oar/nn/network.hpp>         // Network
#include <oar/nn/summary.hpp>         // summary
#include <oar/testing/gradcheck.hpp>  // gradcheck_network

#include "support/random.hpp"  // fill_random

namespace {

using oar::BatchNorm2D;
using oar::Concat;
using oar::Conv2D;
using oar::ReLU;
using oar::Residual;
using oar::Sequential;

using Basic = Residual<Sequential<Conv2D<4, 4, 3, 1, 1>, BatchNorm2D<4>, ReLU, Conv2D<4, 4, 3, 1, 1>>>;
using Projection =
    Residual<Sequential<Conv2D<4, 6, 3, 2, 1>, ReLU, Conv2D<6, 6, 3, 1, 1>>, Sequential<Conv2D<4, 6, 1, 2>, BatchNorm2D<6>>>;
using Inception = Concat<1, Conv2D<6, 2, 1>, Sequential<Conv2D<6, 3, 3, 1, 1>, ReLU>, Residual<Conv2D<6, 6, 3, 1, 1>>>;
using Mixed = Sequential<Basic, ReLU, Projection, Inception>;
using MixedInfo = Mixed::bind<oar::Shape<4, 6, 6>>;

/// Copies every parameter (and buffer) of `to`'s keys from `from` under the key `prefix + key`.
template <class From, class To>
void copy_params(const From& from, To& to, const std::string& prefix) {
    auto& p = to.parameters();
    for (const auto& e : p.entries()) {
        const auto src = from.parameters().value(from.parameters().entry(prefix + e.key));
        std::copy(src.begin(), src.end(), p.value(e).begin());
    }
}

void check_close(std::span<const float> a, std::span<const float> b) {
    REQUIRE(a.size() == b.size());
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
    CHECK(worst < 1e-6);
}

template <class Net>
void check_gradients(bool train) {
    oar::testing::GradcheckOptions o;
    o.train = train;
    o.batch = 3;
    const auto r = oar::testing::gradcheck_network<Net>(o);
    INFO(r.message);
    CHECK(r.ok);
    CHECK(r.checked > 100);
}

}  // namespace

static_assert(oar::Layer<Basic> && oar::ParametricLayer<Basic> && oar::BufferedLayer<Basic>);
static_assert(oar::Layer<Inception> && oar::ParametricLayer<Inception>);
static_assert(Basic::output_dims(oar::make_dims(4, 6, 6)) == oar::make_dims(4, 6, 6));
static_assert(Projection::output_dims(oar::make_dims(4, 6, 6)) == oar::make_dims(6, 3, 3));
static_assert(Inception::output_dims(oar::make_dims(6, 3, 3)) == oar::make_dims(11, 3, 3));
static_assert(Concat<3, Conv2D<2, 2, 1>, Conv2D<2, 2, 1>>::output_dims(oar::make_dims(2, 3, 5)) == oar::make_dims(2, 3, 10));
// The facts fold over the inner layers: parameters, FLOPs (plus one add per output value).
static_assert(MixedInfo::param_counts[0] == 2 * (4 * 4 * 9 + 4) + 2 * 4);
static_assert(MixedInfo::buffer_counts[0] == 2 * 4 && MixedInfo::buffer_counts[2] == 2 * 6);
static_assert(MixedInfo::flops[0] ==
              2 * Conv2D<4, 4, 3, 1, 1>::flops(oar::make_dims(4, 6, 6)) + BatchNorm2D<4>::flops(oar::make_dims(4, 6, 6)) +
                  ReLU::flops(oar::make_dims(4, 6, 6)) + 4 * 6 * 6);
static_assert(MixedInfo::total_params == MixedInfo::param_counts[0] + MixedInfo::param_counts[2] + MixedInfo::param_counts[3]);
// The arena holds every inner output: the activation bytes cover them.
static_assert(MixedInfo::arena_floats[0] >= 4 * 4 * 6 * 6 && MixedInfo::arena_floats[1] == 0);
static_assert(MixedInfo::activation_floats > MixedInfo::output_floats);
static_assert(MixedInfo::output_dims == oar::make_dims(11, 3, 3));

TEST_CASE("Residual<Body> computes x + Body(x) with the body's layers as they run alone") {
    using Body = Sequential<Conv2D<3, 3, 3, 1, 1>, ReLU, Conv2D<3, 3, 3, 1, 1>>;
    oar::Network<Sequential<Residual<Body>>, oar::Shape<3, 5, 5>> net(3);
    oar::Network<Body, oar::Shape<3, 5, 5>> body(11);
    copy_params(net, body, "0.body.");
    oar::Tensor x(2, oar::make_dims(3, 5, 5));
    oar_test::fill_random(x.span(), 5);
    const auto y = net.forward(x.view());
    const auto b = body.forward(x.view());
    std::vector<float> want(x.size());
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = x[i] + b[i];
    check_close({y.data(), y.size()}, want);
}

TEST_CASE("Residual<Body, Shortcut> adds a projection shortcut, and Concat joins its branches along channels") {
    using Body = Sequential<Conv2D<2, 4, 3, 2, 1>, ReLU>;
    using Short = Conv2D<2, 4, 1, 2>;
    oar::Network<Sequential<Residual<Body, Short>>, oar::Shape<2, 6, 6>> res(4);
    oar::Network<Body, oar::Shape<2, 6, 6>> body(9);
    oar::Network<Sequential<Short>, oar::Shape<2, 6, 6>> shortcut(10);
    copy_params(res, body, "0.body.");
    copy_params(res, shortcut, "0.shortcut.");
    oar::Tensor x(3, oar::make_dims(2, 6, 6));
    oar_test::fill_random(x.span(), 6);
    const auto y = res.forward(x.view());
    const auto b = body.forward(x.view());
    const auto s = shortcut.forward(x.view());
    std::vector<float> want(y.size());
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = b[i] + s[i];
    check_close({y.data(), y.size()}, want);

    using A = Conv2D<2, 3, 1>;
    using Bb = Sequential<Conv2D<2, 1, 3, 1, 1>, ReLU>;
    oar::Network<Sequential<Concat<1, A, Bb>>, oar::Shape<2, 4, 5>> cat(5);
    oar::Network<Sequential<A>, oar::Shape<2, 4, 5>> a(1);
    oar::Network<Bb, oar::Shape<2, 4, 5>> bb(2);
    copy_params(cat, a, "0.0.");
    copy_params(cat, bb, "0.1.");
    oar::Tensor xc(2, oar::make_dims(2, 4, 5));
    oar_test::fill_random(xc.span(), 7);
    const auto yc = cat.forward(xc.view());
    const auto ya = a.forward(xc.view());
    const auto yb = bb.forward(xc.view());
    std::vector<float> joined;
    for (std::size_t n = 0; n < 2; ++n) {
        joined.insert(joined.end(), ya.data() + n * 60, ya.data() + (n + 1) * 60);
        joined.insert(joined.end(), yb.data() + n * 20, yb.data() + (n + 1) * 20);
    }
    check_close({yc.data(), yc.size()}, joined);
}

TEST_CASE("Residual and Concat gradients match finite differences, nested and with BatchNorm, in both modes") {
    using Net = oar::Network<Mixed, oar::Shape<4, 6, 6>, oar::cpu64>;
    check_gradients<Net>(true);
    check_gradients<Net>(false);
    // A Residual inside a Residual's body, and a Concat along the width.
    using Nested = oar::Network<Sequential<Residual<Sequential<Residual<Conv2D<2, 2, 3, 1, 1>>, ReLU>>,
                                           Concat<3, Conv2D<2, 2, 1>, Sequential<oar::ReLU, Conv2D<2, 2, 1>>>>,
                                oar::Shape<2, 4, 3>, oar::cpu64>;
    check_gradients<Nested>(true);
}

TEST_CASE("a block's tensors live in the network's flat storage under nested keys, buffers updated only in training") {
    oar::Network<Mixed, oar::Shape<4, 6, 6>> net(2);
    std::vector<std::string> keys, buffers;
    for (const auto& e : net.parameters().entries()) keys.push_back(e.key);
    for (const auto& e : net.parameters().buffer_entries()) buffers.push_back(e.key);
    const std::vector<std::string> want_keys = {
        "0.body.0.weight",      "0.body.0.bias",        "0.body.1.weight",      "0.body.1.bias",
        "0.body.3.weight",      "0.body.3.bias",        "2.body.0.weight",      "2.body.0.bias",
        "2.body.2.weight",      "2.body.2.bias",        "2.shortcut.0.weight",  "2.shortcut.0.bias",
        "2.shortcut.1.weight",  "2.shortcut.1.bias",    "3.0.0.weight",         "3.0.0.bias",
        "3.1.0.weight",         "3.1.0.bias",           "3.2.0.body.0.weight",  "3.2.0.body.0.bias"};
    CHECK(keys == want_keys);
    CHECK(buffers ==
          std::vector<std::string>{"0.body.1._mean", "0.body.1._variance", "2.shortcut.1._mean", "2.shortcut.1._variance"});
    CHECK(net.parameters().count() == MixedInfo::total_params);
    CHECK(net.parameters().buffer_count() == MixedInfo::total_buffers);
    // BatchNorm's scale starts at ones, its running variance at ones, inside blocks too.
    const auto& p = net.parameters();
    CHECK(p.value(p.entry("2.shortcut.1.weight"))[5] == 1.0f);
    const auto var = p.buffer_entries()[3];
    CHECK(p.host_buffers()[var.offset] == 1.0f);

    oar::Tensor x(4, oar::make_dims(4, 6, 6));
    oar_test::fill_random(x.span(), 8, 2.0);
    net.eval();
    const std::vector<float> before(p.host_buffers().begin(), p.host_buffers().end());
    const auto y_eval = net.forward(x.view());
    const std::vector<float> first(y_eval.data(), y_eval.data() + y_eval.size());
    CHECK(std::vector<float>(p.host_buffers().begin(), p.host_buffers().end()) == before);
    net.train();
    net.forward(x.view());
    const auto after = p.host_buffers();
    CHECK(after[p.buffer_entries()[0].offset] != before[p.buffer_entries()[0].offset]);
    CHECK(after[p.buffer_entries()[2].offset] != before[p.buffer_entries()[2].offset]);
    // Evaluation now uses the updated running statistics: another output.
    net.eval();
    const auto y2 = net.forward(x.view());
    CHECK(std::vector<float>(y2.data(), y2.data() + y2.size()) != first);
}

TEST_CASE("summary prints a block's inner layers indented under it, with their own shapes and counts") {
    using Net = oar::Network<Mixed, oar::Shape<4, 6, 6>>;
    const std::string table = oar::summary<Net>();
    // The index column is as wide as the deepest path, "    3.2.0.body.0" (16).
    auto row = [](const std::string& index, const std::string& name, const std::string& shape) {
        std::string r = "\n " + index + std::string(17 - index.size(), ' ') + name;
        return r + std::string(15 - name.size(), ' ') + shape;
    };
    CHECK(table.find(row("0", "Residual", "[N, 4, 6, 6]")) != std::string::npos);
    CHECK(table.find(row("  0.body.1", "BatchNorm2D", "[N, 4, 6, 6]") + "           16 ") != std::string::npos);
    CHECK(table.find(row("  2.shortcut.0", "Conv2D", "[N, 6, 3, 3]") + "           30 ") != std::string::npos);
    CHECK(table.find(row("3", "Concat", "[N, 11, 3, 3]")) != std::string::npos);
    CHECK(table.find(row("    3.2.0.body.0", "Conv2D", "[N, 6, 3, 3]")) != std::string::npos);
    CHECK(table.find("Non-trainable params: 20\n") != std::string::npos);
    const auto rows = MixedInfo::layer_rows();
    CHECK(rows.size() == 18);  // 4 layers; 4, 5 and 4 inner rows; 1 inside the inner Residual
    std::size_t inner_params = 0;
    for (const auto& r : rows)
        if (r.depth == 1 && r.path.rfind("2.", 0) == 0) inner_params += r.params;
    CHECK(inner_params == MixedInfo::param_counts[2] + MixedInfo::buffer_counts[2]);
}

TEST_CASE("a projection Residual in a Concat branch back-propagates without touching the next branch's saved activations") {
    // Residual's shortcut input gradient once went to an offset from the body's first layer's
    // region instead of the block's own: past the block by the body's outputs (here 4 + 4 channels
    // against a 2-channel input), into the next branch's region, where it overwrote part of the
    // Conv2D output that branch's ReLU reads in its backward (run after the first branch's).
    using Proj = Residual<Sequential<Conv2D<2, 4, 3, 1, 1>, ReLU>, Sequential<Conv2D<2, 4, 1>, BatchNorm2D<4>>>;
    using Branch = Sequential<Conv2D<2, 8, 3, 1, 1>, ReLU>;
    using Net = oar::Network<Sequential<Concat<1, Proj, Branch>, Conv2D<12, 2, 1>>, oar::Shape<2, 4, 4>, oar::cpu64>;
    check_gradients<Net>(true);
    check_gradients<Net>(false);
}

TEST_CASE("Dropout inside a Residual body and Concat branches: masks reproducible per seed, distinct per layer, off in evaluation") {
    // y = Concat(drop_a(r), drop_b(r)) with r = x + drop(x): each r is x (dropped) or 3x (kept,
    // scaled by 2), each branch value 0 or 2r.
    using Net = oar::Network<Sequential<Residual<Sequential<oar::Identity, oar::Dropout>>, Concat<1, oar::Dropout, oar::Dropout>>,
                             oar::Shape<2, 4, 4>>;
    constexpr std::size_t n = 3, per = 2 * 4 * 4;
    oar::Tensor x(n, oar::make_dims(2, 4, 4));
    oar_test::fill_random(x.span(), 9);
    auto run = [&](Net& net) {
        const auto y = net.forward(x.view());
        return std::vector<float>(y.data(), y.data() + y.size());
    };
    Net a(5), b(5), c(6);
    a.train();
    b.train();
    c.train();
    const auto ya = run(a);
    CHECK(run(b) == ya);  // same seed, same masks
    CHECK(run(c) != ya);  // another seed, other masks
    CHECK(run(a) != ya);  // the next forward pass draws new masks

    std::size_t kept_body = 0, kept[2] = {0, 0}, same_mask = 0;
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t i = 0; i < per; ++i) {
            const float xi = x[s * per + i];
            const float y0 = ya[s * 2 * per + i], y1 = ya[s * 2 * per + per + i];
            // The residual's value from whichever branch kept it, else both dropped it.
            const float r = y0 != 0.0f ? y0 / 2.0f : y1 != 0.0f ? y1 / 2.0f : 0.0f;
            if (r != 0.0f) {
                REQUIRE((std::abs(r - xi) < 1e-6f || std::abs(r - 3.0f * xi) < 1e-6f));
                kept_body += std::abs(r - 3.0f * xi) < 1e-6f ? 1 : 0;
            }
            if (y0 != 0.0f && y1 != 0.0f) CHECK(y0 == y1);
            kept[0] += y0 != 0.0f ? 1 : 0;
            kept[1] += y1 != 0.0f ? 1 : 0;
            same_mask += (y0 != 0.0f) == (y1 != 0.0f) ? 1 : 0;
        }
    // p = 0.5 over 96 values: each layer keeps about half, and the two branches draw their own masks.
    CHECK(kept_body > 20);
    CHECK(kept_body < 76);
    for (const std::size_t k : kept) {
        CHECK(k > 30);
        CHECK(k < 66);
    }
    CHECK(same_mask < n * per - 20);

    // Evaluation: every Dropout is the identity, so y = (2x, 2x).
    a.eval();
    const auto ye = run(a);
    for (std::size_t s = 0; s < n; ++s)
        for (std::size_t i = 0; i < per; ++i) {
            CHECK(ye[s * 2 * per + i] == 2.0f * x[s * per + i]);
            CHECK(ye[s * 2 * per + per + i] == 2.0f * x[s * per + i]);
        }

    // Backward applies the mask its forward drew, inside blocks too (the gradient check holds the
    // forward count fixed, so every evaluation draws the same masks).
    using Grad = oar::Network<Sequential<Residual<Sequential<Conv2D<2, 2, 3, 1, 1>, oar::Dropout>>,
                                         Concat<1, Sequential<Conv2D<2, 2, 1>, oar::Dropout>, oar::Dropout>>,
                              oar::Shape<2, 4, 4>, oar::cpu64>;
    check_gradients<Grad>(true);
}

namespace {

/// Observes nothing, but makes a network run its layers one by one (no fused pairs at its level).
struct one_by_one {
    void on_forward(const oar::LayerEvent&) {}
    void on_backward(const oar::LayerEvent&) {}
};

/// Network<Sequential<Residual<Body[, Short]>, ReLU>> in training, where the block runs the sum and
/// the ReLU in one pass and its body's BatchNorm + ReLU pairs fused (nn/blocks.hpp), against the
/// body and the shortcut as separate networks run layer by layer, the sum, the ReLU and the
/// gradient fan-out written out here: the output, the input gradient, every parameter gradient and
/// the running statistics bit-equal.
template <class Body, class Short, class In>
void check_fused_block() {
    constexpr bool has_short = !std::is_void_v<Short>;
    using Block = std::conditional_t<has_short, Residual<Body, Short>, Residual<Body>>;
    using Net = oar::Network<Sequential<Block, ReLU>, In>;
    static_assert(Net::fuses_relu(0));  // the block runs the ReLU after it
    Net net(3);
    oar::Network<Body, In> body(11);
    using ShortSeq = std::conditional_t<has_short, Short, Body>;
    oar::Network<ShortSeq, In> shortcut(12);
    copy_params(net, body, "0.body.");
    if constexpr (has_short) copy_params(net, shortcut, "0.shortcut.");
    net.train();
    body.train();
    shortcut.train();
    constexpr std::size_t n = 3;
    oar::Tensor x(n, In::dims);
    oar_test::fill_random(x.span(), 5);
    one_by_one obs;
    const auto y = net.forward(x.view());
    const auto b = body.forward(x.view(), obs);
    const float* s = x.span().data();
    if constexpr (has_short) s = shortcut.forward(x.view(), obs).data();
    const oar::ReLU relu{};
    std::vector<float> want(y.size());
    std::size_t masked = 0;
    for (std::size_t i = 0; i < want.size(); ++i) {
        want[i] = relu.fn(b[i] + s[i]);
        masked += want[i] == 0.0f;
    }
    CHECK(masked > want.size() / 5);  // the ReLU masks a part
    CHECK(std::vector<float>(y.data(), y.data() + y.size()) == want);

    oar::Tensor dy(n, y.dims()), dx(n, In::dims), dxb(n, In::dims), dxs(n, In::dims), g(n, y.dims());
    oar_test::fill_random(dy.span(), 6);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = relu.fn.backward(want[i], want[i], dy[i]);
    net.backward(dy.view(), dx.view());
    body.backward(g.view(), dxb.view(), obs);
    if constexpr (has_short) shortcut.backward(g.view(), dxs.view(), obs);
    std::vector<float> want_dx(dx.size());
    for (std::size_t i = 0; i < want_dx.size(); ++i) want_dx[i] = dxb[i] + (has_short ? dxs[i] : g[i]);
    CHECK(std::vector<float>(dx.span().begin(), dx.span().end()) == want_dx);
    auto same = [&](const auto& part, const std::string& prefix) {
        for (const auto& e : part.parameters().entries()) {
            INFO(prefix, e.key);
            const auto got = net.parameters().grad(net.parameters().entry(prefix + e.key));
            const auto ref = part.parameters().grad(e);
            CHECK(std::vector<float>(got.begin(), got.end()) == std::vector<float>(ref.begin(), ref.end()));
        }
        std::size_t stats = 0, expected = 0;
        for (const auto& e : part.state_dict()) {
            if (e.key.find("_mean") == std::string::npos && e.key.find("_variance") == std::string::npos) continue;
            INFO(prefix, e.key);
            ++expected;
            for (const auto& f : net.state_dict())
                if (f.key == prefix + e.key) {
                    ++stats;
                    CHECK(std::vector<float>(f.values.begin(), f.values.end()) ==
                          std::vector<float>(e.values.begin(), e.values.end()));
                }
        }
        CHECK(stats == expected);
    };
    same(body, "0.body.");
    if constexpr (has_short) same(shortcut, "0.shortcut.");
}

}  // namespace

TEST_CASE("a Residual block with a ReLU after it and BatchNorm + ReLU in its body runs them fused with the unfused bits") {
    using oar::Bias;
    using Body = Sequential<Conv2D<4, 4, 3, 1, 1, Bias::no>, BatchNorm2D<4>, ReLU, Conv2D<4, 4, 3, 1, 1, Bias::no>, BatchNorm2D<4>>;
    check_fused_block<Body, void, oar::Shape<4, 6, 6>>();
    static_assert(oar::detail::chain_of<Body>::type::fuses_relu<1, oar::cpu>);  // BatchNorm + ReLU inside
    // A BatchNorm that a Conv2D's tail takes (folded in evaluation) keeps the tail; a block fuses.
    using Stem = oar::Network<Sequential<Conv2D<3, 4, 3, 1, 1, Bias::no>, BatchNorm2D<4>, ReLU, Residual<Body>, ReLU>,
                              oar::Shape<3, 6, 6>>;
    static_assert(!Stem::fuses_relu(1) && Stem::epilogue_length(0) == 2 && Stem::fuses_relu(3));
    using Down = Sequential<Conv2D<4, 6, 3, 2, 1, Bias::no>, BatchNorm2D<6>, ReLU, Conv2D<6, 6, 3, 1, 1, Bias::no>, BatchNorm2D<6>>;
    using Proj = Sequential<Conv2D<4, 6, 1, 2, 0, Bias::no>, BatchNorm2D<6>>;
    check_fused_block<Down, Proj, oar::Shape<4, 6, 6>>();
    // A body ending in a Conv2D (its ReLU epilogue is not used for the block's dy) and a ReLU
    // ending a body (not fused: its gradient is the block's).
    check_fused_block<Sequential<Conv2D<4, 4, 3, 1, 1>, ReLU, Conv2D<4, 4, 3, 1, 1>>, void, oar::Shape<4, 5, 5>>();
    using EndsInRelu = Sequential<Conv2D<4, 4, 3, 1, 1>, BatchNorm2D<4>, ReLU>;
    static_assert(!oar::detail::chain_of<EndsInRelu>::type::fuses_relu<1, oar::cpu>);
    check_fused_block<EndsInRelu, void, oar::Shape<4, 5, 5>>();
}
