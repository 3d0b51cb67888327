// Tests of oar/dist/parameter_server.hpp's MPI-free part: the flat buffer's slices over the
// servers (contiguous, covering, balanced by bytes, on cache-line boundaries). The protocol runs
// under a real mpirun in tests/dist/mpi_driver.cpp ([ps_sync], [ps_sharding], [ps_async], [ps_fault]).
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/dist/parameter_server.hpp>  // the header under test

#include <algorithm>  // std::min_element, std::max_element
#include <cstddef>    // std::size_t

TEST_CASE("shard_ranges: contiguous slices that cover the buffer, balanced by bytes, cut at multiples of 16") {
    for (std::size_t n : {0u, 1u, 15u, 16u, 17u, 1000u, 25520u, 20368u, 1000003u})
        for (int servers : {1, 2, 3, 4, 7}) {
            CAPTURE(n);
            CAPTURE(servers);
            const auto s = oar::dist::ps::shard_ranges(n, servers);
            REQUIRE(s.size() == static_cast<std::size_t>(servers));
            std::size_t at = 0, lo = n, hi = 0;
            for (std::size_t i = 0; i < s.size(); ++i) {
                CHECK(s[i].first == at);
                if (i + 1 < s.size()) CHECK(s[i].size % 16 == 0);
                at += s[i].size;
                lo = std::min(lo, s[i].size);
                hi = std::max(hi, s[i].size);
            }
            CHECK(at == n);
            CHECK(hi - lo <= 16);
        }
    const auto two = oar::dist::ps::shard_ranges(25520, 2);  // the test CNN of the mpirun jobs
    CHECK(two[0].first == 0);
    CHECK(two[0].size == 12752);
    CHECK(two[1].size == 12768);
}

TEST_CASE("shard_ranges: no servers is a value_error") {
    CHECK_THROWS_WITH_AS(oar::dist::ps::shard_ranges(100, 0), "oar: shard_ranges: 0 servers, need at least 1",
                         oar::value_error);
}
