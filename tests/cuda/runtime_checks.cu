// Tests of oar/cuda/runtime.cuh that run with or without a GPU (they use the CUDA runtime library
// but need no device): OAR_CUDA_CHECK / OAR_CUBLAS_CHECK messages name the call, file, line and
// error; "no device" is its own error type; device strings are parsed before any CUDA call; and,
// on a machine without a GPU (this one), device_count, set_device and device_buffer report
// no_device_error instead of crashing.
#include <doctest/doctest.h>  // TEST_CASE, CHECK

#include <oar/kernels/cuda/runtime.cuh>  // the header under test

#include <string>  // std::string

namespace {
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

template <class E, class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const E& e) {
        return e.what();
    }
    return "(did not throw the expected type)";
}
}  // namespace

TEST_CASE("OAR_CUDA_CHECK names the call, the file and line, and the CUDA error") {
    const int line = __LINE__ + 1;
    const std::string m = message_of<oar::cuda_error>([] { OAR_CUDA_CHECK(cudaErrorMemoryAllocation); });
    CHECK(contains(m, "oar: "));
    CHECK(contains(m, "runtime_checks.cu:" + std::to_string(line)));
    CHECK(contains(m, "cudaErrorMemoryAllocation failed"));
    CHECK(contains(m, "cudaErrorMemoryAllocation ("));  // the runtime's name and description
    bool is_no_device = true;
    try {
        OAR_CUDA_CHECK(cudaErrorMemoryAllocation);
    } catch (const oar::no_device_error&) {
    } catch (const oar::cuda_error&) {
        is_no_device = false;
    }
    CHECK_FALSE(is_no_device);  // out of memory is not "no device"
    CHECK_NOTHROW(OAR_CUDA_CHECK(cudaSuccess));
}

TEST_CASE("a missing device or driver becomes no_device_error") {
    for (cudaError_t e : {cudaErrorNoDevice, cudaErrorInsufficientDriver, cudaErrorInvalidDevice}) {
        const std::string m = message_of<oar::no_device_error>([&] { OAR_CUDA_CHECK(e); });
        CHECK(contains(m, cudaGetErrorName(e)));
    }
}

TEST_CASE("OAR_CUBLAS_CHECK names the call and the cuBLAS status") {
    const std::string m = message_of<oar::cuda_error>([] { OAR_CUBLAS_CHECK(CUBLAS_STATUS_INVALID_VALUE); });
    CHECK(contains(m, "CUBLAS_STATUS_INVALID_VALUE"));
    CHECK(contains(m, "runtime_checks.cu:"));
    CHECK_NOTHROW(OAR_CUBLAS_CHECK(CUBLAS_STATUS_SUCCESS));
}

TEST_CASE("set_device parses before touching CUDA: cpu is a no-op, a malformed string is a usage_error") {
    CHECK_FALSE(oar::cuda_runtime::set_device("cpu").gpu);
    const std::string m = message_of<oar::usage_error>([] { oar::cuda_runtime::set_device("gpu:one"); });
    CHECK(contains(m, "device 'gpu:one'"));
}

TEST_CASE("device_count, set_device and device_buffer agree with device_available; without a GPU they throw no_device_error") {
    const bool available = oar::cuda_runtime::device_available();
    oar::cuda_runtime::device_buffer<float> empty;  // no allocation: fine anywhere
    CHECK(empty.size() == 0);
    CHECK(empty.data() == nullptr);
    if (available) {
        CHECK(oar::cuda_runtime::device_count() > 0);
        oar::cuda_runtime::device_buffer<float> b(10);
        CHECK(b.data() != nullptr);
        const std::string m = message_of<oar::no_device_error>([] { oar::cuda_runtime::set_device("gpu:4096"); });
        CHECK(contains(m, "no CUDA device gpu:4096"));
    } else {
        CHECK(contains(message_of<oar::no_device_error>([] { (void)oar::cuda_runtime::device_count(); }), "no CUDA device"));
        CHECK(contains(message_of<oar::no_device_error>([] { oar::cuda_runtime::set_device("gpu:0"); }), "no CUDA device"));
        CHECK(contains(message_of<oar::no_device_error>([] { oar::cuda_runtime::device_buffer<float> b(10); }),
                       "cudaMalloc"));
    }
}
