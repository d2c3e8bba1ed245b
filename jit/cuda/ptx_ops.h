// ptx_ops.h — PTX text building: PtxWriter (virtual registers, labels, instruction lines) and
// PtxOps, the math library's instruction layer for one element per thread (Note [One math
// library] in jit/math/ops.h).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "jit/math/ops.h"

namespace framejit::jit::cuda {

/// A register ("%f3") or an immediate (its bit pattern, written as the instruction's type
/// wants: 0f3F800000 for a float, 0x3F800000 for bits).
struct PtxVal {
  std::string reg;
  uint64_t imm = 0;
  /// A register PtxOps::load filled with a float constant that is neither NaN nor zero: min/max
  /// against it can take the one-instruction .NaN forms (Note [One math library]'s NaN rule).
  bool nonzero_const = false;
  bool is_reg() const { return !reg.empty(); }
};

/// Registers are declared per width and all hold bit patterns (.b16/.b32/.b64, .pred): PTX lets
/// an instruction of any type read and write a bit-size register of its width, so a float's bits
/// can go through integer instructions (exponent tricks) without moves.
class PtxWriter {
public:
  /// A new register of `bits` (1 for a predicate, 16, 32 or 64).
  std::string reg(int bits);
  std::string label();
  /// One instruction (without the ';').
  void op(const std::string& text);
  /// `label:`
  void place(const std::string& label);
  /// Comment line (FRAMEJIT_LOGS=ptx readers).
  void comment(const std::string& text);
  /// A line as it is: `{`, `}` and the declarations that open a block scope.
  void line(const std::string& text);
  /// The .reg declarations for every register made, then the instructions.
  std::string body() const;

private:
  int preds_ = 0, r16_ = 0, r32_ = 0, r64_ = 0, labels_ = 0;
  std::string text_;
};

/// Immediate text of `v` for an instruction of type `type` ("f32", "b64", "s32", ...).
std::string imm_text(const PtxVal& v, const std::string& type);

/// The math library's Ops for float32 or float64 values in registers (Note [One math library]).
class PtxOps {
public:
  using Vec = PtxVal;
  using Mask = std::string;  // a predicate register
  struct Pair {
    Vec hi, lo;
  };

  PtxOps(PtxWriter& w, bool f64) : w_(w), f64_(f64) {}

  bool f64() const { return f64_; }
  int elem_bits() const { return f64_ ? 64 : 32; }
  int mant_bits() const { return f64_ ? 52 : 23; }
  int exp_bias() const { return f64_ ? 1023 : 127; }
  uint64_t sign_bit() const { return f64_ ? 0x8000000000000000ull : 0x80000000ull; }
  double magic() const { return f64_ ? 6755399441055744.0 : 12582912.0; }

  Vec c(double v) const;
  Vec bits(uint64_t b) const;
  Vec load(const Vec& v);

  Vec add(const Vec& a, const Vec& b) { return arith("add.rn", a, b); }
  Vec sub(const Vec& a, const Vec& b) { return arith("sub.rn", a, b); }
  Vec mul(const Vec& a, const Vec& b) { return arith("mul.rn", a, b); }
  Vec div(const Vec& a, const Vec& b) { return arith("div.rn", a, b); }
  /// a / b for a divisor that is normal and far from overflow, with a normal or zero quotient:
  /// the hardware reciprocal and one correction of the quotient (within 1 ulp, nearly always
  /// the correctly rounded one) instead of div.rn's longer sequence. float64 keeps div.rn.
  Vec div_normal(const Vec& a, const Vec& b);
  /// 2^f from the special-function unit (float32 only; Note [exp through the GPU's ex2]): within
  /// about 2^-22 relative for the |f| <= 0.5 exp_core passes; subnormal f reads as 0.
  Vec exp2_approx(const Vec& f);
  /// x86's rule: the second operand when either is NaN.
  Vec min(const Vec& a, const Vec& b);
  Vec max(const Vec& a, const Vec& b);
  Vec clamp(const Vec& x, double lo, double hi);
  Vec sqrt(const Vec& a);
  Vec fma(const Vec& a, const Vec& b, const Vec& c);
  Vec fms(const Vec& a, const Vec& b, const Vec& c) { return fma(a, b, fneg(c)); }
  Vec fnma(const Vec& a, const Vec& b, const Vec& c) { return fma(fneg(a), b, c); }
  Vec poly(const Vec& x, std::span<const double> coef);

  Vec band(const Vec& a, const Vec& b) { return bitop("and", a, b); }
  Vec bor(const Vec& a, const Vec& b) { return bitop("or", a, b); }
  Vec bxor(const Vec& a, const Vec& b) { return bitop("xor", a, b); }
  Vec bandn(const Vec& a, const Vec& b);
  Vec abs(const Vec& a) { return band(a, bits(~sign_bit())); }
  Vec neg(const Vec& a);
  Vec sign_of(const Vec& a) { return band(a, bits(sign_bit())); }

  Vec ishl(const Vec& a, int n);
  Vec ishr(const Vec& a, int n);
  Vec iadd(const Vec& a, const Vec& b) { return intop("add", a, b); }
  Vec isub(const Vec& a, const Vec& b) { return intop("sub", a, b); }

  Mask cmp(const Vec& a, const Vec& b, math::Cmp p);
  Mask mand(const Mask& a, const Mask& b) { return predop("and", a, b); }
  Mask mor(const Mask& a, const Mask& b) { return predop("or", a, b); }
  Mask mxor(const Mask& a, const Mask& b) { return predop("xor", a, b); }
  Mask mandnot(const Mask& a, const Mask& b);
  Mask bit_set(const Vec& a, int bit);
  Vec blend(const Mask& m, const Vec& f, const Vec& t);
  Vec select_or_zero(const Mask& m, const Vec& a) { return blend(m, bits(0), a); }

  Pair two_prod(const Vec& a, const Vec& b);
  Pair fast_two_sum(const Vec& a, const Vec& b);
  Pair two_sum(const Vec& a, const Vec& b);
  Vec mul_round_bits(const Vec& x, double scale) { return fma(x, c(scale), c(magic())); }
  Vec pow2_from_bits(const Vec& int_bits) {
    return ishl(iadd(int_bits, bits(static_cast<uint64_t>(exp_bias()))), mant_bits());
  }
  /// Note [Payne–Hanek in PTX]: r, r_lo and q redone for |x| = ax above `limit`.
  void reduce_pio2_huge(const Vec& ax, double limit, Vec& r, Vec& r_lo, Vec& q);

  /// A register operand's or immediate's text for type suffix `type`.
  std::string text(const Vec& v, const std::string& type) const { return v.is_reg() ? v.reg : imm_text(v, type); }
  std::string ftype() const { return f64_ ? "f64" : "f32"; }
  std::string btype() const { return f64_ ? "b64" : "b32"; }

private:
  Vec fresh() { return Vec{w_.reg(elem_bits())}; }
  /// -a as a float negation (neg.f32), which ptxas folds into the fma that reads it; `neg` flips
  /// the sign bit with an integer instruction it cannot fold. For operands of arithmetic only.
  Vec fneg(const Vec& a);
  Vec arith(const char* op, const Vec& a, const Vec& b);
  Vec bitop(const char* op, const Vec& a, const Vec& b);
  Vec intop(const char* op, const Vec& a, const Vec& b);
  Mask predop(const char* op, const Mask& a, const Mask& b);

  PtxWriter& w_;
  bool f64_;
};

}  // namespace framejit::jit::cuda
