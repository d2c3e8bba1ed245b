// atan.h — arctan and arctan2: reduction to |u| <= tan(pi/8) by the identities
// atan t = pi/4 + atan((t-1)/(t+1)) and pi/2 - atan(1/t), then a minimax odd polynomial
// (Note [One math library] in jit/math/ops.h).
#pragma once

#include <limits>

#include "jit/math/ops.h"

namespace framejit::jit::math {


namespace atan_detail {

inline constexpr double kInf = std::numeric_limits<double>::infinity();
inline constexpr double kTanPi8 = 0x1.a827999fcef32p-2, kTan3Pi8 = 0x1.3504f333f9de6p+1;
// pi/4 = hi + lo, with hi short enough that k * hi is exact for k <= 4 (50 / 21 significant bits).
inline constexpr double kPi4HiF64 = 0x1.921fb54442d18p-1, kPi4LoF64 = 0x1.1a62633145c07p-55;
inline constexpr double kPi4HiF32 = 0x1.921fb0p-1, kPi4LoF32 = 0x1.5110b4p-23;

// atan u = u + u^3 A(u^2) on |u| <= tan(pi/8) (relative error 2^-30.4 / 2^-59.4).
inline constexpr double kAtanF32[] = {-0x1.55554ap-2, 0x1.9991e2p-3, -0x1.23b9a2p-3, 0x1.b2245cp-4,
                               -0x1.f2e5f6p-5};
inline constexpr double kAtanF64[] = {-0x1.555555555553dp-2, 0x1.9999999995867p-3,  -0x1.24924922ad3d7p-3,
                               0x1.c71c70e5fecfap-4,  -0x1.745cf8da6474ap-4, 0x1.3b1118f81844cp-4,
                               -0x1.10ebb6bd2d8e4p-4, 0x1.df0f36752e306p-5,  -0x1.9cd26802936a6p-5,
                               0x1.37d4e3c8eba16p-5,  -0x1.2568e544dd7c5p-6};

/// u^3 A(u^2) — atan u minus u.
template <class O>
typename O::Vec atan_tail(O& o, const typename O::Vec& u) {
  using Vec = typename O::Vec;
  Vec z = o.mul(u, u);
  Vec a = o.f64() ? o.poly(z, kAtanF64) : o.poly(z, kAtanF32);
  return o.mul(o.mul(u, z), a);
}

}  // namespace atan_detail

template <class O>
typename O::Vec emit_atan(O& o, const typename O::Vec& x) {
  using namespace atan_detail;
  using Vec = typename O::Vec;
  using Mask = typename O::Mask;
  const bool d = o.f64();
  const double pi4_hi = d ? kPi4HiF64 : kPi4HiF32, pi4_lo = d ? kPi4LoF64 : kPi4LoF32;
  Vec ax = o.abs(x);
  Mask mid = o.cmp(ax, o.c(kTanPi8), Cmp::kGt);
  Mask big = o.cmp(ax, o.c(kTan3Pi8), Cmp::kGt);
  // u = t, (t-1)/(t+1) or -1/t; one division for all three.
  Vec num = o.blend(big, o.blend(mid, ax, o.sub(ax, o.c(1.0))), o.c(-1.0));
  Vec den = o.blend(big, o.blend(mid, o.load(o.c(1.0)), o.add(ax, o.c(1.0))), ax);
  Vec u = o.div(num, den);
  Vec zero = o.load(o.c(0.0));
  Vec base_hi = o.blend(big, o.blend(mid, zero, o.c(pi4_hi)), o.c(2 * pi4_hi));
  Vec base_lo = o.blend(big, o.blend(mid, zero, o.c(pi4_lo)), o.c(2 * pi4_lo));
  Vec res = o.add(base_hi, o.add(u, o.add(atan_tail(o, u), base_lo)));
  return o.bxor(res, o.sign_of(x));
}

template <class O>
typename O::Vec emit_atan2(O& o, const typename O::Vec& y, const typename O::Vec& x) {
  using namespace atan_detail;
  using Vec = typename O::Vec;
  using Mask = typename O::Mask;
  const bool d = o.f64();
  const double pi4_hi = d ? kPi4HiF64 : kPi4HiF32, pi4_lo = d ? kPi4LoF64 : kPi4LoF32;
  Vec ay = o.abs(y), ax = o.abs(x);
  Mask swap = o.cmp(ay, ax, Cmp::kGt);
  Vec mn = o.blend(swap, ay, ax), mx = o.blend(swap, ax, ay);
  // Keep mn + mx finite (scale down near the top of the range) and mx * tan(pi/8) exact enough
  // to pick the branch (scale up out of the subnormals); powers of two keep the ratio exact.
  Vec scale = o.blend(o.cmp(mx, o.c(d ? 0x1p-960 : 0x1p-100), Cmp::kLt), o.load(o.c(1.0)),
                      o.c(d ? 0x1p100 : 0x1p50));
  scale = o.blend(o.cmp(mx, o.c(d ? 0x1p1021 : 0x1p125), Cmp::kGt), scale, o.c(0.25));
  mn = o.mul(mn, scale);
  mx = o.mul(mx, scale);
  // atan(mn/mx) = k1 pi/4 + atan(u), k1 = 0 or 1 as mn/mx is below or above tan(pi/8).
  Mask both_inf = o.cmp(mn, o.c(kInf), Cmp::kEq);  // mn is the smaller: both are infinite
  Mask mid = o.mor(o.cmp(mn, o.mul(mx, o.c(kTanPi8)), Cmp::kGt), both_inf);
  Vec u = o.div(o.blend(mid, mn, o.sub(mn, mx)), o.blend(mid, mx, o.add(mn, mx)));
  // 0/0 and inf/inf: the angle is exactly k pi/4.
  u = o.blend(o.mor(o.cmp(mx, o.c(0.0), Cmp::kEq), both_inf), u, o.c(0.0));
  Vec p = o.add(u, atan_tail(o, u));
  // The quadrant: theta = K pi/4 + sigma p with
  //   |y| <= |x|, x >= +0:  K = k1,      sigma = +1
  //   |y| >  |x|, x >= +0:  K = 2 - k1,  sigma = -1
  //   |y| <= |x|, x <= -0:  K = 4 - k1,  sigma = -1
  //   |y| >  |x|, x <= -0:  K = 2 + k1,  sigma = +1
  // (x's sign bit decides, so atan2(±0, -0) = ±pi.)
  Mask xneg = o.bit_set(x, o.elem_bits() - 1);
  Mask sigma_neg = o.mxor(swap, xneg);
  Vec zero = o.load(o.c(0.0));
  Vec base =
      o.blend(xneg, o.blend(swap, zero, o.c(2.0)), o.blend(swap, o.load(o.c(4.0)), o.c(2.0)));
  Vec k1 = o.blend(mid, zero, o.c(1.0));
  Vec k = o.add(base, o.blend(sigma_neg, k1, o.neg(k1)));
  Vec sp = o.blend(sigma_neg, p, o.neg(p));
  Vec res = o.fma(k, o.c(pi4_hi), o.fma(k, o.c(pi4_lo), sp));  // k * pi4_hi is exact
  res = o.bor(res, o.sign_of(y));                              // res >= 0 here
  return o.blend(o.cmp(y, x, Cmp::kUnord), res, o.add(x, y));  // NaN in, NaN out
}

}  // namespace framejit::jit::math
