// test_pointwise_codegen.cpp — fused pointwise kernels: generate → run through the executor →
// compare with a scalar reference, over dtypes, shapes (empty, one element, odd tails, strided,
// broadcast) and every ISA the host has.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "jit/x86/pointwise_codegen.h"
#include "runtime/executor.h"

namespace framejit::jit {
namespace {

using x86::Isa;

std::vector<Isa> host_isas() {
  std::vector<Isa> out{Isa::Scalar};
  if (x86::cpu_isa() >= Isa::Avx2) out.push_back(Isa::Avx2);
  if (x86::cpu_isa() >= Isa::Avx512) out.push_back(Isa::Avx512);
  return out;
}

// out0 = max(x * p0 + y, p1), out1 = floor(sqrt(abs(-out0)) / 0.25), out2 = x - square(y)
PointwiseKernelIR sample_kernel(DType dt) {
  PointwiseKernelIR ir;
  ir.input_dtypes = {dt, dt};
  ir.param_dtypes = {DType::Float64, DType::Int64};
  auto e = [&](ScalarOp op, int a = -1, int b = -1, int input = -1, double c = 0) {
    ir.body.push_back({op, dt, a, b, input, c});
    return static_cast<int>(ir.body.size()) - 1;
  };
  int x = e(ScalarOp::Load, -1, -1, 0), y = e(ScalarOp::Load, -1, -1, 1);
  int p0 = e(ScalarOp::Param, -1, -1, 0), p1 = e(ScalarOp::Param, -1, -1, 1);
  int mx = e(ScalarOp::Max, e(ScalarOp::Add, e(ScalarOp::Mul, x, p0), y), p1);
  int o1 = e(ScalarOp::Floor, e(ScalarOp::Div, e(ScalarOp::Sqrt, e(ScalarOp::Abs, e(ScalarOp::Neg, mx))),
                                e(ScalarOp::Const, -1, -1, -1, 0.25)));
  int o2 = e(ScalarOp::Sub, x, e(ScalarOp::Square, y));
  ir.outputs = {mx, o1, o2};
  ir.output_dtypes = {dt, dt, dt};
  return ir;
}

template <typename T>
void reference(T x, T y, double p0, int64_t p1, T out[3]) {
  T t = x * static_cast<T>(p0) + y;
  T m = static_cast<T>(p1);
  T mx = (t >= m || std::isnan(t)) ? t : m;
  out[0] = mx;
  out[1] = std::floor(std::sqrt(std::fabs(-mx)) / static_cast<T>(0.25));
  out[2] = x - y * y;
}

bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Runs the kernel on x[rows, cols] (optionally transposed storage) and y broadcast as [1, cols]
// or [rows, 1], and compares every element.
template <typename T>
void check(Isa isa, int64_t rows, int64_t cols, bool x_transposed, bool y_per_row) {
  DType dt = sizeof(T) == 4 ? DType::Float32 : DType::Float64;
  auto k = x86::generate_pointwise(sample_kernel(dt), isa, false);
  ASSERT_TRUE(k) << k.error().message();
  std::mt19937 rng(42);
  std::uniform_real_distribution<double> dist(-8, 8);
  std::vector<T> x(rows * cols), y(y_per_row ? rows : cols);
  for (auto& v : x) v = static_cast<T>(dist(rng));
  for (auto& v : y) v = static_cast<T>(dist(rng));
  if (!x.empty()) x[x.size() / 2] = NAN;
  std::vector<T> out[3];
  for (auto& o : out) o.assign(rows * cols, T(-1234));
  const int64_t it = sizeof(T);
  int64_t shape[2] = {rows, cols};
  int64_t sx[2] = {x_transposed ? it : cols * it, x_transposed ? rows * it : it};
  int64_t sy[2] = {y_per_row ? it : 0, y_per_row ? 0 : it};
  int64_t so[2] = {cols * it, it};
  rt::Operand ops[5] = {{reinterpret_cast<char*>(x.data()), sx, static_cast<int>(it)},
                        {reinterpret_cast<char*>(y.data()), sy, static_cast<int>(it)},
                        {reinterpret_cast<char*>(out[0].data()), so, static_cast<int>(it)},
                        {reinterpret_cast<char*>(out[1].data()), so, static_cast<int>(it)},
                        {reinterpret_cast<char*>(out[2].data()), so, static_cast<int>(it)}};
  rt::ParamValue p[2];
  p[0].f = 1.5;
  p[1].i = -1;
  rt::run_pointwise(**k, 2, shape, 5, ops, p, 2);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      T xv = x_transposed ? x[c * rows + r] : x[r * cols + c];
      T yv = y_per_row ? y[r] : y[c];
      T want[3];
      reference<T>(xv, yv, 1.5, -1, want);
      for (int j = 0; j < 3; ++j)
        ASSERT_TRUE(same(out[j][r * cols + c], want[j]))
            << "isa " << x86::isa_name(isa) << " out" << j << " at " << r << "," << c << ": " << out[j][r * cols + c]
            << " vs " << want[j];
    }
}

class PointwiseCodegen : public ::testing::TestWithParam<Isa> {};

TEST_P(PointwiseCodegen, ShapesLayoutsAndBroadcasts) {
  Isa isa = GetParam();
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{{0, 5}, {1, 1}, {1, 7}, {3, 8}, {5, 17}, {2, 1000}, {33, 65}}) {
    for (bool tr : {false, true})
      for (bool per_row : {false, true}) {
        check<float>(isa, rows, cols, tr, per_row);
        check<double>(isa, rows, cols, tr, per_row);
      }
  }
}

TEST_P(PointwiseCodegen, NumPySemanticsOfMaxAndNegativeZero) {
  Isa isa = GetParam();
  PointwiseKernelIR ir;
  ir.input_dtypes = {DType::Float32, DType::Float32};
  ir.body = {{ScalarOp::Load, DType::Float32, -1, -1, 0, 0},
             {ScalarOp::Load, DType::Float32, -1, -1, 1, 0},
             {ScalarOp::Max, DType::Float32, 0, 1, -1, 0},
             {ScalarOp::Min, DType::Float32, 0, 1, -1, 0}};
  ir.outputs = {2, 3};
  ir.output_dtypes = {DType::Float32, DType::Float32};
  auto k = x86::generate_pointwise(ir, isa, false);
  ASSERT_TRUE(k);
  float a[] = {0.0f, -0.0f, NAN, 1.0f, NAN, 2.0f, -INFINITY, 3.0f, 0.0f};
  float b[] = {-0.0f, 0.0f, 1.0f, NAN, NAN, 2.0f, 5.0f, INFINITY, 0.0f};
  float mx[9], mn[9];
  int64_t shape[1] = {9}, s[1] = {4};
  rt::Operand ops[4] = {{reinterpret_cast<char*>(a), s, 4}, {reinterpret_cast<char*>(b), s, 4},
                        {reinterpret_cast<char*>(mx), s, 4}, {reinterpret_cast<char*>(mn), s, 4}};
  rt::run_pointwise(**k, 1, shape, 4, ops, nullptr, 0);
  for (int i = 0; i < 9; ++i) {
    float want_max = (a[i] >= b[i] || std::isnan(a[i])) ? a[i] : b[i];
    float want_min = (a[i] <= b[i] || std::isnan(a[i])) ? a[i] : b[i];
    EXPECT_EQ(std::memcmp(&mx[i], &want_max, 4), 0) << i;
    EXPECT_EQ(std::memcmp(&mn[i], &want_min, 4), 0) << i;
  }
}

// More hoisted constants than vector registers: the allocator must spill and reload whole
// vectors (a spill with an SSE move keeps only 128 bits of a ymm register).
TEST_P(PointwiseCodegen, SpilledConstantsKeepEveryLane) {
  Isa isa = GetParam();
  PointwiseKernelIR ir;
  ir.input_dtypes = {DType::Float32};
  ir.body.push_back({ScalarOp::Load, DType::Float32, -1, -1, 0, 0});
  std::vector<int> consts;
  for (int c = 0; c < 24; ++c) {
    ir.body.push_back({ScalarOp::Const, DType::Float32, -1, -1, -1, static_cast<double>(c + 1)});
    consts.push_back(static_cast<int>(ir.body.size()) - 1);
  }
  int acc = 0;
  for (int c : consts) {
    ir.body.push_back({ScalarOp::Add, DType::Float32, acc, c, -1, 0});
    acc = static_cast<int>(ir.body.size()) - 1;
  }
  ir.outputs = {acc};
  ir.output_dtypes = {DType::Float32};
  auto k = x86::generate_pointwise(ir, isa, false);
  ASSERT_TRUE(k) << k.error().message();
  std::vector<float> x(37), out(37);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  int64_t shape[1] = {37}, s[1] = {4};
  rt::Operand ops[2] = {{reinterpret_cast<char*>(x.data()), s, 4}, {reinterpret_cast<char*>(out.data()), s, 4}};
  rt::run_pointwise(**k, 1, shape, 2, ops, nullptr, 0);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(out[i], x[i] + 300.0f) << i;  // 1 + 2 + ... + 24
}

// An element's result does not depend on where it sits: the vector loop, the tail and the
// strided loop run the same instructions.
TEST_P(PointwiseCodegen, TailAndStridedMatchTheVectorLoop) {
  Isa isa = GetParam();
  for (DType dt : {DType::Float32, DType::Float64}) {
    PointwiseKernelIR ir;
    ir.input_dtypes = {dt};
    ir.body = {{ScalarOp::Load, dt, -1, -1, 0, 0}, {ScalarOp::Tanh, dt, 0, -1, -1, 0}, {ScalarOp::Exp, dt, 1, -1, -1, 0}};
    ir.outputs = {2};
    ir.output_dtypes = {dt};
    auto k = x86::generate_pointwise(ir, isa, false);
    ASSERT_TRUE(k) << k.error().message();
    const int n = 21, it = rt::dtype_itemsize(dt);
    std::vector<double> xd(2 * n, 0.3712);
    std::vector<float> xf(2 * n, 0.3712f);
    std::vector<char> out(n * it), out_strided(n * it);
    char* x = dt == DType::Float32 ? reinterpret_cast<char*>(xf.data()) : reinterpret_cast<char*>(xd.data());
    int64_t shape[1] = {n}, s[1] = {it}, s2[1] = {2 * it};
    rt::Operand a[2] = {{x, s, it}, {out.data(), s, it}};
    rt::Operand b[2] = {{x, s2, it}, {out_strided.data(), s, it}};
    rt::run_pointwise(**k, 1, shape, 2, a, nullptr, 0);
    rt::run_pointwise(**k, 1, shape, 2, b, nullptr, 0);
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(std::memcmp(out.data() + i * it, out.data(), it), 0) << "element " << i;
      ASSERT_EQ(std::memcmp(out_strided.data() + i * it, out.data(), it), 0) << "strided element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, PointwiseCodegen, ::testing::ValuesIn(host_isas()),
                         [](const auto& info) { return std::string(x86::isa_name(info.param)); });

TEST(PointwiseCodegen, SupportCheck) {
  PointwiseKernelIR ir = sample_kernel(DType::Float32);
  EXPECT_TRUE(x86::pointwise_supported(ir, Isa::Avx2));
  ir.input_dtypes[0] = DType::Int32;
  EXPECT_FALSE(x86::pointwise_supported(ir, Isa::Avx2));
}

}  // namespace
}  // namespace framejit::jit
