// trig.h — sin, cos and tan: reduction modulo pi/2 (inline Cody–Waite; the backend's Payne–Hanek
// for huge elements) and minimax polynomials on [-pi/4, pi/4] (Note [One math library]).
#pragma once

#include <cstdint>

#include "jit/math/ops.h"

namespace framejit::jit::math {


namespace trig_detail {

inline constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
// pi/2 in four pieces. float64: 33-bit pieces, so q * piece is exact for q < 2^20 even without
// FMA; float32: 24-bit pieces, whose products FMA keeps exact.
inline constexpr double kPio2F64[] = {0x1.921fb54400000p+0, 0x1.0b4611a600000p-34, 0x1.3198a2e000000p-69,
                               0x1.b839a252049c1p-104};
inline constexpr double kPio2F32[] = {0x1.921fb6p+0, -0x1.777a5cp-25, -0x1.ee59dap-50, 0x1.98a2e0p-77};
// Past these the inline reduction hands over to reduce_pio2_*: float64 because q * piece stops
// being exact, float32 because x * 2/pi in float may then be off by more than the polynomials'
// slack (|r| <= 0.79).
inline constexpr double kInlineLimitF64 = 0x1p20;
inline constexpr double kInlineLimitF32 = 0x1p16;

// 2/pi in binary for the backends' Payne–Hanek reductions: word k holds bits 64k+1 .. 64k+64
// after the point, most significant first. 1536 bits cover the largest double's exponent (1024)
// plus a 192-bit window and margin.
inline constexpr uint64_t kTwoOverPiBits[] = {
    0xa2f9836e4e441529ull, 0xfc2757d1f534ddc0ull, 0xdb6295993c439041ull, 0xfe5163abdebbc561ull,
    0xb7246e3a424dd2e0ull, 0x06492eea09d1921cull, 0xfe1deb1cb129a73eull, 0xe88235f52ebb4484ull,
    0xe99c7026b45f7e41ull, 0x3991d639835339f4ull, 0x9c845f8bbdf9283bull, 0x1ff897ffde05980full,
    0xef2f118b5a0a6d1full, 0x6d367ecf27cb09b7ull, 0x4f463f669e5fea2dull, 0x7527bac7ebe5f17bull,
    0x3d0739f78a5292eaull, 0x6bfb5fb11f8d5d08ull, 0x56033046fc7b6babull, 0xf0cfbc209af4361dull,
    0xa9e391615ee61b08ull, 0x6599855f14a06840ull, 0x8dffd8804d732731ull, 0x06061556ca73a8c9ull,
};
inline constexpr int kTwoOverPiWords = sizeof(kTwoOverPiBits) / sizeof(kTwoOverPiBits[0]);

// sin r = r + r^3 S(r^2), cos r = 1 + r^2 C(r^2) on |r| <= 0.79 (float32) / 0.7855 (float64).
inline constexpr double kSinF32[] = {-0x1.555556p-3, 0x1.111174p-7, -0x1.a0590ep-13, 0x1.7c090ep-19};
inline constexpr double kCosF32[] = {-0x1.000000p-1, 0x1.555556p-5, -0x1.6c175cp-10, 0x1.a0715cp-16,
                              -0x1.3643fep-22};
inline constexpr double kSinF64[] = {-0x1.5555555555555p-3, 0x1.1111111111069p-7,   -0x1.a01a019ffe47ap-13,
                              0x1.71de3a3384691p-19, -0x1.ae642c0c5e9d2p-26, 0x1.61098182ec5e6p-33,
                              -0x1.9fd897e433a65p-41};
inline constexpr double kCosF64[] = {-0x1.0000000000000p-1, 0x1.555555555554bp-5,   -0x1.6c16c16c15013p-10,
                              0x1.a01a019c8ed14p-16, -0x1.27e4f7f14240cp-22, 0x1.1ee9db8f57c2cp-29,
                              -0x1.8fa65f4d84ec0p-37};

template <class O>
struct Reduced {
  typename O::Vec r;     // |r| <= pi/4 (plus rounding slack)
  typename O::Vec r_lo;  // float64 only: r's rounding error
  typename O::Vec q;     // integer lanes whose low two bits are the quadrant
};

/// ax = q pi/2 + r for ax = |x| (NaN passes through r).
template <class O>
Reduced<O> reduce(O& o, const typename O::Vec& ax) {
  using Vec = typename O::Vec;
  using VecPair = typename O::Pair;
  const bool d = o.f64();
  const double* pio2 = d ? kPio2F64 : kPio2F32;
  Reduced<O> red;
  red.q = o.mul_round_bits(ax, kTwoOverPi);
  Vec n = o.sub(red.q, o.c(o.magic()));
  if (d) {
    // float64: r = ax - n pi/2 as r + r_lo. The first step is exact, the second keeps its rounding
    // error (two_sum), the last two pieces are far below r's ulp unless r itself is that small.
    Vec r1 = o.fnma(n, o.c(pio2[0]), ax);
    VecPair r2 = o.two_sum(r1, o.mul(n, o.c(-pio2[1])));
    Vec w = o.fma(n, o.c(pio2[2]), o.mul(n, o.c(pio2[3])));
    VecPair rr = o.fast_two_sum(r2.hi, o.sub(r2.lo, w));
    red.r = rr.hi;
    red.r_lo = rr.lo;
  } else {
    // float32: each FMA step is exact but the last, so r is within half an ulp.
    red.r = o.fnma(n, o.c(pio2[0]), ax);
    for (int k = 1; k < 4; ++k) red.r = o.fnma(n, o.c(pio2[k]), red.r);
  }

  // Rare: some element is huge (or infinite): the backend's Payne–Hanek reduction redoes those.
  o.reduce_pio2_huge(ax, d ? kInlineLimitF64 : kInlineLimitF32, red.r, red.r_lo, red.q);
  return red;
}

template <class O>
void sincos_poly(O& o, const Reduced<O>& red, typename O::Vec* s, typename O::Vec* c) {
  using Vec = typename O::Vec;
  const bool d = o.f64();
  const Vec& r = red.r;
  Vec z = o.mul(r, r);
  Vec s0 = o.fma(o.mul(r, z), d ? o.poly(z, kSinF64) : o.poly(z, kSinF32), r);
  Vec c0 = o.fma(z, d ? o.poly(z, kCosF64) : o.poly(z, kCosF32), o.c(1.0));
  if (!d) {
    *s = s0;
    *c = c0;
    return;
  }
  // sin(r + lo) = s + lo c, cos(r + lo) = c - lo s
  *s = o.fma(red.r_lo, c0, s0);
  *c = o.fnma(red.r_lo, s0, c0);
}

/// Quadrant j = q mod 4 of sin(r + j pi/2): s, c, -s, -c.
template <class O>
typename O::Vec by_quadrant(O& o, const typename O::Vec& q, const typename O::Vec& s, const typename O::Vec& c) {
  using Vec = typename O::Vec;
  Vec v = o.blend(o.bit_set(q, 0), s, c);
  return o.bxor(v, o.band(o.ishl(q, o.elem_bits() - 2), o.bits(o.sign_bit())));
}

}  // namespace trig_detail

// NB: all three reduce |x| and put the sign back at the end, so -0.0 comes out as -0.0.
template <class O>
typename O::Vec emit_sin(O& o, const typename O::Vec& x) {
  using namespace trig_detail;
  using Vec = typename O::Vec;
  Reduced<O> red = reduce(o, o.abs(x));
  Vec s, c;
  sincos_poly(o, red, &s, &c);
  return o.bxor(by_quadrant(o, red.q, s, c), o.sign_of(x));
}

template <class O>
typename O::Vec emit_cos(O& o, const typename O::Vec& x) {
  using namespace trig_detail;
  using Vec = typename O::Vec;
  Reduced<O> red = reduce(o, o.abs(x));
  Vec s, c;
  sincos_poly(o, red, &s, &c);
  return by_quadrant(o, o.iadd(red.q, o.bits(1)), s, c);  // cos x = sin(x + pi/2)
}

template <class O>
typename O::Vec emit_tan(O& o, const typename O::Vec& x) {
  using namespace trig_detail;
  using Vec = typename O::Vec;
  Reduced<O> red = reduce(o, o.abs(x));
  Vec s, c;
  sincos_poly(o, red, &s, &c);
  // tan(r + j pi/2) = s/c for even j, -c/s for odd j.
  typename O::Mask odd = o.bit_set(red.q, 0);
  Vec num = o.blend(odd, s, c);
  Vec den = o.blend(odd, c, o.neg(s));
  return o.bxor(o.div(num, den), o.sign_of(x));
}

}  // namespace framejit::jit::math
