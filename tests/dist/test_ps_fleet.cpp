// Tests of oar/dist/ps_fleet.hpp without MPI (this executable is built without it): the fleet
// facade in collective mode, the parameter-server options of a strategy, and the errors that
// name what is wrong. The parameter-server mode itself runs under mpirun in mpi_driver.cpp
// ([ps_async] goes through fleet::init(argc, argv, false), run_server, init_worker, stop_worker).
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/dist/fleet.hpp>  // the header under test (fleet.hpp includes ps_fleet.hpp)

#include <cstdlib>  // setenv, unsetenv

TEST_CASE("fleet::init(is_collective=true): every rank a worker, no servers") {
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) ::unsetenv(v);
    auto fleet = oar::dist::fleet::init(nullptr, nullptr, /*is_collective=*/true);
    CHECK(fleet.is_collective());
    CHECK(fleet.is_worker());
    CHECK_FALSE(fleet.is_server());
    CHECK(fleet.worker_num() == 1);
    CHECK(fleet.server_num() == 0);
    CHECK(fleet.worker_index() == 0);
    CHECK(fleet.context().world_size() == 1);
    CHECK_THROWS_WITH_AS(fleet.stop_worker(), "oar: fleet.stop_worker() before fleet.init_worker()", oar::usage_error);
}

TEST_CASE("fleet::ps_options: the strategy's a_sync and max_staleness, OAR_PS_TIMEOUT checked") {
    ::unsetenv("OAR_PS_TIMEOUT");
    const auto o = oar::dist::fleet::ps_options({.a_sync = true, .max_staleness = 3});
    CHECK(o.a_sync);
    CHECK(o.max_staleness == 3);
    CHECK(o.timeout_s == 60.0);
    ::setenv("OAR_PS_TIMEOUT", "2.5", 1);
    CHECK(oar::dist::fleet::ps_options({}).timeout_s == 2.5);
    ::setenv("OAR_PS_TIMEOUT", "soon", 1);
    CHECK_THROWS_WITH_AS(oar::dist::fleet::ps_options({}), "oar: OAR_PS_TIMEOUT='soon' is not a number of seconds > 0",
                         oar::usage_error);
    ::unsetenv("OAR_PS_TIMEOUT");
    CHECK_THROWS_WITH_AS(oar::dist::fleet::ps_options({.max_staleness = -1}),
                         "oar: fleet: max_staleness is -1, it must be >= 0", oar::value_error);
}

#if !OAR_HAS_MPI
TEST_CASE("fleet::init(is_collective=false) in a program built without MPI says so") {
    CHECK_THROWS_WITH_AS(oar::dist::fleet::init(nullptr, nullptr, /*is_collective=*/false),
                         "oar: fleet.init(is_collective=false): the parameter-server mode runs over MPI; link the "
                         "program with the oar::mpi CMake target",
                         oar::comm_error);
}
#endif
