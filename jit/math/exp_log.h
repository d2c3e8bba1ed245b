// exp_log.h — exp, expm1, log and log1p, and the exp/log cores other families reuse
// (Note [One math library] in jit/math/ops.h).
#pragma once

#include <limits>

#include "jit/math/ops.h"

namespace framejit::jit::math {

namespace exp_log_detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// e^r = 1 + r + r^2 P(r) on |r| <= ln2/2 (minimax, relative error 2^-31 / 2^-63 after rounding
// the coefficients).
inline constexpr double kExpF32[] = {0x1.0000000000000p-1, 0x1.55553c0000000p-3,  0x1.5554f20000000p-5,
                                     0x1.11371e0000000p-7, 0x1.6d40f40000000p-10, 0x1.6b95f00000000p-13};
inline constexpr double kExpF64[] = {0x1.0000000000000p-1,  0x1.555555555555dp-3,  0x1.555555555556cp-5,
                                     0x1.111111110e549p-7,  0x1.6c16c16c0a41fp-10, 0x1.a01a01b5f4d92p-13,
                                     0x1.a01a01e8a9500p-16, 0x1.71ddeaaba5180p-19, 0x1.27e44a6e6e7a2p-22,
                                     0x1.af744b24f0c6bp-26, 0x1.2050d5b875ec9p-29};
// ln2 = kLn2Hi + kLn2Lo. The float64 high part has 42 significant bits so n * kLn2Hi is exact for
// |n| < 2^11 without FMA; the float32 one relies on FMA (always there on the float32 path).
inline constexpr double kLn2HiF64 = 0x1.62e42fefa3800p-1, kLn2LoF64 = 0x1.ef35793c76730p-45;
inline constexpr double kLn2HiF32 = 0x1.62e430p-1, kLn2LoF32 = -0x1.05c610p-29;
inline constexpr double kLog2e = 0x1.71547652b82fep+0;
// log2(e) = kLog2eHiF32 + kLog2eLoF32 to about 2^-50 (Note [exp through the GPU's ex2]).
inline constexpr double kLog2eHiF32 = 0x1.715476p+0, kLog2eLoF32 = 0x1.4ae0c0p-26;

// log(1+f) = f + f^2 Q(f), f in [sqrt(1/2)-1, sqrt(2)-1] (float32, relative error 2^-27.8).
inline constexpr double kLogF32[] = {-0x1.fffff80000000p-2, 0x1.5555500000000p-2,  -0x1.0004300000000p-2,
                                     0x1.99a41a0000000p-3,  -0x1.5426300000000p-3, 0x1.226e4a0000000p-3,
                                     -0x1.0f3ca20000000p-3, 0x1.085d5a0000000p-3,  -0x1.384bc20000000p-4};
// float64: s = f/(2+f), z = s^2, 2 atanh(s) = 2s + s R, R = z T(z) on z <= (3-2sqrt2)^2
// (|error of R| <= 2^-58.5).
inline constexpr double kLogF64[] = {0x1.5555555555593p-1, 0x1.999999997fb2ep-2, 0x1.249249420f45bp-2,
                                     0x1.c71c51f33044ep-3, 0x1.74664338edfc3p-3, 0x1.39a14e226e3a4p-3,
                                     0x1.2f09a14b4bd35p-3};

}  // namespace exp_log_detail

/// |x| beyond which exp over/underflows for sure, yet n = round(x/ln2) keeps both halves normal.
template <class O>
double exp_clamp_limit(const O& o) {
  return o.f64() ? 1100.0 : 150.0;
}

/// exp's reduction for x already clamped to exp_clamp_limit(): e^x = (1 + em1) * s1 * s2 with
/// s1 = 2^n1, s2 = 2^n2, n1 + n2 = n, each factor a normal number (so subnormal results round
/// once). `x_lo`, when given, is a low-order part added to the reduced argument (pow's
/// double-double). `scale` says what the caller knows of x:
///   kTwoScales    nothing beyond the clamp: s1 and s2 as above
///   kOneScale     x keeps 2^n normal (|x| < 87 for float32): s1 = 2^n, s2 left empty
///   kNonPositive  x <= 0: s1 = 2^(n + B) is normal and s2 the constant 2^-B (B = 100 for
///                 float32, 600 for float64), one integer step fewer than splitting n in two
enum class ExpScale { kTwoScales, kOneScale, kNonPositive };

// Note [exp through the GPU's ex2]
// A GPU's special-function unit computes 2^f (PTX ex2.approx.ftz.f32, relative error about 2^-22)
// at a quarter of the FMA rate on its own pipe: exp's polynomial is nine arithmetic instructions
// of the float32 core, and element-wise chains full of exp (sigmoid, softmax, GELU) run out of
// arithmetic before memory bandwidth. So where an Ops class offers exp2_approx (PtxOps, float32),
// exp_core reduces x ln2-wise instead: x log2(e) = n + f with f = x*L_hi - n + x*L_lo, two FMAs
// whose error is about 2^-25 absolute (x*L_hi is exact inside the first), and 2^f comes from the
// unit — the scheme of CUDA's own expf, and its bound: within 2 ulp of the exact result
// (tests/gpu/test_math.cpp measures every float32 input). The scaling by 2^n is unchanged.
// What needs e^r - 1 itself (expm1; tanh near 0) keeps the polynomial, since 2^f - 1 cancels; so
// does sigmoid, whose quotient e/(1+e) passes exp's error on whole and lands 3 ulp out on 6827
// float32 inputs with the unit's exp (H200, every float32 measured), 2 with the polynomial.
// Consequence: exp, erf and pow in float32 may differ from the x86 kernels' results by a few ulp
// on the GPU — each within its bound of the exact value, not equal to each other.
template <class O>
concept HasExp2Approx = requires(O& o, const typename O::Vec& v) { o.exp2_approx(v); };

template <class O>
bool use_exp2_approx(const O& o) {
  if constexpr (HasExp2Approx<O>)
    return !o.f64();
  else
    return false;
}

/// e^x = (1 + em1) * s1 * s2, or p * s1 * s2 where the core came from exp2_approx (has_p).
template <class O>
struct ExpCore {
  typename O::Vec em1;
  typename O::Vec p;
  typename O::Vec s1;
  typename O::Vec s2;
  bool has_s2 = false;
  bool has_p = false;
};

/// `polynomial`: the core may not come from exp2_approx — the caller reads em1 (expm1, tanh), or
/// needs exp nearer than 2 ulp (sigmoid, whose quotient adds its own rounding).
template <class O>
ExpCore<O> exp_core(O& o, const typename O::Vec& x, const typename O::Vec* x_lo = nullptr,
                    ExpScale scale = ExpScale::kTwoScales, bool polynomial = false) {
  using namespace exp_log_detail;
  using Vec = typename O::Vec;
  const bool d = o.f64();
  Vec t = o.mul_round_bits(x, kLog2e);  // low bits: n = round(x / ln2)
  Vec n = o.sub(t, o.c(o.magic()));
  ExpCore<O> e;
  if (!polynomial && use_exp2_approx(o)) {
    if constexpr (HasExp2Approx<O>) {  // Note [exp through the GPU's ex2]
      Vec f = o.fms(x, o.c(kLog2eHiF32), n);
      f = o.fma(x, o.c(kLog2eLoF32), f);
      if (x_lo) f = o.fma(*x_lo, o.c(kLog2e), f);
      e.p = o.exp2_approx(f);
      e.has_p = true;
    }
  } else {
    Vec r = o.fnma(n, o.c(d ? kLn2HiF64 : kLn2HiF32), x);  // exact
    r = o.fnma(n, o.c(d ? kLn2LoF64 : kLn2LoF32), r);
    if (x_lo) r = o.add(r, *x_lo);
    Vec p = d ? o.poly(r, kExpF64) : o.poly(r, kExpF32);
    e.em1 = o.fma(o.mul(r, r), p, r);
  }
  if (scale == ExpScale::kOneScale) {
    e.s1 = o.pow2_from_bits(t);
    return e;
  }
  if (scale == ExpScale::kNonPositive) {
    // n >= -217 (float32; -1587 for float64) after the clamp, so n + B stays normal and the
    // product (1 + em1) * 2^(n+B) * 2^-B rounds once, like the split below.
    const int b = d ? 600 : 100;
    e.s1 = o.pow2_from_bits(o.iadd(t, o.bits(static_cast<uint64_t>(b))));
    e.s2 = o.load(o.c(d ? 0x1p-600 : 0x1p-100));
    e.has_s2 = true;
    return e;
  }
  // 2^n = 2^n1 * 2^(n-n1) with n1 = round(n/2): both factors stay normal for |n| <= 2*bias - 2.
  Vec t1 = o.mul_round_bits(n, 0.5);
  e.s1 = o.pow2_from_bits(t1);
  e.s2 = o.pow2_from_bits(o.isub(t, t1));  // the magic offsets cancel: n - n1
  e.has_s2 = true;
  return e;
}

/// (1 + em1) * s1 * s2, or p * s1 * s2
template <class O>
typename O::Vec exp_finish(O& o, const ExpCore<O>& e) {
  typename O::Vec v = e.has_p ? o.mul(e.p, e.s1) : o.fma(e.em1, e.s1, e.s1);
  return e.has_s2 ? o.mul(v, e.s2) : v;
}

template <class O>
typename O::Vec emit_exp(O& o, const typename O::Vec& x) {
  const double lim = exp_clamp_limit(o);
  return exp_finish(o, exp_core(o, o.clamp(x, -lim, lim)));
}

template <class O>
typename O::Vec emit_expm1(O& o, const typename O::Vec& x) {
  using Vec = typename O::Vec;
  const bool d = o.f64();
  // Below the lower clamp the result is -1 to the last bit; the clamp keeps 2^n normal.
  Vec xc = o.clamp(x, d ? -60.0 : -25.0, exp_clamp_limit(o));
  ExpCore<O> e = exp_core(o, xc, nullptr, ExpScale::kTwoScales, /*polynomial=*/true);
  // expm1(x) = 2^n em1 + (2^n - 1): the scaling is exact and 2^n - 1 is exact for small |n|.
  Vec s = o.mul(e.s1, e.s2);
  Vec moderate = o.fma(s, e.em1, o.sub(s, o.c(1.0)));
  // Where 2^n alone would overflow, the -1 is far below half an ulp: expm1 = exp.
  Vec res = o.blend(o.cmp(x, o.c(d ? 512.0 : 64.0), Cmp::kGt), moderate, exp_finish(o, e));
  // expm1(x) rounds to x for tiny |x|; this also gives -0.0 and subnormals exactly.
  return o.blend(o.cmp(o.abs(x), o.c(d ? 0x1p-54 : 0x1p-25), Cmp::kLt), res, x);
}

/// x = 2^e * (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)), for positive normal x (e as a float).
template <class O>
struct LogSplit {
  typename O::Vec e;
  typename O::Vec f;
};

template <class O>
LogSplit<O> log_split(O& o, const typename O::Vec& x) {
  using Vec = typename O::Vec;
  const bool d = o.f64();
  const uint64_t one = d ? 0x3FF0000000000000ull : 0x3F800000ull;
  const uint64_t sqrt_half = d ? 0x3FE6A09E667F3BCDull : 0x3F3504F3ull;
  const uint64_t mant_mask = d ? 0x000FFFFFFFFFFFFFull : 0x007FFFFFull;
  // Offsetting the bits by one - sqrt(1/2) moves the exponent boundary to sqrt(1/2).
  Vec ix = o.iadd(x, o.bits(one - sqrt_half));
  // The exponent field as a float: OR it under 2^mant, subtract 2^mant + bias.
  const double two_mant = d ? 0x1p52 : 0x1p23;
  Vec k = o.bor(o.ishr(ix, o.mant_bits()), o.c(two_mant));
  LogSplit<O> s;
  s.e = o.sub(k, o.c(two_mant + o.exp_bias()));
  Vec m = o.iadd(o.band(ix, o.bits(mant_mask)), o.bits(sqrt_half));
  s.f = o.sub(m, o.c(1.0));  // exact
  return s;
}

namespace exp_log_detail {

// log(2^e (1 + f)) + corr, where corr is a small correction (log1p's rounding of 1 + x).
template <class O>
typename O::Vec log_from_split(O& o, const LogSplit<O>& s, const typename O::Vec* corr) {
  using Vec = typename O::Vec;
  if (!o.f64()) {
    Vec q = o.poly(s.f, kLogF32);
    Vec lm = o.fma(o.mul(s.f, s.f), q, s.f);
    if (corr) lm = o.add(lm, *corr);
    return o.fma(s.e, o.c(kLn2HiF32), o.fma(s.e, o.c(kLn2LoF32), lm));
  }
  // log(1+f) = f - (hfsq - s (hfsq + R)), hfsq = f^2/2: the large terms f and e ln2_hi are exact
  // and everything rounded is small next to them.
  Vec sv = o.div(s.f, o.add(s.f, o.c(2.0)));
  Vec z = o.mul(sv, sv);
  Vec r = o.mul(z, o.poly(z, kLogF64));
  Vec hfsq = o.mul(o.mul(s.f, s.f), o.c(0.5));
  Vec lo = o.mul(s.e, o.c(kLn2LoF64));
  if (corr) lo = o.add(lo, *corr);
  Vec inner = o.fma(sv, o.add(hfsq, r), lo);
  Vec t = o.sub(o.sub(hfsq, inner), s.f);
  return o.fms(s.e, o.c(kLn2HiF64), t);
}

}  // namespace exp_log_detail

template <class O>
typename O::Vec emit_log(O& o, const typename O::Vec& x) {
  using namespace exp_log_detail;
  using Vec = typename O::Vec;
  using Mask = typename O::Mask;
  const bool d = o.f64();
  // Subnormals: scale into the normal range first.
  Mask sub = o.cmp(x, o.c(d ? 0x1p-1022 : 0x1p-126), Cmp::kLt);
  const double k = d ? 54.0 : 25.0;
  Vec xs = o.blend(sub, x, o.mul(x, o.c(d ? 0x1p54 : 0x1p25)));
  LogSplit<O> s = log_split(o, xs);
  s.e = o.sub(s.e, o.select_or_zero(sub, o.load(o.c(k))));
  Vec res = log_from_split(o, s, nullptr);
  res = o.blend(o.cmp(x, o.c(0.0), Cmp::kEq), res, o.c(-kInf));  // log(±0) = -inf
  res = o.blend(o.cmp(x, o.c(0.0), Cmp::kNge), res, o.c(kNaN));  // x < 0 or NaN
  return o.blend(o.cmp(x, o.c(kInf), Cmp::kEq), res, o.c(kInf));
}

template <class O>
typename O::Vec emit_log1p(O& o, const typename O::Vec& x) {
  using namespace exp_log_detail;
  using Vec = typename O::Vec;
  const bool d = o.f64();
  // u = 1 + x rounds; log1p(x) = log(u) + (x - (u - 1)) / u to first order.
  Vec u = o.add(x, o.c(1.0));
  Vec corr = o.div(o.sub(x, o.sub(u, o.c(1.0))), u);
  LogSplit<O> s = log_split(o, u);  // u >= 2^-24 when x > -1: never subnormal
  Vec res = log_from_split(o, s, &corr);
  res = o.blend(o.cmp(o.abs(x), o.c(d ? 0x1p-54 : 0x1p-25), Cmp::kLt), res, x);  // ±0, tiny
  res = o.blend(o.cmp(x, o.c(-1.0), Cmp::kEq), res, o.c(-kInf));
  res = o.blend(o.cmp(x, o.c(-1.0), Cmp::kNge), res, o.c(kNaN));  // x < -1 or NaN
  return o.blend(o.cmp(x, o.c(kInf), Cmp::kEq), res, o.c(kInf));
}

}  // namespace framejit::jit::math
