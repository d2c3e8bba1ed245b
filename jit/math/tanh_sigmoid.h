// tanh_sigmoid.h — tanh and sigmoid, both built on exp's core (Note [One math library]).
#pragma once

#include "jit/math/exp_log.h"

namespace framejit::jit::math {

template <class O>
typename O::Vec emit_tanh(O& o, const typename O::Vec& x) {
  using Vec = typename O::Vec;
  const bool d = o.f64();
  // tanh|x| = t / (t + 2) with t = expm1(2|x|): no cancellation anywhere, and for subnormal x
  // t = 2|x| exactly. Past the clamp the result is 1 to the last bit.
  Vec ax = o.min(o.load(o.c(d ? 19.5 : 9.1)), o.abs(x));                    // NaN passes
  ExpCore<O> e = exp_core(o, o.add(ax, ax), nullptr, ExpScale::kOneScale, /*polynomial=*/true);  // 2^n, n <= 57
  Vec t = o.fma(e.s1, e.em1, o.sub(e.s1, o.c(1.0)));
  Vec th = o.div_normal(t, o.add(t, o.c(2.0)));
  return o.bor(th, o.sign_of(x));
}

template <class O>
typename O::Vec emit_sigmoid(O& o, const typename O::Vec& x) {
  using Vec = typename O::Vec;
  // e = exp(-|x|) in (0, 1]; sigmoid = 1/(1+e) for x >= 0 and e/(1+e) for x < 0, so neither side
  // overflows and tiny results keep their precision.
  Vec nx = o.max(o.load(o.c(-exp_clamp_limit(o))), o.bor(x, o.bits(o.sign_bit())));
  Vec e = exp_finish(o, exp_core(o, nx, nullptr, ExpScale::kNonPositive, /*polynomial=*/true));
  Vec num = o.blend(o.cmp(x, o.c(0.0), Cmp::kGe), e, o.c(1.0));
  return o.div_normal(num, o.add(e, o.c(1.0)));
}

}  // namespace framejit::jit::math
