// The course's data_generator in oar: shuffle the index list in train mode, yield full batches,
// then the remainder, with C++20 co_yield in place of Python's yield. It feeds the course's
// linear-regression model (784 -> 1, MSE) for one epoch on the course's RandomDataset, or on an
// MNIST folder given with --data DIR.
#include <cstdio>    // std::printf
#include <cstring>   // std::strcmp
#include <numeric>   // std::iota
#include <string>    // std::string
#include <vector>    // std::vector

#include <oar/models/course.hpp>  // oar::course::LinearRegression
#include <oar/oar.hpp>            // generator, datasets, the network

namespace {

enum class Mode { train, valid, eval };

struct Batch {
    oar::Tensor images;                // [n, 1, 28, 28]
    std::vector<std::int64_t> labels;  // [n]
};

/// The course's reader: a generator over one pass of `ds` in batches of `batch_size`.
template <oar::data::Dataset D>
oar::generator<Batch> data_generator(const D& ds, Mode mode, std::size_t batch_size, std::uint64_t epoch) {
    std::vector<std::size_t> index_list(ds.size());
    std::iota(index_list.begin(), index_list.end(), std::size_t{0});
    if (mode == Mode::train) oar::data::shuffle_indices(index_list, /*seed=*/0, epoch);
    Batch b;
    for (std::size_t first = 0; first < index_list.size(); first += batch_size) {
        const std::size_t n = std::min(batch_size, index_list.size() - first);  // the remainder last
        b.images.resize(n, ds.dims());
        b.labels.resize(n);
        for (std::size_t k = 0; k < n; ++k)
            b.labels[k] = ds.load(index_list[first + k], {b.images.data() + k * ds.dims().size(), ds.dims().size()});
        co_yield b;
    }
}

template <oar::data::Dataset D>
void train_one_epoch(const D& ds) {
    oar::Network<oar::course::LinearRegression, oar::course::Image> net(0);
    oar::SGD opt(net.parameters(), {.learning_rate = 0.001f});
    oar::MSELoss mse;
    oar::Tensor target;
    std::size_t batches = 0, images = 0;
    for (auto&& b : data_generator(ds, Mode::train, 100, 0)) {
        target.resize(b.labels.size(), oar::make_dims(1));
        for (std::size_t i = 0; i < b.labels.size(); ++i) target[i] = static_cast<float>(b.labels[i]);
        const float loss = mse(net.forward(b.images), target);
        net.backward(mse.backward());
        opt.step();
        opt.clear_grad();
        if (batches % 200 == 0) std::printf("epoch: 0, batch: %zu, loss is: %.4f\n", batches, loss);
        ++batches;
        images += b.labels.size();
    }
    std::printf("one epoch: %zu batches, %zu images\n", batches, images);
}

}  // namespace

int main(int argc, char** argv) {
    try {
        if (argc == 3 && std::strcmp(argv[1], "--data") == 0) {
            auto s = oar::data::load_mnist(argv[2]);
            train_one_epoch(oar::data::ByteImageDataset(std::move(s.train.pixels), std::move(s.train.labels),
                                                        oar::make_dims(1, 28, 28)));
        } else if (argc == 1) {
            train_one_epoch(oar::data::RandomDataset(1050, oar::make_dims(1, 28, 28)));
        } else {
            std::fprintf(stderr, "usage: data_generator [--data MNIST_DIR]\n");
            return 2;
        }
    } catch (const oar::error& e) {
        std::fprintf(stderr, "data_generator: %s\n", e.what());
        return 2;
    }
}
