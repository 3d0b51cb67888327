// The one place oar includes xsimd. g++ 12 reports false "-W(maybe-)uninitialized" warnings from
// inside its own AVX-512 intrinsic headers when xsimd's exp/tanh/nearbyint are inlined (the
// "undefined register" idiom; more of them under the sanitizers); the values are all defined.
// Including xsimd under this pragma silences exactly those lines and nothing of ours.
#pragma once

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#include <xsimd/xsimd.hpp>  // xsimd::batch and the math functions

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
