// test_gemm.cpp — device products: framejit's small-product kernel assembled by ptxas (CI) and,
// on a GPU, run in both modes over awkward shapes and layouts with an epilogue, against a float64
// reference; cuBLASLt's path against the same reference (Note [Small device products], Note
// [Device GEMMs]).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "jit/cuda/backend.h"
#include "jit/cuda/gemm_codegen.h"
#include "runtime/cuda/gemm.h"
#include "runtime/cuda/memory.h"

namespace framejit {
namespace {

using jit::GemmKernelIR;
using jit::PointwiseKernelIR;
using jit::ScalarExpr;
using jit::ScalarOp;

// relu(c + bias[j]) * scale: a linear layer's epilogue with a parameter (input 1 is C).
GemmKernelIR bias_relu(DType t) {
  GemmKernelIR g;
  g.dtype = t;
  PointwiseKernelIR& ep = g.epilogue;
  ep.input_dtypes = {t, t};
  ep.param_dtypes = {DType::Float64};
  ep.body = {{ScalarOp::Load, t, -1, -1, 0, 0},  {ScalarOp::Load, t, -1, -1, 1, 0}, {ScalarOp::Add, t, 0, 1, -1, 0},
             {ScalarOp::Const, t, -1, -1, -1, 0}, {ScalarOp::Max, t, 2, 3, -1, 0},  {ScalarOp::Param, t, -1, -1, 0, 0},
             {ScalarOp::Mul, t, 4, 5, -1, 0}};
  ep.outputs = {6};
  ep.output_dtypes = {t};
  g.c_input = 1;
  return g;
}

TEST(PtxGemm, SmallProductsAssemble) {
  const std::string tool = test::find_ptxas();
  for (DType t : {DType::Float32, DType::Float64}) {
    GemmKernelIR plain;
    plain.dtype = t;
    for (const GemmKernelIR& g : {plain, bias_relu(t)}) {
      auto ptx = jit::cuda::small_gemm_ptx(g, "k");
      ASSERT_TRUE(ptx) << ptx.error().message();
      if (tool.empty()) continue;
      std::string log;
      EXPECT_EQ(test::ptxas(tool, *ptx, "sm_90", log), 0) << log << *ptx;
    }
  }
  GemmKernelIR ints;
  ints.dtype = DType::Int32;
  EXPECT_FALSE(jit::cuda::small_gemm_supported(ints));
  if (tool.empty()) GTEST_SKIP() << "no ptxas on this machine (the kernels were generated)";
}

// A layout of a rows x cols operand inside a larger buffer: element (i, j) at i*rs + j*cs.
struct Layout {
  int64_t rs, cs, size;  // strides in elements, buffer elements
};
Layout c_order(int64_t r, int64_t c) { return {c, 1, r * c}; }
Layout f_order(int64_t r, int64_t c) { return {1, r, r * c}; }
Layout strided(int64_t r, int64_t c) { return {2 * c + 3, 2, r * (2 * c + 3)}; }

template <typename T>
void check_small_product(DType t, int64_t m, int64_t n, int64_t k, const Layout& la, const Layout& lb, bool epilogue) {
  SCOPED_TRACE("m=" + std::to_string(m) + " n=" + std::to_string(n) + " k=" + std::to_string(k) +
               " A strides " + std::to_string(la.rs) + "," + std::to_string(la.cs) + " B strides " +
               std::to_string(lb.rs) + "," + std::to_string(lb.cs) + (epilogue ? " with epilogue" : ""));
  std::mt19937 rng(static_cast<unsigned>(m * 131 + n * 7 + k));
  std::normal_distribution<double> normal;
  std::vector<T> a(static_cast<size_t>(std::max<int64_t>(la.size, 1))), b(static_cast<size_t>(std::max<int64_t>(lb.size, 1)));
  std::vector<T> bias(static_cast<size_t>(n));
  for (auto& x : a) x = static_cast<T>(normal(rng));
  for (auto& x : b) x = static_cast<T>(normal(rng));
  for (auto& x : bias) x = static_cast<T>(normal(rng));
  const double scale = 0.75;
  GemmKernelIR ir;
  ir.dtype = t;
  if (epilogue) ir = bias_relu(t);
  auto kernel = jit::cuda::backend(0).compile(ir);
  ASSERT_TRUE(kernel) << kernel.error().message();
  const size_t item = sizeof(T);
  auto da = rt::cuda::device_alloc(0, a.size() * item), db = rt::cuda::device_alloc(0, b.size() * item);
  auto dbias = rt::cuda::device_alloc(0, bias.size() * item), dc = rt::cuda::device_alloc(0, static_cast<size_t>(m * n) * item);
  ASSERT_TRUE(da && db && dbias && dc);
  ASSERT_TRUE(rt::cuda::copy_to_device(0, *da, a.data(), a.size() * item));
  ASSERT_TRUE(rt::cuda::copy_to_device(0, *db, b.data(), b.size() * item));
  ASSERT_TRUE(rt::cuda::copy_to_device(0, *dbias, bias.data(), bias.size() * item));
  rt::cuda::SmallGemmCall call;
  call.m = m, call.n = n, call.k = k;
  call.a = *da, call.a_rs = la.rs * static_cast<int64_t>(item), call.a_cs = la.cs * static_cast<int64_t>(item);
  call.b = *db, call.b_rs = lb.rs * static_cast<int64_t>(item), call.b_cs = lb.cs * static_cast<int64_t>(item);
  call.c = *dc, call.ldc = n * static_cast<int64_t>(item);
  call.itemsize = static_cast<int>(item);
  rt::ParamValue params[1];
  params[0].f = scale;
  if (epilogue) {
    call.num_operands = 2;
    call.ptr[0] = *dbias;
    call.row_stride[0] = 0;  // bias[j], broadcast down the rows
    call.col_stride[0] = static_cast<int64_t>(item);
    call.params = params;
    call.num_params = 1;
  }
  Status st = rt::cuda::run_small_gemm(**kernel, call);
  ASSERT_TRUE(st) << st.message();
  std::vector<T> c(static_cast<size_t>(m * n));
  ASSERT_TRUE(rt::cuda::copy_to_host(0, c.data(), *dc, c.size() * item));
  for (void* p : {*da, *db, *dbias, *dc}) rt::cuda::device_free(p);
  int bad = 0;
  for (int64_t i = 0; i < m && bad < 5; ++i)
    for (int64_t j = 0; j < n && bad < 5; ++j) {
      double want = 0, mag = 0;
      for (int64_t q = 0; q < k; ++q) {
        const double x = static_cast<double>(a[static_cast<size_t>(i * la.rs + q * la.cs)]) *
                         static_cast<double>(b[static_cast<size_t>(q * lb.rs + j * lb.cs)]);
        want += x;
        mag += std::fabs(x);
      }
      if (epilogue) want = std::max(want + static_cast<double>(bias[static_cast<size_t>(j)]), 0.0) * scale;
      const double got = static_cast<double>(c[static_cast<size_t>(i * n + j)]);
      const double tol = (t == DType::Float32 ? 2e-6 : 1e-14) * (mag + 1) * 4;
      if (!(std::fabs(got - want) <= tol)) {
        ADD_FAILURE() << "C[" << i << "][" << j << "] = " << got << ", want " << want;
        ++bad;
      }
    }
}

TEST(GpuGemm, SmallProductsInBothModesAndEveryLayout) {
  REQUIRE_GPU();
  const int64_t shapes[][3] = {{1, 1, 1}, {1, 300, 77}, {5, 33, 1}, {8, 1024, 256}, {13, 17, 1000}, {32, 70, 9}, {3, 5, 0}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], n = s[1], k = s[2];
    for (int la = 0; la < 3; ++la)
      for (int lb = 0; lb < 3; ++lb) {
        auto layout = [](int which, int64_t r, int64_t c) { return which == 0 ? c_order(r, c) : which == 1 ? f_order(r, c) : strided(r, c); };
        check_small_product<float>(DType::Float32, m, n, k, layout(la, m, k), layout(lb, k, n), (la + lb) % 2 == 0);
      }
    check_small_product<double>(DType::Float64, m, n, k, c_order(m, k), f_order(k, n), true);
    check_small_product<double>(DType::Float64, m, n, k, f_order(m, k), c_order(k, n), false);
  }
}

TEST(GpuGemm, CublasLtProductsMatchTheReference) {
  REQUIRE_GPU();
  if (!rt::cuda::gemm_library()) GTEST_SKIP() << rt::cuda::gemm_library().message();
  const int64_t m = 96, n = 80, k = 130;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(k * n)), c(static_cast<size_t>(m * n));
  for (auto& x : a) x = normal(rng);
  for (auto& x : b) x = normal(rng);
  auto da = rt::cuda::device_alloc(0, a.size() * 4), db = rt::cuda::device_alloc(0, b.size() * 4);
  auto dc = rt::cuda::device_alloc(0, c.size() * 4);
  ASSERT_TRUE(da && db && dc);
  ASSERT_TRUE(rt::cuda::copy_to_device(0, *da, a.data(), a.size() * 4));
  ASSERT_TRUE(rt::cuda::copy_to_device(0, *db, b.data(), b.size() * 4));
  // A in C order, B read transposed (Fortran order: unit row stride).
  rt::cuda::DeviceGemmCall g;
  g.m = m, g.n = n, g.k = k;
  g.a = {*da, k, 1, 0};
  g.b = {*db, 1, k, 0};
  g.c = *dc;
  g.ldc = n;
  Status st = rt::cuda::run_gemm(g);
  ASSERT_TRUE(st) << st.message();
  ASSERT_TRUE(rt::cuda::copy_to_host(0, c.data(), *dc, c.size() * 4));
  for (void* p : {*da, *db, *dc}) rt::cuda::device_free(p);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double want = 0, mag = 0;
      for (int64_t q = 0; q < k; ++q) {
        const double x = double{a[static_cast<size_t>(i * k + q)]} * b[static_cast<size_t>(q + j * k)];
        want += x;
        mag += std::fabs(x);
      }
      ASSERT_NEAR(c[static_cast<size_t>(i * n + j)], want, 1e-5 * (mag + 1)) << i << "," << j;
    }
}

}  // namespace
}  // namespace framejit
