// NcclComm on real GPUs when there are any. Everything that touches CUDA runs in a forked child
// (a parent that initialised CUDA cannot fork a child that uses it). Two ctest tests
// (tests/CMakeLists.txt): dist.test_nccl_comm (1 rank) and dist.test_nccl_comm_2ranks. Without a
// CUDA device the 1-rank test first checks that constructing an NcclComm fails with a named
// error, not a crash, then reports a skip (exit 77, tests/main.cpp) only if that check passed;
// the 2-rank test reports a skip with one device (NCCL needs one per rank), and a build without
// NCCL skips both, saying so.
#include <doctest/doctest.h>

#include <string>   // std::string

#include "support/skip.hpp"  // oar_test::skip

#include "../../include/oar/config.hpp"  // OAR_HAS_NCCL, OAR_HAS_CUDA

#if OAR_HAS_NCCL && OAR_HAS_CUDA

#include <cuda_runtime.h>  // cudaMalloc, cudaMemcpy: device buffers
#include <vector>          // std::vector

#include <oar/dist/nccl_comm.hpp>  // NcclComm

#include "support/child_process.hpp"  // start, finish, free_port

namespace {

/// Runs one collective on a device copy of `host` and returns the result, copied back.
template <class T, class F>
std::vector<T> on_device(const std::vector<T>& host, F&& collective) {
    T* d = nullptr;
    oar::dist::detail::cuda_check(cudaMalloc(&d, host.size() * sizeof(T)), "cudaMalloc");
    oar::dist::detail::cuda_check(cudaMemcpy(d, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "copy");
    collective(std::span<T>(d, host.size()));
    std::vector<T> out(host.size());
    oar::dist::detail::cuda_check(cudaMemcpy(out.data(), d, host.size() * sizeof(T), cudaMemcpyDeviceToHost), "copy");
    cudaFree(d);
    return out;
}

std::string join(const std::vector<double>& v) {
    std::string s;
    for (double x : v) {
        if (!s.empty()) s += ',';
        s += std::to_string(x);
    }
    return s;
}

/// Rank `rank` of `world` on device `rank`: allreduce sum and average of rank-dependent values,
/// a broadcast from the last rank, a barrier. Reports the results; "nodevice <why>" without GPUs.
std::function<std::string()> rank_body(int port, int rank, int world) {
    return [=]() -> std::string {
        int devices = 0;
        if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
            try {
                oar::dist::NcclComm c(oar::dist::NcclComm::make_unique_id(), 0, 1, 0);
            } catch (const oar::comm_error& e) {
                return std::string("nodevice ") + e.what();
            } catch (const oar::value_error& e) {
                return std::string("nodevice ") + e.what();
            }
            return "nodevice but an NcclComm was made";
        }
        if (devices < world) return "fewdevices";
        auto comm = oar::dist::NcclComm::from_rendezvous({"127.0.0.1", port, rank, world}, rank);
        const double r = rank + 1;
        const auto sum = on_device(std::vector<double>{r, -2 * r, 0.5}, [&](auto x) { comm.allreduce_sum(x); });
        const auto avg = on_device(std::vector<float>{static_cast<float>(r), 4.0f}, [&](auto x) { comm.allreduce_average(x); });
        const auto bc = on_device(std::vector<float>{static_cast<float>(r) * 10}, [&](auto x) { comm.broadcast(x, world - 1); });
        comm.barrier();
        std::string bad;
        try {
            comm.broadcast(std::span<float>(), world);
        } catch (const oar::value_error& e) {
            bad = e.what();
        }
        return "sum " + join(sum) + " avg " + join({avg[0], avg[1]}) + " bcast " + join({bc[0]}) + " | " + bad;
    };
}

bool contains(const std::string& s, const std::string& w) { return s.find(w) != std::string::npos; }

}  // namespace

TEST_CASE("dist NcclComm [1 rank]: allreduce, average and broadcast device buffers; a named error without a device") {
    const auto t0 = oar_test::Clock::now();
    const oar_test::Finished one = oar_test::finish(oar_test::start(rank_body(oar_test::free_port(), 0, 1)), t0);
    REQUIRE(one.status == 0);
    if (contains(one.output, "nodevice")) {
        // The one thing to check without a GPU: a named error, not a crash, nor an NcclComm.
        REQUIRE(contains(one.output, "ok nodevice oar: NcclComm: "));
        oar_test::skip("no CUDA device: NcclComm's collectives were not run (" + one.output + ")");
        return;
    }
    CHECK(one.output == "ok sum 1.000000,-2.000000,0.500000 avg 1.000000,4.000000 bcast 10.000000 | "
                        "oar: NcclComm::broadcast: root 1 is not a rank (world size 1)");
}

TEST_CASE("dist NcclComm [2 ranks]: allreduce, average and broadcast device buffers across two GPUs") {
    const auto t0 = oar_test::Clock::now();
    const int port = oar_test::free_port();
    const oar_test::Child c0 = oar_test::start(rank_body(port, 0, 2)), c1 = oar_test::start(rank_body(port, 1, 2));
    const oar_test::Finished f0 = oar_test::finish(c0, t0), f1 = oar_test::finish(c1, t0);
    if (contains(f0.output, "ok nodevice") && contains(f1.output, "ok nodevice")) {
        oar_test::skip("no CUDA device: the 2-rank NcclComm run needs two (dist.test_nccl_comm checks the error)");
        return;
    }
    if (f0.output == "ok fewdevices" && f1.output == "ok fewdevices") {
        oar_test::skip("one CUDA device: the 2-rank NcclComm run needs one device per rank");
        return;
    }
    CHECK(f0.status == 0);
    CHECK(f1.status == 0);
    // ranks 1 and 2 (r = rank + 1): sum 3, -6, 1; average (1+2)/2 = 1.5 and 4; broadcast from rank 1: 20.
    const std::string expect = "ok sum 3.000000,-6.000000,1.000000 avg 1.500000,4.000000 bcast 20.000000 | "
                               "oar: NcclComm::broadcast: root 2 is not a rank (world size 2)";
    CHECK(f0.output == expect);
    CHECK(f1.output == expect);
}

#else

TEST_CASE("dist NcclComm [1 rank]: skipped, oar was configured without CUDA and NCCL") {
    oar_test::skip("built without NCCL and CUDA (OAR_HAS_NCCL=0): NcclComm is not compiled");
}

TEST_CASE("dist NcclComm [2 ranks]: skipped, oar was configured without CUDA and NCCL") {
    oar_test::skip("built without NCCL and CUDA (OAR_HAS_NCCL=0): NcclComm is not compiled");
}

#endif
