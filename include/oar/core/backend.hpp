// Backends are types (docs/ARCHITECTURE.md, "Constraints"): `oar::cpu` here, `oar::cuda` in the CUDA headers.
// A backend names where buffers live and their scalar type; kernels for it are
// `kernel<Op, Backend>` specialisations. `cpu64` (double) exists for gradient checks.
#pragma once

#include <concepts>     // std::convertible_to, std::floating_point
#include <string_view>  // std::string_view

namespace oar {

/// Backend: a tag type with `value_type` (the scalar of its buffers),
/// `static constexpr std::string_view name` and `is_oar_backend = true`.
/// Kernels for it are specialisations `kernel<op::X, B>` (oar/kernels/dispatch.hpp).
template <class B>
concept Backend = requires {
    typename B::value_type;
    requires std::floating_point<typename B::value_type>;
    { B::name } -> std::convertible_to<std::string_view>;
    requires B::is_oar_backend;
};

/// The host CPU with scalar T: the reference backend every other backend is tested against.
template <std::floating_point T>
struct basic_cpu {
    using value_type = T;
    static constexpr std::string_view name = "cpu";
    static constexpr bool is_oar_backend = true;
};

using cpu = basic_cpu<float>;     ///< what networks train on
using cpu64 = basic_cpu<double>;  ///< the same kernels in double, for finite-difference checks

}  // namespace oar
