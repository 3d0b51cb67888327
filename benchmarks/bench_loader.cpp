// DataLoader throughput on an MNIST-sized ByteImageDataset (60,000 x [1, 28, 28] random bytes,
// shuffled, batch 100) with 0, 1 and 2 workers, beside the course CNN's training step at batch 100
// and that step fed by the loader: whether loading keeps up with training, and what prefetching hides.
//   build/release/benchmarks/bench_loader [--benchmark_filter=loader]
#include <benchmark/benchmark.h>  // the harness

#include <oar/data/dataloader.hpp>  // DataLoader, ByteImageDataset
#include <oar/models/course.hpp>    // course::CNN
#include <oar/oar.hpp>              // Network, CrossEntropyLoss, Adam

#include <cstddef>  // std::size_t
#include <cstdlib>  // std::getenv
#include <string>   // std::string
#include <cstdint>  // std::int64_t, std::uint8_t
#include <utility>  // std::move
#include <vector>   // std::vector

namespace {

using namespace oar;
using data::ByteImageDataset;
using data::DataLoader;

constexpr std::size_t batch = 100;

/// 60,000 random images and labels, made once.
const ByteImageDataset& mnist_sized() {
    static const ByteImageDataset ds = [] {
        const CounterRng rng{2024};
        const std::size_t n = 60000, px = 28 * 28;
        std::vector<std::uint8_t> pixels(n * px);
        for (std::size_t i = 0; i < pixels.size(); i += 4) {
            const auto b = rng.bits(0, i / 4);
            for (std::size_t j = 0; j < 4 && i + j < pixels.size(); ++j) pixels[i + j] = static_cast<std::uint8_t>(b[j]);
        }
        std::vector<std::int64_t> labels(n);
        for (std::size_t i = 0; i < n; ++i) labels[i] = static_cast<std::int64_t>(rng.below(1, i, 10));
        return ByteImageDataset(std::move(pixels), std::move(labels), make_dims(1, 28, 28));
    }();
    return ds;
}

/// Pulls batches without end: a new epoch (a new generator, so new worker threads) after every 600.
class Feed {
public:
    explicit Feed(std::size_t workers)
        : loader_(mnist_sized(), {.batch_size = batch, .shuffle = true, .num_workers = workers, .seed = 1}),
          gen_(loader_()), it_(gen_.begin()) {}

    data::Batch& next() {
        if (it_ == gen_.end()) {
            gen_ = loader_();
            it_ = gen_.begin();
        }
        data::Batch& b = *it_;
        pending_ = true;
        return b;
    }
    /// Done with the batch from next(): lets the loader continue to the one after.
    void release() {
        if (pending_) ++it_;
        pending_ = false;
    }

private:
    DataLoader<ByteImageDataset> loader_;
    generator<data::Batch> gen_;
    decltype(gen_.begin()) it_;
    bool pending_ = false;
};

void loader_throughput(benchmark::State& state) {
    Feed feed(static_cast<std::size_t>(state.range(0)));
    for (auto _ : state) {
        data::Batch& b = feed.next();
        benchmark::DoNotOptimize(b.images.data());
        feed.release();
    }
    state.counters["batches/s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
    state.counters["img/s"] = benchmark::Counter(double(batch * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(loader_throughput)->Arg(0)->Arg(1)->Arg(2)->ArgName("workers")->Unit(benchmark::kMicrosecond)->UseRealTime();

using CNN = course::CNN;

/// The course CNN's training step (forward, cross-entropy, backward, Adam) on `x`, `y`.
struct Trainer {
    Network<CNN, Shape<1, 28, 28>> net{1};
    Adam<> opt{net.parameters(), {.learning_rate = 1e-3f}};
    CrossEntropyLoss<> ce;

    void step(const Tensor& x, const std::vector<std::int64_t>& y) {
        auto out = net.forward(x);
        benchmark::DoNotOptimize(ce(out, y));
        net.backward(ce.backward());
        opt.step();
        opt.clear_grad();
    }
};

/// The step alone, on one fixed batch: what the loader has to keep up with.
void cnn_train_step(benchmark::State& state) {
    Trainer t;
    Feed feed(0);
    const data::Batch fixed = feed.next();
    for (auto _ : state) t.step(fixed.images, fixed.labels);
    state.counters["batches/s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
    state.counters["img/s"] = benchmark::Counter(double(batch * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(cnn_train_step)->Name("cnn_train_step_b100")->Unit(benchmark::kMillisecond)->UseRealTime();

/// Loading and training together: with workers the next batches load while the step runs.
void cnn_train_step_fed(benchmark::State& state) {
    Trainer t;
    Feed feed(static_cast<std::size_t>(state.range(0)));
    for (auto _ : state) {
        data::Batch& b = feed.next();
        t.step(b.images, b.labels);
        feed.release();
    }
    state.counters["batches/s"] = benchmark::Counter(double(state.iterations()), benchmark::Counter::kIsRate);
    state.counters["img/s"] = benchmark::Counter(double(batch * state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(cnn_train_step_fed)->Name("cnn_train_step_b100_fed")->Arg(0)->Arg(1)->ArgName("workers")
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

/// Reading MNIST's 60,000-image training set from its IDX .gz files (decompress, check, copy):
/// the folder is $OAR_DATA, else data/mnist in the checkout; skipped when neither has it.
void idx_load_train_set(benchmark::State& state) {
    const char* env = std::getenv("OAR_DATA");
    const std::string dir = env && *env ? env : std::string(OAR_SOURCE_DIR) + "/data/mnist";
    if (!oar::data::is_mnist_dir(dir)) {
        state.SkipWithError(("no MNIST IDX files in " + dir + " (run scripts/setup.sh or set OAR_DATA)").c_str());
        return;
    }
    for (auto _ : state) {
        auto s = oar::data::read_idx_pair(oar::data::find_idx_file(dir, "train-images-idx3-ubyte"),
                                          oar::data::find_idx_file(dir, "train-labels-idx1-ubyte"));
        benchmark::DoNotOptimize(s.pixels.data());
    }
    state.counters["images/s"] = benchmark::Counter(60000.0 * double(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(idx_load_train_set)->Unit(benchmark::kMillisecond)->UseRealTime();

BENCHMARK_MAIN();
