// The fleet facade on one process: it builds the same DataParallel as the direct calls, with the
// strategy's bucket size, and training through it gives the direct path's bits.
#include <doctest/doctest.h>

#include <cstdlib>  // unsetenv
#include <cstring>  // std::memcmp
#include <string>   // std::string
#include <vector>   // std::vector

#include <oar/dist/fleet.hpp>  // fleet::init, distributed_model, distributed_optimizer
#include <oar/oar.hpp>         // Network, layers, SGD

using namespace oar;

namespace {
using FleetSmall = Sequential<Flatten, Linear<12, 5>, ReLU, Linear<5, 3>>;
using FleetNet = Network<FleetSmall, Shape<1, 3, 4>>;

template <class DP, class Opt>
void train_steps(DP& dp, Opt& opt) {
    std::vector<float> x(4 * 12), dy(4 * 3);
    for (int s = 0; s < 3; ++s) {
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>((i + s) % 7) - 0.3f;
        for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 0.05f * static_cast<float>((i * 3 + s) % 5) - 0.1f;
        dp.forward(TensorView(x.data(), 4, make_dims(1, 3, 4)));
        dp.backward(TensorView(dy.data(), 4, make_dims(3)));
        opt.step();
        opt.clear_grad();
    }
}
}  // namespace

TEST_CASE("dist fleet: init, distributed_model and distributed_optimizer train as DataParallel does") {
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) unsetenv(v);
    dist::ParallelContext ctx = dist::fleet::init();
    CHECK(ctx.world_size() == 1);
    FleetNet a(3), b(3);
    dist::fleet::DistributedStrategy strategy;
    strategy.fuse_grad_size_in_MB = 16.0 / (1024 * 1024);  // 16 bytes: 4 floats per bucket
    auto model = dist::fleet::distributed_model(a, ctx, strategy);
    CHECK(model.bucket_bytes() == 16);
    CHECK(model.num_buckets() == (a.parameters().grads().size() + 3) / 4);
    SGD sgd_a(a.parameters(), {.learning_rate = 0.1f});
    auto& opt = dist::fleet::distributed_optimizer(sgd_a);
    CHECK(&opt == &sgd_a);
    train_steps(model, opt);

    dist::LocalComm local;
    dist::DataParallel direct(b, local, {.bucket_bytes = 16});
    SGD sgd_b(b.parameters(), {.learning_rate = 0.1f});
    train_steps(direct, sgd_b);
    const auto va = a.parameters().values(), vb = b.parameters().values();
    CHECK(std::memcmp(va.data(), vb.data(), va.size_bytes()) == 0);
    const FleetNet untrained(3);  // the steps moved the parameters: the comparison above means something
    const auto v0 = untrained.parameters().values();
    CHECK(std::vector<float>(va.begin(), va.end()) != std::vector<float>(v0.begin(), v0.end()));
}

TEST_CASE("dist fleet: a bucket size that is not positive is refused, naming it") {
    dist::ParallelContext ctx;
    FleetNet net(1);
    dist::fleet::DistributedStrategy s;
    s.fuse_grad_size_in_MB = 0;
    try {
        (void)dist::fleet::distributed_model(net, ctx, s);
        FAIL("accepted");
    } catch (const value_error& e) {
        CHECK(std::string(e.what()) == "oar: fleet: fuse_grad_size_in_MB is 0, it must be > 0");
    }
}
