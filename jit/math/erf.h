// erf.h — erf: an odd polynomial below 1, and 1 - exp(P(x)) above, P ~ log(erfc x)
// (Note [One math library]).
#pragma once

#include "jit/math/exp_log.h"

namespace framejit::jit::math {

namespace erf_detail {

// |x| < 1: erf x = x + x Q(x^2) (relative error 2^-29.4 / 2^-56.0).
inline constexpr double kSmallF32[] = {0x1.06eba8p-3, -0x1.81273ep-2,  0x1.ce2ce6p-4, -0x1.b7f71ap-6,
                                       0x1.53f224p-8, -0x1.a3515ep-11, 0x1.4771fep-14};
inline constexpr double kSmallF64[] = {
    0x1.06eba8214db68p-3,  -0x1.812746b0379a9p-2,  0x1.ce2f21a040748p-4,  -0x1.b82ce311f8df5p-6,
    0x1.565bccfaeb1d6p-8,  -0x1.c02db0b4e1ff6p-11, 0x1.f9a2c910e9183p-14, -0x1.f4cb4c6c2800bp-17,
    0x1.b98a819b33ea2p-20, -0x1.5c4bdcf1e8a62p-23, 0x1.d904260a3a39ap-27, -0x1.b1784ff2c31aap-31};
// 1 <= |x| <= cap: erfc x = exp(P(u)), u = (x - 2) / h (exact: x - 2 is exact on [1, 8), h a
// power of two). Weighted by erfc, the error in erf is 2^-29 / 2^-58. Past cap, erf rounds to 1.
inline constexpr double kCapF32 = 3.92, kCapF64 = 5.93;
inline constexpr double kInvHF32 = 0.5, kInvHF64 = 0.25;
inline constexpr double kLargeF32[] = {-0x1.575b32p+2, -0x1.1ac324p+3, -0x1.d8f678p+1, -0x1.0e0cdcp-3,
                                       0x1.d2d2ecp-5,  -0x1.6cbb56p-6, 0x1.900ad4p-7};
inline constexpr double kLargeF64[] = {
    -0x1.575b329b1f516p+2, -0x1.1ac3258a8dc36p+4, -0x1.d8f5dece92392p+3, -0x1.0dc3b5faf6d8bp+0,
    0x1.d406b3750a2ebp-1,  -0x1.7ffcfb627b22ep-1, 0x1.1bc3a5086a53bp-1,  -0x1.5b65654d46c68p-2,
    0x1.06054f4ae52e2p-3,  0x1.b543e7addd9c1p-5,  -0x1.7402a53666453p-3, 0x1.f0b786fac66a5p-3,
    -0x1.de7e481cce127p-3, 0x1.5a29fc3b2bcf7p-3,  -0x1.397e6836886b4p-4, -0x1.2a5caa13f3e6bp-5,
    0x1.538fe8f2ecef2p-3,  -0x1.a69c5af6d5c05p-3, 0x1.82ca716949a42p-4};

}  // namespace erf_detail

template <class O>
typename O::Vec emit_erf(O& o, const typename O::Vec& x) {
  using namespace erf_detail;
  using Vec = typename O::Vec;
  const bool d = o.f64();
  Vec small = o.fma(x, d ? o.poly(o.mul(x, x), kSmallF64) : o.poly(o.mul(x, x), kSmallF32), x);

  Vec ax = o.abs(x);
  Vec xc = o.min(ax, o.c(d ? kCapF64 : kCapF32));
  Vec u = o.mul(o.sub(xc, o.c(2.0)), o.c(d ? kInvHF64 : kInvHF32));
  Vec p = d ? o.poly(u, kLargeF64) : o.poly(u, kLargeF32);
  Vec erfc = exp_finish(o, exp_core(o, p, nullptr, ExpScale::kOneScale));  // p in [-38, -1.8]
  Vec large = o.bor(o.sub(o.load(o.c(1.0)), erfc), o.sign_of(x));

  return o.blend(o.cmp(ax, o.c(1.0), Cmp::kGe), small, large);
}

}  // namespace framejit::jit::math
