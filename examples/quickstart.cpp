// oar in one page: the course's CNN as a type, checked by the compiler, trained with the course's
// loop on a few synthetic batches. (train_mnist.cpp is the full program on real data.)
#include <cstdint>   // std::int64_t
#include <cstdio>    // std::printf
#include <vector>    // std::vector

#include <oar/models/course.hpp>  // course::CNN
#include <oar/oar.hpp>            // the CPU API

using CNN = oar::Sequential<oar::Conv2D<1, 20, 5, 1, 2>, oar::ReLU, oar::MaxPool2D<2, 2>,  //
                            oar::Conv2D<20, 20, 5, 1, 2>, oar::ReLU, oar::MaxPool2D<2, 2>,  //
                            oar::Flatten, oar::Linear<980, 10>>;
// Written out here to show it; the library defines it once as oar::course::CNN (oar/models/course.hpp).
static_assert(std::is_same_v<CNN, oar::course::CNN>);
using Net = oar::Network<CNN, oar::Shape<1, 28, 28>>;

// Shapes are compile-time facts: change 980 to 981 above and this file stops compiling with
// "oar: Sequential: a layer's input features do not match ..." and sequential_shape_error<7, ..., 981, 980>.
static_assert(std::is_same_v<Net::output_shape, oar::Shape<10>>);
static_assert(Net::info::total_params == 20350);

int main() {
    Net net(/*seed=*/42);
    std::printf("%s", oar::summary(net).c_str());

    oar::Adam opt(net.parameters(), {.learning_rate = 1e-3f, .weight_decay = oar::L2Decay(1e-5f)});
    oar::CrossEntropyLoss loss_fn;

    // A toy batch: class c is a bright column at x = 2 + 2c.
    oar::Tensor images(100, oar::make_dims(1, 28, 28));
    std::vector<std::int64_t> labels(100);
    for (std::size_t i = 0; i < 100; ++i) {
        labels[i] = static_cast<std::int64_t>(i % 10);
        for (std::size_t p = 0; p < 784; ++p) images[i * 784 + p] = (p % 28 == 2 + 2 * (i % 10)) ? 1.0f : -1.0f;
    }

    for (int step = 0; step < 30; ++step) {  // the course's loop
        auto logits = net.forward(images);
        const float loss = loss_fn(logits, labels);
        net.backward(loss_fn.backward());
        opt.step();
        opt.clear_grad();
        if (step % 10 == 0 || step == 29)
            std::printf("step %2d  loss %.4f  accuracy %.2f\n", step, loss, oar::accuracy(logits, labels));
    }
    for (const auto& e : net.state_dict()) std::printf("%-9s %s\n", e.key.c_str(), oar::to_string(e.dims).c_str());
}
