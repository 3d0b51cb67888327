// DataParallel's bucketing and its overlap with backward, without MPI: a stand-in 2-rank
// communicator whose "peer" holds the same gradients (so a sum doubles them) records every
// reduction, blocking or started, and completes the started ones only at wait_all(). The real
// 2-process runs are in mpi_worker.cpp (equivalence: overlapped == blocking bitwise).
#include <doctest/doctest.h>

#include <cstring>  // std::memcmp
#include <span>     // std::span
#include <string>   // std::string
#include <utility>  // std::pair
#include <vector>   // std::vector

#include <oar/dist/any_comm.hpp>       // AnyComm over a blocking-only communicator
#include <oar/dist/data_parallel.hpp>  // DataParallel
#include <oar/oar.hpp>                 // Network, layers

using namespace oar;
using namespace oar::dist;

namespace {
using DpCnn = Sequential<Conv2D<1, 4, 3, 1, 1>, ReLU, MaxPool2D<2, 2>, Flatten, Linear<64, 16>, ReLU, Linear<16, 3>>;
using DpNet = Network<DpCnn, Shape<1, 8, 8>>;

/// Doubles reach a communicator only through allgather (DataParallel's model check): rank 0's
/// values in the first half, zeros in the second. A twin rank 1 would fill the second half.
void twin_allgather(std::span<double> x) {
    REQUIRE(x.size() % 2 == 0);
    for (std::size_t i = 0; i < x.size() / 2; ++i) x[x.size() / 2 + i] = x[i];
}

/// Rank 0 of 2, the other rank having the same values: a sum of floats doubles. Records the reductions as
/// (offset in `base`, size) and, for started ones, whether they were still pending when backward
/// ran further (progress() calls seen after the start).
struct TwinComm {
    const float* base = nullptr;
    std::vector<std::pair<std::size_t, std::size_t>> blocking, started;
    std::vector<std::span<float>> pending;
    std::size_t progress_calls = 0, waits = 0;
    int rank() const { return 0; }
    int world_size() const { return 2; }
    void allreduce_sum(std::span<float> x) {
        blocking.push_back(where(x));
        for (float& v : x) v += v;
    }
    void allreduce_sum(std::span<double> x) { twin_allgather(x); }
    template <class T>
    void allreduce_average(std::span<T> x) {
        allreduce_sum(x);
        for (T& v : x) v /= T(2);
    }
    template <class T>
    void broadcast(std::span<T>, int) {}
    void barrier() {}
    void start_allreduce_sum(std::span<float> x) {
        started.push_back(where(x));
        pending.push_back(x);
    }
    void start_allreduce_sum(std::span<double>) { FAIL("a float network reduces floats"); }
    void progress() { ++progress_calls; }
    void wait_all() {
        ++waits;
        for (auto x : pending)
            for (float& v : x) v += v;
        pending.clear();
    }
    template <class T>
    std::pair<std::size_t, std::size_t> where(std::span<T> x) const {
        return {static_cast<std::size_t>(reinterpret_cast<const float*>(x.data()) - base), x.size()};
    }
};
static_assert(AsyncCommunicator<TwinComm>);

/// A communicator with blocking collectives only (rank 0 of 2, the peer's values the same).
struct Blocking {
    std::size_t* calls;
    int rank() const { return 0; }
    int world_size() const { return 2; }
    void allreduce_sum(std::span<float> x) {
        ++*calls;
        for (float& v : x) v += v;
    }
    void allreduce_sum(std::span<double> x) { twin_allgather(x); }
    template <class T>
    void allreduce_average(std::span<T> x) {
        allreduce_sum(x);
        for (T& v : x) v /= T(2);
    }
    template <class T>
    void broadcast(std::span<T>, int) {}
    void barrier() {}
};

/// A forward and backward on fixed data: the gradients every variant below must agree on.
void step(auto& dp) {
    std::vector<float> x(3 * 64);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.05f * static_cast<float>(i % 11) - 0.2f;
    const auto y = dp.forward(TensorView(x.data(), 3, make_dims(1, 8, 8)));
    std::vector<float> dy(y.size());
    for (std::size_t i = 0; i < dy.size(); ++i) dy[i] = 0.1f * static_cast<float>(i % 5) - 0.2f;
    dp.backward(TensorView(dy.data(), 3, make_dims(3)));
}

std::vector<float> grads(DpNet& net) { return {net.parameters().grads().begin(), net.parameters().grads().end()}; }
}  // namespace

TEST_CASE("DataParallel cuts buckets from the end of the gradient buffer at tensor starts, each element in one") {
    for (std::size_t bytes : {std::size_t{4}, std::size_t{64}, std::size_t{256}, std::size_t{1000}, std::size_t{25} << 20}) {
        CAPTURE(bytes);
        DpNet net(5);
        TwinComm comm;
        comm.base = net.parameters().grads().data();
        const std::size_t n = net.parameters().grads().size(), per = bytes / sizeof(float);
        DataParallel dp(net, comm, {.bucket_bytes = bytes, .overlap = false});
        step(dp);
        REQUIRE(comm.blocking.size() == dp.num_buckets());
        std::size_t end = n;
        for (auto [first, size] : comm.blocking) {  // in order, from the end: the last layers' first
            CHECK(first + size == end);
            CHECK(size <= per);
            CHECK(size > 0);
            end = first;
        }
        CHECK(end == 0);
        // A tensor is split only when it alone is larger than a bucket.
        for (const auto& e : net.parameters().entries()) {
            std::size_t holding = 0;
            for (auto [first, size] : comm.blocking) holding += (first < e.offset + e.size && e.offset < first + size);
            CHECK_MESSAGE((holding == 1 || e.size > per), e.key, " is in ", holding, " buckets");
        }
        CHECK(comm.started.empty());
        CHECK(dp.overlapped_buckets() == 0);
    }
}

TEST_CASE("DataParallel overlapped: buckets start during backward as layers finish, the result is the blocking one's bits") {
    DpNet a(5), b(5), alone(5);
    TwinComm ca, cb;
    ca.base = a.parameters().grads().data();
    cb.base = b.parameters().grads().data();
    DataParallel over(a, ca, {.bucket_bytes = 256});
    DataParallel block(b, cb, {.bucket_bytes = 256, .overlap = false});
    LocalComm local;
    DataParallel one(alone, local);
    step(over);
    step(block);
    step(one);
    // Both averaged: (g + g) / 2 == g exactly, so both must equal the 1-process gradients.
    CHECK(grads(a) == grads(alone));
    CHECK(std::memcmp(grads(a).data(), grads(b).data(), grads(a).size() * sizeof(float)) == 0);
    // Every bucket started once, in the blocking path's order, and all waited for once.
    CHECK(ca.started == cb.blocking);
    CHECK(ca.blocking.empty());
    CHECK(ca.waits == 1);
    CHECK(ca.pending.empty());
    // The Linear layers' buckets start before the convolution (layer 0) has run backward: every
    // bucket from the first Linear tensor ("4.weight") on overlaps it.
    std::size_t linear_start = 0;
    for (const auto& e : a.parameters().entries())
        if (e.key == "4.weight") linear_start = e.offset;
    REQUIRE(linear_start > 0);
    const std::size_t conv_block = linear_start;
    std::size_t past_conv = 0;
    for (auto [first, size] : ca.started) past_conv += first >= conv_block ? 1 : 0;
    CHECK(past_conv > 1);
    CHECK(over.overlapped_buckets() == past_conv);
    CHECK(ca.progress_calls >= 3);  // once per parametric layer
    // A second step starts from scratch: the same buckets again.
    over.module().clear_grad();
    step(over);
    CHECK(ca.started.size() == 2 * cb.blocking.size());
    CHECK(grads(a) == grads(alone));
}

TEST_CASE("DataParallel over AnyComm of a blocking-only communicator reduces at once, with the same result") {
    static_assert(Communicator<Blocking> && !AsyncCommunicator<Blocking>);
    // AnyComm always offers start_allreduce_sum; for an engine without it, it reduces on the spot.
    DpNet net(5), alone(5);
    std::size_t calls = 0;
    AnyComm comm{Blocking{&calls}};
    DataParallel dp(net, comm, {.bucket_bytes = 256});
    LocalComm local;
    DataParallel one(alone, local);
    const std::size_t construction = calls;  // the model check's allgathers
    step(dp);
    step(one);
    CHECK(calls - construction == dp.num_buckets());
    CHECK(grads(net) == grads(alone));
}
