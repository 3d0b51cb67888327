// Tests of oar/cuda/device.hpp: the backend tag's facts and the course's device strings
// ("cpu", "gpu", "gpu:N"), with named errors for everything else. No GPU needed.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cuda/device.hpp>  // the header under test

#include <string>       // std::string
#include <type_traits>  // std::is_same_v

#include "support/errors.hpp"  // oar_test::message_of, contains

using oar_test::contains;
using oar_test::message_of;

TEST_CASE("oar::cuda is a float backend on the current device and basic_cuda<N> pins device N") {
    static_assert(oar::Backend<oar::cuda>);
    static_assert(oar::Backend<oar::basic_cuda<1>>);
    static_assert(std::is_same_v<oar::cuda::value_type, float>);
    static_assert(oar::cuda::device == -1 && oar::basic_cuda<1>::device == 1);
    static_assert(oar::is_cuda_backend<oar::cuda> && oar::is_cuda_backend<oar::basic_cuda<3>>);
    static_assert(!oar::is_cuda_backend<oar::cpu>);
    CHECK(oar::cuda::name == "cuda");
}

TEST_CASE("parse_device_spec reads cpu, gpu, gpu:N and cuda:N") {
    CHECK(oar::parse_device_spec("cpu") == oar::DeviceSpec{false, 0});
    CHECK(oar::parse_device_spec("gpu") == oar::DeviceSpec{true, 0});
    CHECK(oar::parse_device_spec("gpu:0") == oar::DeviceSpec{true, 0});
    CHECK(oar::parse_device_spec("gpu:3") == oar::DeviceSpec{true, 3});
    CHECK(oar::parse_device_spec("cuda:12") == oar::DeviceSpec{true, 12});
}

TEST_CASE("parse_device_spec names the text and what it expected for bad device strings") {
    for (const char* bad : {"gpu:", "gpu:-1", "gpu:x", "gpu:1x", "gpu:99999999999", "gpu0", "tpu", "", "GPU:0"}) {
        INFO(bad);
        const std::string m = message_of<oar::usage_error>([&] { (void)oar::parse_device_spec(bad); });
        CHECK(contains(m, std::string("device '") + bad + "'"));
        CHECK(contains(m, "gpu:"));
    }
    CHECK(contains(message_of<oar::usage_error>([] { (void)oar::parse_device_spec("gpu:x"); }), "index 'x'"));
}

TEST_CASE("no_device_error is a cuda_error and an oar::error") {
    const std::string m = message_of<oar::cuda_error>([] { throw oar::no_device_error("no CUDA device"); });
    CHECK(contains(m, "oar: no CUDA device"));
}
