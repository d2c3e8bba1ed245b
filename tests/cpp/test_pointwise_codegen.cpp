// test_pointwise_codegen.cpp — fused pointwise kernels: generate → run through the executor →
// compare with a scalar reference, over dtypes, shapes (empty, one element, odd tails, strided,
// broadcast) and every ISA the host has.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sys/mman.h>
#include <unistd.h>
#include <tuple>
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
  // (3000, 5), (700, 3): rows as tiles (Note [Short rows as tiles]), y's rows copied out.
  for (auto [rows, cols] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 5}, {1, 1}, {1, 7}, {3, 8}, {5, 17}, {2, 1000}, {33, 65}, {3000, 5}, {700, 3}, {257, 7}}) {
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
    // NumPy 1.24 (every loop: contiguous, strided, 0-d) returns b on a tie, so
    // np.maximum(0.0, -0.0) is -0.0; NaN in either operand propagates.
    float want_max = (a[i] > b[i] || std::isnan(a[i])) ? a[i] : b[i];
    float want_min = (a[i] < b[i] || std::isnan(a[i])) ? a[i] : b[i];
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

// Note [Buffered strided rows]: rows with strided inputs or outputs (steps of 2 and 3, negative,
// broadcast, strided outputs, an output written over its own input) of lengths around the
// buffering threshold and past one buffer block, against the reference for every element.
template <typename T>
void check_strided(Isa isa, int64_t n, int64_t step_x, int64_t step_y, int64_t step_o1, bool in_place) {
  DType dt = sizeof(T) == 4 ? DType::Float32 : DType::Float64;
  auto k = x86::generate_pointwise(sample_kernel(dt), isa, false);
  ASSERT_TRUE(k) << k.error().message();
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-8, 8);
  const int64_t it = sizeof(T), span = 3 * n + 1;
  std::vector<T> x(span), y(span), out0(n, T(-1)), out1(span, T(-1)), out2(n, T(-1));
  for (auto& v : x) v = static_cast<T>(dist(rng));
  for (auto& v : y) v = static_cast<T>(dist(rng));
  const std::vector<T> x_before = x;
  // An element index's address for a step (negative steps start at the far end).
  auto at = [&](std::vector<T>& v, int64_t step) {
    return reinterpret_cast<char*>(v.data() + (step < 0 ? span - 1 : 0));
  };
  int64_t shape[1] = {n}, sx[1] = {step_x * it}, sy[1] = {step_y * it}, s0[1] = {it}, s1[1] = {step_o1 * it},
          s2[1] = {in_place ? step_x * it : -it};
  char* o2 = in_place ? at(x, step_x) : reinterpret_cast<char*>(out2.data() + n - 1);
  rt::Operand ops[5] = {{at(x, step_x), sx, static_cast<int>(it)},
                        {at(y, step_y), sy, static_cast<int>(it)},
                        {reinterpret_cast<char*>(out0.data()), s0, static_cast<int>(it)},
                        {at(out1, step_o1), s1, static_cast<int>(it)},
                        {o2, s2, static_cast<int>(it)}};
  rt::ParamValue p[2];
  p[0].f = 1.5;
  p[1].i = -1;
  rt::run_pointwise(**k, 1, shape, 5, ops, p, 2);
  auto element = [&](const std::vector<T>& v, int64_t step, int64_t i) {
    return v[(step < 0 ? span - 1 : 0) + i * step];
  };
  for (int64_t i = 0; i < n; ++i) {
    T want[3];
    reference<T>(element(x_before, step_x, i), element(y, step_y, i), 1.5, -1, want);
    T got[3] = {out0[i], element(out1, step_o1, i), in_place ? element(x, step_x, i) : out2[n - 1 - i]};
    for (int j = 0; j < 3; ++j)
      ASSERT_TRUE(same(got[j], want[j])) << "isa " << x86::isa_name(isa) << " n " << n << " steps " << step_x << ","
                                         << step_y << "," << step_o1 << " out" << j << " at " << i << ": " << got[j]
                                         << " vs " << want[j];
  }
  // Nothing written between a strided output's elements.
  for (int64_t i = 0; i < span; ++i)
    if (step_o1 != 1 && step_o1 != -1 && (step_o1 > 0 ? i : span - 1 - i) % std::abs(step_o1) != 0)
      ASSERT_EQ(out1[i], T(-1)) << "wrote between the elements of out1, at " << i;
}

TEST_P(PointwiseCodegen, StridedRowsMatchTheReference) {
  Isa isa = GetParam();
  for (int64_t n : {1, 15, 16, 17, 100, 3000})
    for (auto [sx, sy, so] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {2, 1, 1}, {-1, 0, 1}, {3, -2, 2}, {1, 1, -3}, {-2, 3, 1}})
      for (bool in_place : {false, true}) {
        check_strided<float>(isa, n, sx, sy, so, in_place);
        check_strided<double>(isa, n, sx, sy, so, in_place);
      }
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

// ---- mixed dtypes: integers, uint8, bool, casts, comparisons, select ----
//
// A reference interpreter of the loop IR, written from NumPy 1.24's documented/observed behaviour
// (Note [Casts] in loop_ir.h): every value is an int64 (integers, bool) or a double (floats,
// float32 values rounded to float).

struct RefValue {
  int64_t i = 0;
  double f = 0;
};

bool is_fp(DType t) { return t == DType::Float32 || t == DType::Float64; }

RefValue wrap(DType t, int64_t v) {
  RefValue r;
  switch (t) {
    case DType::Int32: r.i = static_cast<int32_t>(static_cast<uint32_t>(v)); break;
    case DType::UInt8: r.i = v & 0xff; break;
    case DType::Bool: r.i = v != 0; break;
    default: r.i = v; break;
  }
  return r;
}

RefValue ref_cast(DType from, DType to, RefValue v) {
  RefValue r;
  if (is_fp(from)) {
    double x = v.f;
    if (is_fp(to)) {
      r.f = to == DType::Float32 ? static_cast<float>(x) : x;
    } else if (to == DType::Bool) {
      r.i = x != 0 || std::isnan(x);
    } else if (to == DType::Int64) {
      r.i = (std::isnan(x) || x >= 9223372036854775808.0 || x < -9223372036854775808.0) ? INT64_MIN
                                                                                         : static_cast<int64_t>(x);
    } else {  // int32, and uint8 through int32
      int32_t w = (std::isnan(x) || x >= 2147483648.0 || x <= -2147483649.0) ? INT32_MIN : static_cast<int32_t>(x);
      r = wrap(to, w);
    }
    return r;
  }
  if (to == DType::Float32) r.f = static_cast<float>(v.i);  // one rounding, also from int64
  else if (to == DType::Float64) r.f = static_cast<double>(v.i);
  else r = wrap(to, v.i);
  return r;
}

int64_t floor_div(int64_t a, int64_t b, bool mod) {
  if (b == 0) return 0;
  if (b == -1) return mod ? 0 : static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  int64_t q = a / b, r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) {
    q -= 1;
    r += b;
  }
  return mod ? r : q;
}

RefValue ref_op(const ScalarExpr& e, DType operand_type, RefValue a, RefValue b, RefValue c) {
  const DType t = e.dtype;
  if (is_comparison(e.op)) {
    RefValue r;
    if (is_fp(operand_type)) {
      double x = a.f, y = b.f;
      switch (e.op) {
        case ScalarOp::Eq: r.i = x == y; break;
        case ScalarOp::Ne: r.i = x != y; break;
        case ScalarOp::Lt: r.i = x < y; break;
        case ScalarOp::Le: r.i = x <= y; break;
        case ScalarOp::Gt: r.i = x > y; break;
        default: r.i = x >= y; break;
      }
    } else {
      int64_t x = a.i, y = b.i;
      switch (e.op) {
        case ScalarOp::Eq: r.i = x == y; break;
        case ScalarOp::Ne: r.i = x != y; break;
        case ScalarOp::Lt: r.i = x < y; break;
        case ScalarOp::Le: r.i = x <= y; break;
        case ScalarOp::Gt: r.i = x > y; break;
        default: r.i = x >= y; break;
      }
    }
    return r;
  }
  if (e.op == ScalarOp::Where) return c.i ? a : b;
  if (e.op == ScalarOp::Cast) return ref_cast(operand_type, t, a);
  if (is_fp(t)) {
    RefValue r;
    switch (e.op) {
      case ScalarOp::Add: r.f = a.f + b.f; break;
      case ScalarOp::Sub: r.f = a.f - b.f; break;
      case ScalarOp::Mul: r.f = a.f * b.f; break;
      case ScalarOp::Div: r.f = a.f / b.f; break;
      default: ADD_FAILURE() << "no float reference for " << scalar_op_name(e.op);
    }
    if (t == DType::Float32) r.f = static_cast<float>(r.f);
    return r;
  }
  const uint64_t x = static_cast<uint64_t>(a.i), y = static_cast<uint64_t>(b.i);  // wrapping arithmetic
  switch (e.op) {
    case ScalarOp::Add: return wrap(t, static_cast<int64_t>(x + y));
    case ScalarOp::Sub: return wrap(t, static_cast<int64_t>(x - y));
    case ScalarOp::Mul: return wrap(t, static_cast<int64_t>(x * y));
    case ScalarOp::Neg: return wrap(t, static_cast<int64_t>(0 - x));
    case ScalarOp::Abs: return wrap(t, a.i < 0 ? static_cast<int64_t>(0 - x) : a.i);
    case ScalarOp::Square: return wrap(t, static_cast<int64_t>(x * x));
    case ScalarOp::Max: return wrap(t, std::max(a.i, b.i));
    case ScalarOp::Min: return wrap(t, std::min(a.i, b.i));
    case ScalarOp::And: return wrap(t, a.i & b.i);
    case ScalarOp::Or: return wrap(t, a.i | b.i);
    case ScalarOp::Xor: return wrap(t, a.i ^ b.i);
    case ScalarOp::Not: return t == DType::Bool ? wrap(t, !a.i) : wrap(t, ~a.i);
    case ScalarOp::FloorDiv: return wrap(t, floor_div(a.i, b.i, false));
    case ScalarOp::Mod: return wrap(t, floor_div(a.i, b.i, true));
    default: ADD_FAILURE() << "no integer reference for " << scalar_op_name(e.op); return {};
  }
}

RefValue read_elem(DType t, const char* p) {
  RefValue v;
  switch (t) {
    case DType::Float32: { float f; std::memcpy(&f, p, 4); v.f = f; break; }
    case DType::Float64: std::memcpy(&v.f, p, 8); break;
    case DType::Int32: { int32_t i; std::memcpy(&i, p, 4); v.i = i; break; }
    case DType::Int64: std::memcpy(&v.i, p, 8); break;
    default: v.i = static_cast<uint8_t>(*p); break;  // uint8, bool
  }
  return v;
}

bool same_elem(DType t, RefValue got, RefValue want) {
  if (!is_fp(t)) return got.i == want.i;
  return got.f == want.f || (std::isnan(got.f) && std::isnan(want.f));
}

// Values that hit every edge: 0, ±1, the extremes of every integer type, NaN, ±inf, -0.0, values
// just out of int32/uint8 range, fractions of both signs.
std::vector<char> edge_data(DType t, int64_t n, uint32_t seed) {
  const int it = rt::dtype_itemsize(t);
  std::vector<char> buf(std::max<int64_t>(n, 1) * it);
  std::mt19937_64 rng(seed);
  static const double kFloats[] = {0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 255.9, 256.0, 300.5, -3.7, 2147483648.0,
                                   -2147483649.0, 1e10, -1e19, 1e300, NAN, INFINITY, -INFINITY};
  static const int64_t kInts[] = {0, 1, -1, 2, -2, 3, -7, 127, 128, 255, 256, INT32_MAX, INT32_MIN,
                                  static_cast<int64_t>(INT32_MAX) + 1, INT64_MAX, INT64_MIN};
  for (int64_t i = 0; i < n; ++i) {
    char* p = buf.data() + i * it;
    uint64_t r = rng();
    bool edge = r % 3 != 0;
    if (is_fp(t)) {
      double v = edge ? kFloats[(r >> 8) % (sizeof kFloats / sizeof kFloats[0])]
                      : static_cast<double>(static_cast<int64_t>(r >> 20) % 2000000) / 1000.0 - 1000.0;
      if (t == DType::Float32) {
        float f = static_cast<float>(v);
        std::memcpy(p, &f, 4);
      } else {
        std::memcpy(p, &v, 8);
      }
    } else {
      int64_t v = edge ? kInts[(r >> 8) % (sizeof kInts / sizeof kInts[0])] : static_cast<int64_t>(r);
      if (t == DType::Bool) v = v & 1;
      std::memcpy(p, &v, it);  // little-endian: the low bytes (a wrapped value of the type)
    }
  }
  return buf;
}

// Runs `ir` (inputs x and y, any dtypes) over n elements in three layouts — contiguous, x with a
// stride of two elements, y broadcast — and compares every output with the reference interpreter.
void check_mixed(Isa isa, const PointwiseKernelIR& ir, int64_t n, const std::string& what) {
  auto k = x86::generate_pointwise(ir, isa, false);
  ASSERT_TRUE(k) << what << ": " << k.error().message();
  const int nin = static_cast<int>(ir.input_dtypes.size()), nout = static_cast<int>(ir.outputs.size());
  for (int layout = 0; layout < 3; ++layout) {
    std::vector<std::vector<char>> in(nin), out(nout);
    std::vector<int64_t> in_stride(nin), out_stride(nout);
    for (int j = 0; j < nin; ++j) {
      const int it = rt::dtype_itemsize(ir.input_dtypes[j]);
      const int step = layout == 1 && j == 0 ? 2 : 1;
      in[j] = edge_data(ir.input_dtypes[j], n * step, 11 + 7 * j);
      in_stride[j] = layout == 2 && j == 1 ? 0 : step * it;
    }
    for (int j = 0; j < nout; ++j) {
      out[j].assign(std::max<int64_t>(n, 1) * rt::dtype_itemsize(ir.output_dtypes[j]) + 64, 0x5a);
      out_stride[j] = rt::dtype_itemsize(ir.output_dtypes[j]);
    }
    int64_t shape[1] = {n};
    std::vector<rt::Operand> ops;
    for (int j = 0; j < nin; ++j)
      ops.push_back({in[j].data(), &in_stride[j], rt::dtype_itemsize(ir.input_dtypes[j])});
    for (int j = 0; j < nout; ++j)
      ops.push_back({out[j].data(), &out_stride[j], rt::dtype_itemsize(ir.output_dtypes[j])});
    rt::ParamValue params[rt::kMaxKernelParams];
    for (size_t p = 0; p < ir.param_dtypes.size(); ++p) {
      if (ir.param_dtypes[p] == DType::Int64) params[p].i = -3;
      else params[p].f = 2.5;
    }
    rt::run_pointwise(**k, 1, shape, nin + nout, ops.data(), params, static_cast<int>(ir.param_dtypes.size()));
    for (int64_t i = 0; i < n; ++i) {
      std::vector<RefValue> v(ir.body.size());
      for (size_t e = 0; e < ir.body.size(); ++e) {
        const ScalarExpr& x = ir.body[e];
        if (x.op == ScalarOp::Load) {
          v[e] = read_elem(x.dtype, in[x.input].data() + i * in_stride[x.input]);
        } else if (x.op == ScalarOp::Const) {
          v[e] = is_fp(x.dtype) ? RefValue{0, x.dtype == DType::Float32 ? static_cast<float>(x.fconst) : x.fconst}
                                : wrap(x.dtype, static_cast<int64_t>(x.fconst));
        } else if (x.op == ScalarOp::Param) {
          RefValue pv;
          if (ir.param_dtypes[x.input] == DType::Int64) pv.i = params[x.input].i;
          else pv.f = params[x.input].f;
          v[e] = ref_cast(ir.param_dtypes[x.input], x.dtype, pv);
        } else {
          DType operand = ir.body[x.a].dtype;
          v[e] = ref_op(x, operand, v[x.a], x.b >= 0 ? v[x.b] : RefValue{}, x.c >= 0 ? v[x.c] : RefValue{});
        }
      }
      for (int j = 0; j < nout; ++j) {
        DType t = ir.output_dtypes[j];
        RefValue got = read_elem(t, out[j].data() + i * out_stride[j]);
        RefValue want = v[ir.outputs[j]];
        if (t == DType::Float32) want.f = static_cast<float>(want.f);
        ASSERT_TRUE(same_elem(t, got, want))
            << what << " isa " << x86::isa_name(isa) << " n " << n << " layout " << layout << " out" << j
            << " (t" << ir.outputs[j] << ") at " << i << ": got " << (is_fp(t) ? got.f : got.i) << " want "
            << (is_fp(t) ? want.f : want.i) << "\n"
            << ir.to_string();
      }
    }
    // Nothing written past the end of an output (the kernel stores whole vectors only in full).
    for (int j = 0; j < nout; ++j)
      for (size_t b = n * rt::dtype_itemsize(ir.output_dtypes[j]); b < out[j].size(); ++b)
        ASSERT_EQ(out[j][b], 0x5a) << what << " wrote past output " << j;
  }
}

// Builds kernels expression by expression.
struct KernelBuilder {
  PointwiseKernelIR ir;
  int add(ScalarOp op, DType t, int a = -1, int b = -1, int input = -1, double c = 0, int cond = -1) {
    ScalarExpr e{op, t, a, b, input, c};
    e.c = cond;
    ir.body.push_back(e);
    return static_cast<int>(ir.body.size()) - 1;
  }
  int load(DType t) {
    ir.input_dtypes.push_back(t);
    return add(ScalarOp::Load, t, -1, -1, static_cast<int>(ir.input_dtypes.size()) - 1);
  }
  int param(DType t, DType arrives) {
    ir.param_dtypes.push_back(arrives);
    return add(ScalarOp::Param, t, -1, -1, static_cast<int>(ir.param_dtypes.size()) - 1);
  }
  void out(int v) {
    ir.outputs.push_back(v);
    ir.output_dtypes.push_back(ir.body[v].dtype);
  }
};

const int64_t kSizes[] = {0, 1, 7, 31, 33, 1000};
const DType kAllTypes[] = {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::UInt8, DType::Bool};
const DType kIntTypes[] = {DType::Int32, DType::Int64, DType::UInt8};

// Integer arithmetic: two kernels per integer type (binary ops; unary ops with params/consts).
PointwiseKernelIR int_kernel(DType t, int part) {
  KernelBuilder kb;
  int x = kb.load(t), y = kb.load(t);
  if (part == 0) {
    for (ScalarOp op : {ScalarOp::Add, ScalarOp::Sub, ScalarOp::Mul, ScalarOp::Max, ScalarOp::Min,
                        ScalarOp::FloorDiv, ScalarOp::Mod, ScalarOp::And, ScalarOp::Or, ScalarOp::Xor})
      kb.out(kb.add(op, t, x, y));
  } else {
    for (ScalarOp op : {ScalarOp::Neg, ScalarOp::Abs, ScalarOp::Square, ScalarOp::Not}) kb.out(kb.add(op, t, x));
    int p = kb.param(t, DType::Int64);
    kb.out(kb.add(ScalarOp::Mul, t, kb.add(ScalarOp::Add, t, x, p), kb.add(ScalarOp::Const, t, -1, -1, -1, 7)));
    kb.out(kb.add(ScalarOp::FloorDiv, t, x, p));
  }
  return kb.ir;
}

// Every cast from `from`, next to a second input of another width.
PointwiseKernelIR cast_kernel(DType from) {
  KernelBuilder kb;
  int x = kb.load(from);
  kb.load(DType::UInt8);
  for (DType to : kAllTypes)
    if (to != from) kb.out(kb.add(ScalarOp::Cast, to, x));
  return kb.ir;
}

// Comparisons of t, bool logic on their results, and selects between values of t.
PointwiseKernelIR compare_kernel(DType t) {
  KernelBuilder kb;
  int x = kb.load(t), y = kb.load(t);
  std::vector<int> masks;
  for (ScalarOp op : {ScalarOp::Eq, ScalarOp::Ne, ScalarOp::Lt, ScalarOp::Le, ScalarOp::Gt, ScalarOp::Ge}) {
    masks.push_back(kb.add(op, DType::Bool, x, y));
    kb.out(masks.back());
  }
  int both = kb.add(ScalarOp::And, DType::Bool, masks[2], kb.add(ScalarOp::Not, DType::Bool, masks[0]));
  kb.out(kb.add(ScalarOp::Xor, DType::Bool, kb.add(ScalarOp::Or, DType::Bool, both, masks[1]), masks[5]));
  kb.out(kb.add(ScalarOp::Where, t, x, y, -1, 0, masks[2]));  // where(x < y, x, y)
  // where(x > 0, x, 0) in the type's own zero: relu.
  int zero = kb.add(ScalarOp::Const, t, -1, -1, -1, 0);
  kb.out(kb.add(ScalarOp::Where, t, x, zero, -1, 0, kb.add(ScalarOp::Gt, DType::Bool, x, zero)));
  return kb.ir;
}

// int32 + float64 -> float64, uint8 scaled in float32, an int64 comparison stored as bool, and
// a select between int32 values: four itemsizes in one loop.
PointwiseKernelIR mixed_kernel() {
  KernelBuilder kb;
  int a = kb.load(DType::Int32), b = kb.load(DType::Float64), c = kb.load(DType::UInt8);
  int sum = kb.add(ScalarOp::Add, DType::Float64, kb.add(ScalarOp::Cast, DType::Float64, a), b);
  kb.out(sum);
  int f = kb.add(ScalarOp::Mul, DType::Float32, kb.add(ScalarOp::Cast, DType::Float32, c),
                 kb.param(DType::Float32, DType::Float64));
  kb.out(f);
  int wide = kb.add(ScalarOp::Cast, DType::Int64, a);
  int gt = kb.add(ScalarOp::Gt, DType::Bool, wide, kb.add(ScalarOp::Cast, DType::Int64, c));
  kb.out(gt);
  kb.out(kb.add(ScalarOp::Where, DType::Int32, a, kb.add(ScalarOp::Cast, DType::Int32, c), -1, 0, gt));
  kb.out(kb.add(ScalarOp::Cast, DType::UInt8, sum));
  return kb.ir;
}

TEST_P(PointwiseCodegen, IntegerArithmeticWrapsAndDividesLikeNumPy) {
  for (DType t : kIntTypes)
    for (int part = 0; part < 2; ++part)
      for (int64_t n : kSizes) check_mixed(GetParam(), int_kernel(t, part), n, std::string(rt::dtype_name(t)));
}

TEST_P(PointwiseCodegen, CastsBetweenEveryPairOfTypes) {
  for (DType from : kAllTypes)
    for (int64_t n : kSizes)
      check_mixed(GetParam(), cast_kernel(from), n, std::string("cast from ") + std::string(rt::dtype_name(from)));
}

TEST_P(PointwiseCodegen, ComparisonsLogicAndSelect) {
  for (DType t : kAllTypes)
    for (int64_t n : kSizes)
      check_mixed(GetParam(), compare_kernel(t), n, std::string("compare ") + std::string(rt::dtype_name(t)));
}

TEST_P(PointwiseCodegen, MixedWidthsInOneKernel) {
  for (int64_t n : kSizes) check_mixed(GetParam(), mixed_kernel(), n, "mixed widths");
}

// Float kernels whose operations are all correctly rounded IEEE operations (arithmetic, sqrt,
// floor, NumPy's max) give the same bits at every ISA, in the vector loop, the tail and strided.
TEST_P(PointwiseCodegen, FloatResultsAreBitIdenticalToTheScalarIsa) {
  for (DType dt : {DType::Float32, DType::Float64}) {
    PointwiseKernelIR ir = sample_kernel(dt);
    auto want = x86::generate_pointwise(ir, Isa::Scalar, false);
    auto got = x86::generate_pointwise(ir, GetParam(), false);
    ASSERT_TRUE(want && got);
    const int it = rt::dtype_itemsize(dt);
    for (int64_t n : {1, 7, 33, 1000})
      for (int64_t step : {1, 3}) {
        std::vector<char> x = edge_data(dt, n * step, 3), y = edge_data(dt, n, 4);
        std::vector<char> out_want(3 * n * it), out_got(3 * n * it);
        int64_t shape[1] = {n}, sx[1] = {step * it}, s[1] = {it};
        rt::ParamValue p[2];
        p[0].f = 1.5;
        p[1].i = -1;
        for (auto [k, out] : {std::pair{&want, &out_want}, std::pair{&got, &out_got}}) {
          rt::Operand ops[5] = {{x.data(), sx, it}, {y.data(), s, it}, {out->data(), s, it},
                                {out->data() + n * it, s, it}, {out->data() + 2 * n * it, s, it}};
          rt::run_pointwise(***k, 1, shape, 5, ops, p, 2);
        }
        for (int64_t e = 0; e < 3 * n; ++e)
          ASSERT_EQ(std::memcmp(out_got.data() + e * it, out_want.data() + e * it, it), 0)
              << x86::isa_name(GetParam()) << " " << rt::dtype_name(dt) << " n " << n << " step " << step << " output "
              << e / n << " element " << e % n;
      }
  }
}

// Memory that ends where an inaccessible page begins: touching a byte past the end faults.
class GuardedBuffer {
public:
  explicit GuardedBuffer(size_t bytes) {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    span_ = (bytes + page_ - 1) / page_ * page_ + page_;
    void* m = mmap(nullptr, span_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base_ = m == MAP_FAILED ? nullptr : static_cast<char*>(m);
    if (base_) mprotect(base_ + span_ - page_, page_, PROT_NONE);
    data_ = base_ ? base_ + span_ - page_ - bytes : nullptr;
  }
  ~GuardedBuffer() {
    if (base_) munmap(base_, span_);
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  char* data() const { return data_; }

private:
  size_t page_ = 0, span_ = 0;
  char* base_ = nullptr;
  char* data_ = nullptr;
};

// Rows of every length up to two vectors and a bit, inputs and outputs ending right at a guard
// page: the tail (masked on Avx512, Note [Masked tail]) reads and writes only the row's elements,
// and its elements get the same values as in the vector loop of a longer row.
TEST_P(PointwiseCodegen, TailTouchesOnlyTheRow) {
  const Isa isa = GetParam();
  for (DType dt : {DType::Float32, DType::Float64, DType::UInt8}) {
    KernelBuilder kb;
    int x = kb.load(dt), y = kb.load(dt);
    if (is_fp(dt)) kb.out(kb.add(ScalarOp::Tanh, dt, kb.add(ScalarOp::Add, dt, kb.add(ScalarOp::Mul, dt, x, y),
                                                           kb.add(ScalarOp::Const, dt, -1, -1, -1, 1.0))));
    else kb.out(kb.add(ScalarOp::Add, dt, kb.add(ScalarOp::Mul, dt, x, y), kb.add(ScalarOp::Const, dt, -1, -1, -1, 3)));
    auto k = x86::generate_pointwise(kb.ir, isa, false);
    ASSERT_TRUE(k) << k.error().message();
    const int it = rt::dtype_itemsize(dt);
    const int64_t longest = 2 * 64 / it + 3;
    // The reference: every element in the vector loop of a row of `longest` (plus a full vector).
    std::vector<char> xs = edge_data(dt, longest, 5), ys = edge_data(dt, longest, 6);
    std::vector<char> want((longest + 64) * it);
    {
      std::vector<char> xl(want.size()), yl(want.size());
      std::memcpy(xl.data(), xs.data(), xs.size());
      std::memcpy(yl.data(), ys.data(), ys.size());
      int64_t shape[1] = {longest + 64}, s[1] = {it};
      rt::Operand ops[3] = {{xl.data(), s, it}, {yl.data(), s, it}, {want.data(), s, it}};
      rt::run_pointwise(**k, 1, shape, 3, ops, nullptr, 0);
    }
    for (int64_t n = 1; n <= longest; ++n) {
      // The row's last n elements of the reference inputs, so element i meets want[longest - n + i].
      const int64_t first = longest - n;
      GuardedBuffer gx(n * it), gy(n * it), gout(n * it);
      ASSERT_TRUE(gx.data() && gy.data() && gout.data());
      std::memcpy(gx.data(), xs.data() + first * it, n * it);
      std::memcpy(gy.data(), ys.data() + first * it, n * it);
      int64_t shape[1] = {n}, s[1] = {it};
      rt::Operand ops[3] = {{gx.data(), s, it}, {gy.data(), s, it}, {gout.data(), s, it}};
      rt::run_pointwise(**k, 1, shape, 3, ops, nullptr, 0);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(std::memcmp(gout.data() + i * it, want.data() + (first + i) * it, it), 0)
            << x86::isa_name(isa) << " " << rt::dtype_name(dt) << " n " << n << " element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, PointwiseCodegen, ::testing::ValuesIn(host_isas()),
                         [](const auto& info) { return std::string(x86::isa_name(info.param)); });

// Every kernel of these tests is generated at every ISA, also those the host cannot run: an
// AVX-512 kernel is at least assembled (operand forms, register classes) on any machine.
TEST(PointwiseCodegen, EveryKernelAssemblesAtEveryIsa) {
  std::vector<PointwiseKernelIR> irs = {mixed_kernel(), sample_kernel(DType::Float32), sample_kernel(DType::Float64)};
  for (DType t : kIntTypes)
    for (int part = 0; part < 2; ++part) irs.push_back(int_kernel(t, part));
  for (DType t : kAllTypes) {
    irs.push_back(cast_kernel(t));
    irs.push_back(compare_kernel(t));
  }
  for (DType dt : {DType::Float32, DType::Float64}) {
    KernelBuilder kb;
    int x = kb.load(dt), y = kb.load(dt);
    for (ScalarOp op : {ScalarOp::Exp, ScalarOp::Tanh, ScalarOp::Sin, ScalarOp::Ceil, ScalarOp::Reciprocal})
      kb.out(kb.add(op, dt, x));
    kb.out(kb.add(ScalarOp::Pow, dt, x, y));
    kb.out(kb.add(ScalarOp::Min, dt, x, y));
    irs.push_back(kb.ir);
  }
  for (const PointwiseKernelIR& ir : irs)
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      auto k = x86::generate_pointwise(ir, isa, true);
      ASSERT_TRUE(k) << x86::isa_name(isa) << ": " << k.error().message() << "\n" << ir.to_string();
      EXPECT_NE((*k)->listing.find(isa == Isa::Avx512 ? "zmm" : isa == Isa::Avx2 ? "ymm" : "xmm"), std::string::npos);
      // AVX kernels return with the vector registers' upper halves clean (set_frame_isa).
      const std::string& code = (*k)->listing;
      const size_t ret = code.rfind("ret");
      ASSERT_NE(ret, std::string::npos);
      EXPECT_EQ(code.rfind("vzeroupper", ret) != std::string::npos, isa != Isa::Scalar) << code.substr(ret > 200 ? ret - 200 : 0);
    }
}

TEST(PointwiseCodegen, SupportCheck) {
  PointwiseKernelIR ir = sample_kernel(DType::Float32);
  EXPECT_TRUE(x86::pointwise_supported(ir, Isa::Avx2));
  ir.input_dtypes[0] = DType::Int32;
  EXPECT_FALSE(x86::pointwise_supported(ir, Isa::Avx2));
}

}  // namespace
}  // namespace framejit::jit
