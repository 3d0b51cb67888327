// Tests of oar/dist/env.hpp's device_id: which GPU a rank takes (entry local_rank of $OAR_GPUS,
// else the local rank), and the errors that name a malformed OAR_GPUS.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/dist/env.hpp>  // the header under test

#include <cstdlib>  // setenv, unsetenv
#include <string>   // std::string

namespace {

/// Sets OAR_GPUS for the scope (unset when value is null), restoring what was there.
class ScopedGpus {
public:
    explicit ScopedGpus(const char* value) {
        if (const char* old = std::getenv("OAR_GPUS")) old_ = old, had_ = true;
        if (value) ::setenv("OAR_GPUS", value, 1);
        else ::unsetenv("OAR_GPUS");
    }
    ~ScopedGpus() {
        if (had_) ::setenv("OAR_GPUS", old_.c_str(), 1);
        else ::unsetenv("OAR_GPUS");
    }

private:
    std::string old_;
    bool had_ = false;
};

oar::dist::ParallelEnv local(int r) { return {r, 4, r}; }

}  // namespace

TEST_CASE("without OAR_GPUS a rank takes the GPU of its local rank") {
    ScopedGpus g(nullptr);
    CHECK(oar::dist::device_id(local(0)) == 0);
    CHECK(oar::dist::device_id(local(3)) == 3);
}

TEST_CASE("OAR_GPUS lists the GPU of each local rank, as oar-launch --gpus sets it") {
    ScopedGpus g("2,3");
    CHECK(oar::dist::device_id(local(0)) == 2);
    CHECK(oar::dist::device_id(local(1)) == 3);
}

TEST_CASE("a malformed or short OAR_GPUS is a usage_error naming the variable") {
    {
        ScopedGpus g("0,x");
        CHECK_THROWS_WITH_AS(oar::dist::device_id(local(1)), doctest::Contains("OAR_GPUS='0,x': entry 1 ('x')"),
                             oar::usage_error);
    }
    {
        ScopedGpus g("0,,1");
        CHECK_THROWS_AS(oar::dist::device_id(local(2)), oar::usage_error);
    }
    {
        ScopedGpus g("5");
        CHECK(oar::dist::device_id(local(0)) == 5);
        CHECK_THROWS_WITH_AS(oar::dist::device_id(local(1)), doctest::Contains("lists 1 GPU, but this is local rank 1"),
                             oar::usage_error);
    }
}
