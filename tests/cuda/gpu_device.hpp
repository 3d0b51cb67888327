// Helpers for the GPU runtime tests: host vectors to and from device buffers, and the relative
// difference used to compare a CUDA kernel with the CPU one.
#pragma once

#include <algorithm>  // std::max
#include <cmath>      // std::abs
#include <cstddef>    // std::size_t
#include <vector>     // std::vector

#include <oar/kernels/cuda/runtime.cuh>  // device_buffer

namespace oar_test {

template <class T>
oar::cuda_runtime::device_buffer<T> to_device(const std::vector<T>& v) {
    oar::cuda_runtime::device_buffer<T> d(v.size());
    d.copy_from_host(v.data(), v.size());
    return d;
}

template <class T>
std::vector<T> to_host(const oar::cuda_runtime::device_buffer<T>& d) {
    OAR_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<T> v(d.size());
    d.copy_to_host(v.data(), v.size());
    return v;
}

/// The largest |a - b| / max(1, |a|, |b|).
inline double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double worst = a.size() == b.size() ? 0.0 : 1e30;
    for (std::size_t i = 0; i < a.size() && i < b.size(); ++i)
        worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) /
                                    std::max({1.0, std::abs(static_cast<double>(a[i])), std::abs(static_cast<double>(b[i]))}));
    return worst;
}

}  // namespace oar_test
