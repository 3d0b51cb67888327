// The AVX512-BF16 and AMX bodies of kernels/cpu/gemm_bf16.hpp (isa/gemm_bf16_avx512.inc,
// isa/gemm_bf16_amx.inc) compiled on every host with their intrinsics emulated as the Intel SDM
// defines them (vdpbf16ps, tdpbf16ps: exact bf16 products added to fp32 sums), for tests of the
// bodies and of the code built on them where the instructions are absent:
// oar::cpu_detail::emu_avx512::gemm_block (and dw_tile_rows, conv_bf16.hpp's weight-gradient tile)
// and oar::cpu_detail::emu_amx::gemm_block (and the
// emulated tile file, emu_amx::tiles(), whose misuse flag records a tile used outside its shape).
// Include after <oar/kernels/cpu/gemm_bf16.hpp>.
#pragma once

#include <oar/kernels/cpu/gemm_bf16.hpp>  // the bodies' callers and the tile intrinsics' macros
#include <oar/core/bf16.hpp>              // bf16, to_float

#include <cmath>    // std::fma
#include <cstddef>  // std::size_t
#include <cstdint>  // std::uint16_t, std::int32_t
#include <cstring>  // std::memcpy, std::memset

// The hardware bodies on emulated intrinsics (see the header comment). The tile intrinsics are
// macros in GCC's and Clang's headers: undefined here, after gemm_bf16.hpp has used them, so the
// functions below take their names.
#undef _tile_loadd
#undef _tile_stored
#undef _tile_zero
#undef _tile_dpbf16ps

namespace oar::cpu_detail::emu {

struct f32x16 {
    float f[16];
};
struct i32x16 {
    std::uint16_t h[32];
};
struct f32x8 {
    float f[8];
};
struct i32x8 {
    std::uint16_t h[16];
};
inline float bf(std::uint16_t h) { return oar::to_float(oar::bf16{h}); }
// vdpbf16ps on `lanes` fp32 lanes: lane i adds the products of the bf16 pairs (2i + 1 first, then
// 2i), each exact.
inline void dpbf16(float* acc, const std::uint16_t* a, const std::uint16_t* b, int lanes) {
    for (int i = 0; i < lanes; ++i) {
        acc[i] = std::fma(bf(a[2 * i + 1]), bf(b[2 * i + 1]), acc[i]);
        acc[i] = std::fma(bf(a[2 * i]), bf(b[2 * i]), acc[i]);
    }
}

}  // namespace oar::cpu_detail::emu

namespace oar::cpu_detail::emu_avx512 {
using namespace oar::cpu_detail::emu;
using __m512 = f32x16;
using __m512i = i32x16;
using __m512bh = i32x16;
using __mmask16 = std::uint16_t;
inline __m512 _mm512_setzero_ps() { return {}; }
inline __m512 _mm512_set1_ps(float x) {
    __m512 r;
    for (float& v : r.f) v = x;
    return r;
}
inline __m512i _mm512_loadu_si512(const void* p) {
    __m512i r;
    std::memcpy(&r, p, sizeof r);
    return r;
}
inline __m512i _mm512_set1_epi32(std::int32_t x) {
    __m512i r;
    for (int i = 0; i < 16; ++i) std::memcpy(&r.h[2 * i], &x, 4);
    return r;
}
inline __m512 _mm512_dpbf16_ps(__m512 acc, __m512bh a, __m512bh b) {
    dpbf16(acc.f, a.h, b.h, 16);
    return acc;
}
inline __m512 _mm512_maskz_loadu_ps(__mmask16 m, const float* p) {
    __m512 r{};
    for (int i = 0; i < 16; ++i)
        if ((m >> i) & 1) r.f[i] = p[i];
    return r;
}
inline __m512 _mm512_mul_ps(__m512 a, __m512 b) {
    for (int i = 0; i < 16; ++i) a.f[i] *= b.f[i];
    return a;
}
inline __m512 _mm512_fmadd_ps(__m512 a, __m512 b, __m512 c) {
    for (int i = 0; i < 16; ++i) c.f[i] = std::fma(a.f[i], b.f[i], c.f[i]);
    return c;
}
inline void _mm512_mask_storeu_ps(float* p, __mmask16 m, __m512 v) {
    for (int i = 0; i < 16; ++i)
        if ((m >> i) & 1) p[i] = v.f[i];
}
// The 256-bit forms (AVX512VL) the weight-gradient tile takes for a block of 17-24 channels.
using __m256 = f32x8;
using __m256i = i32x8;
using __m256bh = i32x8;
inline __m256 _mm256_setzero_ps() { return {}; }
inline __m256i _mm256_loadu_si256(const void* p) {
    __m256i r;
    std::memcpy(&r, p, sizeof r);
    return r;
}
inline __m256i _mm512_castsi512_si256(__m512i a) {
    __m256i r;
    std::memcpy(r.h, a.h, sizeof r.h);
    return r;
}
inline __m256 _mm256_dpbf16_ps(__m256 acc, __m256bh a, __m256bh b) {
    dpbf16(acc.f, a.h, b.h, 8);
    return acc;
}
inline void _mm256_storeu_ps(float* p, __m256 v) { std::memcpy(p, v.f, sizeof v.f); }
#include <oar/kernels/cpu/isa/gemm_bf16_avx512.inc>
#include <oar/kernels/cpu/isa/conv_bf16_dw.inc>
}  // namespace oar::cpu_detail::emu_avx512

namespace oar::cpu_detail::emu_amx {
using namespace oar::cpu_detail::emu;
// Eight tiles of 16 rows of 64 bytes and their shapes from the last configuration; a load, store
// or product outside a configured shape, or without a configuration, fails the test.
struct tile_file {
    unsigned char t[8][16][64];
    int rows[8], colsb[8];
    bool configured = false;
    bool misuse = false;
};
inline tile_file& tiles() {
    static tile_file f;
    return f;
}
inline void _tile_loadconfig(const void* cfg) {
    const auto* b = static_cast<const unsigned char*>(cfg);
    tile_file& f = tiles();
    f.misuse |= b[0] != 1;  // palette 1
    for (int i = 0; i < 8; ++i) {
        std::uint16_t cb;
        std::memcpy(&cb, b + 16 + 2 * i, 2);
        f.colsb[i] = cb;
        f.rows[i] = b[48 + i];
        f.misuse |= f.rows[i] > 16 || f.colsb[i] > 64;
    }
    f.configured = true;
}
inline void _tile_release() { tiles().configured = false; }
inline void _tile_zero(int t) {
    tiles().misuse |= !tiles().configured;
    std::memset(tiles().t[t], 0, sizeof tiles().t[t]);
}
inline void _tile_loadd(int t, const void* base, std::size_t stride) {
    tile_file& f = tiles();
    f.misuse |= !f.configured;
    for (int r = 0; r < f.rows[t]; ++r) std::memcpy(f.t[t][r], static_cast<const char*>(base) + r * stride, f.colsb[t]);
}
inline void _tile_stored(int t, void* base, std::size_t stride) {
    tile_file& f = tiles();
    f.misuse |= !f.configured;
    for (int r = 0; r < f.rows[t]; ++r) std::memcpy(static_cast<char*>(base) + r * stride, f.t[t][r], f.colsb[t]);
}
// tdpbf16ps: C[m][n] += A[m][2k+1] B[k][2n+1] + A[m][2k] B[k][2n] over the K pairs k, each exact.
inline void _tile_dpbf16ps(int c, int a, int b) {
    tile_file& f = tiles();
    f.misuse |= !f.configured || f.rows[a] != f.rows[c] || f.colsb[b] != f.colsb[c] || f.colsb[a] / 4 != f.rows[b];
    const auto u16 = [](const unsigned char* p) {
        std::uint16_t v;
        std::memcpy(&v, p, 2);
        return v;
    };
    for (int m = 0; m < f.rows[c]; ++m)
        for (int n = 0; n < f.colsb[c] / 4; ++n) {
            float acc;
            std::memcpy(&acc, &f.t[c][m][4 * n], 4);
            for (int k = 0; k < f.colsb[a] / 4; ++k) {
                acc = std::fma(bf(u16(&f.t[a][m][4 * k + 2])), bf(u16(&f.t[b][k][4 * n + 2])), acc);
                acc = std::fma(bf(u16(&f.t[a][m][4 * k])), bf(u16(&f.t[b][k][4 * n])), acc);
            }
            std::memcpy(&f.t[c][m][4 * n], &acc, 4);
        }
}
#include <oar/kernels/cpu/isa/gemm_bf16_amx.inc>
}  // namespace oar::cpu_detail::emu_amx
