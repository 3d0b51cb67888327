// The CPU kernels' thread-local scratch: one grow-only buffer per (scalar type, slot, thread), so
// a steady training loop allocates nothing. Every user of scratch memory names its slot here, in
// one enumeration, so no two kernels that are live at once can share a buffer by accident.
#pragma once

#include <cstddef>  // std::size_t

#include "../../core/aligned.hpp"  // aligned_vector

namespace oar::cpu_detail {

enum class scratch_slot {
    gemm_a,          // gemm: packed panels of op(A) / the narrow paths' B panel
    gemm_b,          // gemm: packed strips of op(B)
    gemm_shared,     // gemm split over threads: the operand every part reads, packed once for all
    conv_cols,       // conv: one sample's column (or row) matrix
    conv_dcols,      // conv backward: the column matrix's gradient
    conv_partials,   // conv backward: per-group weight-gradient partial sums
    conv_flipped,    // conv backward: flipped, transposed weights (input gradient as a forward)
    conv_padded,     // conv stride 1: a zero-padded sample (and the offsets table)
    conv_out,        // conv stride 1: the wide output before the valid columns are copied out
    conv_dw_x,       // conv weight gradient: padded samples of a group (and a positions or offsets table)
    conv_dw_dy,      // conv weight gradient: dy on the padded pitch
    conv_db,         // conv backward: per-sample bias sums
    conv_wpack,      // conv: weights packed once per call
    conv_round_x,    // conv: a sample's or a group's x rounded to bf16 for a GEMM that reads it as it lies
    conv_round_dy,   // conv backward: a group's dy rounded to bf16, likewise
    wino_u,          // Winograd: transformed weights
    wino_in,         // Winograd: interleaved input tiles
    wino_v,          // Winograd: transformed input tiles
    wino_m,          // Winograd: point-wise products
    wino_st,         // Winograd: the output transform's staging
    wino_xg,         // Winograd weight gradient: a group's transformed inputs
    wino_dyg,        // Winograd weight gradient: a group's transformed dy
    wino_acc,        // Winograd weight gradient: per-group partial sums
    bf16_a,          // bf16 gemm: op(A) widened to float, or its packed bf16 panels
    bf16_b,          // bf16 gemm: op(B) widened to float, or its packed bf16 strips
    mixed_a,         // bf16 mixed precision: a GEMM's A rounded to bf16 (as bf16, or as floats)
    mixed_b,         // bf16 mixed precision: a GEMM's B rounded to bf16
    mixed_x,         // bf16 mixed precision: a convolution's input rounded to bf16
    mixed_w,         // bf16 mixed precision: a convolution's weights rounded to bf16
    mixed_dy,        // bf16 mixed precision: a convolution's output gradient rounded to bf16
};

/// At least n values of T in this thread's buffer for `Slot`; contents undefined.
template <class T, scratch_slot Slot>
T* scratch(std::size_t n) {
    thread_local aligned_vector<T> buf;
    if (buf.size() < n) buf.resize(n);
    return buf.data();
}

}  // namespace oar::cpu_detail
