// gemm_pack.cpp — GEMM operand packing into micro-panels, from any strides (portable and AVX2).
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "jit/x86/gemm_p.h"

namespace framejit::jit::x86 {

namespace {

// Note [GEMM packing]
// Both operands pack the same way. A block is `lines` lines of kc steps each: element (r, p) at
// src[r*ls + p*ss]. Lines are A's rows (W = MR) or B's columns (W = NR); steps run along k.
// Panel t holds lines [t*W, t*W + W) as kc groups of W elements:
//
//   dst[t*W*kc + p*W + r]  =  src[(t*W + r)*ls + p*ss]      (0 for lines past `lines`)
//
// Three source shapes cover every stride:
//   ls == 1  "copy":      each group is W contiguous elements (row-major B, transposed A);
//                         read step by step across all panels, so a wide B is read row by row.
//   ss == 1  "transpose": each line is contiguous along k (row-major A, transposed B); AVX2
//                         transposes 8x8 or 4x8 (float32) and 4x4 (float64) register blocks.
//   neither  "gather":    element by element (strided or negative-stride views).

template <typename T, int W>
void pack_gather(const T* src, int64_t ls, int64_t ss, int64_t count, int64_t kc, T* dst) {
  for (int64_t p = 0; p < kc; ++p) {
    for (int64_t r = 0; r < count; ++r) dst[p * W + r] = src[r * ls + p * ss];
    for (int64_t r = count; r < W; ++r) dst[p * W + r] = T(0);
  }
}

// ---- portable ----------------------------------------------------------------------------------

template <typename T, int W>
void pack_portable(const T* src, int64_t ls, int64_t ss, int64_t lines, int64_t kc, T* dst) {
  const int64_t full = lines / W * W;
  if (ls == 1) {
    for (int64_t p = 0; p < kc; ++p)
      for (int64_t t = 0; t < full; t += W)
        std::memcpy(dst + t * kc + p * W, src + p * ss + t, W * sizeof(T));
  } else if (ss == 1) {
    for (int64_t t = 0; t < full; t += W) {
      const T* s = src + t * ls;
      T* d = dst + t * kc;
      for (int r = 0; r < W; ++r)
        for (int64_t p = 0; p < kc; ++p) d[p * W + r] = s[r * ls + p];
    }
  } else {
    for (int64_t t = 0; t < full; t += W)
      pack_gather<T, W>(src + t * ls, ls, ss, W, kc, dst + t * kc);
  }
  if (full < lines) pack_gather<T, W>(src + full * ls, ls, ss, lines - full, kc, dst + full * kc);
}

// ---- AVX2 ---------------------------------------------------------------------------------------

#define FJ_AVX2 __attribute__((target("avx2,fma")))
#define FJ_AVX2_INLINE FJ_AVX2 __attribute__((always_inline)) inline

FJ_AVX2_INLINE void transpose8x8(__m256 v[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
  const __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
  const __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  v[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  v[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  v[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  v[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  v[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  v[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

FJ_AVX2_INLINE void transpose4x4(__m256d v[4]) {
  const __m256d t0 = _mm256_unpacklo_pd(v[0], v[1]), t1 = _mm256_unpackhi_pd(v[0], v[1]);
  const __m256d t2 = _mm256_unpacklo_pd(v[2], v[3]), t3 = _mm256_unpackhi_pd(v[2], v[3]);
  v[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
  v[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
  v[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
  v[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

// The first N lanes of v to d.
template <int N>
FJ_AVX2_INLINE void store_lanes(float* d, __m256 v) {
  if constexpr (N == 8) {
    _mm256_storeu_ps(d, v);
  } else if constexpr (N == 6) {
    _mm_storeu_ps(d, _mm256_castps256_ps128(v));
    _mm_storel_pi(reinterpret_cast<__m64*>(d + 4), _mm256_extractf128_ps(v, 1));
  } else if constexpr (N == 4) {
    _mm_storeu_ps(d, _mm256_castps256_ps128(v));
  } else {
    alignas(32) float tmp[8];
    _mm256_store_ps(tmp, v);
    std::memcpy(d, tmp, N * sizeof(float));
  }
}

template <int N>
FJ_AVX2_INLINE void store_lanes(double* d, __m256d v) {
  if constexpr (N == 4) {
    _mm256_storeu_pd(d, v);
  } else if constexpr (N == 2) {
    _mm_storeu_pd(d, _mm256_castpd256_pd128(v));
  } else {
    alignas(32) double tmp[4];
    _mm256_store_pd(tmp, v);
    std::memcpy(d, tmp, N * sizeof(double));
  }
}

// Lane i of the mask is set when i < n (n may be <= 0 or >= the lane count).
FJ_AVX2_INLINE __m256i lane_mask32(int64_t n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(n, 0, 8))), idx);
}
FJ_AVX2_INLINE __m256i lane_mask64(int64_t n) {
  const __m256i idx = _mm256_setr_epi64x(0, 1, 2, 3);
  return _mm256_cmpgt_epi64(_mm256_set1_epi64x(std::clamp<int64_t>(n, 0, 4)), idx);
}

// The first N (1..4) lanes of v to d.
template <int N>
FJ_AVX2_INLINE void store_lanes4(float* d, __m128 v) {
  if constexpr (N == 4) {
    _mm_storeu_ps(d, v);
  } else if constexpr (N == 2) {
    _mm_storel_pi(reinterpret_cast<__m64*>(d), v);
  } else {
    alignas(16) float tmp[4];
    _mm_store_ps(tmp, v);
    std::memcpy(d, tmp, N * sizeof(float));
  }
}

// Lines [0, avail) of a 4-line group (the others read as zeros) x 8 steps, transposed: step q's
// 4 values go to d + q*W, of which the first N are stored.
template <int W, int N>
FJ_AVX2_INLINE void transpose_4x8(const float* src, int64_t ls, int64_t avail, float* d) {
  const __m256 z = _mm256_setzero_ps();
  const __m256 r0 = avail > 0 ? _mm256_loadu_ps(src) : z;
  const __m256 r1 = avail > 1 ? _mm256_loadu_ps(src + ls) : z;
  const __m256 r2 = avail > 2 ? _mm256_loadu_ps(src + 2 * ls) : z;
  const __m256 r3 = avail > 3 ? _mm256_loadu_ps(src + 3 * ls) : z;
  const __m256 t0 = _mm256_unpacklo_ps(r0, r1), t1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 t2 = _mm256_unpacklo_ps(r2, r3), t3 = _mm256_unpackhi_ps(r2, r3);
  const __m256 c0 = _mm256_shuffle_ps(t0, t2, 0x44),
               c1 = _mm256_shuffle_ps(t0, t2, 0xEE);  // steps 0|4, 1|5
  const __m256 c2 = _mm256_shuffle_ps(t1, t3, 0x44),
               c3 = _mm256_shuffle_ps(t1, t3, 0xEE);  // steps 2|6, 3|7
  store_lanes4<N>(d + 0 * W, _mm256_castps256_ps128(c0));
  store_lanes4<N>(d + 1 * W, _mm256_castps256_ps128(c1));
  store_lanes4<N>(d + 2 * W, _mm256_castps256_ps128(c2));
  store_lanes4<N>(d + 3 * W, _mm256_castps256_ps128(c3));
  store_lanes4<N>(d + 4 * W, _mm256_extractf128_ps(c0, 1));
  store_lanes4<N>(d + 5 * W, _mm256_extractf128_ps(c1, 1));
  store_lanes4<N>(d + 6 * W, _mm256_extractf128_ps(c2, 1));
  store_lanes4<N>(d + 7 * W, _mm256_extractf128_ps(c3, 1));
}

// 8 lines from r0 (those < count; others zeros) x 8 steps, transposed into full 8-lane groups.
template <int W>
FJ_AVX2_INLINE void transpose_8x8(const float* src, int64_t ls, int64_t avail, float* d) {
  __m256 v[8];
  for (int i = 0; i < 8; ++i)
    v[i] = i < avail ? _mm256_loadu_ps(src + i * ls) : _mm256_setzero_ps();
  transpose8x8(v);
  for (int q = 0; q < 8; ++q) _mm256_storeu_ps(d + q * W, v[q]);
}

// Line groups of a W-wide float32 panel, from line R0 on: 8 lines at a time while 8 lanes remain
// (and more than 4 lines are real), else 4 (a 6-wide panel is 4 + 2 lines).
template <int W, int R0>
FJ_AVX2_INLINE void transpose_groups(const float* src, int64_t ls, int64_t count, float* d) {
  if constexpr (R0 < W) {
    if constexpr (W - R0 >= 8) {
      if (count - R0 > 4) {
        transpose_8x8<W>(src + R0 * ls, ls, count - R0, d + R0);
        transpose_groups<W, R0 + 8>(src, ls, count, d);
        return;
      }
    }
    transpose_4x8<W, std::min(4, W - R0)>(src + R0 * ls, ls, count - R0, d + R0);
    transpose_groups<W, R0 + 4>(src, ls, count, d);
  }
}

// Transpose source (ss == 1), float32: one panel of `count` <= W lines. Groups of 8 lines use
// 8x8 register transposes (full 256-bit stores); the rest, 4x8 (a 6-wide panel is 4 + 2 lines).
template <int W>
FJ_AVX2 void transpose_panel(const float* src, int64_t ls, int64_t count, int64_t kc, float* dst) {
  int64_t p = 0;
  for (; p + 8 <= kc; p += 8) transpose_groups<W, 0>(src + p, ls, count, dst + p * W);
  if (p < kc) pack_gather<float, W>(src + p, ls, 1, count, kc - p, dst + p * W);
}

// Transpose source (ss == 1), float64: 4x4 register transposes, line groups from R0 on.
template <int W, int R0>
FJ_AVX2_INLINE void transpose_groups(const double* src, int64_t ls, int64_t count, double* d) {
  if constexpr (R0 < W) {
    const int64_t avail = count - R0;
    const double* s = src + R0 * ls;
    const __m256d z = _mm256_setzero_pd();
    __m256d v[4] = {avail > 0 ? _mm256_loadu_pd(s) : z, avail > 1 ? _mm256_loadu_pd(s + ls) : z,
                    avail > 2 ? _mm256_loadu_pd(s + 2 * ls) : z,
                    avail > 3 ? _mm256_loadu_pd(s + 3 * ls) : z};
    transpose4x4(v);
    constexpr int kLanes = std::min(4, W - R0);
    for (int q = 0; q < 4; ++q) store_lanes<kLanes>(d + q * W + R0, v[q]);
    transpose_groups<W, R0 + 4>(src, ls, count, d);
  }
}

template <int W>
FJ_AVX2 void transpose_panel(const double* src, int64_t ls, int64_t count, int64_t kc,
                             double* dst) {
  int64_t p = 0;
  for (; p + 4 <= kc; p += 4) transpose_groups<W, 0>(src + p, ls, count, dst + p * W);
  if (p < kc) pack_gather<double, W>(src + p, ls, 1, count, kc - p, dst + p * W);
}

// Copy source (ls == 1), a partial panel: masked loads read no element past `count`, and give
// zeros for the padding. C0: the first lane of this chunk (float32: 8 lanes a chunk).
template <int W, int C0>
FJ_AVX2_INLINE void copy_chunks(const float* src, int64_t ss, int64_t count, int64_t kc,
                                float* dst) {
  if constexpr (C0 < W) {
    const __m256i mask = lane_mask32(count - C0);
    for (int64_t p = 0; p < kc; ++p)
      store_lanes<std::min(8, W - C0)>(dst + p * W + C0,
                                       _mm256_maskload_ps(src + p * ss + C0, mask));
    copy_chunks<W, C0 + 8>(src, ss, count, kc, dst);
  }
}

template <int W, int C0>
FJ_AVX2_INLINE void copy_chunks(const double* src, int64_t ss, int64_t count, int64_t kc,
                                double* dst) {
  if constexpr (C0 < W) {
    const __m256i mask = lane_mask64(count - C0);
    for (int64_t p = 0; p < kc; ++p)
      store_lanes<std::min(4, W - C0)>(dst + p * W + C0,
                                       _mm256_maskload_pd(src + p * ss + C0, mask));
    copy_chunks<W, C0 + 4>(src, ss, count, kc, dst);
  }
}

template <typename T, int W>
FJ_AVX2 void pack_avx2(const T* src, int64_t ls, int64_t ss, int64_t lines, int64_t kc, T* dst) {
  const int64_t full = lines / W * W;
  if (ls == 1) {
    // A few panels at a time: row segments long enough for the prefetchers, few write streams.
    constexpr int64_t kGroup = 4 * W;
    for (int64_t t0 = 0; t0 < full; t0 += kGroup) {
      const int64_t t1 = std::min(full, t0 + kGroup);
      for (int64_t p = 0; p < kc; ++p)
        for (int64_t t = t0; t < t1; t += W)
          std::memcpy(dst + t * kc + p * W, src + p * ss + t, W * sizeof(T));
    }
    if (full < lines) copy_chunks<W, 0>(src + full, ss, lines - full, kc, dst + full * kc);
  } else if (ss == 1) {
    for (int64_t t = 0; t < lines; t += W)
      transpose_panel<W>(src + t * ls, ls, std::min<int64_t>(W, lines - t), kc, dst + t * kc);
  } else {
    for (int64_t t = 0; t < lines; t += W)
      pack_gather<T, W>(src + t * ls, ls, ss, std::min<int64_t>(W, lines - t), kc, dst + t * kc);
  }
}

}  // namespace

template <typename T>
GemmPackFn<T> gemm_pack_fn(Isa isa, int w) {
  const bool avx2 = isa != Isa::Scalar;
#define FJ_PACK_CASE(W) \
  case W: return avx2 ? &pack_avx2<T, W> : &pack_portable<T, W>;
  switch (w) {
    FJ_PACK_CASE(4)
    FJ_PACK_CASE(6)
    FJ_PACK_CASE(8)
    FJ_PACK_CASE(14)
    FJ_PACK_CASE(16)
    FJ_PACK_CASE(32)
  }
#undef FJ_PACK_CASE
  return nullptr;
}

template GemmPackFn<float> gemm_pack_fn<float>(Isa isa, int w);
template GemmPackFn<double> gemm_pack_fn<double>(Isa isa, int w);

}  // namespace framejit::jit::x86
