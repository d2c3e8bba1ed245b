// test_pointwise.cpp — PTX pointwise kernels: every op and dtype assembled by ptxas (CI), and on
// a GPU run over contiguous, broadcast, strided and misaligned operands and compared bit for bit
// with the x86 backend's kernels on the same inputs (the two share their math routines) — except
// float32 exp and what is built on it, which the GPU computes through its ex2 unit (Note [exp
// through the GPU's ex2]): those within a stated distance, and tests/gpu/test_math.cpp bounds them.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "jit/cuda/backend.h"
#include "jit/cuda/pointwise_codegen.h"
#include "jit/x86/backend.h"
#include "runtime/cuda/launch.h"
#include "runtime/cuda/memory.h"
#include "runtime/executor.h"
#include "tests/gpu/gpu_test_util.h"

namespace framejit::jit {
namespace {

using rt::DType;

constexpr DType kAll[] = {DType::Bool, DType::UInt8, DType::Int32, DType::Int64, DType::Float32, DType::Float64};
constexpr DType kFloats[] = {DType::Float32, DType::Float64};
constexpr DType kInts[] = {DType::UInt8, DType::Int32, DType::Int64};

struct Case {
  std::string name;
  PointwiseKernelIR ir;
  /// float32 outputs may differ from x86's by this many ulp (one function on both sides within its
  /// bound of the exact value), or, for chains, by rel_tol relative to max(1, |x86's|).
  int ulps = 0;
  double rel_tol = 0;
};

PointwiseKernelIR unary(ScalarOp op, DType in, DType out) {
  PointwiseKernelIR ir;
  ir.input_dtypes = {in};
  ir.body = {{ScalarOp::Load, in, -1, -1, 0, 0}, {op, out, 0, -1, -1, 0}};
  ir.outputs = {1};
  ir.output_dtypes = {out};
  return ir;
}

PointwiseKernelIR binary(ScalarOp op, DType in, DType out) {
  PointwiseKernelIR ir;
  ir.input_dtypes = {in, in};
  ir.body = {{ScalarOp::Load, in, -1, -1, 0, 0}, {ScalarOp::Load, in, -1, -1, 1, 0}, {op, out, 0, 1, -1, 0}};
  ir.outputs = {2};
  ir.output_dtypes = {out};
  return ir;
}

std::vector<Case> catalog() {
  std::vector<Case> out;
  auto add = [&](std::string name, PointwiseKernelIR ir) { out.push_back({std::move(name), std::move(ir)}); };
  // Note [exp through the GPU's ex2]: 2 ulp each side of the exact value (pow: 4 on x86).
  auto add_near = [&](std::string name, PointwiseKernelIR ir, int ulps, double rel_tol) {
    out.push_back({std::move(name), std::move(ir), ulps, rel_tol});
  };
  auto via_ex2 = [](ScalarOp op, DType t) {
    return t == DType::Float32 &&
           (op == ScalarOp::Exp || op == ScalarOp::Erf || op == ScalarOp::Pow);
  };
  auto dn = [](DType t) { return std::string(rt::dtype_short_name(t)); };
  const ScalarOp compares[] = {ScalarOp::Eq, ScalarOp::Ne, ScalarOp::Lt, ScalarOp::Le, ScalarOp::Gt, ScalarOp::Ge};
  // A device product's pack kernels (rt::GemmStep::pack).
  for (DType t : {DType::Float32, DType::Float64}) add("copy_" + dn(t), copy_kernel(t));
  for (DType t : kFloats) {
    for (ScalarOp op : {ScalarOp::Neg, ScalarOp::Abs, ScalarOp::Sqrt, ScalarOp::Square, ScalarOp::Reciprocal,
                        ScalarOp::Exp, ScalarOp::Log, ScalarOp::Log1p, ScalarOp::Expm1, ScalarOp::Tanh,
                        ScalarOp::Sigmoid, ScalarOp::Atan, ScalarOp::Erf, ScalarOp::Floor, ScalarOp::Ceil})
      add_near(std::string(scalar_op_name(op)) + "_" + dn(t), unary(op, t, t), via_ex2(op, t) ? 4 : 0, 0);
    // Note [Payne–Hanek in PTX]: a huge argument's r may round apart from x86's in rare ties, and
    // float64's r_lo is the more accurate one.
    for (ScalarOp op : {ScalarOp::Sin, ScalarOp::Cos, ScalarOp::Tan})
      add_near(std::string(scalar_op_name(op)) + "_" + dn(t), unary(op, t, t), op == ScalarOp::Tan ? 2 : 1, 0);
    for (ScalarOp op : {ScalarOp::Add, ScalarOp::Sub, ScalarOp::Mul, ScalarOp::Div, ScalarOp::Max, ScalarOp::Min,
                        ScalarOp::Pow, ScalarOp::Atan2})
      add_near(std::string(scalar_op_name(op)) + "_" + dn(t), binary(op, t, t), via_ex2(op, t) ? 6 : 0, 0);
  }
  for (DType t : kInts) {
    for (ScalarOp op : {ScalarOp::Neg, ScalarOp::Abs, ScalarOp::Square, ScalarOp::Not})
      add(std::string(scalar_op_name(op)) + "_" + dn(t), unary(op, t, t));
    for (ScalarOp op : {ScalarOp::Add, ScalarOp::Sub, ScalarOp::Mul, ScalarOp::Max, ScalarOp::Min, ScalarOp::And,
                        ScalarOp::Or, ScalarOp::Xor, ScalarOp::FloorDiv, ScalarOp::Mod})
      add(std::string(scalar_op_name(op)) + "_" + dn(t), binary(op, t, t));
  }
  for (ScalarOp op : {ScalarOp::And, ScalarOp::Or, ScalarOp::Xor})
    add(std::string(scalar_op_name(op)) + "_b", binary(op, DType::Bool, DType::Bool));
  add("not_b", unary(ScalarOp::Not, DType::Bool, DType::Bool));
  for (DType t : kAll)
    for (ScalarOp op : compares) add(std::string(scalar_op_name(op)) + "_" + dn(t), binary(op, t, DType::Bool));
  for (DType from : kAll)
    for (DType to : kAll)
      if (from != to) add("cast_" + dn(from) + "_" + dn(to), unary(ScalarOp::Cast, from, to));
  for (DType t : kAll) {
    PointwiseKernelIR ir;
    ir.input_dtypes = {DType::Bool, t, t};
    ir.body = {{ScalarOp::Load, DType::Bool, -1, -1, 0, 0},
               {ScalarOp::Load, t, -1, -1, 1, 0},
               {ScalarOp::Load, t, -1, -1, 2, 0},
               {ScalarOp::Where, t, 1, 2, -1, 0, 0}};
    ir.outputs = {3};
    ir.output_dtypes = {t};
    add("where_" + dn(t), ir);
  }
  // Parameters and constants, and two outputs: x * p0 + 2.5 and x - p1 (an integer parameter).
  for (DType t : {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8}) {
    PointwiseKernelIR ir;
    ir.input_dtypes = {t};
    ir.param_dtypes = {t == DType::Float32 || t == DType::Float64 ? DType::Float64 : DType::Int64, DType::Int64};
    ir.body = {{ScalarOp::Load, t, -1, -1, 0, 0},      {ScalarOp::Param, t, -1, -1, 0, 0},
               {ScalarOp::Mul, t, 0, 1, -1, 0},        {ScalarOp::Const, t, -1, -1, -1, 2.5},
               {ScalarOp::Add, t, 2, 3, -1, 0},        {ScalarOp::Param, t, -1, -1, 1, 0},
               {ScalarOp::Sub, t, 0, 5, -1, 0}};
    ir.outputs = {4, 6};
    ir.output_dtypes = {t, t};
    add("params_" + dn(t), ir);
  }
  // A chain like the GELU benchmark's: gelu(x * a + b) * sigmoid(x), erf form.
  {
    const DType t = DType::Float32;
    PointwiseKernelIR ir;
    ir.input_dtypes = {t, t, t};
    ir.body = {{ScalarOp::Load, t, -1, -1, 0, 0},    {ScalarOp::Load, t, -1, -1, 1, 0},
               {ScalarOp::Load, t, -1, -1, 2, 0},    {ScalarOp::Mul, t, 0, 1, -1, 0},
               {ScalarOp::Add, t, 3, 2, -1, 0},      {ScalarOp::Const, t, -1, -1, -1, M_SQRT1_2},
               {ScalarOp::Mul, t, 4, 5, -1, 0},      {ScalarOp::Erf, t, 6, -1, -1, 0},
               {ScalarOp::Const, t, -1, -1, -1, 1},  {ScalarOp::Add, t, 7, 8, -1, 0},
               {ScalarOp::Mul, t, 4, 9, -1, 0},      {ScalarOp::Const, t, -1, -1, -1, 0.5},
               {ScalarOp::Mul, t, 10, 11, -1, 0},    {ScalarOp::Sigmoid, t, 0, -1, -1, 0},
               {ScalarOp::Mul, t, 12, 13, -1, 0}};
    ir.outputs = {14};
    ir.output_dtypes = {t};
    add_near("gelu_chain_f32", ir, 0, 1e-6);
  }
  // The GPU benchmark's form: 0.5 y (1 + tanh(0.79788 (y + 0.044715 y^3))) / (1 + exp(-x)), y = x a + b.
  {
    const DType t = DType::Float32;
    PointwiseKernelIR ir;
    ir.input_dtypes = {t};
    ir.param_dtypes = {DType::Float64, DType::Float64};
    ir.body = {{ScalarOp::Load, t, -1, -1, 0, 0},      {ScalarOp::Param, t, -1, -1, 0, 0},
               {ScalarOp::Param, t, -1, -1, 1, 0},     {ScalarOp::Mul, t, 0, 1, -1, 0},
               {ScalarOp::Add, t, 3, 2, -1, 0},        {ScalarOp::Mul, t, 4, 4, -1, 0},
               {ScalarOp::Mul, t, 5, 4, -1, 0},        {ScalarOp::Const, t, -1, -1, -1, 0.044715},
               {ScalarOp::Mul, t, 7, 6, -1, 0},        {ScalarOp::Add, t, 4, 8, -1, 0},
               {ScalarOp::Const, t, -1, -1, -1, 0.7978845608028654}, {ScalarOp::Mul, t, 10, 9, -1, 0},
               {ScalarOp::Tanh, t, 11, -1, -1, 0},     {ScalarOp::Const, t, -1, -1, -1, 1},
               {ScalarOp::Add, t, 13, 12, -1, 0},      {ScalarOp::Const, t, -1, -1, -1, 0.5},
               {ScalarOp::Mul, t, 15, 4, -1, 0},       {ScalarOp::Mul, t, 16, 14, -1, 0},
               {ScalarOp::Neg, t, 0, -1, -1, 0},       {ScalarOp::Exp, t, 18, -1, -1, 0},
               {ScalarOp::Add, t, 13, 19, -1, 0},      {ScalarOp::Div, t, 13, 20, -1, 0},
               {ScalarOp::Mul, t, 17, 21, -1, 0}};
    ir.outputs = {22};
    ir.output_dtypes = {t};
    add_near("gelu_tanh_chain_f32", ir, 0, 1e-6);
  }
  // Note [Half types]: loads, stores and the casts; arithmetic as lowering spells it (float32, then
  // rounded): (a * b rounded) + 1.5, rounded.
  for (DType h : {DType::Float16, DType::BFloat16}) {
    add("copy_" + dn(h), copy_kernel(h));
    for (DType from : {DType::Bool, DType::UInt8, DType::Float32, h == DType::Float16 ? DType::BFloat16 : DType::Float16})
      add("cast_" + dn(from) + "_" + dn(h), unary(ScalarOp::Cast, from, h));
    for (DType to : kAll) add("cast_" + dn(h) + "_" + dn(to), unary(ScalarOp::Cast, h, to));
    const DType f = DType::Float32;
    PointwiseKernelIR ir;
    ir.input_dtypes = {h, h};
    ir.body = {{ScalarOp::Load, h, -1, -1, 0, 0},     {ScalarOp::Load, h, -1, -1, 1, 0},
               {ScalarOp::Cast, f, 0, -1, -1, 0},     {ScalarOp::Cast, f, 1, -1, -1, 0},
               {ScalarOp::Mul, f, 2, 3, -1, 0},       {ScalarOp::Cast, h, 4, -1, -1, 0},
               {ScalarOp::Cast, f, 5, -1, -1, 0},     {ScalarOp::Const, f, -1, -1, -1, 1.5},
               {ScalarOp::Add, f, 6, 7, -1, 0},       {ScalarOp::Cast, h, 8, -1, -1, 0}};
    ir.outputs = {9};
    ir.output_dtypes = {h};
    add("mul_add_" + dn(h), ir);
  }
  return out;
}

// Every catalogued kernel passes ptxas for sm_90 (many kernels per run: ptxas starts slowly).
TEST(PtxPointwise, EveryOpAndDtypeAssembles) {
  const std::string tool = test::find_ptxas();
  const std::vector<Case> cases = catalog();
  std::string module, header;
  int in_module = 0;
  size_t longest = 0;
  std::string longest_name;
  auto flush = [&] {
    if (!in_module) return;
    std::string log;
    // FRAMEJIT_TEST_PTX: keep the modules as <it>.<n> (to read ptxas's line numbers against).
    static int modules = 0;
    if (const char* keep = std::getenv("FRAMEJIT_TEST_PTX"))
      std::ofstream(std::string(keep) + "." + std::to_string(modules++)) << header + module;
    EXPECT_EQ(test::ptxas(tool, header + module, "sm_90", log), 0) << log;
    module.clear();
    in_module = 0;
  };
  for (size_t i = 0; i < 2 * cases.size(); ++i) {
    const Case& c = cases[i / 2];
    const bool flat = i % 2;  // both forms (Note [Flat pointwise kernels])
    auto ptx = cuda::pointwise_ptx(c.ir, (flat ? "kf_" : "k_") + c.name, flat);
    ASSERT_TRUE(ptx) << c.name << ": " << ptx.error().message();
    const size_t entry = ptx->find(".visible .entry");
    ASSERT_NE(entry, std::string::npos);
    if (header.empty()) header = ptx->substr(0, ptx->find("//"));
    module += ptx->substr(entry) + "\n";
    const size_t lines = static_cast<size_t>(std::count(ptx->begin(), ptx->end(), '\n'));
    if (lines > longest) {
      longest = lines;
      longest_name = c.name;
    }
    if (++in_module == 40 && !tool.empty()) flush();
  }
  std::printf("%zu kernels; the longest, %s, is %zu lines of PTX\n", cases.size(), longest_name.c_str(), longest);
  if (tool.empty()) GTEST_SKIP() << "no ptxas on this machine (the kernels were generated)";
  flush();
}

TEST(PtxPointwise, DeclinesWhatItCannotCompute) {
  EXPECT_FALSE(cuda::pointwise_supported(unary(ScalarOp::Sin, DType::Int32, DType::Int32)));
  // Note [Half types]: no arithmetic in a half type, no double rounding from float64.
  EXPECT_FALSE(cuda::pointwise_supported(binary(ScalarOp::Add, DType::BFloat16, DType::BFloat16)));
  EXPECT_FALSE(cuda::pointwise_supported(unary(ScalarOp::Cast, DType::Float64, DType::Float16)));
  EXPECT_TRUE(cuda::pointwise_supported(unary(ScalarOp::Cast, DType::Float32, DType::BFloat16)));
  auto ptx = cuda::pointwise_ptx(unary(ScalarOp::Cos, DType::Int64, DType::Int64), "k");
  EXPECT_FALSE(ptx);
}

// ---- on a GPU: same bits as the x86 kernels --------------------------------------------------

// Inputs of dtype t: ordinary values, and the special ones (NaN, ±inf, ±0, huge, tiny, MIN, -1).
std::vector<unsigned char> make_input(DType t, int64_t n, std::mt19937& rng) {
  const int size = rt::dtype_itemsize(t);
  std::vector<unsigned char> buf(n * size);
  std::uniform_real_distribution<double> u(-6, 6);
  std::uniform_int_distribution<int> pick(0, 15);
  for (int64_t i = 0; i < n; ++i) {
    unsigned char* p = buf.data() + i * size;
    const int k = pick(rng);
    switch (t) {
      case DType::Float32:
      case DType::Float64: {
        const double specials[] = {std::numeric_limits<double>::quiet_NaN(), INFINITY, -INFINITY, 0.0, -0.0,
                                   1e30, -3e38, 1e-40, 0.5, -1.0, 88.5, -104.0};
        double v = k < 12 && pick(rng) < 3 ? specials[k] : u(rng) * (pick(rng) < 2 ? 100 : 1);
        if (t == DType::Float32) {
          float f = static_cast<float>(v);
          std::memcpy(p, &f, 4);
        } else {
          std::memcpy(p, &v, 8);
        }
        break;
      }
      case DType::Int32:
      case DType::Int64: {
        const int64_t specials[] = {0, -1, 1, t == DType::Int32 ? INT32_MIN : INT64_MIN,
                                    t == DType::Int32 ? INT32_MAX : INT64_MAX, 7, -7};
        int64_t v = k < 7 && pick(rng) < 4 ? specials[k] : static_cast<int64_t>(u(rng) * 1000);
        if (t == DType::Int32) {
          int32_t w = static_cast<int32_t>(v);
          std::memcpy(p, &w, 4);
        } else {
          std::memcpy(p, &v, 8);
        }
        break;
      }
      case DType::UInt8: *p = static_cast<unsigned char>(k < 3 ? (k == 0 ? 0 : 255) : rng() & 0xFF); break;
      case DType::Float16:
      case DType::BFloat16: {  // every bit pattern: NaNs, infinities, subnormals, ties
        const uint16_t v = static_cast<uint16_t>(rng());
        std::memcpy(p, &v, 2);
        break;
      }
      default: *p = static_cast<unsigned char>(k & 1); break;  // bool
    }
  }
  return buf;
}

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) {
    auto p = rt::cuda::device_alloc(0, bytes);
    EXPECT_TRUE(p) << p.error().message();
    if (p) ptr = *p;
  }
  ~DeviceBuffer() { rt::cuda::device_free(ptr); }
  char* data() const { return static_cast<char*>(ptr); }
};

bool same_element(const Case& c, DType t, const unsigned char* a, const unsigned char* b) {
  if (t == DType::Float32) {
    float x, y;
    std::memcpy(&x, a, 4);
    std::memcpy(&y, b, 4);
    if (std::memcmp(a, b, 4) == 0 || (std::isnan(x) && std::isnan(y))) return true;
    if (c.rel_tol > 0) return std::fabs(double(x) - double(y)) <= c.rel_tol * std::max(1.0, std::fabs(double(x)));
    if (std::isnan(x) || std::isnan(y) || std::signbit(x) != std::signbit(y)) return false;
    const int64_t ix = std::bit_cast<int32_t>(x) & 0x7fffffff, iy = std::bit_cast<int32_t>(y) & 0x7fffffff;
    return std::llabs(ix - iy) <= c.ulps;
  }
  if (t == DType::Float64) {
    double x, y;
    std::memcpy(&x, a, 8);
    std::memcpy(&y, b, 8);
    return std::memcmp(a, b, 8) == 0 || (std::isnan(x) && std::isnan(y));
  }
  if (rt::dtype_is_half(t)) {  // NaN bits differ (x86 keeps the payload, PTX gives a canonical one)
    uint16_t x, y;
    std::memcpy(&x, a, 2);
    std::memcpy(&y, b, 2);
    const auto is_nan = [t](uint16_t v) {
      return t == DType::Float16 ? (v & 0x7c00) == 0x7c00 && (v & 0x3ff) : (v & 0x7f80) == 0x7f80 && (v & 0x7f);
    };
    return x == y || (is_nan(x) && is_nan(y));
  }
  return std::memcmp(a, b, rt::dtype_itemsize(t)) == 0;
}

// Runs `c` over `shape` (2-D) on both backends. Inputs are contiguous [rows, cols] arrays read
// through `in_strides` (bytes, per input; a zero broadcasts), starting `offset` elements in;
// outputs are fresh C-ordered arrays. Returns the number of mismatching elements (printing a few).
int compare_on_layout(const Case& c, int64_t rows, int64_t cols, const std::vector<std::array<int64_t, 2>>& in_strides,
                      int offset, std::mt19937& rng) {
  const PointwiseKernelIR& ir = c.ir;
  const int nin = static_cast<int>(ir.input_dtypes.size()), nout = static_cast<int>(ir.outputs.size());
  auto cpu_kernel = x86::backend().compile(ir);
  auto gpu_kernel = cuda::backend(0).compile(ir);
  EXPECT_TRUE(cpu_kernel) << cpu_kernel.error().message();
  EXPECT_TRUE(gpu_kernel) << c.name << ": " << gpu_kernel.error().message();
  if (!cpu_kernel || !gpu_kernel) return 1;
  const int64_t shape[2] = {rows, cols};
  int64_t span = rows * cols + offset + 8;  // elements each input buffer holds
  for (const auto& st : in_strides) span = std::max(span, offset + (rows - 1) * st[0] + (cols - 1) * st[1] + 8);
  std::vector<std::vector<unsigned char>> host_in(nin);
  std::vector<std::unique_ptr<DeviceBuffer>> dev_in, dev_out;
  std::vector<std::array<int64_t, 2>> strides(nin + nout);
  rt::Operand cpu_ops[rt::kMaxKernelOperands], gpu_ops[rt::kMaxKernelOperands];
  std::vector<std::vector<unsigned char>> cpu_out(nout), gpu_out(nout);
  for (int k = 0; k < nin; ++k) {
    const int size = rt::dtype_itemsize(ir.input_dtypes[k]);
    host_in[k] = make_input(ir.input_dtypes[k], span, rng);
    dev_in.push_back(std::make_unique<DeviceBuffer>(host_in[k].size()));
    EXPECT_TRUE(rt::cuda::copy_to_device(0, dev_in[k]->data(), host_in[k].data(), host_in[k].size()));
    strides[k] = {in_strides[k][0] * size, in_strides[k][1] * size};
    cpu_ops[k] = {reinterpret_cast<char*>(host_in[k].data()) + offset * size, strides[k].data(), size};
    gpu_ops[k] = {dev_in[k]->data() + offset * size, strides[k].data(), size};
  }
  for (int o = 0; o < nout; ++o) {
    const int size = rt::dtype_itemsize(ir.output_dtypes[o]);
    cpu_out[o].assign(rows * cols * size, 0xAB);
    gpu_out[o].assign(rows * cols * size, 0xCD);
    dev_out.push_back(std::make_unique<DeviceBuffer>(gpu_out[o].size()));
    strides[nin + o] = {cols * size, size};
    cpu_ops[nin + o] = {reinterpret_cast<char*>(cpu_out[o].data()), strides[nin + o].data(), size};
    gpu_ops[nin + o] = {dev_out[o]->data(), strides[nin + o].data(), size};
  }
  rt::ParamValue params[2];
  params[0].f = 1.75;
  if (!ir.param_dtypes.empty() && ir.param_dtypes[0] == DType::Int64) params[0].i = -3;
  params[1].i = 1000001;
  const int nparams = static_cast<int>(ir.param_dtypes.size());
  rt::run_pointwise(**cpu_kernel, 2, shape, nin + nout, cpu_ops, params, nparams);
  Status s = rt::cuda::run_pointwise(**gpu_kernel, 2, shape, nin + nout, gpu_ops, params, nparams);
  EXPECT_TRUE(s) << s.message();
  int bad = 0;
  for (int o = 0; o < nout; ++o) {
    EXPECT_TRUE(rt::cuda::copy_to_host(0, gpu_out[o].data(), dev_out[o]->data(), gpu_out[o].size()));
    const DType t = ir.output_dtypes[o];
    const int size = rt::dtype_itemsize(t);
    for (int64_t i = 0; i < rows * cols; ++i)
      if (!same_element(c, t, cpu_out[o].data() + i * size, gpu_out[o].data() + i * size) && ++bad <= 3) {
        std::string in_bytes;
        for (int k = 0; k < nin; ++k) {
          const int isz = rt::dtype_itemsize(ir.input_dtypes[k]);
          const int64_t r = i / cols, col = i % cols;
          const unsigned char* p = host_in[k].data() + (offset + r * in_strides[k][0] + col * in_strides[k][1]) * isz;
          char hex[40];
          uint64_t v = 0;
          std::memcpy(&v, p, isz);
          std::snprintf(hex, sizeof hex, " in%d=0x%llx", k, static_cast<unsigned long long>(v));
          in_bytes += hex;
        }
        uint64_t cv = 0, gv = 0;
        std::memcpy(&cv, cpu_out[o].data() + i * size, size);
        std::memcpy(&gv, gpu_out[o].data() + i * size, size);
        ADD_FAILURE() << c.name << " [" << rows << "x" << cols << "] element " << i << ":" << in_bytes << " x86=0x"
                      << std::hex << cv << " gpu=0x" << gv;
      }
  }
  return bad;
}

TEST(PtxPointwise, MatchesTheX86KernelsBitForBit) {
  REQUIRE_GPU();
  std::mt19937 rng(1234);
  for (const Case& c : catalog()) {
    const int nin = static_cast<int>(c.ir.input_dtypes.size());
    // Contiguous: 1-D of an odd length (vector chunks and a tail).
    std::vector<std::array<int64_t, 2>> contiguous(nin, {1001, 1});
    compare_on_layout(c, 3, 1001, contiguous, 0, rng);
  }
}

TEST(PtxPointwise, EveryLayout) {
  REQUIRE_GPU();
  std::mt19937 rng(99);
  for (const Case& c : catalog()) {
    if (c.name != "add_f32" && c.name != "where_f64" && c.name != "cast_f32_u8" && c.name != "gelu_chain_f32" &&
        c.name != "floordiv_i64" && c.name != "params_i32")
      continue;
    const int nin = static_cast<int>(c.ir.input_dtypes.size());
    // Row-broadcast last input ([1, cols]), a column-broadcast first input, transposed reads,
    // a misaligned start, and a row length that is not a multiple of 4.
    std::vector<std::array<int64_t, 2>> bcast(nin, {64, 1});
    if (nin > 0) bcast.back() = {0, 1};
    if (nin > 1) bcast.front() = {1, 0};
    EXPECT_EQ(compare_on_layout(c, 37, 64, bcast, 0, rng), 0) << c.name << " broadcast";
    std::vector<std::array<int64_t, 2>> transposed(nin, {1, 37});
    EXPECT_EQ(compare_on_layout(c, 64, 37, transposed, 0, rng), 0) << c.name << " transposed";
    std::vector<std::array<int64_t, 2>> shifted(nin, {66, 1});
    EXPECT_EQ(compare_on_layout(c, 9, 66, shifted, 1, rng), 0) << c.name << " misaligned";
    std::vector<std::array<int64_t, 2>> strided(nin, {300, 3});
    EXPECT_EQ(compare_on_layout(c, 5, 100, strided, 0, rng), 0) << c.name << " strided";
  }
}

}  // namespace
}  // namespace framejit::jit
