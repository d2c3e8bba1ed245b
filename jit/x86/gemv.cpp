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
  FJ_AVX2 static void store_first(double* p, R v, int count) {  // lanes [0, count)
    const __m256i lanes = _mm256_setr_epi64x(0, 1, 2, 3);
    _mm256_maskstore_pd(p, _mm256_cmpgt_epi64(_mm256_set1_epi64x(count), lanes), v);
  }
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
  FJ_AVX2 static void store_first(float* p, R v, int count) {  // lanes [0, count)
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    _mm256_maskstore_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(count), lanes), v);
  }
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

// Note [Narrow products]
// A product with at most two vectors' worth of columns, A(m, k) @ B(k, n <= 2W): (100000, 2) @
// (2, 3) and (8, 4096) @ (4096, 8) ran at 0.4x NumPy through the GEMM, whose tiles are 16 or more
// columns wide and which packs A for k of 2. Here each row of C is a sum of B's rows scaled by
// A's elements: C[i, :] = sum_p A[i, p] * B[p, :], B's rows as one or two vectors (B copied into
// zero-padded rows when its rows are not whole vectors), A read once, element by element, C's
// rows written once (the last vector masked). Four rows at a time, even and odd p in separate
// accumulators: 8 or 16 independent FMA chains. Each output is summed in one fixed order
// whatever the thread split (threads take rows).
template <typename T>
struct Narrow {
  int64_t m, k, n;
  const T* a;
  int64_t ars, acs;
  const T* b;  // k rows of `bs` elements, the first n of each B's row
  int64_t bs;
  T* c;
  int64_t ldc;
};

template <typename T, int NV>
FJ_AVX2 void narrow_rows_avx2(const Narrow<T>& g, int64_t r0, int64_t r1) {
  using V = Vec<T>;
  using R = typename V::R;
  constexpr int W = V::kW;
  const int last = static_cast<int>(g.n - (NV - 1) * W);  // lanes of the last vector stored
  auto store_row = [&](T* c, const R* even, const R* odd) {
    #pragma GCC unroll 2
    for (int v = 0; v + 1 < NV; ++v) V::store(c + v * W, V::add(even[v], odd[v]));
    V::store_first(c + (NV - 1) * W, V::add(even[NV - 1], odd[NV - 1]), last);
  };
  int64_t i = r0;
  for (; i + 4 <= r1; i += 4) {
    R even[4][NV], odd[4][NV];
    #pragma GCC unroll 4
    for (int q = 0; q < 4; ++q)
      #pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) even[q][v] = odd[q][v] = V::zero();
    const T* a = g.a + i * g.ars;
    int64_t p = 0;
    for (; p + 2 <= g.k; p += 2) {
      const T* b0 = g.b + p * g.bs;
      R x0[NV], x1[NV];
      #pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) x0[v] = V::load(b0 + v * W), x1[v] = V::load(b0 + g.bs + v * W);
      #pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const R s0 = V::splat(a[q * g.ars + p * g.acs]), s1 = V::splat(a[q * g.ars + (p + 1) * g.acs]);
        #pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) {
          even[q][v] = V::fma(s0, x0[v], even[q][v]);
          odd[q][v] = V::fma(s1, x1[v], odd[q][v]);
        }
      }
    }
    if (p < g.k) {
      R x0[NV];
      #pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) x0[v] = V::load(g.b + p * g.bs + v * W);
      #pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        const R s0 = V::splat(a[q * g.ars + p * g.acs]);
        #pragma GCC unroll 2
        for (int v = 0; v < NV; ++v) even[q][v] = V::fma(s0, x0[v], even[q][v]);
      }
    }
    #pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) store_row(g.c + (i + q) * g.ldc, even[q], odd[q]);
  }
  for (; i < r1; ++i) {
    R even[NV], odd[NV];
    #pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) even[v] = odd[v] = V::zero();
    const T* a = g.a + i * g.ars;
    int64_t p = 0;
    for (; p + 2 <= g.k; p += 2) {
      const R s0 = V::splat(a[p * g.acs]), s1 = V::splat(a[(p + 1) * g.acs]);
      #pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) {
        even[v] = V::fma(s0, V::load(g.b + p * g.bs + v * W), even[v]);
        odd[v] = V::fma(s1, V::load(g.b + (p + 1) * g.bs + v * W), odd[v]);
      }
    }
    if (p < g.k) {
      const R s0 = V::splat(a[p * g.acs]);
      #pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) even[v] = V::fma(s0, V::load(g.b + p * g.bs + v * W), even[v]);
    }
    store_row(g.c + i * g.ldc, even, odd);
  }
}

template <typename T>
bool narrow_typed(const GemmArgs& a) {
  constexpr int W = Vec<T>::kW;
  const int nv = a.n <= W ? 1 : 2;
  Narrow<T> g{a.m, a.k, a.n, static_cast<const T*>(a.a), a.a_row_stride, a.a_col_stride,
              static_cast<const T*>(a.b), a.b_row_stride, static_cast<T*>(a.c), a.ldc};
  std::vector<T> padded;
  if (a.b_col_stride != 1 || a.n % W != 0) {  // whole vectors per row, zeros past column n
    g.bs = nv * W;
    padded.assign(a.k * g.bs, T(0));
    const T* b = static_cast<const T*>(a.b);
    for (int64_t p = 0; p < a.k; ++p)
      for (int64_t j = 0; j < a.n; ++j) padded[p * g.bs + j] = b[p * a.b_row_stride + j * a.b_col_stride];
    g.b = padded.data();
  }
  const int64_t grain = std::max<int64_t>(4, kMinMacsPerTask / (a.k * a.n));
  const Narrow<T>* gp = &g;
  rt::parallel_for(a.m, grain, [gp, nv, &a](int64_t r0, int64_t r1) {
    nv == 1 ? narrow_rows_avx2<T, 1>(*gp, r0, r1) : narrow_rows_avx2<T, 2>(*gp, r0, r1);
    if (a.epilogue) a.epilogue(a.epilogue_ctx, static_cast<T*>(a.c) + r0 * a.ldc, a.ldc, r0, 0, r1 - r0, a.n);
  });
  return true;
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
  if (args.m <= 0 || args.n <= 0 || args.k <= 0) return false;
  const bool f32 = args.dtype == rt::DType::Float32;
  if (!f32 && args.dtype != rt::DType::Float64) return false;
  if (args.m == 1 || args.n == 1) return f32 ? gemv_typed<float>(args) : gemv_typed<double>(args);
  // Note [Narrow products]: AVX2 and FMA only (hosts without them run the GEMM's portable path).
  if (host_isa() == Isa::Scalar || args.n > 2 * (f32 ? Vec<float>::kW : Vec<double>::kW)) return false;
  return f32 ? narrow_typed<float>(args) : narrow_typed<double>(args);
}

}  // namespace framejit::jit::x86
