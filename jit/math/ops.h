// ops.h — the instruction layer every math routine in jit/math is written against, and the
// compare predicates it uses: what a backend implements to get exp, log, tanh ... for free.
#pragma once

#include <cstdint>

namespace framejit::jit::math {

// Note [One math library]
// exp, log, tanh, erf, atan, pow, sin ... are written once, as templates over an "Ops" class that
// emits instructions for one backend: x86's VecOps (jit/x86/injectors/vec_ops_p.h: SSE2 scalar,
// AVX2+FMA, AVX-512 lanes) and the PTX emitter's PtxOps (jit/cuda/ptx_ops.h: one element per
// thread). So a kernel computes the same function on the CPU and the GPU, to the same last bit
// wherever both round the same way, and the accuracy measured for one (tests/cpp/
// test_math_injectors.cpp: 1-3 ulp against the correctly rounded result) holds for the other.
// Two places differ on purpose. div_normal (tanh's and sigmoid's quotients): the GPU's
// reciprocal-and-correction lands on the correctly rounded quotient except when it lies within
// about 2^-22 ulp of a halfway point, where it may be 1 ulp off x86's division. And float32 exp
// on the GPU takes 2^f from the special-function unit (Note [exp through the GPU's ex2] in
// exp_log.h): exp, erf and pow stay within their bounds of the exact result there
// (tests/gpu/test_math.cpp) but may land a few ulp from x86's.
// An Ops class may offer more than the list below; routines test for it (exp2_approx).
// Each routine returns a new value and never changes its operands.
//
// What an Ops class provides (the x86 one documents each member):
//   types      Vec (a value), Mask (a per-element predicate), Pair {Vec hi, lo}
//   shape      f64(), elem_bits(), mant_bits(), exp_bias(), sign_bit(), magic()
//   constants  c(double) and bits(uint64_t) as operands; load(operand) -> Vec
//   float      add sub mul div div_normal min max clamp sqrt fma fms fnma poly  (min/max: x86's rule, the
//              second operand when either is NaN; clamp lets NaN through)
//   bits       band bor bxor bandn abs neg sign_of, integer ishl ishr iadd isub on the bit pattern
//   masks      cmp(a, b, Cmp) mand mor mxor mandnot bit_set blend select_or_zero
//   exact      two_prod fast_two_sum two_sum mul_round_bits pow2_from_bits
//   trig       reduce_pio2_huge(ax, limit, r, r_lo, q): redo the reduction modulo pi/2 for the
//              elements above `limit` (Payne–Hanek), leaving the others as they are

/// Compare predicates (AVX's encoding, which x86 uses as is). Ordered predicates are false when
/// either side is NaN; kNe, kNlt, kNle, kNgt, kNge are true when either side is NaN.
enum class Cmp : uint8_t {
  kEq = 0x00,     // EQ_OQ
  kLt = 0x01,     // LT_OS
  kLe = 0x02,     // LE_OS
  kUnord = 0x03,  // UNORD_Q
  kNe = 0x04,     // NEQ_UQ
  kNlt = 0x05,    // NLT_US
  kNle = 0x06,    // NLE_US
  kOrd = 0x07,    // ORD_Q
  kNge = 0x09,    // NGE_US
  kNgt = 0x0A,    // NGT_US
  kGe = 0x0D,     // GE_OS
  kGt = 0x0E,     // GT_OS
};

}  // namespace framejit::jit::math
