// pow.h — power (float64 only; float32 runs it widened): exp(y * log|x|) with log|x| carried as
// a double-double, then C99/NumPy's special cases applied as masks (Note [One math library]).
#pragma once

#include <limits>

#include "jit/math/exp_log.h"

namespace framejit::jit::math {


namespace pow_detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
inline constexpr double kLn2Hi = 0x1.62e42fefa3800p-1, kLn2Lo = 0x1.ef35793c76730p-45;  // hi: 42 bits
inline constexpr double kTwoThirdsHi = 0x1.5555555555555p-1, kTwoThirdsLo = 0x1.5555555555555p-55;
// ln m = 2s + (2/3) s^3 + s^5 P(s^2), s = (m-1)/(m+1), s^2 <= (3-2sqrt2)^2 (error 2^-65 of ln m).
inline constexpr double kLogTail[] = {0x1.9999999999b31p-2, 0x1.2492492457b67p-2, 0x1.c71c722d94baep-3,
                               0x1.745ce9d276a3bp-3, 0x1.3b1eef4ab0326p-3, 0x1.0f7f98df6ae07p-3,
                               0x1.0e45c91ac81e7p-3};

/// log|x| as hi + lo, relative error about 2^-64 (y log|x| must be right to ~2^-53 absolute
/// for |y log x| up to 745). |x| = 0 and inf give -inf and inf with lo = 0.
template <class O>
typename O::Pair log_dd(O& o, const typename O::Vec& ax) {
  using Vec = typename O::Vec;
  using Mask = typename O::Mask;
  using VecPair = typename O::Pair;
  Mask sub = o.cmp(ax, o.c(0x1p-1022), Cmp::kLt);
  LogSplit<O> sp = log_split(o, o.blend(sub, ax, o.mul(ax, o.c(0x1p54))));
  Vec e = o.sub(sp.e, o.select_or_zero(sub, o.load(o.c(54.0))));
  const Vec& f = sp.f;
  // s = f / (2 + f) = sh + sl
  Vec den = o.add(f, o.c(2.0));
  Vec den_lo = o.sub(f, o.sub(den, o.c(2.0)));  // (2 + f) - den, exactly
  Vec sh = o.div(f, den);
  VecPair q = o.two_prod(sh, den);
  Vec rem = o.sub(o.sub(o.sub(f, q.hi), q.lo), o.mul(sh, den_lo));  // f - sh (2 + f)
  Vec sl = o.div(rem, den);
  // (2/3) s^3 to about 2^-57 relative: sh^3 exactly as a pair, plus the first-order terms.
  VecPair z = o.two_prod(sh, sh);
  VecPair cube = o.two_prod(z.hi, sh);
  Vec cube_lo = o.add(cube.lo, o.fma(z.lo, sh, o.mul(o.mul(z.hi, sl), o.c(3.0))));
  VecPair t3 = o.two_prod(cube.hi, o.load(o.c(kTwoThirdsHi)));
  Vec t3_lo = o.add(t3.lo, o.fma(cube.hi, o.c(kTwoThirdsLo), o.mul(cube_lo, o.c(kTwoThirdsHi))));
  Vec tail = o.mul(o.mul(cube.hi, z.hi), o.poly(z.hi, kLogTail));
  VecPair a = o.fast_two_sum(o.add(sh, sh), t3.hi);
  Vec a_lo = o.add(a.lo, o.add(o.add(sl, sl), o.add(t3_lo, tail)));
  // + e ln2
  VecPair b = o.two_sum(o.mul(e, o.c(kLn2Hi)), a.hi);  // e * kLn2Hi is exact
  Vec b_lo = o.add(b.lo, o.fma(e, o.c(kLn2Lo), a_lo));
  VecPair l = o.fast_two_sum(b.hi, b_lo);
  Mask zero = o.cmp(ax, o.c(0.0), Cmp::kEq), inf = o.cmp(ax, o.c(kInf), Cmp::kEq);
  l.hi = o.blend(inf, o.blend(zero, l.hi, o.c(-kInf)), o.c(kInf));
  l.lo = o.blend(o.mor(zero, inf), l.lo, o.c(0.0));
  return l;
}

}  // namespace pow_detail

template <class O>
typename O::Vec emit_pow(O& o, const typename O::Vec& x, const typename O::Vec& y) {
  using namespace pow_detail;
  using Vec = typename O::Vec;
  using Mask = typename O::Mask;
  using VecPair = typename O::Pair;
  Vec ax = o.abs(x), ay = o.abs(y);
  VecPair l = log_dd(o, ax);
  // w = y log|x| as a pair. Where y l.hi overflows, is inf * 0, or (Dekker, Scalar path) y is
  // too large to split, the low part is garbage or NaN: zeroing NaN and clamping to [-1, 1] is
  // harmless, since such a w.hi is either 0 exactly (|x| = 1) or far out of exp's range.
  VecPair w = o.two_prod(y, l.hi);
  Vec w_lo = o.fma(y, l.lo, w.lo);
  w_lo = o.select_or_zero(o.cmp(w_lo, w_lo, Cmp::kOrd), w_lo);
  w_lo = o.min(o.max(w_lo, o.c(-1.0)), o.c(1.0));
  const double lim = exp_clamp_limit(o);
  Vec r = exp_finish(o, exp_core(o, o.clamp(w.hi, -lim, lim), &w_lo));

  // y's integer-ness: |y| >= 2^52 is always an integer (inf counts; it is never odd).
  Vec ry = o.sub(o.add(ay, o.c(0x1p52)), o.c(0x1p52));
  Mask y_int = o.mor(o.cmp(ry, ay, Cmp::kEq), o.cmp(ay, o.c(0x1p52), Cmp::kGe));
  Vec hy = o.mul(ay, o.c(0.5));
  Vec rhy = o.sub(o.add(hy, o.c(0x1p52)), o.c(0x1p52));
  Mask y_odd =
      o.mandnot(o.mandnot(y_int, o.cmp(rhy, hy, Cmp::kEq)), o.cmp(ay, o.c(0x1p53), Cmp::kGe));

  // Negative base (sign bit, so -0 and -inf too) to an odd integer: negative result.
  r = o.blend(o.mand(o.bit_set(x, 63), y_odd), r, o.neg(r));
  // Finite negative base to a non-integer: NaN.
  Mask neg_finite = o.mand(o.cmp(x, o.c(0.0), Cmp::kLt), o.cmp(x, o.c(-kInf), Cmp::kGt));
  r = o.blend(o.mandnot(neg_finite, y_int), r, o.c(kNaN));
  r = o.blend(o.cmp(x, y, Cmp::kUnord), r, o.add(x, y));
  // Exactly 1: pow(x, ±0) for any x (NaN too), pow(1, y) for any y, pow(±1, ±inf).
  Mask one = o.mor(o.cmp(y, o.c(0.0), Cmp::kEq), o.cmp(x, o.c(1.0), Cmp::kEq));
  one = o.mor(one, o.mand(o.cmp(ax, o.c(1.0), Cmp::kEq), o.cmp(ay, o.c(kInf), Cmp::kEq)));
  return o.blend(one, r, o.c(1.0));
}

}  // namespace framejit::jit::math
