// vec_ops_p.h — the ISA-neutral vector instruction layer the math injectors are written against.
//
// Every math function is written once, in terms of VecOps, and VecOps picks the instructions:
// SSE2 scalar (ss/sd on lane 0, no FMA), AVX2+FMA on ymm, or AVX-512 on zmm with k-register masks.
// Operations are SSA-like: each returns a new virtual register and never modifies its inputs (the
// `*_inplace` forms are the exception, for Horner chains). The Compiler allocates and spills.
#pragma once

#include <asmjit/x86.h>

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "jit/math/ops.h"
#include "jit/x86/isa.h"

namespace framejit::jit::x86::injectors {

using asmjit::Label;
using asmjit::Operand;
using asmjit::x86::Compiler;
using asmjit::x86::KReg;
using asmjit::x86::Mem;
using asmjit::x86::Vec;

enum class Elem : uint8_t { F32, F64 };

/// A per-lane predicate. Scalar and Avx2 keep it in a vector register (all-ones or all-zeros per
/// lane); Avx512 keeps it in a k register.
struct Mask {
  Vec v;
  KReg k;
};

using math::Cmp;

/// A double-double value hi + lo with |lo| <= ulp(hi)/2 (or close to it).
struct VecPair {
  Vec hi;
  Vec lo;
};

/// Virtual registers lent to the VecOps of successive injector calls (Note [Recycled injector
/// registers]). `next*` count the ones handed out to the current call.
struct RegPool {
  std::vector<Vec> vecs;
  std::vector<KReg> kb, kw;
  size_t next_vec = 0, next_kb = 0, next_kw = 0;
  void release_all() { next_vec = next_kb = next_kw = 0; }
};

/// The x86 Ops of Note [One math library] (jit/math/ops.h).
class VecOps {
public:
  using Vec = asmjit::x86::Vec;
  using Mask = injectors::Mask;
  using Pair = VecPair;

  /// With `pool`, registers come from it and must all be dead when the caller releases it.
  VecOps(Compiler& cc, Isa isa, Elem elem, RegPool* pool = nullptr);

  Compiler& cc() const { return cc_; }
  Isa isa() const { return isa_; }
  Elem elem() const { return elem_; }
  bool f64() const { return elem_ == Elem::F64; }
  /// Lanes per register (1 for Scalar).
  int lanes() const;
  /// Bytes of one vector register (16 for Scalar: constants are stored as full xmm).
  int vbytes() const;
  int elem_bits() const { return f64() ? 64 : 32; }
  int mant_bits() const { return f64() ? 52 : 23; }
  int exp_bias() const { return f64() ? 1023 : 127; }
  /// Whether fma() is one fused instruction; the Scalar path is SSE2-only and rounds twice.
  bool fused() const { return isa_ != Isa::Scalar; }
  uint64_t sign_bit() const { return f64() ? 0x8000000000000000ull : 0x80000000ull; }

  // ---- registers and constants -------------------------------------------------------------
  Vec vec();
  /// A broadcast floating-point constant in the function's constant pool (rounded to the lane
  /// type).
  Mem c(double v);
  /// A broadcast bit pattern (the low 32 or 64 bits of `bits`).
  Mem bits(uint64_t bits);
  Vec load(const Operand& src);  // register copy of a register or constant
  void store(const Mem& dst, const Vec& v);
  void load_into(const Vec& dst, const Mem& src);
  void mov(const Vec& dst, const Vec& src);

  // ---- floating point ------------------------------------------------------------------------
  Vec add(const Vec& a, const Operand& b);
  Vec sub(const Vec& a, const Operand& b);
  Vec mul(const Vec& a, const Operand& b);
  Vec div(const Vec& a, const Operand& b);
  /// a / b where b is a normal number well inside the range and a / b is normal or zero (the
  /// divisions inside tanh and sigmoid): within 1 ulp. Here exactly div (x86's division is
  /// cheap next to the routines); a GPU replaces it with a reciprocal and a correction.
  Vec div_normal(const Vec& a, const Operand& b) { return div(a, b); }
  /// min/max with the CPU's rule: when either is NaN the second operand is returned. So
  /// `min(load(C), x)` keeps a NaN x, `min(x, C)` replaces it with C.
  Vec min(const Vec& a, const Operand& b);
  Vec max(const Vec& a, const Operand& b);
  /// clamp(x, lo, hi) that lets NaN through.
  Vec clamp(const Vec& x, double lo, double hi);
  Vec sqrt(const Vec& a);
  /// a*b + c. At most one of b, c may be a memory operand.
  Vec fma(const Vec& a, const Operand& b, const Operand& c);
  /// a*b - c
  Vec fms(const Vec& a, const Operand& b, const Operand& c);
  /// c - a*b
  Vec fnma(const Vec& a, const Operand& b, const Operand& c);
  /// acc = acc*b + c in place (Horner step); c may be memory.
  void fma_inplace(const Vec& acc, const Vec& b, const Operand& c);
  /// c[0] + c[1] x + ... + c[n] x^n by Horner's rule.
  Vec poly(const Vec& x, std::span<const double> c);
  Vec poly(const Vec& x, std::initializer_list<double> c) {
    return poly(x, std::span(c.begin(), c.size()));
  }

  // ---- bitwise (on the lane's bit pattern) ---------------------------------------------------
  Vec band(const Vec& a, const Operand& b);
  Vec bor(const Vec& a, const Operand& b);
  Vec bxor(const Vec& a, const Operand& b);
  /// ~a & b
  Vec bandn(const Vec& a, const Operand& b);
  Vec abs(const Vec& a) { return band(a, bits(~sign_bit())); }
  Vec neg(const Vec& a) { return bxor(a, bits(sign_bit())); }
  /// The sign bit of a alone.
  Vec sign_of(const Vec& a) { return band(a, bits(sign_bit())); }

  // ---- integer lanes of the element's width --------------------------------------------------
  Vec ishl(const Vec& a, int n);
  Vec ishr(const Vec& a, int n);  // logical
  Vec iadd(const Vec& a, const Operand& b);
  Vec isub(const Vec& a, const Operand& b);

  // ---- predicates ----------------------------------------------------------------------------
  Mask cmp(const Vec& a, const Operand& b, Cmp p);
  Mask mand(const Mask& a, const Mask& b);
  Mask mor(const Mask& a, const Mask& b);
  Mask mxor(const Mask& a, const Mask& b);
  /// a & ~b
  Mask mandnot(const Mask& a, const Mask& b);
  /// Lanes whose integer bit `bit` is set.
  Mask bit_set(const Vec& a, int bit);
  /// m ? t : f, lane by lane. t may be a memory operand.
  Vec blend(const Mask& m, const Vec& f, const Operand& t);
  /// m ? a : 0
  Vec select_or_zero(const Mask& m, const Vec& a);
  void jump_if_none(const Mask& m, const Label& target);

  // ---- exact arithmetic building blocks ------------------------------------------------------
  /// hi + lo == a * b exactly (FMA, or Dekker's splitting on the Scalar path; |a|,|b| < 2^995).
  VecPair two_prod(const Vec& a, const Vec& b);
  /// hi + lo == a + b exactly, for |a| >= |b| (or a == 0).
  VecPair fast_two_sum(const Vec& a, const Vec& b);
  /// hi + lo == a + b exactly, any order.
  VecPair two_sum(const Vec& a, const Vec& b);
  /// Magic number 1.5 * 2^mant_bits: adding it rounds |v| < 2^(mant_bits-1) to an integer
  /// (ties to even, in the default rounding mode) and leaves that integer, two's complement, in
  /// the low mantissa bits; subtracting it again gives the rounded value.
  double magic() const { return f64() ? 6755399441055744.0 : 12582912.0; }
  /// x * scale + magic(), rounded once when fused: round(x * scale) as integer bits.
  Vec mul_round_bits(const Vec& x, double scale);
  /// 2^n from integer bits n, |n| < bias: (n + bias) << mant. mul_round_bits' result may be
  /// passed as is: the magic number's bits above the low ones shift out.
  Vec pow2_from_bits(const Vec& int_bits);

  // ---- trig ----------------------------------------------------------------------------------
  /// When some lane of `ax` (= |x|) exceeds `limit`, reduces the whole register out of line
  /// (reduce_pio2_f32/f64 in trig_reduce.cpp) into r, r_lo (float64) and q; else leaves them.
  void reduce_pio2_huge(const Vec& ax, double limit, Vec& r, Vec& r_lo, Vec& q);

private:
  Mem sized(const Mem& m, bool scalar_op) const;
  Operand src(const Operand& o, bool scalar_op) const;
  Vec binop(uint32_t sse_id, uint32_t avx_id, const Vec& a, const Operand& b, bool scalar_op);
  KReg new_k();
  void test_mask(const Mask& m);  // sets ZF when no lane is set

  Compiler& cc_;
  Isa isa_;
  Elem elem_;
  RegPool* pool_;
};

}  // namespace framejit::jit::x86::injectors
