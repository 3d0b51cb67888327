// The backend seam (docs/ARCHITECTURE.md): Network, the optimizers, CrossEntropyLoss, Model, the
// checkpoints and DataParallel are written once, and run on a backend made of the CUDA backend's
// kernel bodies under emulated launches (tests/cuda/emulated_backend.hpp: buffers that are not
// host memory, the CUDA launch grids, the conv plan, the CPU GEMM in place of cuBLAS). Each result
// is compared with the same code on the CPU backend.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/dist/data_parallel.hpp>  // DataParallel
#include <oar/kernels/cpu/gemm_bf16.hpp>  // the CPU's bf16_mixed kernels: the reference of the device's
#include <oar/kernels/cpu/winograd.hpp>  // set_conv_winograd: the CPU reference on the direct kernel
#include <oar/models/course.hpp>       // course::CNN
#include <oar/oar.hpp>                 // Network, layers, optimizers, CrossEntropyLoss, Model
#include <oar/train/checkpoint.hpp>    // save_checkpoint, load_checkpoint

#include <algorithm>  // std::max
#include <cmath>      // std::abs
#include <cstddef>    // std::size_t
#include <cstdint>    // std::int64_t
#include <functional> // std::function: the fake stream's queued work
#include <span>       // std::span
#include <vector>     // std::vector

#include "cuda/compare_training.hpp"  // compare_training: the device beside the CPU
#include "cuda/emulated_backend.hpp"  // emulated_cuda
#include "support/random.hpp"         // random_vector
#include "support/temp_dir.hpp"       // TempDir
#include "support/toy_model.hpp"      // toy_set

namespace {

using oar_test::emulated_cuda;
using Image = oar::Shape<1, 28, 28>;
using CNN = oar::course::CNN;
using MLP = oar::Sequential<oar::Flatten, oar::Linear<784, 64>, oar::ReLU, oar::DropoutPercent<20>, oar::Linear<64, 10>>;

/// Blocks through the seam: a Residual, a projection Residual and a Concat (op::add, op::copy_rows).
using Blocks = oar::Sequential<oar::Conv2D<1, 4, 3, 1, 1>, oar::ReLU,
                               oar::Residual<oar::Sequential<oar::Conv2D<4, 4, 3, 1, 1>, oar::ReLU, oar::Conv2D<4, 4, 3, 1, 1>>>,
                               oar::Residual<oar::Conv2D<4, 6, 3, 2, 1>, oar::Conv2D<4, 6, 1, 2>>,
                               oar::Concat<1, oar::Conv2D<6, 2, 1>, oar::Sequential<oar::Conv2D<6, 2, 3, 1, 1>, oar::ReLU>>,
                               oar::MaxPool2D<2, 2>, oar::Flatten, oar::Linear<4 * 7 * 7, 10>>;

using oar_test::compare_training;
double max_rel_diff(std::span<const float> a, std::span<const float> b) { return oar_test::max_rel_diff_of(a, b); }

}  // namespace

TEST_CASE("the course CNN and Adam, written once, train on the emulated CUDA backend as on the CPU") {
    compare_training<emulated_cuda, CNN, oar::Adam>(8, 2, 1e-5, 1e-4);
}

TEST_CASE("Residual and Concat blocks, written once, train on the emulated CUDA backend as on the CPU") {
    compare_training<emulated_cuda, Blocks, oar::Adam>(4, 2, 1e-5, 1e-4);
}

TEST_CASE("SGD, Momentum and Adagrad, written once, step on the emulated CUDA backend as on the CPU") {
    compare_training<emulated_cuda, MLP, oar::SGD>(16, 2, 1e-5, 1e-4);
    compare_training<emulated_cuda, MLP, oar::Momentum>(16, 2, 1e-5, 1e-4);
    compare_training<emulated_cuda, MLP, oar::Adagrad>(16, 2, 1e-5, 1e-4);
}

TEST_CASE("rectangular, per-axis strided and bias-free convolutions train on the emulated CUDA backend as on the CPU") {
    // (1,28,28) -> 3x5 kernel, strides 1x2, padding 1x2: (4,28,14) -> 3x3, stride 2, padding 1, no bias:
    // (4,14,7) -> 1x3 kernel, stride 1, padding 0x1, no bias: (4,14,7)
    using RectCNN = oar::Sequential<oar::Conv2D<1, 4, oar::Size2{3, 5}, oar::Size2{1, 2}, oar::Size2{1, 2}>, oar::ReLU,
                                    oar::Conv2D<4, 4, 3, 2, 1, oar::Bias::no>, oar::ReLU,
                                    oar::Conv2D<4, 4, oar::Size2{1, 3}, 1, oar::Size2{0, 1}, oar::Bias::no>,
                                    oar::Flatten, oar::Linear<392, 10>>;
    compare_training<emulated_cuda, RectCNN, oar::Adam>(8, 2, 1e-5, 1e-4);
}

TEST_CASE("BatchNorm's CUDA kernels under emulated launches give the CPU kernels' bits, in training and evaluation") {
    constexpr std::size_t n = 5, channels = 3, inner = 7, count = n * channels * inner;
    const auto x = oar_test::random_vector<float>(count, 11);
    const auto dy = oar_test::random_vector<float>(count, 12);
    const auto gamma = oar_test::random_vector<float>(channels, 13);
    const auto beta = oar_test::random_vector<float>(channels, 14);
    for (const bool train : {true, false}) {
        INFO("train ", train);
        std::vector<float> mean_c{0.1f, -0.2f, 0.3f}, var_c{1.0f, 0.5f, 2.0f}, mean_e = mean_c, var_e = var_c;
        std::vector<float> y_c(count), y_e(count, 9.0f);
        oar::kernel<oar::op::batch_norm_forward, oar::cpu>::run(n, channels, inner, x.data(), gamma.data(), beta.data(),
                                                                mean_c.data(), var_c.data(), train, 0.9f, 1e-5f,
                                                                y_c.data());
        oar::kernel<oar::op::batch_norm_forward, emulated_cuda>::run(n, channels, inner, x.data(), gamma.data(),
                                                                     beta.data(), mean_e.data(), var_e.data(), train,
                                                                     0.9f, 1e-5f, y_e.data());
        CHECK(y_e == y_c);
        CHECK(mean_e == mean_c);
        CHECK(var_e == var_c);
        CHECK((mean_c != std::vector<float>{0.1f, -0.2f, 0.3f}) == train);  // training moved the statistics
        std::vector<float> dg_c(channels, 0.5f), db_c(channels, -0.5f), dx_c(count), dg_e = dg_c, db_e = db_c,
                                                                                    dx_e(count, 9.0f);
        oar::kernel<oar::op::batch_norm_backward, oar::cpu>::run(n, channels, inner, x.data(), gamma.data(),
                                                                 mean_c.data(), var_c.data(), train, 1e-5f, dy.data(),
                                                                 dg_c.data(), db_c.data(), dx_c.data());
        oar::kernel<oar::op::batch_norm_backward, emulated_cuda>::run(n, channels, inner, x.data(), gamma.data(),
                                                                      mean_e.data(), var_e.data(), train, 1e-5f,
                                                                      dy.data(), dg_e.data(), db_e.data(), dx_e.data());
        CHECK(dx_e == dx_c);
        CHECK(dg_e == dg_c);
        CHECK(db_e == db_c);
    }
}

TEST_CASE("a CNN with BatchNorm2D trains on the emulated CUDA backend as on the CPU, running statistics included") {
    using BNCNN = oar::Sequential<oar::Conv2D<1, 4, 3, 1, 1, oar::Bias::no>, oar::BatchNorm2D<4>, oar::ReLU,
                                  oar::MaxPool2D<2, 2>, oar::Flatten, oar::Linear<784, 10>>;
    compare_training<emulated_cuda, BNCNN, oar::Adam>(8, 3, 1e-5, 1e-4);
    oar::Network<BNCNN, Image> host(4);
    oar::Network<BNCNN, Image, emulated_cuda> dev(4);
    const auto x = oar_test::random_vector<float>(6 * 784, 21);
    host.forward(oar::TensorView(x.data(), 6, Image::dims));
    dev.forward(oar::TensorView(x.data(), 6, Image::dims));
    CHECK(max_rel_diff(host.parameters().buffers(), dev.parameters().host_buffers()) <= 1e-6);
    host.eval();
    dev.eval();
    const auto yh = host.forward(oar::TensorView(x.data(), 6, Image::dims));
    const std::vector<float> want(yh.data(), yh.data() + yh.size());
    const auto yd = dev.to_host(dev.forward(oar::TensorView(x.data(), 6, Image::dims)));
    CHECK(max_rel_diff(want, yd) <= 1e-5);
}

TEST_CASE("a network's layer settings survive its conversion to another backend and back") {
    using Seq = oar::Sequential<oar::Flatten, oar::Linear<784, 16>, oar::LeakyReLU, oar::Dropout, oar::Linear<16, 10>>;
    const oar::Network<Seq, Image> host{Seq{{}, {}, oar::LeakyReLU{0.25f}, oar::Dropout{0.1f}, {}}, 3};
    const oar::Network<Seq, Image, emulated_cuda> dev(host);
    CHECK(dev.layer<2>().negative_slope() == 0.25f);
    CHECK(dev.layer<3>().p == 0.1f);
    const oar::Network<Seq, Image> back(dev);
    CHECK(back.layer<2>().negative_slope() == 0.25f);
    CHECK(back.layer<3>().p == 0.1f);
}

TEST_CASE("a Linear's tail of activations runs in its epilogue on the emulated CUDA backend, with the bits of the layers one by one") {
    using Seq = oar::Sequential<oar::Flatten, oar::Linear<784, 16>, oar::LeakyReLU, oar::Hardswish, oar::GELU,
                                oar::Linear<16, 10>>;
    using Dev = oar::Network<Seq, Image, emulated_cuda>;
    static_assert(Dev::epilogue_length(1) == 3);
    compare_training<emulated_cuda, Seq, oar::Adam>(8, 3, 1e-5, 1e-4);
    struct Watch {  // observed: the layers run one by one
        void on_forward(const oar::LayerEvent&) {}
        void on_backward(const oar::LayerEvent&) {}
    };
    const Seq seq{{}, {}, oar::LeakyReLU{-0.4f}, {}, {}, {}};
    Dev a(seq, 3), b(seq, 3);
    const auto x = oar_test::random_vector<float>(5 * 784, 8);
    const oar::TensorView xv(x.data(), 5, Image::dims);
    const std::vector<std::int64_t> y{0, 1, 2, 3, 4};
    oar::CrossEntropyLoss<emulated_cuda> la, lb;
    const double fa = la(a.forward(xv), y), fb = lb(b.forward(xv, Watch{}), y);
    CHECK(fa == fb);
    CHECK(Dev::to_host(a.activation(5)) == Dev::to_host(b.activation(5)));
    a.backward(la.backward());
    b.backward(lb.backward(), Watch{});
    const auto ha = a.parameters().host_grads();
    const std::vector<float> ga(ha.begin(), ha.end());
    const auto hb = b.parameters().host_grads();
    CHECK(ga == std::vector<float>(hb.begin(), hb.end()));
    CHECK(max_rel_diff(ga, std::vector<float>(ga.size(), 0.0f)) > 0.0);  // gradients flowed
}

TEST_CASE("producer tails on the emulated CUDA backend: a Conv2D's activations and a folded BatchNorm2D, against the CPU") {
    using Seq = oar::Sequential<oar::Conv2D<1, 4, 3, 1, 1, oar::Bias::no>, oar::BatchNorm2D<4>, oar::ReLU, oar::Tanh,
                                oar::MaxPool2D<2>, oar::Conv2D<4, 4, 3, 2, 1>, oar::LeakyReLU, oar::Sigmoid,
                                oar::Flatten, oar::Linear<196, 10>>;
    using Dev = oar::Network<Seq, Image, emulated_cuda>;
    static_assert(Dev::epilogue_length(0) == 3 && Dev::folds_batch_norm(0) && Dev::epilogue_length(5) == 2);
    compare_training<emulated_cuda, Seq, oar::Adam>(6, 3, 1e-5, 1e-4);  // training: the BatchNorm as itself
    oar::set_conv_winograd(false);
    oar::Network<Seq, Image> host(5);
    oar::Network<Seq, Image, emulated_cuda> dev(5), plain(5);
    const auto x = oar_test::random_vector<float>(5 * 784, 9);
    const oar::TensorView xv(x.data(), 5, Image::dims);
    for (int s = 0; s < 2; ++s) {  // running statistics away from (0, 1)
        host.forward(xv);
        dev.forward(xv);
        plain.forward(xv);
    }
    host.eval();
    dev.eval();
    plain.eval();
    struct Watch {
        void on_forward(const oar::LayerEvent&) {}
    };
    const auto h = host.forward(xv);
    const auto d = Dev::to_host(dev.forward(xv));          // folded in the epilogue
    const auto p = Dev::to_host(plain.forward(xv, Watch{}));  // layer by layer
    CHECK(oar_test::max_rel_diff_of(std::span<const float>(h.data(), h.size()), d) <= 1e-5);
    CHECK(oar_test::max_rel_diff_of(std::span<const float>(p.data(), p.size()), d) <= 1e-5);
    CHECK(Dev::to_host(dev.activation(1)) == Dev::to_host(plain.activation(1)));  // the convolution's own output
    oar::set_conv_winograd(true);
}

TEST_CASE("an MLP with Dropout on the emulated CUDA backend draws the CPU's masks") {
    compare_training<emulated_cuda, MLP, oar::Adam>(32, 3, 1e-5, 1e-4);
}

TEST_CASE("a device network copies its input in, keeps its buffers off the host and hands back copies") {
    auto& c = oar_test::counts();
    const oar_test::storage_counts before = c;
    oar::Network<MLP, Image, emulated_cuda> dev(3);
    dev.eval();  // the same Dropout-free function for both forwards
    const auto x = oar_test::random_vector<float>(4 * 784, 5);
    const auto out = dev.forward(oar::TensorView(x.data(), 4, Image::dims));
    CHECK(c.uploads > before.uploads);  // the initial weights, then the batch
    const auto host_out = dev.to_host(out);
    CHECK(c.downloads == before.downloads + 1);
    CHECK(host_out.size() == 40);
    // forward_device: an input already in device memory is copied within the device.
    auto staged = oar::storage<emulated_cuda>::make<float>(x.size());
    oar::storage<emulated_cuda>::upload(staged.data(), x.data(), x.size());
    const std::size_t copies = c.copies;
    const auto again = dev.forward_device(oar::TensorView(staged.data(), 4, Image::dims));
    CHECK(c.copies > copies);  // the input, then Flatten's copy
    CHECK(max_rel_diff(dev.to_host(again), host_out) == 0.0);
    // A CPU network converts to the device and back with the same bits.
    oar::Network<MLP, Image, oar::cpu> cpu_net(11);
    oar::Network<MLP, Image, emulated_cuda> moved(cpu_net);
    oar::Network<MLP, Image, oar::cpu> back(moved);
    CHECK(max_rel_diff(cpu_net.parameters().values(), back.parameters().values()) == 0.0);
}

TEST_CASE("Model.fit, evaluate and predict drive a device network through the CPU's code") {
    using ToyDev = oar::Network<oar_test::ToySeq, oar::Shape<1, 6, 6>, emulated_cuda>;
    const auto train = oar_test::toy_set(200), valid = oar_test::toy_set(40, 1000);
    ToyDev dev(3);
    oar_test::ToyNet host(3);
    oar::Adam<emulated_cuda> opt_d(dev.parameters(), {.learning_rate = 0.01f});
    oar::Adam<> opt_h(host.parameters(), {.learning_rate = 0.01f});
    oar::Model md(dev);
    oar::Model mh(host);
    md.prepare(opt_d, oar::CrossEntropyLoss<emulated_cuda>{}, {oar::top_k_accuracy(1)});
    mh.prepare(opt_h, oar::CrossEntropyLoss<>{}, {oar::top_k_accuracy(1)});
    const oar::FitOptions o{.epochs = 3, .batch_size = 20, .verbose = 0};
    const oar::History hd = md.fit(train, &valid, o);
    const oar::History hh = mh.fit(train, &valid, o);
    REQUIRE(hd.epochs.size() == 3);
    CHECK(hd.epochs[2].loss < hd.epochs[0].loss);
    CHECK(hd.epochs[2].at("eval_acc") >= 0.95);
    for (std::size_t e = 0; e < 3; ++e)
        CHECK(std::abs(hd.epochs[e].loss - hh.epochs[e].loss) <= 1e-4 * std::max(1.0, hh.epochs[e].loss));
    CHECK(max_rel_diff(host.parameters().values(), dev.parameters().host_values()) <= 1e-3);
    const auto ev = md.evaluate(valid);
    CHECK(std::abs(ev.loss - mh.evaluate(valid).loss) <= 1e-4);
    const auto pd = md.predict(valid), ph = mh.predict(valid);
    CHECK(max_rel_diff(pd.view().span(), ph.view().span()) <= 1e-3);
}

TEST_CASE("a checkpoint of a device network is the CPU checkpoint of the same weights and state, and resumes") {
    oar_test::TempDir dir;
    using ToyDev = oar::Network<oar_test::ToySeq, oar::Shape<1, 6, 6>, emulated_cuda>;
    const auto train = oar_test::toy_set(60);
    ToyDev dev(5);
    oar::Adam<emulated_cuda> opt(dev.parameters(), {.learning_rate = 0.01f});
    oar::Model m(dev);
    m.prepare(opt, oar::CrossEntropyLoss<emulated_cuda>{});
    m.fit(train, {.epochs = 1, .batch_size = 20, .verbose = 0});
    oar::TrainingState saved;
    saved.epoch = 1;
    saved.global_step = 3;
    oar::save_checkpoint(dir.path.string(), "ckpt", dev, opt, saved);
    // Loaded into a CPU network and optimizer: the device's weights and moments, bit for bit.
    oar_test::ToyNet cpu_net(99);
    oar::Adam<> cpu_opt(cpu_net.parameters());
    const auto st = oar::load_checkpoint(dir.path.string(), "ckpt", cpu_net, cpu_opt);
    CHECK(st.global_step == 3);
    CHECK(max_rel_diff(cpu_net.parameters().values(), dev.parameters().host_values()) == 0.0);
    CHECK(cpu_opt.step_count() == opt.step_count());
    auto dev_state = opt.state();
    auto cpu_state = cpu_opt.state();
    REQUIRE(dev_state.size() == cpu_state.size());
    for (std::size_t k = 0; k < dev_state.size(); ++k) {
        std::vector<float> d(dev_state[k].second.size());
        oar::storage<emulated_cuda>::download(d.data(), dev_state[k].second.data(), d.size());
        CHECK(max_rel_diff(d, cpu_state[k].second) == 0.0);
    }
    // Loaded back into a fresh device network, one more step equals the original's next step.
    ToyDev dev2(5);  // the same seed (Dropout's masks are drawn from it), as a resumed run has
    oar::Adam<emulated_cuda> opt2(dev2.parameters(), {.learning_rate = 0.01f});
    oar::load_checkpoint(dir.path.string(), "ckpt", dev2, opt2);
    CHECK(max_rel_diff(dev2.parameters().host_values(), dev.parameters().host_values()) == 0.0);
    const auto x = oar_test::random_vector<float>(8 * 36, 3);
    const std::vector<std::int64_t> y{0, 1, 2, 3, 0, 1, 2, 3};
    oar::CrossEntropyLoss<emulated_cuda> l1, l2;
    l1(dev.forward(oar::TensorView(x.data(), 8, oar::make_dims(1, 6, 6))), y);
    l2(dev2.forward(oar::TensorView(x.data(), 8, oar::make_dims(1, 6, 6))), y);
    dev.clear_grad();
    dev2.clear_grad();
    dev.backward(l1.backward());
    dev2.backward(l2.backward());
    opt.step();
    opt2.step();
    CHECK(max_rel_diff(dev2.parameters().host_values(), dev.parameters().host_values()) == 0.0);
}

namespace {

/// A two-rank communicator of "device memory" whose reductions run on a fake stream: started ones
/// are queued and only run at wait_all (as NCCL's stream would run them later), blocking ones run
/// at once. The other rank holds the same gradients, so a sum doubles each value.
struct FakeStreamComm {
    static constexpr bool device_memory = true;
    std::vector<std::function<void()>> stream;
    std::size_t started = 0, progressed = 0;
    int rank() const { return 0; }
    int world_size() const { return 2; }
    template <class T>
    void allreduce_sum(std::span<T> x) {
        for (T& v : x) v += v;
    }
    template <class T>
    void allreduce_average(std::span<T> x) {
        (void)x;
    }
    template <class T>
    void broadcast(std::span<T>, int) {}
    void barrier() {}
    /// Control data is laid out rank by rank (allgather): rank 1 contributes what rank 0 does.
    void host_allreduce_sum(std::span<double> x) {
        const std::size_t half = x.size() / 2;
        for (std::size_t i = 0; i < half; ++i) x[half + i] = x[i];
    }
    template <class T>
    void start_allreduce_sum(std::span<T> x) {
        ++started;
        stream.push_back([x] {
            for (T& v : x) v += v;
        });
    }
    void progress() { ++progressed; }
    void wait_all() {
        for (auto& f : stream) f();
        stream.clear();
    }
};

}  // namespace

TEST_CASE("DataParallel over a device network starts bucketed reductions during backward, as on the CPU") {
    static_assert(oar::dist::AsyncCommunicator<FakeStreamComm>);
    using Net = oar::Network<MLP, Image, emulated_cuda>;
    const auto x = oar_test::random_vector<float>(16 * 784, 1);
    std::vector<std::int64_t> y(16);
    for (std::size_t i = 0; i < 16; ++i) y[i] = static_cast<std::int64_t>(i % 10);
    auto run = [&](bool overlap, std::size_t& buckets, std::size_t& overlapped) {
        Net net(2);
        FakeStreamComm comm;
        oar::dist::DataParallel dp(net, comm, {.bucket_bytes = 4096, .overlap = overlap});
        oar::CrossEntropyLoss<emulated_cuda> loss;
        loss(dp.forward(oar::TensorView(x.data(), 16, Image::dims)), y);
        dp.backward(loss.backward());
        buckets = dp.num_buckets();
        overlapped = dp.overlapped_buckets();
        CHECK(comm.stream.empty());
        const auto g = net.parameters().host_grads();
        return std::vector<float>(g.begin(), g.end());
    };
    std::size_t b1 = 0, o1 = 0, b2 = 0, o2 = 0;
    const auto overlapped = run(true, b1, o1);
    const auto blocking = run(false, b2, o2);
    CHECK(b1 > 2);
    CHECK(o1 > 0);   // buckets started while earlier layers still ran backward
    CHECK(o2 == 0);
    CHECK(max_rel_diff(overlapped, blocking) == 0.0);
    // (g + g) / 2 == g: the average of two identical ranks is the single rank's gradient.
    Net single(2);
    oar::CrossEntropyLoss<emulated_cuda> loss;
    loss(single.forward(oar::TensorView(x.data(), 16, Image::dims)), y);
    single.backward(loss.backward());
    const auto g = single.parameters().host_grads();
    CHECK(max_rel_diff(overlapped, std::vector<float>(g.begin(), g.end())) == 0.0);
}

TEST_CASE("bf16_mixed on the emulated CUDA backend trains as the CPU's bf16_mixed network") {
    // Both round the same operands to bf16 and sum in fp32, in different orders (the conv plan's
    // GEMM against the CPU's direct kernel): an fp32 difference can move a value across a bf16
    // rounding boundary, one step of 2^-8 relative in that operand. Bound: 2^-8 (relative, absolute
    // below 1) on logits, loss, gradients and parameters, one bf16 rounding step.
    constexpr double bound = 1.0 / 256;
    compare_training<emulated_cuda, CNN, oar::Adam, oar::bf16_mixed>(8, 2, bound, bound);
    compare_training<emulated_cuda, MLP, oar::SGD, oar::bf16_mixed>(16, 2, bound, bound);
    compare_training<emulated_cuda, Blocks, oar::Adam, oar::bf16_mixed>(4, 2, bound, bound);  // convs inside blocks
}

TEST_CASE("bf16_mixed on the emulated CUDA backend: Linear's and Conv2D's products on bf16 operands with fp32 sums") {
    // One Conv2D and one Linear: the output against a double sum of bf16-rounded operands (so the
    // only error is the fp32 summation: bound K * 2^-24 * sum |a||b|) and unlike the fp32 network's.
    using Seq = oar::Sequential<oar::Conv2D<1, 2, 3>, oar::Flatten, oar::Linear<2 * 4 * 4, 3>>;
    using Small = oar::Shape<1, 6, 6>;
    oar::Network<Seq, Small, emulated_cuda, oar::bf16_mixed> net(11);
    oar::Network<Seq, Small, emulated_cuda> net32(11);
    const std::size_t n = 2;
    const auto x = oar_test::random_vector<float>(n * 36, 12);
    const oar::TensorView xv(x.data(), n, Small::dims);
    const auto out = net.to_host(net.forward(xv));
    const auto out32 = net32.to_host(net32.forward(xv));
    const auto p = net.parameters().host_values();
    const auto r = [](float v) { return static_cast<double>(oar::round_to_bf16(v)); };
    const auto& e = net.parameters().entries();  // conv weight (2, 1, 3, 3) and bias, Linear weight (32, 3) and bias
    REQUIRE(e.size() == 4);
    const float* cw = p.data() + e[0].offset;
    const float* cb = p.data() + e[1].offset;
    const float* lw = p.data() + e[2].offset;
    const float* lb = p.data() + e[3].offset;
    double worst = 0.0, worst32 = 0.0;
    for (std::size_t s = 0; s < n; ++s) {
        std::vector<float> h(32);  // the conv's output as the device computed it: fp32 of bf16 products
        std::vector<double> h_abs(32);
        for (std::size_t c = 0; c < 2; ++c)
            for (std::size_t oy = 0; oy < 4; ++oy)
                for (std::size_t ox = 0; ox < 4; ++ox) {
                    double acc = 0.0, mag = 0.0;
                    for (std::size_t ky = 0; ky < 3; ++ky)
                        for (std::size_t kx = 0; kx < 3; ++kx) {
                            const double t = r(cw[c * 9 + ky * 3 + kx]) * r(x[s * 36 + (oy + ky) * 6 + ox + kx]);
                            acc += t;
                            mag += std::abs(t);
                        }
                    h[c * 16 + oy * 4 + ox] = static_cast<float>(acc + cb[c]);
                    h_abs[c * 16 + oy * 4 + ox] = mag;
                }
        const auto conv = net.to_host(net.activation(1));  // checked itself: within the fp32 bound of the sum
        for (std::size_t i = 0; i < 32; ++i)
            CHECK(std::abs(conv[s * 32 + i] - h[i]) <= 16 * 0x1p-24 * (h_abs[i] + std::abs(cb[i / 16])));
        for (std::size_t j = 0; j < 3; ++j) {
            double acc = 0.0, mag = 0.0;
            for (std::size_t k = 0; k < 32; ++k) {
                const double t = r(conv[s * 32 + k]) * r(lw[k * 3 + j]);
                acc += t;
                mag += std::abs(t);
            }
            const double want = acc + lb[j];
            INFO("sample " << s << " output " << j);
            CHECK(std::abs(out[s * 3 + j] - want) <= 64 * 0x1p-24 * (mag + std::abs(lb[j])));
            worst = std::max(worst, std::abs(out[s * 3 + j] - want));
            worst32 = std::max(worst32, std::abs(static_cast<double>(out32[s * 3 + j]) - want));
        }
    }
    CHECK(worst32 > 4 * worst);  // the fp32 network's products are not the bf16 ones
}

TEST_CASE("a bf16_mixed device network's checkpoint holds fp32 weights that load into an fp32 CPU network") {
    oar_test::TempDir dir;
    oar::Network<MLP, Image, emulated_cuda, oar::bf16_mixed> dev(5);
    oar::Adam<emulated_cuda> opt(dev.parameters());
    const auto x = oar_test::random_vector<float>(4 * 784, 6);
    const std::vector<std::int64_t> y{1, 2, 3, 4};
    oar::CrossEntropyLoss<emulated_cuda> loss;
    loss(dev.forward(oar::TensorView(x.data(), 4, Image::dims)), y);
    dev.clear_grad();
    dev.backward(loss.backward());
    opt.step();
    oar::save_checkpoint(dir.path.string(), "bf16", dev, opt, oar::TrainingState{});
    oar::Network<MLP, Image> host(99);
    oar::Adam<> host_opt(host.parameters());
    oar::load_checkpoint(dir.path.string(), "bf16", host, host_opt);
    CHECK(max_rel_diff(host.parameters().values(), dev.parameters().host_values()) == 0.0);
    // and back, into a bf16_mixed device network
    oar::Network<MLP, Image, emulated_cuda, oar::bf16_mixed> dev2(1);
    oar::Adam<emulated_cuda> opt2(dev2.parameters());
    oar::save_checkpoint(dir.path.string(), "fp32", host, host_opt, oar::TrainingState{});
    oar::load_checkpoint(dir.path.string(), "fp32", dev2, opt2);
    CHECK(max_rel_diff(dev2.parameters().host_values(), dev.parameters().host_values()) == 0.0);
}
