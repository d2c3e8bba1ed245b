// test_math_injectors.cpp — ulp error and special values of the vectorized math emitters
// (MathInjector), for every MathFn x {float32, float64} x every ISA this CPU runs; AVX-512 code is
// generated (and validated by asmjit) even where it cannot run.
//
// Reference: float32 results are libm's double functions rounded to float; float64 results are
// the x87 long double functions rounded to double (sqrt: the IEEE double sqrt). Error is the
// distance between bit patterns to that value; NaN-ness and the sign of zero must match exactly.
// Inputs (make_unary_inputs / make_binary_inputs), sized for a few seconds of CI:
//   float32 unary: 2M patterns, one per 2048-pattern bucket of all 2^32, plus a dense interval;
//   float64 unary: log-uniform magnitudes over every binade of both signs, plus dense intervals
//     (sin/cos/tan: |x| < 1e5 and up to 1.3e5 log-uniform; the binades reach 1e308);
//   atan2, pow: raw bit-pattern pairs, every special pair, and pairs spread so that the result
//     covers the whole range (pow: negative bases with integer exponents, bases near 1).
// FRAMEJIT_ULP_SAMPLES=k multiplies the sample counts; DISABLED_EveryFloat32 checks all 2^32
// float32 inputs of the unary functions.
#include <asmjit/x86.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "jit/x86/injectors.h"
#include "jit/x86/isa.h"

namespace framejit::jit::x86 {
namespace {

using rt::DType;
namespace ax = asmjit::x86;

// ---- JIT harness ------------------------------------------------------------------------------

/// Records asmjit's first error so a failing build says why.
class ErrorCollector : public asmjit::ErrorHandler {
public:
  void handleError(asmjit::Error err, const char* message, asmjit::BaseEmitter*) override {
    if (!failed) text = std::string(asmjit::DebugUtils::errorAsString(err)) + ": " + message;
    failed = true;
  }
  bool failed = false;
  std::string text;
};

asmjit::JitRuntime& jit_runtime() {
  static asmjit::JitRuntime rt;
  return rt;
}

/// void f(const T* a, const T* b, T* out, int64_t n): out[i] = fn(a[i]) or fn(a[i], b[i]).
/// Full vectors, then one masked vector for the tail (vmaskmov on Avx2, a k mask on Avx512);
/// Scalar goes element by element.
using KernelFn = void (*)(const void* a, const void* b, void* out, int64_t n);

KernelFn build_kernel(MathFn fn, DType dt, Isa isa, std::string* error) {
  using namespace asmjit;
  static const int32_t kTailMask32[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
  static const int64_t kTailMask64[8] = {-1, -1, -1, -1, 0, 0, 0, 0};

  CodeHolder code;
  code.init(jit_runtime().environment());
  ErrorCollector errors;
  code.setErrorHandler(&errors);
  ax::Compiler cc(&code);
  cc.addDiagnosticOptions(DiagnosticOptions::kValidateIntermediate);

  FuncNode* func = cc.addFunc(FuncSignatureT<void, const void*, const void*, void*, int64_t>());
  if (isa != Isa::Scalar) func->frame().setAvxEnabled();
  if (isa == Isa::Avx512) func->frame().setAvx512Enabled();
  ax::Gp pa = cc.newIntPtr("a"), pb = cc.newIntPtr("b"), po = cc.newIntPtr("out");
  ax::Gp n = cc.newInt64("n"), i = cc.newInt64("i"), rem = cc.newInt64("rem");
  func->setArg(0, pa);
  func->setArg(1, pb);
  func->setArg(2, po);
  func->setArg(3, n);

  const bool f32 = dt == DType::Float32;
  const bool binary = math_fn_is_binary(fn);
  const int shift = f32 ? 2 : 3;
  const int lanes = isa == Isa::Scalar ? 1 : vector_bytes(isa) >> shift;
  MathInjector inj(cc, isa, dt);
  ax::Vec va = inj.new_vec("va"), vb = inj.new_vec("vb"), vr = inj.new_vec("vr");

  auto load = [&](const ax::Vec& v, const ax::Gp& base) {
    ax::Mem m = ax::ptr(base, i, shift);
    if (isa == Isa::Scalar)
      f32 ? cc.movss(v.xmm(), m) : cc.movsd(v.xmm(), m);
    else
      cc.vmovups(v, m);
  };
  auto store = [&](const ax::Vec& v) {
    ax::Mem m = ax::ptr(po, i, shift);
    if (isa == Isa::Scalar)
      f32 ? cc.movss(m, v.xmm()) : cc.movsd(m, v.xmm());
    else
      cc.vmovups(m, v);
  };

  Label vector_loop = cc.newLabel(), tail = cc.newLabel(), done = cc.newLabel();
  cc.xor_(i, i);
  cc.bind(vector_loop);
  cc.mov(rem, n);
  cc.sub(rem, i);
  cc.cmp(rem, lanes);
  cc.jl(tail);
  load(va, pa);
  if (binary) load(vb, pb);
  inj.emit(fn, vr, va, vb);
  store(vr);
  cc.add(i, lanes);
  cc.jmp(vector_loop);

  cc.bind(tail);
  if (isa != Isa::Scalar) {
    cc.test(rem, rem);
    cc.jz(done);
    ax::Mem ma = ax::ptr(pa, i, shift), mb = ax::ptr(pb, i, shift), mo = ax::ptr(po, i, shift);
    if (isa == Isa::Avx512) {
      ax::Gp bitsr = cc.newInt64("tail_bits");
      ax::KReg k = cc.newKq("tail_k");
      cc.mov(bitsr, 1);
      cc.shl(bitsr, rem.r8());
      cc.dec(bitsr);
      cc.kmovq(k, bitsr);
      // The mask counts elements: vmovupd for float64 lanes, vmovups for float32.
      const asmjit::InstId mov = f32 ? ax::Inst::kIdVmovups : ax::Inst::kIdVmovupd;
      cc.k(k).z().emit(mov, va, ma);
      if (binary) cc.k(k).z().emit(mov, vb, mb);
      inj.emit(fn, vr, va, vb);
      cc.k(k).emit(mov, mo, vr);
    } else {
      ax::Gp table = cc.newIntPtr("tail_table"), off = cc.newInt64("tail_off");
      ax::Vec mask = cc.newYmm("tail_mask");
      cc.mov(table, imm(f32 ? reinterpret_cast<uintptr_t>(kTailMask32)
                            : reinterpret_cast<uintptr_t>(kTailMask64)));
      cc.mov(off, lanes);
      cc.sub(off, rem);
      cc.vmovdqu(mask, ax::ptr(table, off, shift));
      if (f32) {
        cc.vmaskmovps(va, mask, ma);
        if (binary) cc.vmaskmovps(vb, mask, mb);
      } else {
        cc.vmaskmovpd(va, mask, ma);
        if (binary) cc.vmaskmovpd(vb, mask, mb);
      }
      inj.emit(fn, vr, va, vb);
      f32 ? cc.vmaskmovps(mo, mask, vr) : cc.vmaskmovpd(mo, mask, vr);
    }
  }
  cc.bind(done);
  cc.endFunc();
  cc.finalize();

  KernelFn kernel = nullptr;
  if (!errors.failed) jit_runtime().add(&kernel, &code);
  if (errors.failed || !kernel) {
    if (error) *error = errors.failed ? errors.text : "JitRuntime::add failed";
    return nullptr;
  }
  return kernel;
}

// ---- references and ulp distance --------------------------------------------------------------

double ref_f32(MathFn fn, double a, double b) {
  switch (fn) {
    case MathFn::Exp: return std::exp(a);
    case MathFn::Log: return std::log(a);
    case MathFn::Log1p: return std::log1p(a);
    case MathFn::Expm1: return std::expm1(a);
    case MathFn::Tanh: return std::tanh(a);
    case MathFn::Sigmoid: return 1.0 / (1.0 + std::exp(-a));
    case MathFn::Erf: return std::erf(a);
    case MathFn::Sin: return std::sin(a);
    case MathFn::Cos: return std::cos(a);
    case MathFn::Tan: return std::tan(a);
    case MathFn::Atan: return std::atan(a);
    case MathFn::Atan2: return std::atan2(a, b);
    case MathFn::Sqrt: return std::sqrt(a);
    case MathFn::Pow: return std::pow(a, b);
  }
  return 0;
}

long double ref_f64(MathFn fn, long double a, long double b) {
  switch (fn) {
    case MathFn::Exp: return expl(a);
    case MathFn::Log: return logl(a);
    case MathFn::Log1p: return log1pl(a);
    case MathFn::Expm1: return expm1l(a);
    case MathFn::Tanh: return tanhl(a);
    case MathFn::Sigmoid: return 1.0L / (1.0L + expl(-a));
    case MathFn::Erf: return erfl(a);
    case MathFn::Sin: return sinl(a);
    case MathFn::Cos: return cosl(a);
    case MathFn::Tan: return tanl(a);
    case MathFn::Atan: return atanl(a);
    case MathFn::Atan2: return atan2l(a, b);
    case MathFn::Sqrt: return std::sqrt(static_cast<double>(a));  // IEEE: sqrtl would round twice
    case MathFn::Pow: return powl(a, b);
  }
  return 0;
}

template <class T> T reference(MathFn fn, T a, T b) {
  if constexpr (sizeof(T) == 4)
    return static_cast<float>(ref_f32(fn, a, b));
  else
    return static_cast<double>(ref_f64(fn, a, b));
}

constexpr uint64_t kMismatch = ~uint64_t{0};  // NaN-ness or the sign of a zero differs

template <class T> int64_t ordinal(T v) {
  using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  const U u = std::bit_cast<U>(v);
  const U sign = U{1} << (sizeof(T) * 8 - 1);
  return (u & sign) ? -static_cast<int64_t>(u & ~sign) : static_cast<int64_t>(u);
}

template <class T> uint64_t ulp_distance(T got, T want) {
  if (std::isnan(got) || std::isnan(want))
    return std::isnan(got) && std::isnan(want) ? 0 : kMismatch;
  if (got == 0 && want == 0) return std::signbit(got) == std::signbit(want) ? 0 : kMismatch;
  const int64_t d = ordinal(got) - ordinal(want);
  return static_cast<uint64_t>(d < 0 ? -d : d);
}

// ---- inputs ---------------------------------------------------------------------------------

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * ((next() >> 11) * 0x1p-53); }
  /// sign * 2^U(lo_exp, hi_exp) with a random mantissa: log-uniform magnitudes.
  double log_uniform(double lo_exp, double hi_exp, bool random_sign) {
    double m = std::ldexp(1.0 + (next() >> 12) * 0x1p-52, 0);
    double v = std::ldexp(m, static_cast<int>(std::floor(uniform(lo_exp, hi_exp))));
    return random_sign && (next() & 1) ? -v : v;
  }
};

template <class T> std::vector<T> special_values() {
  using L = std::numeric_limits<T>;
  std::vector<T> v = {T(0),
                      T(1),
                      T(0.5),
                      T(2),
                      T(3),
                      T(10),
                      T(0.1),
                      T(1e-3),
                      T(100),
                      T(88.5),
                      T(89),
                      T(709),
                      T(710),
                      T(745),
                      T(-745),
                      T(-746),
                      T(103.5),
                      T(104),
                      T(-104),
                      T(9),
                      T(20),
                      T(1e5),
                      T(3.14159265358979323846),
                      T(1.57079632679489661923),
                      T(0.78539816339744830962),
                      T(5.93),
                      T(3.92),
                      T(0.84375),
                      T(1e10),
                      T(1e20),
                      T(1e30),
                      T(65536),
                      T(1048576),
                      L::min(),
                      L::denorm_min(),
                      L::max(),
                      L::epsilon(),
                      L::infinity(),
                      T(1) - L::epsilon(),
                      T(1) + L::epsilon()};
  const size_t n = v.size();
  for (size_t k = 0; k < n; ++k) v.push_back(-v[k]);
  v.push_back(L::quiet_NaN());
  v.push_back(-L::quiet_NaN());
  return v;
}

template <class T> T from_bits(uint64_t b) {
  if constexpr (sizeof(T) == 4)
    return std::bit_cast<float>(static_cast<uint32_t>(b));
  else
    return std::bit_cast<double>(b);
}

/// Sample counts are multiplied by FRAMEJIT_ULP_SAMPLES (default 1) for longer runs off CI.
int scaled(int n) {
  static const int factor = [] {
    const char* e = std::getenv("FRAMEJIT_ULP_SAMPLES");
    return e ? std::max(1, std::atoi(e)) : 1;
  }();
  return n * factor;
}

/// Unary inputs for fn at type T (see the file comment for the domains).
template <class T> std::vector<T> make_unary_inputs(MathFn fn) {
  constexpr bool f32 = sizeof(T) == 4;
  std::vector<T> v = special_values<T>();
  Rng rng{0x5eed0000u + static_cast<unsigned>(fn) * 7919u + (f32 ? 1 : 2)};
  // Dense interval where the function is not saturated.
  double lo = -10, hi = 10;
  switch (fn) {
    case MathFn::Exp:
    case MathFn::Expm1:
    case MathFn::Sigmoid:
      lo = f32 ? -104 : -746;
      hi = f32 ? 89 : 710;
      break;
    case MathFn::Log:
    case MathFn::Log1p:
      lo = -1;
      hi = 3;
      break;
    case MathFn::Tanh:
      lo = f32 ? -10 : -20;
      hi = -lo;
      break;
    case MathFn::Erf:
      lo = -6.5;
      hi = 6.5;
      break;
    case MathFn::Sin:
    case MathFn::Cos:
    case MathFn::Tan:
      lo = f32 ? -1e4 : -1e5;
      hi = -lo;
      break;
    default: break;
  }
  if (f32) {
    // 2M bit patterns, one per 2048-pattern bucket over all 2^32, at a random offset.
    for (uint64_t k = 0; k < (uint64_t{1} << 21) * scaled(1); ++k)
      v.push_back(from_bits<T>((k << 11) | (rng.next() & 2047)));
    for (int k = 0; k < scaled(300000); ++k) v.push_back(static_cast<T>(rng.uniform(lo, hi)));
    return v;
  }
  // float64: log-uniform over every binade (both signs), then dense intervals.
  for (int k = 0; k < scaled(600000); ++k) v.push_back(rng.log_uniform(-1075, 1024, true));
  for (int k = 0; k < scaled(600000); ++k) v.push_back(rng.uniform(lo, hi));
  for (int k = 0; k < scaled(200000); ++k)
    v.push_back(rng.log_uniform(-40, 4, true));  // small arguments
  if (fn == MathFn::Log || fn == MathFn::Log1p)
    for (int k = 0; k < scaled(200000); ++k)
      v.push_back(fn == MathFn::Log ? 1 + rng.uniform(-0.3, 0.5) : rng.uniform(-1, 1));
  if (fn == MathFn::Sin || fn == MathFn::Cos || fn == MathFn::Tan)
    for (int k = 0; k < scaled(300000); ++k)
      v.push_back(rng.log_uniform(-30, 17, true));  // |x| < 1.3e5
  return v;
}

/// (a, b) pairs for atan2(a, b) and pow(a, b).
template <class T> void make_binary_inputs(MathFn fn, std::vector<T>& a, std::vector<T>& b) {
  constexpr bool f32 = sizeof(T) == 4;
  const std::vector<T> sp = special_values<T>();
  for (T x : sp)
    for (T y : sp) a.push_back(x), b.push_back(y);
  Rng rng{0xb1aa0000u + static_cast<unsigned>(fn) * 31u + (f32 ? 1 : 2)};
  const int bits = f32 ? 32 : 64;
  const double emin = f32 ? -150 : -1075, emax = f32 ? 128 : 1024;
  const double log2_max = f32 ? 150 : 1100;
  auto push = [&](double x, double y) {
    a.push_back(static_cast<T>(x)), b.push_back(static_cast<T>(y));
  };
  for (int k = 0; k < scaled(400000); ++k) {  // raw bit patterns
    uint64_t r1 = rng.next(), r2 = rng.next();
    if (bits == 32) r1 >>= 32, r2 >>= 32;
    a.push_back(from_bits<T>(r1)), b.push_back(from_bits<T>(r2));
  }
  if (fn == MathFn::Atan2) {
    for (int k = 0; k < scaled(1000000); ++k) {  // independent magnitudes
      push(rng.log_uniform(emin, emax, true), rng.log_uniform(emin, emax, true));
    }
    for (int k = 0; k < scaled(600000); ++k) {  // comparable magnitudes: the interesting region
      double e = rng.uniform(emin + 40, emax - 40);
      push(rng.log_uniform(e - 3, e + 3, true), rng.log_uniform(e - 3, e + 3, true));
    }
    return;
  }
  // pow: positive bases over every binade with exponents that keep the result around the range.
  for (int k = 0; k < scaled(900000); ++k) {
    double x = rng.log_uniform(emin, emax, false);
    double l = std::fabs(std::log2(x));
    double ymax = std::min(log2_max / std::max(l, 1e-300), f32 ? 1e9 : 1e18);
    push(x, rng.uniform(-ymax, ymax));
  }
  for (int k = 0; k < scaled(300000); ++k) {  // bases near 1, large exponents
    double x = 1 + rng.log_uniform(f32 ? -24 : -53, -1, true);
    double ymax = log2_max / std::fabs(std::log2(static_cast<T>(x)));
    push(x, rng.uniform(-ymax, ymax));
  }
  for (int k = 0; k < scaled(300000); ++k) {  // negative bases, integer exponents
    double x = -rng.log_uniform(-8, 8, false);
    push(x, std::nearbyint(rng.uniform(-200, 200)));
  }
  for (int k = 0; k < scaled(100000); ++k)
    push(rng.log_uniform(-4, 4, true), rng.uniform(-10, 10));  // small y
}

// ---- the ulp test -----------------------------------------------------------------------------

std::vector<Isa> runnable_isas() {
  std::vector<Isa> v = {Isa::Scalar};
  if (cpu_isa() >= Isa::Avx2) v.push_back(Isa::Avx2);
  if (cpu_isa() >= Isa::Avx512) v.push_back(Isa::Avx512);
  return v;
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

struct Param {
  MathFn fn;
  DType dtype;
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << math_fn_name(p.fn) << " " << rt::dtype_name(p.dtype);
}

std::string param_name(const testing::TestParamInfo<Param>& info) {
  return std::string(math_fn_name(info.param.fn)) +
         (info.param.dtype == DType::Float32 ? "_f32" : "_f64");
}

class MathInjectorUlp : public testing::TestWithParam<Param> {};

template <class T> void check_ulp(MathFn fn) {
  constexpr bool f32 = sizeof(T) == 4;
  const DType dt = f32 ? DType::Float32 : DType::Float64;
  const bool binary = math_fn_is_binary(fn);
  std::vector<T> a, b;
  if (binary)
    make_binary_inputs<T>(fn, a, b);
  else
    a = make_unary_inputs<T>(fn);
  if (b.empty()) b.assign(a.size(), T(0));
  const size_t n = a.size();
  std::vector<T> want(n), got(n);
  parallel_for(n, [&](size_t k) { want[k] = reference<T>(fn, a[k], b[k]); });
  // sqrt is the IEEE instruction: exact. Everything else: the 4 ulp.
  const uint64_t limit = fn == MathFn::Sqrt ? 0 : 4;

  for (Isa isa : runnable_isas()) {
    std::string error;
    KernelFn k = build_kernel(fn, dt, isa, &error);
    ASSERT_NE(k, nullptr) << isa_name(isa) << ": " << error;
    std::fill(got.begin(), got.end(), T(-12345));
    // Odd split: exercises the masked tail twice.
    const int64_t half = static_cast<int64_t>(n / 2) | 1;
    k(a.data(), b.data(), got.data(), half);
    k(a.data() + half, b.data() + half, got.data() + half, static_cast<int64_t>(n) - half);
    uint64_t worst = 0, bad = 0;
    size_t worst_at = 0;
    for (size_t j = 0; j < n; ++j) {
      const uint64_t d = ulp_distance(got[j], want[j]);
      if (d != kMismatch && d > worst) worst = d, worst_at = j;
      if (d <= limit) continue;
      if (++bad <= 5) {
        ADD_FAILURE() << math_fn_name(fn) << (f32 ? " float32 " : " float64 ") << isa_name(isa)
                      << std::hexfloat << ": a=" << a[j] << " b=" << b[j] << " got " << got[j]
                      << " want " << want[j] << std::dec
                      << (d == kMismatch ? " (NaN or zero sign differs)"
                                         : " (" + std::to_string(d) + " ulp)");
      }
    }
    std::printf("[ ulp      ] %-8s %s %-6s  max %3llu ulp  (%zu inputs, worst at a=%a b=%a)%s\n",
                math_fn_name(fn), f32 ? "float32" : "float64", isa_name(isa),
                static_cast<unsigned long long>(worst), n, static_cast<double>(a[worst_at]),
                static_cast<double>(b[worst_at]), bad ? "  FAILURES" : "");
    testing::Test::RecordProperty(std::string("max_ulp_") + isa_name(isa), static_cast<int>(worst));
    EXPECT_EQ(bad, 0u) << math_fn_name(fn) << " " << isa_name(isa) << ": " << bad
                       << " inputs off by more than " << limit
                       << " ulp or with the wrong NaN/zero sign";
  }
}

TEST_P(MathInjectorUlp, WithinFourUlp) {
  if (GetParam().dtype == DType::Float32)
    check_ulp<float>(GetParam().fn);
  else
    check_ulp<double>(GetParam().fn);
}

std::vector<Param> all_params() {
  std::vector<Param> v;
  for (int f = 0; f < kNumMathFns; ++f)
    for (DType dt : {DType::Float32, DType::Float64}) v.push_back({static_cast<MathFn>(f), dt});
  return v;
}

INSTANTIATE_TEST_SUITE_P(All, MathInjectorUlp, testing::ValuesIn(all_params()), param_name);

// ---- exact special values (NumPy's results, spelled out) ---------------------------------------

template <class T> void expect_exact(MathFn fn, T a, T b, T want) {
  const DType dt = sizeof(T) == 4 ? DType::Float32 : DType::Float64;
  for (Isa isa : runnable_isas()) {
    std::string error;
    KernelFn k = build_kernel(fn, dt, isa, &error);
    ASSERT_NE(k, nullptr) << error;
    // One lane in a full vector of the value and one through the tail.
    std::vector<T> va(17, a), vb(17, b), out(17, T(-7));
    k(va.data(), vb.data(), out.data(), 17);
    for (T g : out) {
      const bool same = (std::isnan(g) && std::isnan(want)) ||
                        (g == want && std::signbit(g) == std::signbit(want));
      EXPECT_TRUE(same) << math_fn_name(fn) << (sizeof(T) == 4 ? " f32 " : " f64 ") << isa_name(isa)
                        << std::hexfloat << " f(" << a
                        << (math_fn_is_binary(fn) ? ", " + std::to_string(b) : "") << ") = " << g
                        << ", want " << want;
      if (!same) break;
    }
  }
}

template <class T> void check_specials() {
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  const T pi = T(3.14159265358979323846), half_pi = T(1.57079632679489661923);
  using F = MathFn;
  struct Case {
    F fn;
    T a, b, want;
  };
  const Case cases[] = {
      {F::Exp, -inf, 0, 0},
      {F::Exp, inf, 0, inf},
      {F::Exp, nan, 0, nan},
      {F::Exp, T(-0.0), 0, 1},
      {F::Exp, T(1000), 0, inf},
      {F::Exp, T(-1000), 0, 0},
      {F::Log, 0, 0, -inf},
      {F::Log, T(-0.0), 0, -inf},
      {F::Log, -1, 0, nan},
      {F::Log, inf, 0, inf},
      {F::Log, -inf, 0, nan},
      {F::Log, 1, 0, 0},
      {F::Log, nan, 0, nan},
      {F::Log1p, -1, 0, -inf},
      {F::Log1p, -2, 0, nan},
      {F::Log1p, T(-0.0), 0, T(-0.0)},
      {F::Log1p, inf, 0, inf},
      {F::Expm1, T(-0.0), 0, T(-0.0)},
      {F::Expm1, -inf, 0, -1},
      {F::Expm1, inf, 0, inf},
      {F::Expm1, T(1000), 0, inf},
      {F::Tanh, inf, 0, 1},
      {F::Tanh, -inf, 0, -1},
      {F::Tanh, T(-0.0), 0, T(-0.0)},
      {F::Tanh, nan, 0, nan},
      {F::Sigmoid, inf, 0, 1},
      {F::Sigmoid, -inf, 0, 0},
      {F::Sigmoid, 0, 0, T(0.5)},
      {F::Sigmoid, nan, 0, nan},
      {F::Erf, inf, 0, 1},
      {F::Erf, -inf, 0, -1},
      {F::Erf, T(-0.0), 0, T(-0.0)},
      {F::Erf, nan, 0, nan},
      {F::Sin, T(-0.0), 0, T(-0.0)},
      {F::Sin, inf, 0, nan},
      {F::Sin, -inf, 0, nan},
      {F::Sin, nan, 0, nan},
      {F::Cos, T(-0.0), 0, 1},
      {F::Cos, inf, 0, nan},
      {F::Tan, T(-0.0), 0, T(-0.0)},
      {F::Tan, -inf, 0, nan},
      {F::Atan, inf, 0, half_pi},
      {F::Atan, -inf, 0, -half_pi},
      {F::Atan, T(-0.0), 0, T(-0.0)},
      {F::Atan2, 0, 0, 0},
      {F::Atan2, T(-0.0), 0, T(-0.0)},
      {F::Atan2, 0, T(-0.0), pi},
      {F::Atan2, T(-0.0), T(-0.0), -pi},
      {F::Atan2, 0, -1, pi},
      {F::Atan2, T(-0.0), -1, -pi},
      {F::Atan2, 1, 0, half_pi},
      {F::Atan2, -1, T(-0.0), -half_pi},
      {F::Atan2, inf, inf, T(0.78539816339744830962)},
      {F::Atan2, -inf, -inf, T(-2.35619449019234492885)},
      {F::Atan2, 1, -inf, pi},
      {F::Atan2, -1, inf, T(-0.0)},
      {F::Atan2, inf, 5, half_pi},
      {F::Atan2, nan, 1, nan},
      {F::Atan2, 1, nan, nan},
      {F::Sqrt, T(-0.0), 0, T(-0.0)},
      {F::Sqrt, -1, 0, nan},
      {F::Sqrt, inf, 0, inf},
      {F::Sqrt, 4, 0, 2},
      {F::Pow, nan, 0, 1},
      {F::Pow, inf, T(-0.0), 1},
      {F::Pow, 1, nan, 1},
      {F::Pow, 1, inf, 1},
      {F::Pow, -1, inf, 1},
      {F::Pow, -1, -inf, 1},
      {F::Pow, -2, T(0.5), nan},
      {F::Pow, -2, 3, -8},
      {F::Pow, -2, 2, 4},
      {F::Pow, T(-0.0), 3, T(-0.0)},
      {F::Pow, T(-0.0), 2, 0},
      {F::Pow, T(-0.0), -3, -inf},
      {F::Pow, T(-0.0), -2, inf},
      {F::Pow, 0, T(-0.5), inf},
      {F::Pow, 0, T(0.5), 0},
      {F::Pow, T(-0.0), T(0.5), 0},
      {F::Pow, T(0.5), inf, 0},
      {F::Pow, T(0.5), -inf, inf},
      {F::Pow, 2, inf, inf},
      {F::Pow, 2, -inf, 0},
      {F::Pow, -inf, 3, -inf},
      {F::Pow, -inf, -3, T(-0.0)},
      {F::Pow, -inf, T(0.5), inf},
      {F::Pow, -inf, -2, 0},
      {F::Pow, inf, T(-0.5), 0},
      {F::Pow, inf, 2, inf},
      {F::Pow, nan, 1, nan},
      {F::Pow, 2, nan, nan},
      {F::Pow, 2, T(10000), inf},
      {F::Pow, -2, T(10001), -inf},
      {F::Pow, 2, T(-10000), 0},
      {F::Pow, -2, T(-10001), T(-0.0)},
      {F::Pow, sizeof(T) == 4 ? T(-1e-20) : T(-1e-200), 3, T(-0.0)},
  };
  for (const Case& c : cases) expect_exact<T>(c.fn, c.a, c.b, c.want);
}

TEST(MathInjectorSpecials, Float32) { check_specials<float>(); }
TEST(MathInjectorSpecials, Float64) { check_specials<double>(); }

// ---- every float32 ------------------------------------------------------------------------------

// Not part of CI (minutes per function on a few cores): all 2^32 float32 inputs of every unary
// function, at every ISA the host runs. Run with --gtest_also_run_disabled_tests
// --gtest_filter='*Exhaustive*'; FRAMEJIT_EXHAUSTIVE_FNS=exp,tanh limits the functions.
TEST(MathInjectorExhaustive, DISABLED_EveryFloat32) {
  const char* only = std::getenv("FRAMEJIT_EXHAUSTIVE_FNS");
  constexpr size_t kChunk = size_t{1} << 24;
  std::vector<float> in(kChunk), want(kChunk), got(kChunk);
  const std::vector<Isa> isas = runnable_isas();
  for (int f = 0; f < kNumMathFns; ++f) {
    const MathFn fn = static_cast<MathFn>(f);
    if (math_fn_is_binary(fn)) continue;
    if (only && !std::strstr(only, math_fn_name(fn))) continue;
    std::vector<KernelFn> kernels;
    for (Isa isa : isas) {
      std::string error;
      kernels.push_back(build_kernel(fn, DType::Float32, isa, &error));
      ASSERT_NE(kernels.back(), nullptr) << error;
    }
    std::vector<uint64_t> worst(isas.size(), 0), bad(isas.size(), 0);
    std::vector<float> worst_x(isas.size(), 0);
    for (uint64_t base = 0; base < (uint64_t{1} << 32); base += kChunk) {
      for (size_t j = 0; j < kChunk; ++j)
        in[j] = std::bit_cast<float>(static_cast<uint32_t>(base + j));
      parallel_for(kChunk, [&](size_t j) { want[j] = reference<float>(fn, in[j], 0.0f); });
      for (size_t i = 0; i < isas.size(); ++i) {
        const size_t parts = 256;
        parallel_for(parts, [&](size_t p) {
          const size_t lo = kChunk * p / parts, hi = kChunk * (p + 1) / parts;
          kernels[i](in.data() + lo, in.data() + lo, got.data() + lo,
                     static_cast<int64_t>(hi - lo));
        });
        std::vector<uint64_t> part_worst(parts, 0), part_bad(parts, 0);
        std::vector<size_t> part_at(parts, 0), part_first_bad(parts, kChunk);
        parallel_for(parts, [&](size_t p) {
          for (size_t j = kChunk * p / parts; j < kChunk * (p + 1) / parts; ++j) {
            const uint64_t d = ulp_distance(got[j], want[j]);
            if (d != kMismatch && d > part_worst[p]) part_worst[p] = d, part_at[p] = j;
            if (d > 4 && part_bad[p]++ == 0) part_first_bad[p] = j;
          }
        });
        for (size_t p = 0; p < parts; ++p) {
          if (part_worst[p] > worst[i]) worst[i] = part_worst[p], worst_x[i] = in[part_at[p]];
          if (part_bad[p] && bad[i] < 5) {
            const size_t j = part_first_bad[p];
            ADD_FAILURE() << math_fn_name(fn) << " " << isa_name(isas[i]) << std::hexfloat
                          << ": x=" << in[j] << " got " << got[j] << " want " << want[j];
          }
          bad[i] += part_bad[p];
        }
      }
    }
    for (size_t i = 0; i < isas.size(); ++i)
      std::printf("[ all f32  ] %-8s %-6s  max %3llu ulp at %a, %llu over 4 ulp\n",
                  math_fn_name(fn), isa_name(isas[i]), static_cast<unsigned long long>(worst[i]),
                  static_cast<double>(worst_x[i]), static_cast<unsigned long long>(bad[i]));
    std::fflush(stdout);
  }
}

// ---- AVX-512 code generation, whatever the host ------------------------------------------------

TEST(MathInjectorCodegen, EveryFunctionAtEveryIsaAssembles) {
  for (int f = 0; f < kNumMathFns; ++f)
    for (DType dt : {DType::Float32, DType::Float64})
      for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
        std::string error;
        EXPECT_NE(build_kernel(static_cast<MathFn>(f), dt, isa, &error), nullptr)
            << math_fn_name(static_cast<MathFn>(f)) << " " << rt::dtype_name(dt) << " "
            << isa_name(isa) << ": " << error;
      }
}

}  // namespace
}  // namespace framejit::jit::x86
