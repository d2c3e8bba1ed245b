// test_math.cpp — the accuracy of the GPU's float32 math where it is not x86's to the bit (Note [exp
// through the GPU's ex2]): exp and erf on every float32 input, and sigmoid, which stays on the
// polynomial for accuracy; pow on a sample. Each against the correctly rounded value (double- or
// long-double-precision references), in ulp.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "jit/cuda/backend.h"
#include "runtime/cuda/launch.h"
#include "runtime/cuda/memory.h"
#include "tests/gpu/gpu_test_util.h"

namespace framejit::jit {
namespace {

using rt::DType;

PointwiseKernelIR function_ir(ScalarOp op, int arity) {
  const DType t = DType::Float32;
  PointwiseKernelIR ir;
  ir.input_dtypes.assign(arity, t);
  for (int k = 0; k < arity; ++k) ir.body.push_back({ScalarOp::Load, t, -1, -1, k, 0});
  ir.body.push_back({op, t, 0, arity > 1 ? 1 : -1, -1, 0});
  ir.outputs = {arity};
  ir.output_dtypes = {t};
  return ir;
}

template <class F> void parallel_for(size_t n, F f) {
  const unsigned nt = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < nt; ++t)
    ts.emplace_back([&, t] {
      for (size_t k = n * t / nt; k < n * (t + 1) / nt; ++k) f(k);
    });
  for (auto& t : ts) t.join();
}

int64_t ordinal(float v) {
  const uint32_t u = std::bit_cast<uint32_t>(v);
  return (u & 0x80000000u) ? -static_cast<int64_t>(u & 0x7fffffffu) : static_cast<int64_t>(u);
}

/// ulp distance; a NaN against a number, or zeros of different signs: a huge distance.
uint64_t ulp_distance(float got, float want) {
  if (std::isnan(got) || std::isnan(want)) return std::isnan(got) && std::isnan(want) ? 0 : ~uint64_t{0} >> 1;
  if (got == 0 && want == 0) return std::signbit(got) == std::signbit(want) ? 0 : ~uint64_t{0} >> 1;
  const int64_t d = ordinal(got) - ordinal(want);
  return static_cast<uint64_t>(d < 0 ? -d : d);
}

/// Runs the kernel of `ir` over n elements of a (and b) on the GPU.
template <class K>
void run_on_gpu(const K& k, int arity, const float* a, const float* b, float* out, int64_t n) {
  const size_t bytes = n * sizeof(float);
  void* dev[3] = {};
  for (int i = 0; i <= arity; ++i) {
    auto p = rt::cuda::device_alloc(0, bytes);
    ASSERT_TRUE(p) << p.error().message();
    dev[i] = *p;
  }
  ASSERT_TRUE(rt::cuda::copy_to_device(0, dev[0], a, bytes));
  if (arity > 1) ASSERT_TRUE(rt::cuda::copy_to_device(0, dev[1], b, bytes));
  const int64_t shape[1] = {n}, stride[1] = {4};
  rt::Operand ops[3];
  for (int i = 0; i <= arity; ++i) ops[i] = {static_cast<char*>(dev[i]), stride, 4};
  Status s = rt::cuda::run_pointwise(k, 1, shape, arity + 1, ops, nullptr, 0);
  ASSERT_TRUE(s) << s.message();
  ASSERT_TRUE(rt::cuda::copy_to_host(0, out, dev[arity], bytes));
  for (int i = 0; i <= arity; ++i) rt::cuda::device_free(dev[i]);
}

struct Unary {
  ScalarOp op;
  const char* name;
  double (*ref)(double);
  uint64_t bound;  // the issue's: 2 ulp
};

TEST(GpuMath, ExpFamilyAndTrigOnEveryFloat32) {
  REQUIRE_GPU();
  const Unary fns[] = {
      {ScalarOp::Exp, "exp", [](double x) { return std::exp(x); }, 2},
      {ScalarOp::Sigmoid, "sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }, 2},
      {ScalarOp::Erf, "erf", [](double x) { return std::erf(x); }, 2},
      // Note [Payne–Hanek in PTX]: the huge arguments included.
      {ScalarOp::Sin, "sin", [](double x) { return std::sin(x); }, 2},
      {ScalarOp::Cos, "cos", [](double x) { return std::cos(x); }, 2},
      {ScalarOp::Tan, "tan", [](double x) { return std::tan(x); }, 4},
  };
  constexpr int64_t kChunk = int64_t{1} << 26;
  std::vector<float> in(kChunk), got(kChunk);
  for (const Unary& f : fns) {
    auto kernel = cuda::backend(0).compile(function_ir(f.op, 1));
    ASSERT_TRUE(kernel) << kernel.error().message();
    uint64_t worst = 0, bad = 0;
    float worst_x = 0;
    for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kChunk) {
      for (int64_t j = 0; j < kChunk; ++j) in[j] = std::bit_cast<float>(static_cast<uint32_t>(base + j));
      run_on_gpu(**kernel, 1, in.data(), nullptr, got.data(), kChunk);
      constexpr size_t kParts = 256;
      std::vector<uint64_t> part_worst(kParts, 0), part_bad(kParts, 0);
      std::vector<int64_t> part_at(kParts, 0);
      parallel_for(kParts, [&](size_t p) {
        for (int64_t j = kChunk * p / kParts; j < int64_t(kChunk * (p + 1) / kParts); ++j) {
          const uint64_t d = ulp_distance(got[j], static_cast<float>(f.ref(in[j])));
          if (d > part_worst[p]) part_worst[p] = d, part_at[p] = j;
          if (d > f.bound) ++part_bad[p];
        }
      });
      for (size_t p = 0; p < kParts; ++p) {
        if (part_worst[p] > worst) worst = part_worst[p], worst_x = in[part_at[p]];
        bad += part_bad[p];
      }
    }
    std::printf("[ gpu f32  ] %-8s max %llu ulp at %a, %llu inputs over %llu ulp\n", f.name,
                static_cast<unsigned long long>(worst), static_cast<double>(worst_x),
                static_cast<unsigned long long>(bad), static_cast<unsigned long long>(f.bound));
    EXPECT_EQ(bad, 0u) << f.name << ": worst " << worst << " ulp at " << std::hexfloat << worst_x;
  }
}

TEST(GpuMath, PowOnASample) {
  REQUIRE_GPU();
  constexpr int64_t n = int64_t{1} << 22;
  std::vector<float> a(n), b(n), got(n);
  uint64_t s = 12345;
  auto next = [&] {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  auto uniform = [&](double lo, double hi) { return lo + (hi - lo) * ((next() >> 11) * 0x1p-53); };
  for (int64_t k = 0; k < n; ++k) {
    // Magnitudes over the whole range, exponents that reach over- and underflow, integers and
    // negative bases, results near 1.
    const int kind = static_cast<int>(k % 4);
    a[k] = static_cast<float>(std::ldexp(uniform(1, 2), static_cast<int>(uniform(-60, 60))));
    b[k] = static_cast<float>(uniform(-8, 8));
    if (kind == 1) b[k] = static_cast<float>(uniform(-200, 200) / std::max(1.0, std::fabs(std::log2(double(a[k])))));
    if (kind == 2) a[k] = -a[k], b[k] = std::round(b[k]);
    if (kind == 3) a[k] = static_cast<float>(uniform(0.5, 2)), b[k] = static_cast<float>(uniform(-1000, 1000));
  }
  auto kernel = cuda::backend(0).compile(function_ir(ScalarOp::Pow, 2));
  ASSERT_TRUE(kernel) << kernel.error().message();
  run_on_gpu(**kernel, 2, a.data(), b.data(), got.data(), n);
  uint64_t worst = 0, bad = 0;
  int64_t at = 0;
  for (int64_t k = 0; k < n; ++k) {
    const float want = static_cast<float>(powl(static_cast<long double>(a[k]), static_cast<long double>(b[k])));
    const uint64_t d = ulp_distance(got[k], want);
    if (d > worst) worst = d, at = k;
    if (d > 4) ++bad;
  }
  std::printf("[ gpu f32  ] pow      max %llu ulp at (%a, %a), %llu of %lld over 4 ulp\n",
              static_cast<unsigned long long>(worst), static_cast<double>(a[at]), static_cast<double>(b[at]),
              static_cast<unsigned long long>(bad), static_cast<long long>(n));
  EXPECT_EQ(bad, 0u);
}

}  // namespace
}  // namespace framejit::jit
