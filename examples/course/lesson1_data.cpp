// Lesson 1 of the course, data handling:
//   1. load_data: read mnist.json.gz into its train / valid / test splits and check them (as many
//      labels as images, every image 784 finite values, labels 0-9; the reader refuses anything
//      else, naming the file, split, sample and byte offset);
//   2. shuffle the training index list and batch it with data_generator, a coroutine (co_yield for
//      the course's yield); print the first batch's shapes and check one epoch saw every sample;
//   3. the asynchronous reader: the course's RandomDataset(10), then a DataLoader over it
//      (batch_size=3, shuffle=True, drop_last=True, num_workers=2) printing each batch's shapes.
// --data also takes an MNIST IDX folder (data/mnist), split as the course's file is.
#include <algorithm>  // std::min, std::max
#include <array>      // std::array: per-class counts
#include <bit>        // std::bit_cast: the values' checksum
#include <cstddef>    // std::size_t
#include <cstdint>    // std::int64_t, std::uint64_t
#include <cstdio>     // std::printf, std::fprintf
#include <exception>  // std::exception
#include <limits>     // std::numeric_limits
#include <span>       // std::span
#include <string>     // std::string

#include "app/cli.hpp"      // cli::for_each_flag, oar::parse_count
#include "lesson_data.hpp"  // lesson::load_splits, index_list, data_generator

namespace {

constexpr const char* usage = R"(usage: course_lesson1_data [--data FILE|DIR] [--batch-size N]
The course's lesson 1: read, check, shuffle and batch MNIST; then RandomDataset and DataLoader.

  --data FILE|DIR   mnist.json.gz, or an MNIST IDX folder     (default ./work/mnist.json.gz)
  --batch-size N    the generator's BATCHSIZE                  (default 100)
)";

/// "[n, d0, d1, ...]": a batch's shape as the course prints numpy's.
std::string shape(std::size_t n, const oar::Dims& d) {
    std::string s = "[" + std::to_string(n);
    for (std::size_t i = 0; i < d.rank; ++i) s += ", " + std::to_string(d[i]);
    return s + "]";
}

/// Per-class label counts and the sum of all values of a set of samples: what the generator's
/// epoch must reproduce.
struct Tally {
    std::array<std::size_t, 10> per_class{};
    std::uint64_t value_sum = 0;  // of the values' bit patterns: exact in any order
    std::size_t images = 0;

    void add(std::span<const float> values, std::span<const std::int64_t> labels) {
        for (const float v : values) value_sum += std::bit_cast<std::uint32_t>(v);
        for (const std::int64_t y : labels) ++per_class[static_cast<std::size_t>(y)];
        images += labels.size();
    }
};

/// The course's checks on one split, printed: counts, shape, value range, labels per class.
Tally check(const char* name, const oar::data::InMemoryDataset& ds) {
    float lo = std::numeric_limits<float>::max(), hi = std::numeric_limits<float>::lowest();
    for (const float v : ds.images()) lo = std::min(lo, v), hi = std::max(hi, v);
    Tally t;
    t.add(ds.images(), ds.labels());
    std::printf("checked %s: %zu images, %zu labels, each %s, values in [%.4f, %.4f], labels per class 0-9:", name,
                ds.size(), ds.labels().size(), oar::to_string(ds.dims()).c_str(), static_cast<double>(lo),
                static_cast<double>(hi));
    for (const std::size_t c : t.per_class) std::printf(" %zu", c);
    std::printf("\n");
    return t;
}

void random_dataset_demo() {
    // The course's RandomDataset(10): 784 uniform values in [0, 1) and a random label per sample.
    const oar::data::RandomDataset dataset(10);
    std::printf("RandomDataset(10):\n");
    for (std::size_t i = 0; i < dataset.size(); ++i) {
        const oar::data::Sample s = dataset.get(i);
        std::printf("sample %zu: image %s, values %.4f %.4f %.4f ..., label %lld\n", i,
                    oar::to_string(s.dims).c_str(), static_cast<double>(s.image[0]), static_cast<double>(s.image[1]),
                    static_cast<double>(s.image[2]), static_cast<long long>(s.label));
    }
    // Worker threads build the batches while this thread consumes them.
    oar::data::DataLoader loader(dataset, {.batch_size = 3, .shuffle = true, .drop_last = true, .num_workers = 2});
    std::printf("DataLoader(dataset, batch_size=3, shuffle=True, drop_last=True, num_workers=2):\n");
    for (auto&& b : loader())
        std::printf("batch_id: %zu, image shape: %s, label shape: [%zu]\n", b.index,
                    shape(b.images.batch(), b.images.dims()).c_str(), b.labels.size());
}

}  // namespace

int main(int argc, char** argv) {
    try {
        std::string datafile = "./work/mnist.json.gz";
        std::size_t batch_size = 100;
        if (!cli::for_each_flag(argc, argv, [&](const std::string& flag, const std::string& value) {
                if (flag == "--data") datafile = value;
                else if (flag == "--batch-size") batch_size = oar::parse_count(flag, value, 1);
                else throw cli::unknown_flag(flag);
            })) {
            std::printf("%s", usage);
            return 0;
        }

        std::printf("loading mnist dataset from %s ......\n", datafile.c_str());
        const oar::data::MnistJson data = lesson::load_splits(datafile);
        std::printf("mnist dataset load done\n");
        std::printf("number of training samples: %zu\n", data.train.size());
        std::printf("number of validation samples: %zu\n", data.valid.size());
        std::printf("number of test samples: %zu\n", data.test.size());
        const Tally train = check("train", data.train);
        check("valid", data.valid);
        check("eval", data.test);
        try {  // load_data(mode) knows three modes, as the course's raises for any other
            (void)oar::data::mnist_json_split("predict");
        } catch (const oar::error& e) {
            std::printf("load_data('predict'): %s\n", e.what());
        }

        // Shuffle the training index list, then batch it with the generator.
        const auto order = lesson::index_list(data.train.size(), /*shuffle=*/true, /*epoch=*/0);
        std::printf("shuffled index_list begins:");
        for (std::size_t i = 0; i < std::min<std::size_t>(8, order.size()); ++i) std::printf(" %zu", order[i]);
        std::printf(" ...\n");
        Tally seen;
        std::size_t batches = 0, last = 0;
        for (auto&& [images, labels] : lesson::data_generator(data.train, order, batch_size)) {
            if (batches == 0)
                std::printf("first batch: image shape %s, label shape [%zu], labels begin %lld %lld %lld\n",
                            shape(images.batch(), images.dims()).c_str(), labels.size(),
                            static_cast<long long>(labels[0]), static_cast<long long>(labels[std::min<std::size_t>(1, labels.size() - 1)]),
                            static_cast<long long>(labels[std::min<std::size_t>(2, labels.size() - 1)]));
            seen.add(images.span(), labels);
            last = labels.size();
            ++batches;
        }
        const bool same = seen.per_class == train.per_class && seen.value_sum == train.value_sum;
        std::printf("one epoch: %zu batches (the last of %zu), %zu images; labels per class and checksum of the values equal "
                    "the train split's: %s\n",
                    batches, last, seen.images, same ? "yes" : "NO");

        random_dataset_demo();
        return same ? 0 : 1;
    } catch (const oar::usage_error& e) {
        std::fprintf(stderr, "course_lesson1_data: %s\n%s", e.what(), usage);
        return 2;
    } catch (const oar::error& e) {
        std::fprintf(stderr, "course_lesson1_data: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "course_lesson1_data: unexpected failure: %s\n", e.what());
        return 1;
    }
}
