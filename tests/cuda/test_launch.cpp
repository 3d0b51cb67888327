// Tests of oar/kernels/cuda/launch.hpp: the grid sizes the CUDA wrappers launch and the
// coordinates a body sees, checked by covering every element exactly once under many launches.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cuda/launch.hpp>  // the header under test

#include <cstddef>  // std::size_t
#include <vector>   // std::vector

#include "cuda/emulate.hpp"  // emulate_launch

namespace ck = oar::cuda_kernels;

TEST_CASE("blocks_for covers n elements, launches at least one block and caps the grid") {
    CHECK(ck::blocks_for(0) == 1);
    CHECK(ck::blocks_for(1) == 1);
    CHECK(ck::blocks_for(256) == 1);
    CHECK(ck::blocks_for(257) == 2);
    CHECK(ck::blocks_for(1000, 32) == 32);
    CHECK(ck::blocks_for(std::size_t{1} << 40) == ck::max_blocks);
}

TEST_CASE("a grid-stride loop over global_x and stride_x visits every element exactly once") {
    for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{31}, std::size_t{1000}, std::size_t{4097}})
        for (unsigned blocks : {1u, 3u, ck::blocks_for(n)})
            for (unsigned threads : {1u, 32u, ck::block_threads}) {
                std::vector<int> hits(n, 0);
                oar_test::emulate_launch(ck::Dim3{blocks}, ck::Dim3{threads}, [&](const ck::Thread& t) {
                    for (std::size_t i = t.global_x(); i < n; i += t.stride_x()) ++hits[i];
                });
                bool once = true;
                for (int h : hits) once = once && h == 1;
                CHECK_MESSAGE(once, "n=" << n << " blocks=" << blocks << " threads=" << threads);
            }
}
