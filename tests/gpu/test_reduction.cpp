// test_reduction.cpp — PTX reductions: every op and dtype assembled by ptxas (CI), and on a GPU
// run over rows, columns, whole arrays and strided views, split or not, against the x86
// backend's reductions of the same data.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "jit/cuda/backend.h"
#include "jit/cuda/reduction_codegen.h"
#include "jit/cuda/row_chain_codegen.h"
#include "jit/x86/backend.h"
#include "runtime/cuda/memory.h"
#include "runtime/cuda/reduction.h"
#include "runtime/executor.h"
#include "tests/gpu/gpu_test_util.h"

namespace framejit::jit {
namespace {

using rt::DType;

// reduce(cast?(x)): the prologue loads its input and converts it to `acc` when that differs.
ReductionKernelIR reduction(ReduceOp op, DType in, DType acc, bool mean = false, bool sqrt = false) {
  ReductionKernelIR r;
  r.op = op;
  r.mean = mean;
  r.sqrt = sqrt;
  r.prologue.input_dtypes = {in};
  r.prologue.body = {{ScalarOp::Load, in, -1, -1, 0, 0}};
  if (acc != in) r.prologue.body.push_back({ScalarOp::Cast, acc, 0, -1, -1, 0});
  r.prologue.outputs = {static_cast<int>(r.prologue.body.size()) - 1};
  r.prologue.output_dtypes = {acc};
  return r;
}

// sum((x - p0)^2): a prologue with a parameter, as var's second pass has.
ReductionKernelIR squared_deviation(DType t, bool mean, bool sqrt, bool store) {
  ReductionKernelIR r;
  r.op = ReduceOp::Sum;
  r.mean = mean;
  r.sqrt = sqrt;
  r.store_value = store;
  r.prologue.input_dtypes = {t};
  r.prologue.param_dtypes = {DType::Float64};
  r.prologue.body = {{ScalarOp::Load, t, -1, -1, 0, 0},
                     {ScalarOp::Param, t, -1, -1, 0, 0},
                     {ScalarOp::Sub, t, 0, 1, -1, 0},
                     {ScalarOp::Square, t, 2, -1, -1, 0}};
  r.prologue.outputs = {3};
  r.prologue.output_dtypes = {t};
  return r;
}

struct Case {
  std::string name;
  ReductionKernelIR ir;
};

std::vector<Case> catalog() {
  std::vector<Case> out;
  auto dn = [](DType t) { return std::string(rt::dtype_short_name(t)); };
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin}) {
    for (DType t : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8, DType::Bool}) {
      DType acc = t;
      if ((op == ReduceOp::Sum || op == ReduceOp::Prod) && t != DType::Float32 && t != DType::Float64)
        acc = t == DType::UInt8 || t == DType::Bool ? DType::UInt64 : DType::Int64;
      out.push_back({std::string(reduce_op_name(op)) + "_" + dn(t), reduction(op, t, acc)});
    }
  }
  for (DType t : {DType::Float32, DType::Float64}) {
    out.push_back({"mean_" + dn(t), reduction(ReduceOp::Sum, t, t, true)});
    out.push_back({"var_" + dn(t), squared_deviation(t, true, false, false)});
    out.push_back({"std_" + dn(t), squared_deviation(t, true, true, false)});
    out.push_back({"stored_" + dn(t), squared_deviation(t, false, false, true)});
  }
  out.push_back({"mean_i32_as_f64", reduction(ReduceOp::Sum, DType::Int32, DType::Float64, true)});
  // any / all: bool max / min of the truth values (jit/lower), from every kind of input.
  for (DType t : {DType::Float32, DType::Float64, DType::Int32, DType::UInt8}) {
    out.push_back({"any_" + dn(t), reduction(ReduceOp::Max, t, DType::Bool)});
    out.push_back({"all_" + dn(t), reduction(ReduceOp::Min, t, DType::Bool)});
  }
  // Note [Half types]: a half input widened to float32 by the prologue.
  for (DType h : {DType::Float16, DType::BFloat16}) {
    out.push_back({"sum_" + dn(h) + "_as_f32", reduction(ReduceOp::Sum, h, DType::Float32)});
    out.push_back({"mean_" + dn(h) + "_as_f32", reduction(ReduceOp::Sum, h, DType::Float32, true)});
    out.push_back({"max_" + dn(h) + "_as_f32", reduction(ReduceOp::Max, h, DType::Float32)});
    out.push_back({"argmin_" + dn(h) + "_as_f32", reduction(ReduceOp::ArgMin, h, DType::Float32)});
  }
  return out;
}

TEST(PtxReduction, EveryOpAndDtypeAssembles) {
  const std::string tool = test::find_ptxas();
  const std::vector<Case> cases = catalog();
  for (const Case& c : cases) {
    ASSERT_TRUE(cuda::reduction_supported(c.ir)) << c.name;
    auto ptx = cuda::reduction_ptx(c.ir, "k_" + c.name);
    ASSERT_TRUE(ptx) << c.name << ": " << ptx.error().message();
    EXPECT_NE(ptx->find("k_" + c.name + "_combine"), std::string::npos);
    if (tool.empty()) continue;
    std::string log;
    EXPECT_EQ(test::ptxas(tool, *ptx, "sm_90", log), 0) << c.name << "\n" << log;
  }
  if (tool.empty()) GTEST_SKIP() << "no ptxas on this machine (the kernels were generated)";
}

TEST(PtxReduction, DeclinesWhatTheLibraryDoesNotDo) {
  EXPECT_FALSE(cuda::reduction_supported(reduction(ReduceOp::ArgMax, DType::Float32, DType::Float32, true)));
  EXPECT_FALSE(cuda::reduction_supported(reduction(ReduceOp::Sum, DType::Int32, DType::Int32, true)));
  EXPECT_FALSE(cuda::reduction_supported(reduction(ReduceOp::Sum, DType::Bool, DType::Bool)));
  EXPECT_FALSE(cuda::reduction_supported(reduction(ReduceOp::Max, DType::Int32, DType::UInt64)));
}

// ---- on a GPU: the x86 backend's results -----------------------------------------------------

template <typename T>
std::vector<unsigned char> bytes_of(const std::vector<T>& v) {
  std::vector<unsigned char> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

struct Layout {
  std::string name;
  std::vector<int64_t> shape;    // the iteration space
  std::vector<int64_t> strides;  // the input's, in elements (0: broadcast)
  std::vector<bool> reduced;
};

// Runs `r` over `in` (an array of `elems` elements) with layout `l` on the CPU (x86 kernels) and on
// the GPU; returns false when a launch failed (with the reason in `why`).
bool run_both(const ReductionKernelIR& r, const std::vector<unsigned char>& in, const Layout& l, std::vector<unsigned char>& cpu,
              std::vector<unsigned char>& gpu, std::string& why) {
  const DType in_t = r.prologue.input_dtypes[0];
  const DType out_t = r.result_dtype();
  const int in_size = rt::dtype_itemsize(in_t), out_size = rt::dtype_itemsize(out_t);
  const int rank = static_cast<int>(l.shape.size());
  int64_t outputs = 1;
  for (int d = 0; d < rank; ++d)
    if (!l.reduced[d]) outputs *= l.shape[d];
  std::vector<int64_t> in_strides(rank), out_strides(rank);
  int64_t s = out_size;
  for (int d = rank - 1; d >= 0; --d) {
    in_strides[d] = l.strides[d] * in_size;
    out_strides[d] = l.reduced[d] ? 0 : s;
    if (!l.reduced[d]) s *= l.shape[d];
  }
  bool reduced[rt::kMaxRank];
  for (int d = 0; d < rank; ++d) reduced[d] = l.reduced[d];
  const rt::ParamValue params[1] = {{0.25}};

  auto cpu_k = x86::backend().compile(r);
  if (!cpu_k) {
    why = cpu_k.error().message();
    return false;
  }
  cpu.assign(outputs * out_size, 0);
  rt::Operand op{const_cast<char*>(reinterpret_cast<const char*>(in.data())), in_strides.data(), in_size};
  rt::ReductionLaunch L;
  L.row = cpu_k->row.get();
  L.column = cpu_k->column.get();
  L.arg = is_arg_reduce(r.op);
  L.arg_max = r.op == ReduceOp::ArgMax;
  // How split rows' partial results join (Note [Split column rows]), as rt::Program sets them.
  L.extreme = r.op == ReduceOp::Max ? 1 : r.op == ReduceOp::Min ? -1 : 0;
  L.product = r.op == ReduceOp::Prod;
  L.value_dtype = r.dtype();
  L.rank = rank;
  L.shape = l.shape.data();
  L.reduced = reduced;
  L.num_inputs = 1;
  L.inputs = &op;
  L.out = reinterpret_cast<char*>(cpu.data());
  L.out_strides = out_strides.data();
  L.params = params;
  L.num_params = static_cast<int>(r.prologue.param_dtypes.size());
  rt::run_reduction(L);

  auto gpu_k = cuda::backend(0).compile(r);
  if (!gpu_k) {
    why = gpu_k.error().message();
    return false;
  }
  auto d_in = rt::cuda::device_alloc(0, in.size());
  auto d_out = rt::cuda::device_alloc(0, outputs * out_size);
  if (!d_in || !d_out || !rt::cuda::copy_to_device(0, *d_in, in.data(), in.size())) {
    why = "device memory";
    return false;
  }
  rt::Operand dop{static_cast<char*>(*d_in), in_strides.data(), in_size};
  L.row = gpu_k->row.get();
  L.column = gpu_k->column.get();
  L.inputs = &dop;
  L.out = static_cast<char*>(*d_out);
  Status st = rt::cuda::run_reduction(L);
  gpu.assign(outputs * out_size, 0);
  if (st) st = rt::cuda::copy_to_host(0, gpu.data(), *d_out, gpu.size());
  rt::cuda::device_free(*d_in);
  rt::cuda::device_free(*d_out);
  if (!st) why = st.message();
  return static_cast<bool>(st);
}

// Same bits where the order of combination cannot matter (integers, max/min, arg; any NaN for a
// NaN); float sums and products within 2e-4 (float32) / 1e-10 (float64) of the x86 result,
// relative or absolute.
void expect_close(DType t, ReduceOp op, const std::vector<unsigned char>& a, const std::vector<unsigned char>& b,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  const bool exact = t != DType::Float32 && t != DType::Float64 ? true : op != ReduceOp::Sum && op != ReduceOp::Prod;
  if (exact && t != DType::Float32 && t != DType::Float64) {
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size())) << what;
    return;
  }
  const bool f32 = t == DType::Float32;
  const size_t n = a.size() / (f32 ? 4 : 8);
  int bad = 0;
  for (size_t i = 0; i < n && bad < 5; ++i) {
    double x, y;
    if (f32) {
      float fx, fy;
      std::memcpy(&fx, a.data() + 4 * i, 4);
      std::memcpy(&fy, b.data() + 4 * i, 4);
      x = fx, y = fy;
    } else {
      std::memcpy(&x, a.data() + 8 * i, 8);
      std::memcpy(&y, b.data() + 8 * i, 8);
    }
    if (std::isnan(x) && std::isnan(y)) continue;  // a NaN's payload may differ (a float16's, widened)
    if (exact) {
      if (std::memcmp(&x, &y, sizeof x) != 0) {
        ADD_FAILURE() << what << ": output " << i << " x86 " << x << " gpu " << y;
        ++bad;
      }
      continue;
    }
    // Both orders round differently (x86's column kernel adds 200000 rows one by one).
    const double tol = (f32 ? 2e-4 : 1e-10) * std::max(1.0, std::fabs(x));
    if (!(std::fabs(x - y) <= tol) && x != y) {
      ADD_FAILURE() << what << ": output " << i << " x86 " << x << " gpu " << y;
      ++bad;
    }
  }
}

TEST(PtxReduction, MatchesTheX86Reductions) {
  REQUIRE_GPU();
  std::mt19937 rng(7);
  // Rows (short, warp, block, split), columns, the whole array, a middle axis, a transposed and a
  // strided view, a broadcast input.
  const std::vector<Layout> layouts = {
      {"rows_7", {300, 7}, {7, 1}, {false, true}},
      {"rows_100", {130, 100}, {100, 1}, {false, true}},
      {"rows_5000", {40, 5000}, {5000, 1}, {false, true}},
      {"one_row_1M", {1, 1 << 20}, {1 << 20, 1}, {false, true}},
      {"all_1M", {1024, 1024}, {1024, 1}, {true, true}},
      {"cols", {2000, 300}, {300, 1}, {true, false}},
      {"few_cols_long", {200000, 3}, {3, 1}, {true, false}},
      {"middle", {6, 500, 40}, {20000, 40, 1}, {false, true, false}},
      {"transposed", {300, 400}, {1, 300}, {false, true}},
      {"strided", {64, 333}, {1000, 3}, {false, true}},
      {"broadcast", {50, 70}, {0, 1}, {false, true}},
  };
  for (const Case& c : catalog()) {
    if (c.ir.store_value) continue;  // the stored values' operand: tests/python/test_gpu_tensor.py
    const DType in_t = c.ir.prologue.input_dtypes[0];
    for (const Layout& l : layouts) {
      int64_t span = 1;
      for (size_t d = 0; d < l.shape.size(); ++d) span += (l.shape[d] - 1) * l.strides[d];
      std::vector<unsigned char> in(span * rt::dtype_itemsize(in_t));
      std::uniform_int_distribution<int> byte(0, 255);
      if (in_t == DType::Float32) {
        std::vector<float> v(span);
        std::normal_distribution<float> nd(0.f, 1.f);
        for (auto& x : v) x = nd(rng);
        if (span > 40) v[span / 3] = NAN, v[span / 2] = INFINITY;
        // Products of many values over/underflow either way; keep them near 1.
        if (c.ir.op == ReduceOp::Prod)
          for (auto& x : v) x = 1.f + x / 1024;
        in = bytes_of(v);
      } else if (in_t == DType::Float64) {
        std::vector<double> v(span);
        std::normal_distribution<double> nd(0., 1.);
        for (auto& x : v) x = nd(rng);
        if (span > 40) v[span / 3] = NAN;
        if (c.ir.op == ReduceOp::Prod)
          for (auto& x : v) x = 1. + x / 1024;
        in = bytes_of(v);
      } else if (rt::dtype_is_half(in_t)) {  // normal values, and a NaN
        std::vector<uint16_t> v(span);
        std::normal_distribution<double> nd(0., 1.);
        for (auto& x : v) x = in_t == DType::Float16 ? rt::double_to_half(nd(rng)) : rt::double_to_bfloat16(nd(rng));
        if (span > 40) v[span / 3] = 0x7e00;
        if (c.ir.op == ReduceOp::Prod)
          for (auto& x : v) x = in_t == DType::Float16 ? 0x3c00 : 0x3f80;
        in = bytes_of(v);
      } else {
        for (auto& x : in) x = static_cast<unsigned char>(byte(rng));
        if (in_t == DType::Bool)
          for (auto& x : in) x &= 1;
      }
      std::vector<unsigned char> cpu, gpu;
      std::string why;
      ASSERT_TRUE(run_both(c.ir, in, l, cpu, gpu, why)) << c.name << " " << l.name << ": " << why;
      expect_close(c.ir.result_dtype(), c.ir.op, cpu, gpu, c.name + " " + l.name);
    }
  }
}

}  // namespace
}  // namespace framejit::jit

namespace framejit::jit {
namespace {

// Softmax as the scheduler chains it: max(x); sum(exp(x - m)); exp(x - m) / s, with m and s
// forwarded from their reductions.
RowChainIR softmax_chain(DType t) {
  RowChainIR c;
  RowChainIR::Part max;
  max.reduction = true;
  max.red = reduction(ReduceOp::Max, t, t);
  max.forwarded = {-1};
  max.cached = {0};
  RowChainIR::Part sum;
  sum.reduction = true;
  sum.red.op = ReduceOp::Sum;
  sum.red.prologue.input_dtypes = {t, t};
  sum.red.prologue.body = {{ScalarOp::Load, t, -1, -1, 0, 0}, {ScalarOp::Load, t, -1, -1, 1, 0},
                           {ScalarOp::Sub, t, 0, 1, -1, 0},   {ScalarOp::Exp, t, 2, -1, -1, 0}};
  sum.red.prologue.outputs = {3};
  sum.red.prologue.output_dtypes = {t};
  sum.forwarded = {-1, 0};
  sum.cached = {0, -1};
  RowChainIR::Part div;
  div.kernel.input_dtypes = {t, t, t};
  div.kernel.body = {{ScalarOp::Load, t, -1, -1, 0, 0}, {ScalarOp::Load, t, -1, -1, 1, 0},
                     {ScalarOp::Load, t, -1, -1, 2, 0}, {ScalarOp::Sub, t, 0, 1, -1, 0},
                     {ScalarOp::Exp, t, 3, -1, -1, 0},  {ScalarOp::Div, t, 4, 2, -1, 0}};
  div.kernel.outputs = {5};
  div.kernel.output_dtypes = {t};
  div.forwarded = {-1, 0, 1};
  div.cached = {0, -1, -1};
  c.parts = {max, sum, div};
  c.caches = 1;
  return c;
}

// Softmax of a half-type row in float32 (Note [Composites in float32]): each part widens the
// cached half row, the result is rounded back.
RowChainIR half_softmax_chain(DType h) {
  const DType f = DType::Float32;
  RowChainIR c = softmax_chain(f);
  c.parts[0].red = reduction(ReduceOp::Max, h, f);
  ReductionKernelIR& sum = c.parts[1].red;
  sum.prologue.input_dtypes = {h, f};
  sum.prologue.body = {{ScalarOp::Load, h, -1, -1, 0, 0}, {ScalarOp::Load, f, -1, -1, 1, 0},
                       {ScalarOp::Cast, f, 0, -1, -1, 0}, {ScalarOp::Sub, f, 2, 1, -1, 0},
                       {ScalarOp::Exp, f, 3, -1, -1, 0}};
  sum.prologue.outputs = {4};
  PointwiseKernelIR& div = c.parts[2].kernel;
  div.input_dtypes = {h, f, f};
  div.body = {{ScalarOp::Load, h, -1, -1, 0, 0}, {ScalarOp::Load, f, -1, -1, 1, 0},
              {ScalarOp::Load, f, -1, -1, 2, 0}, {ScalarOp::Cast, f, 0, -1, -1, 0},
              {ScalarOp::Sub, f, 3, 1, -1, 0},   {ScalarOp::Exp, f, 4, -1, -1, 0},
              {ScalarOp::Div, f, 5, 2, -1, 0},   {ScalarOp::Cast, h, 6, -1, -1, 0}};
  div.outputs = {7};
  div.output_dtypes = {h};
  return c;
}

TEST(PtxRowChain, SoftmaxAndMeansAssemble) {
  const std::string tool = test::find_ptxas();
  RowChainIR mean_var;  // mean(x); mean((x - m)^2) with m forwarded; (x - m) * p0
  {
    RowChainIR::Part m;
    m.reduction = true;
    m.red = reduction(ReduceOp::Sum, DType::Float64, DType::Float64, true);
    m.forwarded = {-1};
    m.cached = {0};
    RowChainIR::Part v;
    v.reduction = true;
    v.red = squared_deviation(DType::Float64, true, true, false);
    v.red.prologue.body[1] = {ScalarOp::Load, DType::Float64, -1, -1, 1, 0};
    v.red.prologue.input_dtypes = {DType::Float64, DType::Float64};
    v.red.prologue.param_dtypes = {};
    v.forwarded = {-1, 0};
    v.cached = {0, -1};
    mean_var.parts = {m, v};
    mean_var.caches = 1;
  }
  // Layer norm's shape: 1 / sqrt(var + eps) as a row constant (a kernel over forwarded values
  // only), forwarded in turn to (x - m) * r.
  RowChainIR norm = mean_var;
  {
    const DType t = DType::Float64;
    RowChainIR::Part r;
    r.kernel.input_dtypes = {t};
    r.kernel.body = {{ScalarOp::Load, t, -1, -1, 0, 0}, {ScalarOp::Const, t, -1, -1, -1, 1e-5},
                     {ScalarOp::Add, t, 0, 1, -1, 0},   {ScalarOp::Sqrt, t, 2, -1, -1, 0},
                     {ScalarOp::Reciprocal, t, 3, -1, -1, 0}};
    r.kernel.outputs = {4};
    r.kernel.output_dtypes = {t};
    r.forwarded = {1};
    r.cached = {-1};
    RowChainIR::Part out;
    out.kernel.input_dtypes = {t, t, t};
    out.kernel.body = {{ScalarOp::Load, t, -1, -1, 0, 0}, {ScalarOp::Load, t, -1, -1, 1, 0},
                       {ScalarOp::Load, t, -1, -1, 2, 0}, {ScalarOp::Sub, t, 0, 1, -1, 0},
                       {ScalarOp::Mul, t, 3, 2, -1, 0}};
    out.kernel.outputs = {4};
    out.kernel.output_dtypes = {t};
    out.forwarded = {-1, 0, 2};
    out.cached = {0, -1, -1};
    norm.parts.push_back(r);
    norm.parts.push_back(out);
  }
  // With a weight row read from memory in the last kernel (Note [Two chunks in flight]).
  RowChainIR affine = norm;
  {
    const DType t = DType::Float64;
    PointwiseKernelIR& k = affine.parts.back().kernel;
    k.input_dtypes.push_back(t);
    k.body.push_back({ScalarOp::Load, t, -1, -1, 3, 0});
    k.body.push_back({ScalarOp::Mul, t, 4, 5, -1, 0});
    k.outputs = {6};
    affine.parts.back().forwarded.push_back(-1);
    affine.parts.back().cached.push_back(-1);
  }
  for (const RowChainIR& c : {softmax_chain(DType::Float32), softmax_chain(DType::Float64), mean_var, norm,
                              half_softmax_chain(DType::BFloat16), half_softmax_chain(DType::Float16), affine}) {
    ASSERT_TRUE(cuda::row_chain_supported(c)) << c.to_string();
    auto ptx = cuda::row_chain_ptx(c, "chain");
    ASSERT_TRUE(ptx) << ptx.error().message();
    // FRAMEJIT_TEST_PTX: keep the modules as <it>.chain<n> (for ptxas -v and line numbers).
    static int modules = 0;
    if (const char* keep = std::getenv("FRAMEJIT_TEST_PTX"))
      std::ofstream(std::string(keep) + ".chain" + std::to_string(modules++)) << *ptx;
    if (tool.empty()) continue;
    std::string log;
    EXPECT_EQ(test::ptxas(tool, *ptx, "sm_90", log), 0) << log;
  }
  // A forwarded input must come from an earlier reduction; a cache must be declared.
  RowChainIR bad = softmax_chain(DType::Float32);
  bad.parts[1].forwarded = {-1, 2};
  EXPECT_FALSE(cuda::row_chain_supported(bad));
  bad = softmax_chain(DType::Float32);
  bad.caches = 0;
  EXPECT_FALSE(cuda::row_chain_supported(bad));
  bad = norm;  // a kernel reading memory is not a row constant: nothing may be forwarded from it
  bad.parts[2].forwarded = {-1};
  EXPECT_FALSE(cuda::row_chain_supported(bad));
  if (tool.empty()) GTEST_SKIP() << "no ptxas on this machine (the kernels were generated)";
}

}  // namespace
}  // namespace framejit::jit
