// gemv.cpp — products with one row or one column: one pass over the matrix, no packing (Note
// [Matrix-vector products]).
#include "jit/x86/gemv.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "jit/x86/isa.h"
#include "runtime/threads.h"

namespace framejit::jit::x86 {

// Note [Matrix-vector products]
// A product with one column, A(m, k) @ B(k, 1), or one row, A(1, k) @ B(k, n), uses each element
// of the matrix once: its time is one pass over the matrix from memory. The GEMM packs the matrix
// first (a second pass) and computes full tiles for one useful column: (1000, 1000) @ (1000, 1)
// ran at 0.17-0.26x NumPy's (OpenBLAS's gemv). Here both are out[i] = sum_p M[i, p] * v[p] with
// M = A (one column) or M = B transposed (one row), when M has a unit stride on one axis:
//  - rows contiguous, the dot form: four rows at a time, two vector accumulators per row (eight
//    FMA chains hide the FMA latency), then horizontal sums;
//  - columns contiguous, the axpy form: a chunk of outputs kept in L1 (8 KiB) takes
//    v[p] * M[chunk, p] for four columns p at a time.
// Other strides go to the GEMM. A strided v is copied to a contiguous buffer first. Threads take
// disjoint ranges of outputs and each output is summed in one fixed order, so results are bitwise
// the same on any number of threads (as the GEMM's): the scalar tails, whose elements depend on the
// split, round as the vector code does (std::fma, not a multiply-add the compiler may or may not
// contract: the sanitizer build did not). The sums are plain FMA chains, as BLAS's gemv; they agree
// with NumPy's to rounding.

namespace {

// NB: the small loops over rows and columns are unrolled by pragma: at -O2 GCC keeps them loops, and
// their accumulator arrays then live on the stack (each FMA a store-forwarded round trip).
#define FJ_AVX2 __attribute__((target("avx2,fma")))

constexpr int64_t kChunkBytes = 8 << 10;  // axpy form: outputs accumulated in L1
constexpr int64_t kMinMacsPerTask = int64_t{1} << 16;

template <typename T>
struct Vec;
template <>
struct Vec<double> {
  using R = __m256d;
  static constexpr int kW = 4;
  FJ_AVX2 static R zero() { return _mm256_setzero_pd(); }
  FJ_AVX2 static R load(const double* p) { return _mm256_loadu_pd(p); }
  FJ_AVX2 static void store(double* p, R v) { _mm256_storeu_pd(p, v); }
  FJ_AVX2 static R splat(double x) { return _mm256_set1_pd(x); }
  FJ_AVX2 static R fma(R a, R b, R c) { return _mm256_fmadd_pd(a, b, c); }
  FJ_AVX2 static R add(R a, R b) { return _mm256_add_pd(a, b); }
  FJ_AVX2 static double sum(R v) {
    const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
  }
};
template <>
struct Vec<float> {
  using R = __m256;
  static constexpr int kW = 8;
  FJ_AVX2 static R zero() { return _mm256_setzero_ps(); }
  FJ_AVX2 static R load(const float* p) { return _mm256_loadu_ps(p); }
  FJ_AVX2 static void store(float* p, R v) { _mm256_storeu_ps(p, v); }
  FJ_AVX2 static R splat(float x) { return _mm256_set1_ps(x); }
  FJ_AVX2 static R fma(R a, R b, R c) { return _mm256_fmadd_ps(a, b, c); }
  FJ_AVX2 static R add(R a, R b) { return _mm256_add_ps(a, b); }
  FJ_AVX2 static float sum(R v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
};

// The product in elements: out[i * os] = sum_p m[i * rs + p * cs] * v[p], v contiguous.
template <typename T>
struct Mv {
  int64_t rows, cols;
  const T* m;
  int64_t rs, cs;
  const T* v;
  T* out;
  int64_t os;
};

// One row's dot product (the rows the four-row loop leaves, and the portable path).
template <typename T>
FJ_AVX2 T dot_row(const T* row, const T* v, int64_t n) {
  using V = Vec<T>;
  constexpr int W = V::kW;
  typename V::R c0 = V::zero(), c1 = V::zero();
  int64_t p = 0;
  for (; p + 2 * W <= n; p += 2 * W) {
    c0 = V::fma(V::load(row + p), V::load(v + p), c0);
    c1 = V::fma(V::load(row + p + W), V::load(v + p + W), c1);
  }
  if (p + W <= n) {
    c0 = V::fma(V::load(row + p), V::load(v + p), c0);
    p += W;
  }
  T s = V::sum(V::add(c0, c1));
  for (; p < n; ++p) s = std::fma(row[p], v[p], s);
  return s;
}

template <typename T>
FJ_AVX2 void dot_rows_avx2(const Mv<T>& g, int64_t r0, int64_t r1) {
  using V = Vec<T>;
  constexpr int W = V::kW;
  const int64_t n = g.cols;
  if (n < W) {  // rows shorter than a vector: plain sums, no horizontal ones
    for (int64_t i = r0; i < r1; ++i) {
      const T* row = g.m + i * g.rs;
      T s = row[0] * g.v[0];
      for (int64_t p = 1; p < n; ++p) s = std::fma(row[p], g.v[p], s);
      g.out[i * g.os] = s;
    }
    return;
  }
  int64_t i = r0;
  for (; i + 4 <= r1; i += 4) {
    const T* a[4];
    #pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) a[q] = g.m + (i + q) * g.rs;
    typename V::R c[8];
    #pragma GCC unroll 8
    for (auto& x : c) x = V::zero();
    int64_t p = 0;
    for (; p + 2 * W <= n; p += 2 * W) {
      const typename V::R x0 = V::load(g.v + p), x1 = V::load(g.v + p + W);
      #pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        c[2 * q] = V::fma(V::load(a[q] + p), x0, c[2 * q]);
        c[2 * q + 1] = V::fma(V::load(a[q] + p + W), x1, c[2 * q + 1]);
      }
    }
    if (p + W <= n) {
      const typename V::R x0 = V::load(g.v + p);
      #pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) c[2 * q] = V::fma(V::load(a[q] + p), x0, c[2 * q]);
      p += W;
    }
    #pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      T s = V::sum(V::add(c[2 * q], c[2 * q + 1]));
      for (int64_t t = p; t < n; ++t) s = std::fma(a[q][t], g.v[t], s);
      g.out[(i + q) * g.os] = s;
    }
  }
  for (; i < r1; ++i) g.out[i * g.os] = dot_row(g.m + i * g.rs, g.v, n);
}

template <typename T>
FJ_AVX2 void axpy_cols_avx2(const Mv<T>& g, int64_t r0, int64_t r1) {
  using V = Vec<T>;
  constexpr int W = V::kW;
  constexpr int64_t kChunk = kChunkBytes / sizeof(T);
  alignas(32) T acc[kChunk];
  for (int64_t c0 = r0; c0 < r1; c0 += kChunk) {
    const int64_t len = std::min(kChunk, r1 - c0);
    std::fill_n(acc, len, T(0));
    const int64_t vec_end = len / W * W;
    int64_t p = 0;
    for (; p + 4 <= g.cols; p += 4) {
      const T* col[4];
      typename V::R x[4];
      #pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) col[q] = g.m + (p + q) * g.cs + c0, x[q] = V::splat(g.v[p + q]);
      for (int64_t i = 0; i < vec_end; i += W) {
        typename V::R s = V::load(acc + i);
        #pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) s = V::fma(V::load(col[q] + i), x[q], s);
        V::store(acc + i, s);
      }
      for (int64_t i = vec_end; i < len; ++i)
        #pragma GCC unroll 4
        for (int q = 0; q < 4; ++q) acc[i] = std::fma(col[q][i], g.v[p + q], acc[i]);
    }
    for (; p < g.cols; ++p) {
      const T* col = g.m + p * g.cs + c0;
      const typename V::R x = V::splat(g.v[p]);
      for (int64_t i = 0; i < vec_end; i += W) V::store(acc + i, V::fma(V::load(col + i), x, V::load(acc + i)));
      for (int64_t i = vec_end; i < len; ++i) acc[i] = std::fma(col[i], g.v[p], acc[i]);
    }
    for (int64_t i = 0; i < len; ++i) g.out[(c0 + i) * g.os] = acc[i];
  }
}

// The portable path (hosts without AVX2 and FMA): the same forms in plain C++.
template <typename T>
void mv_portable(const Mv<T>& g, int64_t r0, int64_t r1) {
  for (int64_t i = r0; i < r1; ++i) {
    T s0 = 0, s1 = 0;
    int64_t p = 0;
    const T* row = g.m + i * g.rs;
    for (; p + 2 <= g.cols; p += 2) s0 += row[p * g.cs] * g.v[p], s1 += row[(p + 1) * g.cs] * g.v[p + 1];
    if (p < g.cols) s0 += row[p * g.cs] * g.v[p];
    g.out[i * g.os] = s0 + s1;
  }
}

template <typename T>
bool gemv_typed(const GemmArgs& a) {
  Mv<T> g;
  const T* v = nullptr;
  int64_t vs = 0;
  if (a.n == 1) {  // C(m, 1) = A @ B[:, 0]
    g = {a.m, a.k, static_cast<const T*>(a.a), a.a_row_stride, a.a_col_stride, nullptr, static_cast<T*>(a.c), a.ldc};
    v = static_cast<const T*>(a.b), vs = a.b_row_stride;
  } else {  // C(1, n) = A[0, :] @ B: rows of M are B's columns
    g = {a.n, a.k, static_cast<const T*>(a.b), a.b_col_stride, a.b_row_stride, nullptr, static_cast<T*>(a.c), 1};
    v = static_cast<const T*>(a.a), vs = a.a_col_stride;
  }
  const bool avx2 = host_isa() != Isa::Scalar;
  const bool dot = g.cs == 1;
  if (!dot && g.rs != 1) return false;  // no unit stride: the GEMM packs it
  std::vector<T> packed;
  if (vs != 1) {
    packed.resize(g.cols);
    for (int64_t p = 0; p < g.cols; ++p) packed[p] = v[p * vs];
    v = packed.data();
  }
  g.v = v;
  const bool one_column = a.n == 1;
  const int64_t grain = std::max<int64_t>(16, kMinMacsPerTask / g.cols);
  const Mv<T>* gp = &g;
  rt::parallel_for(g.rows, grain, [gp, avx2, dot, one_column, &a](int64_t r0, int64_t r1) {
    if (!avx2)
      mv_portable(*gp, r0, r1);
    else if (dot)
      dot_rows_avx2(*gp, r0, r1);
    else
      axpy_cols_avx2(*gp, r0, r1);
    if (!a.epilogue) return;
    if (one_column)
      a.epilogue(a.epilogue_ctx, static_cast<T*>(a.c) + r0 * a.ldc, a.ldc, r0, 0, r1 - r0, 1);
    else
      a.epilogue(a.epilogue_ctx, static_cast<T*>(a.c) + r0, a.ldc, 0, r0, 1, r1 - r0);
  });
  return true;
}

}  // namespace

bool gemv(const GemmArgs& args) {
  if ((args.m != 1 && args.n != 1) || args.m <= 0 || args.n <= 0 || args.k <= 0) return false;
  switch (args.dtype) {
    case rt::DType::Float32: return gemv_typed<float>(args);
    case rt::DType::Float64: return gemv_typed<double>(args);
    default: return false;
  }
}

}  // namespace framejit::jit::x86
