// The CUDA backend's tag and device choice, without the CUDA toolkit: code compiled by g++ (the
// main job's flag parsing, a .cpp that only names the backend) can use it. `oar::cuda` runs on
// the current device (set_device, default gpu:0); `basic_cuda<N>` pins device N as a type.
// The toolkit-dependent parts (buffers, streams, kernels) are in the .cuh headers beside this one.
#pragma once

#include <charconv>     // std::from_chars: the index of "gpu:N"
#include <string>       // std::string
#include <string_view>  // std::string_view

#include "../../core/backend.hpp"  // Backend (the concept the tag satisfies), cpu
#include "../../core/error.hpp"    // error, usage_error

namespace oar {

/// The CUDA backend: float buffers in device memory. Device < 0 means "the current device"
/// (oar::cuda_runtime::set_device); Device >= 0 pins that device: a Network bound to the type
/// makes it current when built and at each forward/backward; raw kernel calls use the current device.
template <int Device = -1>
struct basic_cuda {
    using value_type = float;
    static constexpr std::string_view name = "cuda";
    static constexpr bool is_oar_backend = true;
    static constexpr int device = Device;
    static constexpr bool bf16_kernels = true;  ///< runs the bf16_mixed policy (core/precision.hpp)
};

using cuda = basic_cuda<>;  ///< the CUDA backend (docs/ARCHITECTURE.md)

template <class B>
inline constexpr bool is_cuda_backend = false;
template <int D>
inline constexpr bool is_cuda_backend<basic_cuda<D>> = true;

/// A CUDA runtime or cuBLAS call failed; the message names the call, file and line.
class cuda_error : public error {
public:
    using error::error;
};

/// No CUDA device is usable here (no GPU, no driver, or the index is beyond the devices present).
class no_device_error : public cuda_error {
public:
    using cuda_error::cuda_error;
};

/// Where to run, as the course writes it: paddle.set_device("cpu" | "gpu" | "gpu:N").
struct DeviceSpec {
    bool gpu = false;
    int index = 0;  ///< the GPU's index when gpu
    friend bool operator==(const DeviceSpec&, const DeviceSpec&) = default;
};

/// Parses "cpu", "gpu", "gpu:N" (also "cuda", "cuda:N"); throws usage_error naming the text and
/// what was expected. (Not `parse_device`: that is the main job's --device flag parser in
/// oar/train/options.hpp, and the two overloads would be ambiguous for a string literal.)
inline DeviceSpec parse_device_spec(std::string_view text) {
    if (text == "cpu") return {false, 0};
    for (std::string_view prefix : {std::string_view("gpu"), std::string_view("cuda")}) {
        if (text.substr(0, prefix.size()) != prefix) continue;
        std::string_view rest = text.substr(prefix.size());
        if (rest.empty()) return {true, 0};
        if (rest[0] != ':' || rest.size() == 1) break;
        rest.remove_prefix(1);
        int index = -1;
        const auto [end, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), index);
        if (ec != std::errc{} || end != rest.data() + rest.size() || index < 0)
            throw usage_error(detail::concat("device '", text, "': the GPU index '", rest,
                                             "' is not a non-negative integer (expected gpu:N, e.g. gpu:0)"));
        return {true, index};
    }
    throw usage_error(detail::concat("device '", text, "' is not one of cpu, gpu, gpu:N (N a GPU index, e.g. gpu:0)"));
}

}  // namespace oar
