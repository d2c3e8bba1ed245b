// test_gemm.cpp — x86 GEMM vs a double-accumulating reference: shapes, strides, epilogue, ISAs.
#include <emmintrin.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

#include "jit/x86/gemm.h"
#include "jit/x86/gemm_p.h"
#include "jit/x86/isa.h"
#include "runtime/threads.h"

namespace framejit::jit::x86 {
namespace {

using rt::DType;

// How an operand is stored. Its logical values never change, only where they live.
enum class Layout {
  RowMajor,    // contiguous rows
  Transposed,  // column-major: the transpose of a row-major array (swapped strides)
  Strided,     // rows padded, every other column
  NegRows,     // rows in reverse order: negative row stride
  NegCols,     // columns in reverse order: negative column stride
};

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::RowMajor: return "row";
    case Layout::Transposed: return "trans";
    case Layout::Strided: return "strided";
    case Layout::NegRows: return "negrows";
    case Layout::NegCols: return "negcols";
  }
  return "?";
}

// Deterministic values in [-1, 1], exactly representable in float32 (so float32 and float64 runs
// share one reference).
std::vector<float> values(int64_t count, uint64_t seed) {
  std::vector<float> v(count);
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<int32_t>(s >> 40) - (1 << 23)) / static_cast<float>(1 << 23);
  }
  return v;
}

// A rows x cols operand of T stored in `layout`: `origin` points at logical element (0, 0).
template <typename T>
struct Operand {
  std::vector<T> storage;
  const T* origin = nullptr;
  int64_t rs = 0, cs = 0;

  Operand(const std::vector<float>& logical, int64_t rows, int64_t cols, Layout layout) {
    int64_t prs = cols, pcs = 1, size = rows * cols;  // physical strides for logical (i, j)
    switch (layout) {
      case Layout::RowMajor: break;
      case Layout::Transposed: prs = 1, pcs = rows; break;
      case Layout::Strided:
        prs = 2 * cols + 5, pcs = 2, size = std::max<int64_t>(rows * prs, 1);
        break;
      case Layout::NegRows: break;
      case Layout::NegCols: break;
    }
    storage.assign(std::max<int64_t>(size, 1), std::numeric_limits<T>::quiet_NaN());
    int64_t base = 0;
    rs = prs, cs = pcs;
    if (layout == Layout::NegRows && rows > 0) base = (rows - 1) * cols, rs = -cols;
    if (layout == Layout::NegCols && cols > 0) base = cols - 1, cs = -1;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) storage[base + i * rs + j * cs] = logical[i * cols + j];
    origin = storage.data() + base;
  }
};

// Which rows of C a test checks: all of them, except in big problems (where the reference would
// dominate the test time) the first and last 32 and every 5th in between. That still covers
// every row position within a register tile (tiles are at most 16 rows; 5 is prime to their
// heights) and both edges; every column is checked.
bool checked_row(int64_t i, int64_t m, int64_t n, int64_t k) {
  return m * n * k <= (int64_t{1} << 26) || i < 32 || i >= m - 32 || i % 5 == 0;
}

// C = A @ B with double accumulation, and sum |A||B| per element (the scale of rounding error),
// on the checked rows.
struct Reference {
  std::vector<double> c, abs;
};

const Reference& reference(int64_t m, int64_t n, int64_t k, const std::vector<float>& a,
                           const std::vector<float>& b) {
  static std::map<std::tuple<int64_t, int64_t, int64_t>, Reference> cache;  // ISAs, dtypes share
  auto [it, fresh] = cache.try_emplace({m, n, k});
  Reference& r = it->second;
  if (!fresh) return r;
  r.c.assign(m * n, 0.0);
  r.abs.assign(m * n, 0.0);
  std::vector<double> bd(b.begin(), b.end()), babs(k * n);
  for (int64_t i = 0; i < k * n; ++i) babs[i] = std::fabs(bd[i]);
  for (int64_t i = 0; i < m; ++i) {  // i-p-j order: unit-stride inner loop
    if (!checked_row(i, m, n, k)) continue;
    double* ci = r.c.data() + i * n;  // NB: not &r.c[i * n]: n may be 0
    double* ci_abs = r.abs.data() + i * n;
    for (int64_t p = 0; p < k; ++p) {
      const double aip = a[i * k + p], aip_abs = std::fabs(aip);
      const double* bp = bd.data() + p * n;
      const double* bp_abs = babs.data() + p * n;
      const __m128d va = _mm_set1_pd(aip), va_abs = _mm_set1_pd(aip_abs);  // SSE2: every x86-64
      int64_t j = 0;
      for (; j + 2 <= n; j += 2) {
        _mm_storeu_pd(ci + j,
                      _mm_add_pd(_mm_loadu_pd(ci + j), _mm_mul_pd(va, _mm_loadu_pd(bp + j))));
        _mm_storeu_pd(ci_abs + j, _mm_add_pd(_mm_loadu_pd(ci_abs + j),
                                             _mm_mul_pd(va_abs, _mm_loadu_pd(bp_abs + j))));
      }
      for (; j < n; ++j) {
        ci[j] += aip * bp[j];
        ci_abs[j] += aip_abs * bp_abs[j];
      }
    }
  }
  return r;
}

struct Case {
  int64_t m, n, k;
  Layout la = Layout::RowMajor, lb = Layout::RowMajor;
};

std::string case_name(const Case& c) {
  return std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
         " A:" + layout_name(c.la) + " B:" + layout_name(c.lb);
}

// The epilogue under test: C = 2*C + bias[j]. Nonlinear in when it runs: applied before the K
// reduction finished, the doubling would miss the rest of the sum. Counts calls per element.
template <typename T>
struct BiasEpilogue {
  const std::vector<T>* bias;
  std::vector<int>* visits;  // m x n
  int64_t n;
  static void run(void* ctx, void* c, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb) {
    auto* self = static_cast<BiasEpilogue*>(ctx);
    T* cb = static_cast<T*>(c);
    for (int64_t i = 0; i < mb; ++i)
      for (int64_t j = 0; j < nb; ++j) {
        cb[i * ldc + j] = 2 * cb[i * ldc + j] + (*self->bias)[n0 + j];
        // Disjoint blocks may run concurrently; each element is ours alone.
        ++(*self->visits)[(m0 + i) * self->n + (n0 + j)];
      }
  }
};

template <typename T>
void run_case(const Case& cs, bool with_epilogue) {
  SCOPED_TRACE(case_name(cs) + (with_epilogue ? " +epilogue" : ""));
  const int64_t m = cs.m, n = cs.n, k = cs.k;
  const std::vector<float> av = values(m * k, 1 + m * 31 + k), bv = values(k * n, 2 + n * 17 + k);
  const Operand<T> a(av, m, k, cs.la), b(bv, k, n, cs.lb);

  // C with padded rows; NaN everywhere so an unwritten element or an accumulation into stale
  // memory shows, and the padding must stay NaN.
  const int64_t ldc = n + 3;
  std::vector<T> c(std::max<int64_t>(m * ldc, 1), std::numeric_limits<T>::quiet_NaN());
  std::vector<T> bias(n);
  for (int64_t j = 0; j < n; ++j) bias[j] = static_cast<T>(0.25 * (j % 7) - 0.5);
  std::vector<int> visits(m * n, 0);
  BiasEpilogue<T> epi{&bias, &visits, n};

  GemmArgs g;
  g.dtype = std::is_same_v<T, float> ? DType::Float32 : DType::Float64;
  g.m = m, g.n = n, g.k = k;
  g.a = a.origin, g.a_row_stride = a.rs, g.a_col_stride = a.cs;
  g.b = b.origin, g.b_row_stride = b.rs, g.b_col_stride = b.cs;
  g.c = c.data(), g.ldc = ldc;
  if (with_epilogue) g.epilogue = &BiasEpilogue<T>::run, g.epilogue_ctx = &epi;
  ASSERT_TRUE(gemm(g));

  const Reference& ref = reference(m, n, k, av, bv);
  // Note [GEMM tolerance]: summing k products in precision eps, the rounding error of an element
  // is bounded by about sqrt(k) * eps * sum_p |a_ip b_pj| for independent rounding errors (Higham,
  // "Accuracy and Stability of Numerical Algorithms", 3.1 and the probabilistic bound after it);
  // the factor 4 is headroom, still orders of magnitude below the error of any wrong product.
  const double eps = std::numeric_limits<T>::epsilon();
  const double scale = 4 * eps * std::sqrt(static_cast<double>(std::max<int64_t>(k, 1)));
  int64_t bad = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n && checked_row(i, m, n, k); ++j) {
      double want = ref.c[i * n + j], tol = scale * ref.abs[i * n + j];
      if (with_epilogue) want = 2 * want + bias[j], tol = 2 * tol + eps * std::fabs(want);
      const double got = c[i * ldc + j];
      if (!(std::fabs(got - want) <= tol) && bad++ < 5)
        ADD_FAILURE() << "C[" << i << "][" << j << "] = " << got << ", want " << want << " +- "
                      << tol;
      if (with_epilogue && visits[i * n + j] != 1 && bad++ < 5)
        ADD_FAILURE() << "epilogue ran " << visits[i * n + j] << " times on C[" << i << "][" << j
                      << "]";
    }
    for (int64_t j = 0; j < n && !checked_row(i, m, n, k); ++j)  // not compared: still written
      if (std::isnan(c[i * ldc + j]) && bad++ < 5)
        ADD_FAILURE() << "C[" << i << "][" << j << "] not written";
    for (int64_t j = n; j < ldc; ++j)
      if (!std::isnan(c[i * ldc + j]) && bad++ < 5)
        ADD_FAILURE() << "wrote C's row padding at row " << i;
  }
  EXPECT_EQ(bad, 0);
}

// ---- kernel generation (every ISA, whatever the host has)
// -----------------------------------------

TEST(GemmKernels, GenerateEveryIsa) {
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
    for (DType dt : {DType::Float32, DType::Float64}) {
      SCOPED_TRACE(std::string(isa_name(isa)) + " " + (dt == DType::Float32 ? "f32" : "f64"));
      const GemmKernelSet* ks = gemm_kernel_set(isa, dt);
      ASSERT_NE(ks, nullptr) << gemm_kernel_status(isa, dt).message();
      EXPECT_EQ(ks->isa, isa);
      EXPECT_GE(ks->mr, 1);
      EXPECT_LE(ks->mr, kGemmMaxMr);
      for (int r = 1; r <= ks->mr; ++r) {
        EXPECT_NE(ks->ukr[r], nullptr);
        EXPECT_NE(ks->ukr_stream[r], nullptr);
      }
      EXPECT_EQ(gemm_kernel_set(isa, dt), ks);  // built once, cached
    }
  }
  EXPECT_EQ(gemm_kernel_set(Isa::Avx2, DType::Int32), nullptr);
}

TEST(GemmKernels, UnsupportedDtypeDoesNothing) {
  int32_t a = 1, b = 1, c = 7;
  GemmArgs g;
  g.dtype = DType::Int32, g.m = g.n = g.k = 1;
  g.a = &a, g.b = &b, g.c = &c,
  g.a_row_stride = g.a_col_stride = g.b_row_stride = g.b_col_stride = g.ldc = 1;
  EXPECT_FALSE(gemm(g));
  EXPECT_EQ(c, 7);
}

// ---- correctness per (ISA, dtype) ---------------------------------------------------------------

struct Variant {
  Isa isa;
  DType dtype;
};
std::string variant_name(const Variant& v) {
  return std::string(isa_name(v.isa)) + (v.dtype == DType::Float32 ? "_f32" : "_f64");
}
void PrintTo(const Variant& v, std::ostream* os) { *os << variant_name(v); }

class GemmTest : public ::testing::TestWithParam<Variant> {
protected:
  void SetUp() override {
    const Isa isa = GetParam().isa;
    set_isa_override(isa);
    ASSERT_EQ(host_isa(), isa);
  }
  void TearDown() override { set_isa_override(std::nullopt); }

  template <typename F>
  void for_dtype(F&& f) {
    if (GetParam().dtype == DType::Float32)
      f(float());
    else
      f(double());
  }
  void run(const Case& c, bool with_epilogue = false) {
    for_dtype([&](auto t) { run_case<decltype(t)>(c, with_epilogue); });
  }
};

TEST_P(GemmTest, Cubes) {
  for (int64_t s : {1, 7, 17, 64, 1023}) run({s, s, s});
}

TEST_P(GemmTest, NonSquare) {
  for (const Case& c :
       {Case{1, 1000, 1}, Case{1000, 1, 1000}, Case{3, 1023, 17}, Case{17, 3, 1023},
        Case{8, 1000, 2000}, Case{5, 40, 300}, Case{100, 33, 513}, Case{2, 2, 4096}})
    run(c);
  // Empty: nothing to do, or (k = 0) an empty sum: C = 0.
  for (const Case& c : {Case{0, 5, 3}, Case{5, 0, 3}, Case{0, 0, 0}, Case{4, 5, 0}}) run(c);
}

TEST_P(GemmTest, Layouts) {
  const Layout all[] = {Layout::RowMajor, Layout::Transposed, Layout::Strided, Layout::NegRows,
                        Layout::NegCols};
  for (Layout la : all)
    for (Layout lb : all) {
      run({37, 29, 70, la, lb});
      run({7, 53, 300, la, lb});  // few rows: the streamed path
    }
}

// Note [Matrix-vector products]: one row or one column, every layout (dot and axpy forms, strided
// and reversed vectors, the GEMM for matrices without a unit stride), rows shorter than a vector,
// outputs across the axpy form's chunks, epilogues.
TEST_P(GemmTest, MatrixVector) {
  const Layout all[] = {Layout::RowMajor, Layout::Transposed, Layout::Strided, Layout::NegRows,
                        Layout::NegCols};
  for (Layout la : all)
    for (Layout lb : all) {
      run({173, 1, 300, la, lb});
      run({1, 173, 300, la, lb});
      run({1, 1, 77, la, lb});
    }
  for (const Case& c : {Case{1000, 1, 2}, Case{1, 1000, 3}, Case{5, 1, 3}, Case{3, 1, 9}, Case{1, 9, 7},
                        Case{2100, 1, 37, Layout::Transposed}, Case{1, 2100, 37}, Case{1, 4500, 5}})
    run(c);
  for (const Case& c : {Case{300, 1, 50}, Case{1, 300, 50}, Case{2100, 1, 37, Layout::Transposed},
                        Case{1, 2100, 9}})
    run(c, /*with_epilogue=*/true);
}

// Note [Narrow products]: up to two vectors of columns (one and two vectors, whole and partial,
// float64's 4 lanes and float32's 8), row counts around the four-row step, odd and tiny k, every
// layout (B copied into padded rows when its rows are not whole vectors), epilogues.
TEST_P(GemmTest, NarrowProducts) {
  for (int64_t n : {2, 3, 4, 5, 8, 9, 15, 16})
    for (int64_t m : {2, 3, 4, 5, 37})
      for (int64_t k : {1, 2, 3, 64, 513}) run({m, n, k});
  const Layout all[] = {Layout::RowMajor, Layout::Transposed, Layout::Strided, Layout::NegRows,
                        Layout::NegCols};
  for (Layout la : all)
    for (Layout lb : all) {
      run({37, 3, 70, la, lb});
      run({9, 16, 33, la, lb});
    }
  for (const Case& c : {Case{100000, 3, 2}, Case{8, 8, 4096}, Case{301, 11, 5}})
    run(c, /*with_epilogue=*/true);
}

TEST_P(GemmTest, Epilogue) {
  for (const Case& c :
       {Case{4, 5, 0}, Case{1, 1, 1}, Case{17, 17, 17}, Case{300, 200, 700}, Case{8, 1000, 600},
        Case{31, 5000, 40, Layout::Transposed, Layout::Transposed}})
    run(c, /*with_epilogue=*/true);
}

// The thread split never changes any element's summation order: results are bitwise the same.
TEST_P(GemmTest, ThreadCountInvariant) {
  for_dtype([&](auto t) {
    using T = decltype(t);
    for (const Case& cs : {Case{200, 150, 300}, Case{8, 1000, 300}, Case{20, 300, 500}, Case{4000, 1, 300},
                           Case{1, 4000, 300}, Case{4001, 3, 2}, Case{999, 16, 70}}) {
      SCOPED_TRACE(case_name(cs));
      const int64_t m = cs.m, n = cs.n, k = cs.k;
      const std::vector<float> av = values(m * k, 5), bv = values(k * n, 6);
      const std::vector<T> a(av.begin(), av.end()), b(bv.begin(), bv.end());
      std::vector<T> c1(m * n), c2(m * n);
      GemmArgs g;
      g.dtype = std::is_same_v<T, float> ? DType::Float32 : DType::Float64;
      g.m = m, g.n = n, g.k = k, g.a = a.data(), g.a_row_stride = k, g.a_col_stride = 1;
      g.b = b.data(), g.b_row_stride = n, g.b_col_stride = 1, g.ldc = n;
      rt::set_num_threads(1);
      g.c = c1.data();
      ASSERT_TRUE(gemm(g));
      rt::set_num_threads(3);  // more threads than this machine may have: still a valid split
      g.c = c2.data();
      ASSERT_TRUE(gemm(g));
      rt::set_num_threads(0);
      EXPECT_EQ(c1, c2);
    }
  });
}

TEST(GemmLarge, Sgemm1024) { run_case<float>({1024, 1024, 1024}, /*with_epilogue=*/false); }

// Every ISA level the CPU has (GemmKernels.GenerateEveryIsa still generates the others).
std::vector<Variant> host_variants() {
  std::vector<Variant> v;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (static_cast<int>(isa) <= static_cast<int>(cpu_isa()))
      for (DType dt : {DType::Float32, DType::Float64}) v.push_back({isa, dt});
  return v;
}

INSTANTIATE_TEST_SUITE_P(, GemmTest, ::testing::ValuesIn(host_variants()),
                         [](const auto& info) { return variant_name(info.param); });

}  // namespace
}  // namespace framejit::jit::x86
