// LocalComm, AnyComm, the allgather helpers and DataParallel on one process, and
// init_parallel_env's reading of the launcher's environment, without MPI (this test is built
// without oar::mpi, as a user's single-process program is).
#include <doctest/doctest.h>

#include <cstdlib>  // setenv, unsetenv
#include <string>   // std::string
#include <vector>   // std::vector

#include <oar/dist/any_comm.hpp>       // AnyComm
#include <oar/dist/communicator.hpp>   // Communicator, allgather, allgather_strings
#include <oar/dist/data_parallel.hpp>  // DataParallel
#include <oar/dist/env.hpp>            // init_parallel_env
#include <oar/dist/local_comm.hpp>     // LocalComm
#include <oar/dist/mpi_comm.hpp>       // harmless without MPI (naming MpiComm is the error)
#include <oar/oar.hpp>                 // Network, layers

using namespace oar;
using namespace oar::dist;

static_assert(Communicator<LocalComm>);
static_assert(Communicator<AnyComm>);
static_assert(!Communicator<int>);

namespace {
using LocalSmall = Sequential<Flatten, Linear<12, 5>, ReLU, Linear<5, 3>>;
using LocalNet = Network<LocalSmall, Shape<1, 3, 4>>;

/// Unsets the launcher variables on entry and exit (ctest never sets them; a test here does).
void clear_launcher_env() {
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK",
                          "PMI_SIZE", "MPI_LOCALRANKID", "PMIX_RANK"})
        unsetenv(v);
}
struct CleanEnv {
    CleanEnv() { clear_launcher_env(); }
    ~CleanEnv() { clear_launcher_env(); }
    CleanEnv(const CleanEnv&) = delete;
    CleanEnv& operator=(const CleanEnv&) = delete;
};
}  // namespace

TEST_CASE("LocalComm is rank 0 of 1 and its collectives leave the data as it is") {
    LocalComm c;
    CHECK(c.rank() == 0);
    CHECK(c.world_size() == 1);
    std::vector<float> f{1.5f, -2.0f, 3.25f};
    std::vector<double> d{0.1, 0.2};
    c.allreduce_sum(std::span<float>(f));
    c.allreduce_average(std::span<float>(f));
    c.allreduce_sum(std::span<double>(d));
    c.allreduce_average(std::span<double>(d));
    c.broadcast(std::span<float>(f), 0);
    c.barrier();
    CHECK(f == std::vector<float>{1.5f, -2.0f, 3.25f});
    CHECK(d == std::vector<double>{0.1, 0.2});
}

TEST_CASE("LocalComm refuses a broadcast from a root that is not rank 0") {
    LocalComm c;
    std::vector<float> f(3);
    CHECK_THROWS_WITH_AS(c.broadcast(std::span<float>(f), 1), "oar: LocalComm::broadcast: root 1 is not rank 0",
                         value_error);
}

TEST_CASE("allgather and allgather_strings on one rank return the rank's own values") {
    LocalComm c;
    const std::vector<double> mine{1, 2, 65535};
    CHECK(allgather(c, std::span<const double>(mine)) == mine);
    CHECK(allgather_strings(c, "0.weight [5, 12]") == std::vector<std::string>{"0.weight [5, 12]"});
    CHECK(allgather_strings(c, "") == std::vector<std::string>{""});
    CHECK(split_u64(0x0123456789abcdefull) == std::vector<double>{0xcdef, 0x89ab, 0x4567, 0x0123});
}

TEST_CASE("AnyComm holds a LocalComm by default and forwards every collective") {
    AnyComm c;
    CHECK(c.rank() == 0);
    CHECK(c.world_size() == 1);
    std::vector<double> d{4.0};
    c.allreduce_average(std::span<double>(d));
    CHECK(d[0] == 4.0);
    CHECK_THROWS_AS(c.broadcast(std::span<double>(d), 2), value_error);
}

TEST_CASE("DataParallel on one process: buckets of the configured bytes, gradients and parameters unchanged") {
    LocalNet net(3);
    LocalComm comm;
    const std::size_t n = net.parameters().grads().size();
    DataParallel dp(net, comm, {.bucket_bytes = 64});  // 16 floats per bucket, cut at tensor starts
    CHECK(dp.num_buckets() >= (n + 15) / 16);  // (tests/dist/test_data_parallel.cpp checks the cuts)
    CHECK(dp.is_writer());
    CHECK(dp.world_size() == 1);
    CHECK(DataParallel(net, comm).num_buckets() == 1);  // the 25 MB default holds it all
    CHECK(DataParallel(net, comm, {.bucket_bytes = 1}).num_buckets() == n);  // at least one element each

    std::vector<float> x(2 * 12);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i % 7);
    const std::vector<float> before(net.parameters().values().begin(), net.parameters().values().end());
    auto y = dp.forward(TensorView(x.data(), 2, make_dims(1, 3, 4)));
    std::vector<float> dy(y.size(), 1.0f);
    LocalNet ref = net;
    dp.backward(TensorView(dy.data(), 2, make_dims(3)));
    ref.forward(TensorView(x.data(), 2, make_dims(1, 3, 4)));
    ref.backward(TensorView(dy.data(), 2, make_dims(3)));
    const auto g = net.parameters().grads(), gr = ref.parameters().grads();
    CHECK(std::vector<float>(g.begin(), g.end()) == std::vector<float>(gr.begin(), gr.end()));
    const auto v = net.parameters().values();
    CHECK(std::vector<float>(v.begin(), v.end()) == before);
}

TEST_CASE("DataParallel refuses a root that is not a rank") {
    LocalNet net;
    LocalComm comm;
    CHECK_THROWS_WITH_AS(DataParallel(net, comm, {.root = 1}), "oar: DataParallel: root 1 is not a rank (world size 1)",
                         value_error);
}

TEST_CASE("describe_parameters and fingerprint tell models apart by keys and shapes") {
    using Other = Network<Sequential<Flatten, Linear<12, 6>, ReLU, Linear<6, 3>>, Shape<1, 3, 4>>;
    const LocalNet a;
    const Other b;
    CHECK(describe_parameters(a) == "[1.weight [12, 5], 1.bias [5], 3.weight [5, 3], 3.bias [3]]");
    CHECK(fingerprint(describe_parameters(a), 8) == fingerprint(describe_parameters(LocalNet(9)), 8));
    CHECK(fingerprint(describe_parameters(a), 8) != fingerprint(describe_parameters(b), 8));
    CHECK(fingerprint("x", 8) != fingerprint("x", 16));
}

TEST_CASE("init_parallel_env alone is rank 0 of 1 with a LocalComm, and MPI is never touched") {
    CleanEnv clean;
    CHECK_FALSE(launched_env().has_value());
    ParallelContext ctx = init_parallel_env();
    CHECK(ctx.rank() == 0);
    CHECK(ctx.world_size() == 1);
    CHECK(ctx.local_rank() == 0);
    CHECK_FALSE(ctx.distributed());
    CHECK(ctx.is_writer());
    CHECK(ctx.comm().world_size() == 1);
}

TEST_CASE("init_parallel_env reads mpirun's variables, and refuses N ranks in a build without MPI") {
    CleanEnv clean;
    setenv("OMPI_COMM_WORLD_RANK", "1", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "2", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1", 1);
    const auto e = launched_env();
    REQUIRE(e.has_value());
    CHECK(e->rank == 1);
    CHECK(e->world_size == 2);
    CHECK(e->local_rank == 1);
    CHECK_THROWS_WITH_AS(init_parallel_env(),
                         "oar: started by a launcher as rank 1 of 2, but this program was built without MPI: link it "
                         "with the oar::mpi CMake target (or run it as one process)",
                         comm_error);
    // mpirun -np 1 of a program without MPI is just one process.
    setenv("OMPI_COMM_WORLD_RANK", "0", 1);
    setenv("OMPI_COMM_WORLD_SIZE", "1", 1);
    CHECK(init_parallel_env().world_size() == 1);
    unsetenv("OMPI_COMM_WORLD_RANK");
    setenv("PMI_RANK", "3", 1);
    setenv("PMI_SIZE", "4", 1);
    CHECK(launched_env()->rank == 3);
    CHECK(launched_env()->world_size == 4);
}
