// vec_ops.cpp — VecOps: one math-emitter vocabulary lowered to SSE2 scalar, AVX2+FMA or AVX-512.
#include "jit/x86/injectors/vec_ops_p.h"

#include "jit/x86/injectors/math_p.h"

#include <cstring>

namespace framejit::jit::x86::injectors {

namespace {
namespace I = asmjit::x86;
using Id = asmjit::InstId;
constexpr Id id(bool f64, Id f32_form, Id f64_form) { return f64 ? f64_form : f32_form; }
}  // namespace

VecOps::VecOps(Compiler& cc, Isa isa, Elem elem, RegPool* pool) : cc_(cc), isa_(isa), elem_(elem), pool_(pool) {}

int VecOps::vbytes() const { return vector_bytes(isa_); }
int VecOps::lanes() const { return isa_ == Isa::Scalar ? 1 : vbytes() / (elem_bits() / 8); }

// Note [Recycled injector registers]
// The math functions are written SSA-style: every operation returns a new virtual register, about
// thirty per call. A fused kernel with a hundred calls (and its scalar tail loop, which repeats
// them) would hand asmjit's register allocator thousands of short-lived registers, and its
// bin-packing grows faster than linearly with their number: compile time went from 0.6 ms at 25
// operations to 16 ms at 200. Every temporary of a call is dead once the call has moved its
// result out, so the injector lends the same registers to every call (RegPool): each becomes one
// register with many disjoint live ranges, and the allocator's work stays proportional to the
// code.
Vec VecOps::vec() {
  if (pool_) {
    if (pool_->next_vec == pool_->vecs.size()) {
      pool_->vecs.push_back(pool_ ? Vec() : Vec());
      pool_->vecs.back() = [&]() -> Vec {
        switch (isa_) {
          case Isa::Scalar: return cc_.newXmm();
          case Isa::Avx2: return cc_.newYmm();
          case Isa::Avx512: return cc_.newZmm();
        }
        return cc_.newXmm();
      }();
    }
    return pool_->vecs[pool_->next_vec++];
  }
  switch (isa_) {
    case Isa::Scalar: return cc_.newXmm();
    case Isa::Avx2: return cc_.newYmm();
    case Isa::Avx512: return cc_.newZmm();
  }
  return cc_.newXmm();
}

KReg VecOps::new_k() {
  if (!pool_) return f64() ? cc_.newKb() : cc_.newKw();
  std::vector<KReg>& ks = f64() ? pool_->kb : pool_->kw;
  size_t& next = f64() ? pool_->next_kb : pool_->next_kw;
  if (next == ks.size()) ks.push_back(f64() ? cc_.newKb() : cc_.newKw());
  return ks[next++];
}

Mem VecOps::bits(uint64_t pattern) {
  // Scalar constants fill a whole xmm so that packed bitwise SSE ops may read them (16-byte
  // aligned).
  alignas(64) uint8_t buf[64];
  const int n = vbytes();
  for (int off = 0; off < n; off += elem_bits() / 8) {
    if (f64())
      std::memcpy(buf + off, &pattern, 8);
    else {
      uint32_t v = static_cast<uint32_t>(pattern);
      std::memcpy(buf + off, &v, 4);
    }
  }
  return cc_.newConst(asmjit::ConstPoolScope::kLocal, buf, static_cast<size_t>(n));
}

Mem VecOps::c(double v) {
  if (f64()) {
    uint64_t b;
    std::memcpy(&b, &v, 8);
    return bits(b);
  }
  float f = static_cast<float>(v);
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return bits(b);
}

Mem VecOps::sized(const Mem& m, bool scalar_op) const {
  if (isa_ == Isa::Scalar && scalar_op) return m.cloneResized(f64() ? 8 : 4);
  return m.cloneResized(static_cast<uint32_t>(vbytes()));
}

Operand VecOps::src(const Operand& o, bool scalar_op) const {
  if (o.isMem()) return sized(o.as<Mem>(), scalar_op);
  return o;
}

void VecOps::mov(const Vec& dst, const Vec& s) {
  if (isa_ == Isa::Scalar)
    cc_.emit(I::Inst::kIdMovaps, dst, s);
  else
    cc_.emit(I::Inst::kIdVmovaps, dst, s);
}

Vec VecOps::load(const Operand& s) {
  Vec d = vec();
  if (s.isMem()) {
    if (isa_ == Isa::Scalar)
      cc_.emit(I::Inst::kIdMovaps, d, sized(s.as<Mem>(), false));
    else
      cc_.emit(I::Inst::kIdVmovups, d, sized(s.as<Mem>(), false));
  } else {
    mov(d, s.as<Vec>());
  }
  return d;
}

void VecOps::store(const Mem& dst, const Vec& v) {
  if (isa_ == Isa::Scalar)
    cc_.emit(f64() ? I::Inst::kIdMovsd : I::Inst::kIdMovss, dst.cloneResized(f64() ? 8 : 4), v);
  else
    cc_.emit(I::Inst::kIdVmovups, dst.cloneResized(static_cast<uint32_t>(vbytes())), v);
}

void VecOps::load_into(const Vec& dst, const Mem& s) {
  if (isa_ == Isa::Scalar)
    cc_.emit(f64() ? I::Inst::kIdMovsd : I::Inst::kIdMovss, dst, s.cloneResized(f64() ? 8 : 4));
  else
    cc_.emit(I::Inst::kIdVmovups, dst, s.cloneResized(static_cast<uint32_t>(vbytes())));
}

Vec VecOps::binop(uint32_t sse_id, uint32_t avx_id, const Vec& a, const Operand& b,
                  bool scalar_op) {
  Vec d = vec();
  if (isa_ == Isa::Scalar) {
    cc_.emit(I::Inst::kIdMovaps, d, a);
    cc_.emit(sse_id, d, src(b, scalar_op));
  } else {
    cc_.emit(avx_id, d, a, src(b, false));
  }
  return d;
}

// ---- floating point ------------------------------------------------------------------------

Vec VecOps::add(const Vec& a, const Operand& b) {
  return binop(id(f64(), I::Inst::kIdAddss, I::Inst::kIdAddsd),
               id(f64(), I::Inst::kIdVaddps, I::Inst::kIdVaddpd), a, b, true);
}
Vec VecOps::sub(const Vec& a, const Operand& b) {
  return binop(id(f64(), I::Inst::kIdSubss, I::Inst::kIdSubsd),
               id(f64(), I::Inst::kIdVsubps, I::Inst::kIdVsubpd), a, b, true);
}
Vec VecOps::mul(const Vec& a, const Operand& b) {
  return binop(id(f64(), I::Inst::kIdMulss, I::Inst::kIdMulsd),
               id(f64(), I::Inst::kIdVmulps, I::Inst::kIdVmulpd), a, b, true);
}
Vec VecOps::div(const Vec& a, const Operand& b) {
  return binop(id(f64(), I::Inst::kIdDivss, I::Inst::kIdDivsd),
               id(f64(), I::Inst::kIdVdivps, I::Inst::kIdVdivpd), a, b, true);
}
Vec VecOps::min(const Vec& a, const Operand& b) {
  return binop(id(f64(), I::Inst::kIdMinss, I::Inst::kIdMinsd),
               id(f64(), I::Inst::kIdVminps, I::Inst::kIdVminpd), a, b, true);
}
Vec VecOps::max(const Vec& a, const Operand& b) {
  return binop(id(f64(), I::Inst::kIdMaxss, I::Inst::kIdMaxsd),
               id(f64(), I::Inst::kIdVmaxps, I::Inst::kIdVmaxpd), a, b, true);
}

Vec VecOps::clamp(const Vec& x, double lo, double hi) {
  // x in the second operand: a NaN x is what min/max return.
  Vec t = min(load(c(hi)), x);
  return max(load(c(lo)), t);
}

Vec VecOps::sqrt(const Vec& a) {
  Vec d = vec();
  if (isa_ == Isa::Scalar) {
    cc_.emit(I::Inst::kIdMovaps, d, a);  // sqrtsd merges the upper lane; keep it defined
    cc_.emit(id(f64(), I::Inst::kIdSqrtss, I::Inst::kIdSqrtsd), d, a);
  } else {
    cc_.emit(id(f64(), I::Inst::kIdVsqrtps, I::Inst::kIdVsqrtpd), d, a);
  }
  return d;
}

Vec VecOps::fma(const Vec& a, const Operand& b, const Operand& c_) {
  if (!fused()) return add(mul(a, b), c_);
  Vec d = vec();
  mov(d, a);
  if (b.isMem() && c_.isMem()) {
    Vec bb = load(b);
    cc_.emit(id(f64(), I::Inst::kIdVfmadd213ps, I::Inst::kIdVfmadd213pd), d, bb, src(c_, false));
  } else if (b.isMem()) {  // d = d*b + c
    cc_.emit(id(f64(), I::Inst::kIdVfmadd132ps, I::Inst::kIdVfmadd132pd), d, c_, src(b, false));
  } else {  // d = b*d + c
    cc_.emit(id(f64(), I::Inst::kIdVfmadd213ps, I::Inst::kIdVfmadd213pd), d, b, src(c_, false));
  }
  return d;
}

Vec VecOps::fms(const Vec& a, const Operand& b, const Operand& c_) {
  if (!fused()) return sub(mul(a, b), c_);
  Vec d = vec();
  mov(d, a);
  if (b.isMem() && c_.isMem()) {
    Vec bb = load(b);
    cc_.emit(id(f64(), I::Inst::kIdVfmsub213ps, I::Inst::kIdVfmsub213pd), d, bb, src(c_, false));
  } else if (b.isMem()) {
    cc_.emit(id(f64(), I::Inst::kIdVfmsub132ps, I::Inst::kIdVfmsub132pd), d, c_, src(b, false));
  } else {
    cc_.emit(id(f64(), I::Inst::kIdVfmsub213ps, I::Inst::kIdVfmsub213pd), d, b, src(c_, false));
  }
  return d;
}

Vec VecOps::fnma(const Vec& a, const Operand& b, const Operand& c_) {
  if (!fused()) {
    Vec t = mul(a, b);
    Vec d = c_.isMem() ? load(c_) : load(c_.as<Vec>());
    cc_.emit(id(f64(), I::Inst::kIdSubss, I::Inst::kIdSubsd), d, t);
    return d;
  }
  Vec d = vec();
  mov(d, a);
  if (b.isMem() && c_.isMem()) {
    Vec bb = load(b);
    cc_.emit(id(f64(), I::Inst::kIdVfnmadd213ps, I::Inst::kIdVfnmadd213pd), d, bb, src(c_, false));
  } else if (b.isMem()) {
    cc_.emit(id(f64(), I::Inst::kIdVfnmadd132ps, I::Inst::kIdVfnmadd132pd), d, c_, src(b, false));
  } else {
    cc_.emit(id(f64(), I::Inst::kIdVfnmadd213ps, I::Inst::kIdVfnmadd213pd), d, b, src(c_, false));
  }
  return d;
}

void VecOps::fma_inplace(const Vec& acc, const Vec& b, const Operand& c_) {
  if (!fused()) {
    cc_.emit(id(f64(), I::Inst::kIdMulss, I::Inst::kIdMulsd), acc, b);
    cc_.emit(id(f64(), I::Inst::kIdAddss, I::Inst::kIdAddsd), acc, src(c_, true));
    return;
  }
  cc_.emit(id(f64(), I::Inst::kIdVfmadd213ps, I::Inst::kIdVfmadd213pd), acc, b, src(c_, false));
}

Vec VecOps::poly(const Vec& x, std::span<const double> coef) {
  const size_t n = coef.size() - 1;
  Vec p = load(c(coef[n]));
  for (size_t k = n; k-- > 0;) fma_inplace(p, x, c(coef[k]));
  return p;
}

// ---- bitwise --------------------------------------------------------------------------------

Vec VecOps::band(const Vec& a, const Operand& b) {
  return binop(id(f64(), I::Inst::kIdAndps, I::Inst::kIdAndpd),
               id(f64(), I::Inst::kIdVandps, I::Inst::kIdVandpd), a, b, false);
}
Vec VecOps::bor(const Vec& a, const Operand& b) {
  return binop(id(f64(), I::Inst::kIdOrps, I::Inst::kIdOrpd),
               id(f64(), I::Inst::kIdVorps, I::Inst::kIdVorpd), a, b, false);
}
Vec VecOps::bxor(const Vec& a, const Operand& b) {
  return binop(id(f64(), I::Inst::kIdXorps, I::Inst::kIdXorpd),
               id(f64(), I::Inst::kIdVxorps, I::Inst::kIdVxorpd), a, b, false);
}
Vec VecOps::bandn(const Vec& a, const Operand& b) {
  return binop(id(f64(), I::Inst::kIdAndnps, I::Inst::kIdAndnpd),
               id(f64(), I::Inst::kIdVandnps, I::Inst::kIdVandnpd), a, b, false);
}

// ---- integer lanes --------------------------------------------------------------------------

Vec VecOps::ishl(const Vec& a, int n) {
  Vec d = vec();
  if (isa_ == Isa::Scalar) {
    cc_.emit(I::Inst::kIdMovaps, d, a);
    cc_.emit(id(f64(), I::Inst::kIdPslld, I::Inst::kIdPsllq), d, asmjit::imm(n));
  } else {
    cc_.emit(id(f64(), I::Inst::kIdVpslld, I::Inst::kIdVpsllq), d, a, asmjit::imm(n));
  }
  return d;
}
Vec VecOps::ishr(const Vec& a, int n) {
  Vec d = vec();
  if (isa_ == Isa::Scalar) {
    cc_.emit(I::Inst::kIdMovaps, d, a);
    cc_.emit(id(f64(), I::Inst::kIdPsrld, I::Inst::kIdPsrlq), d, asmjit::imm(n));
  } else {
    cc_.emit(id(f64(), I::Inst::kIdVpsrld, I::Inst::kIdVpsrlq), d, a, asmjit::imm(n));
  }
  return d;
}
Vec VecOps::iadd(const Vec& a, const Operand& b) {
  return binop(id(f64(), I::Inst::kIdPaddd, I::Inst::kIdPaddq),
               id(f64(), I::Inst::kIdVpaddd, I::Inst::kIdVpaddq), a, b, false);
}
Vec VecOps::isub(const Vec& a, const Operand& b) {
  return binop(id(f64(), I::Inst::kIdPsubd, I::Inst::kIdPsubq),
               id(f64(), I::Inst::kIdVpsubd, I::Inst::kIdVpsubq), a, b, false);
}

// ---- predicates -----------------------------------------------------------------------------

Mask VecOps::cmp(const Vec& a, const Operand& b, Cmp p) {
  Mask m;
  const Id op = id(f64(), I::Inst::kIdVcmpps, I::Inst::kIdVcmppd);
  if (isa_ == Isa::Avx512) {
    m.k = new_k();
    cc_.emit(op, m.k, a, src(b, false), asmjit::imm(static_cast<int>(p)));
    return m;
  }
  if (isa_ == Isa::Avx2) {
    m.v = vec();
    cc_.emit(op, m.v, a, src(b, false), asmjit::imm(static_cast<int>(p)));
    return m;
  }
  // SSE2 cmpsd knows predicates 0-7 only: a > b is b < a, and so on.
  Operand lhs = a, rhs = b;
  int pred = static_cast<int>(p);
  if (p == Cmp::kGe || p == Cmp::kGt || p == Cmp::kNge || p == Cmp::kNgt) {
    lhs = b.isMem() ? load(b) : b;
    rhs = a;
    pred = p == Cmp::kGe ? 2 : p == Cmp::kGt ? 1 : p == Cmp::kNge ? 6 : 5;
  }
  m.v = vec();
  cc_.emit(I::Inst::kIdMovaps, m.v, lhs);
  cc_.emit(id(f64(), I::Inst::kIdCmpss, I::Inst::kIdCmpsd), m.v, src(rhs, true), asmjit::imm(pred));
  return m;
}

Mask VecOps::mand(const Mask& a, const Mask& b) {
  Mask m;
  if (isa_ == Isa::Avx512) {
    m.k = new_k();
    cc_.emit(f64() ? I::Inst::kIdKandb : I::Inst::kIdKandw, m.k, a.k, b.k);
  } else {
    m.v = band(a.v, b.v);
  }
  return m;
}
Mask VecOps::mor(const Mask& a, const Mask& b) {
  Mask m;
  if (isa_ == Isa::Avx512) {
    m.k = new_k();
    cc_.emit(f64() ? I::Inst::kIdKorb : I::Inst::kIdKorw, m.k, a.k, b.k);
  } else {
    m.v = bor(a.v, b.v);
  }
  return m;
}
Mask VecOps::mxor(const Mask& a, const Mask& b) {
  Mask m;
  if (isa_ == Isa::Avx512) {
    m.k = new_k();
    cc_.emit(f64() ? I::Inst::kIdKxorb : I::Inst::kIdKxorw, m.k, a.k, b.k);
  } else {
    m.v = bxor(a.v, b.v);
  }
  return m;
}
Mask VecOps::mandnot(const Mask& a, const Mask& b) {
  Mask m;
  if (isa_ == Isa::Avx512) {
    m.k = new_k();
    cc_.emit(f64() ? I::Inst::kIdKandnb : I::Inst::kIdKandnw, m.k, b.k, a.k);
  } else {
    m.v = bandn(b.v, a.v);
  }
  return m;
}

Mask VecOps::bit_set(const Vec& a, int bit) {
  Mask m;
  if (isa_ == Isa::Avx512) {
    m.k = new_k();
    cc_.emit(id(f64(), I::Inst::kIdVptestmd, I::Inst::kIdVptestmq), m.k, a,
             src(bits(uint64_t{1} << bit), false));
    return m;
  }
  // Move the bit to the sign position, then smear the sign over the lane.
  Vec t = ishl(a, elem_bits() - 1 - bit);
  Vec d = vec();
  if (isa_ == Isa::Scalar) {
    cc_.emit(I::Inst::kIdMovaps, d, t);
    cc_.emit(I::Inst::kIdPsrad, d, asmjit::imm(31));
    if (f64()) cc_.emit(I::Inst::kIdPshufd, d, d, asmjit::imm(0xF5));
  } else {
    cc_.emit(I::Inst::kIdVpsrad, d, t, asmjit::imm(31));
    if (f64()) cc_.emit(I::Inst::kIdVpshufd, d, d, asmjit::imm(0xF5));
  }
  m.v = d;
  return m;
}

Vec VecOps::blend(const Mask& m, const Vec& f, const Operand& t) {
  Vec d = vec();
  switch (isa_) {
    case Isa::Avx512:
      cc_.k(m.k).emit(id(f64(), I::Inst::kIdVblendmps, I::Inst::kIdVblendmpd), d, f, src(t, false));
      return d;
    case Isa::Avx2:
      cc_.emit(id(f64(), I::Inst::kIdVblendvps, I::Inst::kIdVblendvpd), d, f, src(t, false), m.v);
      return d;
    case Isa::Scalar: break;
  }
  Vec on = band(m.v, t);
  Vec off = bandn(m.v, f);
  return bor(on, off);
}

Vec VecOps::select_or_zero(const Mask& m, const Vec& a) {
  if (isa_ == Isa::Avx512) {
    Vec d = vec();
    cc_.k(m.k).z().emit(id(f64(), I::Inst::kIdVmovaps, I::Inst::kIdVmovapd), d, a);
    return d;
  }
  return band(m.v, a);
}

void VecOps::test_mask(const Mask& m) {
  switch (isa_) {
    case Isa::Avx512:
      cc_.emit(f64() ? I::Inst::kIdKortestb : I::Inst::kIdKortestw, m.k, m.k);
      break;
    case Isa::Avx2: cc_.emit(id(f64(), I::Inst::kIdVtestps, I::Inst::kIdVtestpd), m.v, m.v); break;
    case Isa::Scalar: {
      asmjit::x86::Gp g = cc_.newGpd();
      cc_.emit(id(f64(), I::Inst::kIdMovmskps, I::Inst::kIdMovmskpd), g, m.v);
      cc_.emit(I::Inst::kIdTest, g, asmjit::imm(1));
      break;
    }
  }
}

void VecOps::jump_if_none(const Mask& m, const Label& target) {
  test_mask(m);
  cc_.jz(target);
}

// ---- exact arithmetic -----------------------------------------------------------------------

VecPair VecOps::two_prod(const Vec& a, const Vec& b) {
  Vec hi = mul(a, b);
  if (fused()) return {hi, fms(a, b, hi)};
  // Dekker: split each factor into halves whose products are exact.
  const double splitter = f64() ? 134217729.0 : 4097.0;  // 2^27 + 1, 2^12 + 1
  auto split = [&](const Vec& x) -> VecPair {
    Vec t = mul(x, c(splitter));
    Vec h = sub(t, sub(t, x));
    return {h, sub(x, h)};
  };
  VecPair sa = split(a), sb = split(b);
  Vec e = sub(mul(sa.hi, sb.hi), hi);
  e = add(e, mul(sa.hi, sb.lo));
  e = add(e, mul(sa.lo, sb.hi));
  e = add(e, mul(sa.lo, sb.lo));
  return {hi, e};
}

VecPair VecOps::fast_two_sum(const Vec& a, const Vec& b) {
  Vec s = add(a, b);
  Vec z = sub(s, a);
  return {s, sub(b, z)};
}

VecPair VecOps::two_sum(const Vec& a, const Vec& b) {
  Vec s = add(a, b);
  Vec bb = sub(s, a);
  Vec aa = sub(s, bb);
  Vec e = add(sub(a, aa), sub(b, bb));
  return {s, e};
}

Vec VecOps::mul_round_bits(const Vec& x, double scale) {
  if (fused()) return fma(x, c(scale), c(magic()));
  return add(mul(x, c(scale)), c(magic()));
}

Vec VecOps::pow2_from_bits(const Vec& int_bits) {
  return ishl(iadd(int_bits, bits(static_cast<uint64_t>(exp_bias()))), mant_bits());
}

void VecOps::reduce_pio2_huge(const Vec& ax, double limit, Vec& r, Vec& r_lo, Vec& q) {
  const bool d = f64();
  Label inline_ok = cc_.newLabel();
  jump_if_none(cmp(ax, c(limit), Cmp::kGt), inline_ok);
  // The whole register goes through memory to the C reduction; the Compiler spills live vector
  // registers around the call.
  const uint32_t bytes = static_cast<uint32_t>(vbytes());
  Mem sx = cc_.newStack(bytes, 64), sr = cc_.newStack(bytes, 64), slo = cc_.newStack(bytes, 64);
  Mem sq = cc_.newStack(bytes, 64);
  store(sx, ax);
  asmjit::x86::Gp px = cc_.newIntPtr(), pr = cc_.newIntPtr(), plo = cc_.newIntPtr(), pq = cc_.newIntPtr();
  cc_.lea(px, sx);
  cc_.lea(pr, sr);
  cc_.lea(plo, slo);
  cc_.lea(pq, sq);
  asmjit::InvokeNode* call = nullptr;
  if (d) {
    cc_.invoke(&call, reinterpret_cast<uint64_t>(&reduce_pio2_f64),
               asmjit::FuncSignatureT<void, const double*, double*, double*, int64_t*, int64_t>());
    call->setArg(0, px);
    call->setArg(1, pr);
    call->setArg(2, plo);
    call->setArg(3, pq);
    call->setArg(4, asmjit::imm(lanes()));
  } else {
    cc_.invoke(&call, reinterpret_cast<uint64_t>(&reduce_pio2_f32),
               asmjit::FuncSignatureT<void, const float*, float*, int32_t*, int64_t>());
    call->setArg(0, px);
    call->setArg(1, pr);
    call->setArg(2, pq);
    call->setArg(3, asmjit::imm(lanes()));
  }
  load_into(r, sr);
  if (d) load_into(r_lo, slo);
  if (isa_ == Isa::Scalar) {
    // q went out as an integer; only its low bits matter, so a raw load is enough.
    cc_.movsd(q.xmm(), sq.cloneResized(8));
  } else {
    load_into(q, sq);
  }
  cc_.bind(inline_ok);
}

}  // namespace framejit::jit::x86::injectors
