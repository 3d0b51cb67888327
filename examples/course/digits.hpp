// The data of the course's lessons 3 and 5-8: generated digits, so that they run anywhere in
// seconds (class c is a bright column at x = 2 + 2c over noise), or the first images of the real
// MNIST's splits (`--data DIR`, an IDX folder such as data/mnist); the course's CNN; the course's
// reader (a new shuffle every epoch, from the seed and the epoch alone, so that a resumed run reads
// the batches an uninterrupted one reads); the lessons' small argument parser. Program code for
// examples/course/, not installed.
#pragma once

#include <algorithm>  // std::min
#include <cstddef>  // std::size_t
#include <cstdint>  // std::int64_t, std::uint64_t
#include <initializer_list>  // parse_args' flags
#include <map>      // std::map: the flags given
#include <numeric>  // std::iota
#include <span>     // std::span
#include <string>   // std::string
#include <utility>  // std::swap
#include <vector>   // std::vector

#include <oar/oar.hpp>  // the CPU API

namespace course {

/// The course's CNN: two 5x5 convolutions with 20 channels, ReLU and 2x2 max pooling, Linear(980, 10).
using CNN = oar::Network<oar::Sequential<oar::Conv2D<1, 20, 5, 1, 2>, oar::ReLU, oar::MaxPool2D<2, 2>,  //
                                         oar::Conv2D<20, 20, 5, 1, 2>, oar::ReLU, oar::MaxPool2D<2, 2>,  //
                                         oar::Flatten, oar::Linear<980, 10>>,
                         oar::Shape<1, 28, 28>>;

/// `n` images of 28x28 scaled as the course's (about -1 to 1) and their labels.
struct Digits {
    oar::Tensor images;
    std::vector<std::int64_t> labels;
    std::size_t size() const { return labels.size(); }
};

/// `n` generated digits; `stream` keeps the training and test sets apart.
inline Digits generate(std::size_t n, std::uint64_t stream) {
    Digits d{oar::Tensor(n, oar::make_dims(1, 28, 28)), std::vector<std::int64_t>(n)};
    const oar::CounterRng rng{stream};
    for (std::size_t i = 0; i < n; ++i) {
        d.labels[i] = static_cast<std::int64_t>(rng.below(1, i, 10));
        for (std::size_t p = 0; p < 784; ++p) {
            const bool on = p % 28 == 2 + 2 * static_cast<std::size_t>(d.labels[i]);
            d.images[i * 784 + p] = (on ? 1.0f : -1.0f) + 0.8f * (rng.uniform(2, i * 784 + p) - 0.5f);
        }
    }
    return d;
}

/// The first `n` images of `set` (a split of the real MNIST as oar::data::load_mnist reads it) as
/// the course's file has them, x / 127.5 - 1; format_error unless they are 28x28, value_error when
/// the split has fewer than `n`.
inline Digits first_of(const oar::data::LabeledImages& set, std::size_t n, const char* split) {
    if (set.rows != 28 || set.cols != 28)
        throw oar::format_error(oar::detail::concat("MNIST ", split, " images are ", set.rows, "x", set.cols,
                                                    ", the course's networks take 28x28"));
    if (set.count < n)
        throw oar::value_error(oar::detail::concat("MNIST ", split, " split has ", set.count, " images, this lesson uses ", n));
    Digits d;
    std::vector<std::size_t> which(n);
    std::iota(which.begin(), which.end(), std::size_t{0});
    oar::data::fill_batch(set, which, d.images, d.labels);
    return d;
}

/// A lesson's three sets: `n_train`, `n_valid` and `n_test` generated digits (from the streams
/// `streams`: train, valid, test), or, when `mnist_dir` is not empty, the first that many images of
/// the real MNIST's train, valid and test splits (50,000 / 10,000 / 10,000, the course's split).
struct Sets {
    Digits train, valid, test;
    const char* name = "generated";  ///< "generated" or "mnist"
};

inline Sets load_sets(const std::string& mnist_dir, std::size_t n_train, std::size_t n_valid, std::size_t n_test,
                      const std::uint64_t (&streams)[3]) {
    if (mnist_dir.empty())
        return {generate(n_train, streams[0]), generate(n_valid, streams[1]), generate(n_test, streams[2]), "generated"};
    const oar::data::MnistSplits m = oar::data::load_mnist(mnist_dir);
    return {first_of(m.train, n_train, "train"), first_of(m.valid, n_valid, "valid"), first_of(m.test, n_test, "test"),
            "mnist"};
}

/// A lesson's command line: `--flag VALUE` pairs for the flags in `flags`, other words positional
/// (at most `max_positional`). usage_error naming the word for an unknown flag, a flag without a
/// value or one positional too many.
struct Args {
    std::map<std::string, std::string> flags;
    std::vector<std::string> positional;
    std::string flag(const std::string& name, std::string fallback = "") const {
        const auto it = flags.find(name);
        return it == flags.end() ? fallback : it->second;
    }
    std::string at(std::size_t i, std::string fallback) const {
        return i < positional.size() ? positional[i] : fallback;
    }
};

inline Args parse_args(int argc, char** argv, std::initializer_list<const char*> flags, std::size_t max_positional) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string w = argv[i];
        if (w.rfind("--", 0) == 0) {
            bool known = false;
            for (const char* f : flags) known = known || w == f;
            if (!known) throw oar::usage_error(oar::detail::concat("unknown flag '", w, "'"));
            if (i + 1 >= argc) throw oar::usage_error(oar::detail::concat(w, " needs a value"));
            a.flags[w] = argv[++i];
        } else if (a.positional.size() < max_positional) {
            a.positional.push_back(w);
        } else {
            throw oar::usage_error(oar::detail::concat("unexpected argument '", w, "'"));
        }
    }
    return a;
}

/// The order of epoch `epoch`'s images: a Fisher-Yates shuffle drawn from (seed, epoch) alone.
inline std::vector<std::size_t> shuffled(std::size_t n, std::uint64_t seed, std::size_t epoch) {
    std::vector<std::size_t> order(n);
    std::iota(order.begin(), order.end(), std::size_t{0});
    const oar::CounterRng rng{seed};
    for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(epoch, i, i)]);
    return order;
}

/// One batch: the images and labels of order[first, first + count).
struct Batch {
    oar::Tensor images;
    std::vector<std::int64_t> labels;
};

inline Batch gather(const Digits& d, std::span<const std::size_t> which) {
    Batch b{oar::Tensor(which.size(), oar::make_dims(1, 28, 28)), std::vector<std::int64_t>(which.size())};
    for (std::size_t k = 0; k < which.size(); ++k) {
        for (std::size_t p = 0; p < 784; ++p) b.images[k * 784 + p] = d.images[which[k] * 784 + p];
        b.labels[k] = d.labels[which[k]];
    }
    return b;
}

/// Loss and accuracy of `net` on all of `d` in eval mode, in batches of `batch`.
struct Score {
    double loss = 0, accuracy = 0;
};

template <class Net>
Score evaluate(Net& net, const Digits& d, std::size_t batch = 100) {
    net.eval();
    oar::CrossEntropyLoss<> loss_fn;
    Score s;
    for (std::size_t b = 0; b < d.size(); b += batch) {
        const std::size_t n = std::min(batch, d.size() - b);
        const oar::TensorView x(d.images.data() + b * 784, n, oar::make_dims(1, 28, 28));
        const std::span<const std::int64_t> y(d.labels.data() + b, n);
        auto out = net.forward(x);
        s.loss += static_cast<double>(loss_fn.forward(out, y)) * static_cast<double>(n);
        s.accuracy += static_cast<double>(oar::accuracy(out, y)) * static_cast<double>(n);
    }
    s.loss /= static_cast<double>(d.size());
    s.accuracy /= static_cast<double>(d.size());
    net.train();
    return s;
}

}  // namespace course
