// body_emitter_int.cpp — integer and bool element operations, comparisons, select and casts:
// AVX2 / AVX-512 forms where the ISA has them, lane-wise general-purpose code otherwise.
#include "jit/x86/body_emitter_p.h"

#include <cstring>

namespace framejit::jit::x86::detail {

namespace {

bool is_fp(DType t) { return t == DType::Float32 || t == DType::Float64; }
int size_of(DType t) { return rt::dtype_itemsize(t); }
int log2_of(int s) { return s == 8 ? 3 : s == 4 ? 2 : s == 2 ? 1 : 0; }

// AVX comparison predicates (quiet; NaN makes every one false except NEQ_UQ).
int float_predicate(ScalarOp op) {
  switch (op) {
    case ScalarOp::Eq: return 0x00;  // EQ_OQ
    case ScalarOp::Ne: return 0x04;  // NEQ_UQ
    case ScalarOp::Lt: return 0x11;  // LT_OQ
    case ScalarOp::Le: return 0x12;  // LE_OQ
    case ScalarOp::Gt: return 0x1E;  // GT_OQ
    default: return 0x1D;            // GE_OQ
  }
}

}  // namespace

InstId BodyEmitter::by_size(DType t, InstId b, InstId d, InstId q) const {
  switch (size_of(t)) {
    case 1: return b;
    case 4: return d;
    default: return q;
  }
}

ax::Mem BodyEmitter::spill_slot(int k) {
  const int vbytes = vector_bytes(isa_);
  if (!have_spill_) {
    spill_ = cc_.newStack(4 * vbytes, 32);
    have_spill_ = true;
  }
  ax::Mem m = spill_.cloneAdjusted(k * vbytes);
  m.setSize(vex_ ? vbytes : 16);
  return m;
}

// ---- lane-wise code ----
//
// Every integer element is handled in a 64-bit register in canonical form (int32 sign-extended,
// uint8 and bool zero-extended), where signed 64-bit arithmetic and comparisons are exact for
// all three; the result is stored back with its own width, which wraps as NumPy's C loops do.

struct LaneOps {
  BodyEmitter& e;
  ax::Compiler& cc;

  ax::Gp load_int(DType t, const ax::Mem& m) {
    ax::Gp g = cc.newInt64();
    switch (size_of(t)) {
      case 1: cc.movzx(g.r32(), m); break;
      case 4: cc.movsxd(g, m); break;
      default: cc.mov(g, m); break;
    }
    return g;
  }
  ax::Xmm load_float(DType t, const ax::Mem& m) {
    ax::Xmm x = cc.newXmm();
    if (t == DType::Float32) e.vex_ ? cc.vmovss(x, m) : cc.movss(x, m);
    else e.vex_ ? cc.vmovsd(x, m) : cc.movsd(x, m);
    return x;
  }
  void store_int(DType t, const ax::Mem& m, const ax::Gp& g) {
    switch (size_of(t)) {
      case 1: cc.mov(m, g.r8()); break;
      case 4: cc.mov(m, g.r32()); break;
      default: cc.mov(m, g); break;
    }
  }
  void store_float(DType t, const ax::Mem& m, const ax::Xmm& x) {
    if (t == DType::Float32) e.vex_ ? cc.vmovss(m, x) : cc.movss(m, x);
    else e.vex_ ? cc.vmovsd(m, x) : cc.movsd(m, x);
  }
  // ucomis a, b
  void ucomi(DType t, const ax::Xmm& a, const ax::Xmm& b) {
    if (t == DType::Float32) e.vex_ ? cc.vucomiss(a, b) : cc.ucomiss(a, b);
    else e.vex_ ? cc.vucomisd(a, b) : cc.ucomisd(a, b);
  }
  ax::Gp new_zero() {
    ax::Gp r = cc.newInt64();
    cc.xor_(r.r32(), r.r32());
    return r;
  }

  // Comparison of two floats: ucomis sets ZF, PF and CF all on an unordered pair (NaN).
  ax::Gp compare_float(ScalarOp op, DType t, const ax::Xmm& a, const ax::Xmm& b) {
    ax::Gp r = new_zero();
    switch (op) {
      case ScalarOp::Eq:
      case ScalarOp::Ne: {
        ax::Gp p = new_zero();
        ucomi(t, a, b);
        if (op == ScalarOp::Eq) {
          cc.sete(r.r8());
          cc.setnp(p.r8());
          cc.and_(r, p);
        } else {
          cc.setne(r.r8());
          cc.setp(p.r8());
          cc.or_(r, p);
        }
        return r;
      }
      case ScalarOp::Gt: ucomi(t, a, b); cc.seta(r.r8()); return r;
      case ScalarOp::Ge: ucomi(t, a, b); cc.setae(r.r8()); return r;
      case ScalarOp::Lt: ucomi(t, b, a); cc.seta(r.r8()); return r;
      default: ucomi(t, b, a); cc.setae(r.r8()); return r;  // Le
    }
  }

  ax::Gp compare_int(ScalarOp op, const ax::Gp& a, const ax::Gp& b) {
    ax::Gp r = new_zero();
    cc.cmp(a, b);
    switch (op) {
      case ScalarOp::Eq: cc.sete(r.r8()); break;
      case ScalarOp::Ne: cc.setne(r.r8()); break;
      case ScalarOp::Lt: cc.setl(r.r8()); break;
      case ScalarOp::Le: cc.setle(r.r8()); break;
      case ScalarOp::Gt: cc.setg(r.r8()); break;
      default: cc.setge(r.r8()); break;
    }
    return r;
  }

  // NumPy's integer floor_divide / remainder (Note in loop_ir.h): x // 0 == x % 0 == 0, the
  // quotient rounds toward -inf and the remainder takes the divisor's sign. b == -1 is taken
  // apart because idiv faults on INT64_MIN / -1 (NumPy's answer is the wrapped -a and 0).
  ax::Gp floor_div_mod(bool want_div, const ax::Gp& a, const ax::Gp& b) {
    ax::Gp q = new_zero(), r = new_zero();
    Label general = cc.newLabel(), done = cc.newLabel();
    cc.test(b, b);
    cc.jz(done);
    cc.cmp(b, -1);
    cc.jne(general);
    cc.mov(q, a);
    cc.neg(q);
    cc.jmp(done);
    cc.bind(general);
    ax::Gp lo = cc.newInt64(), hi = cc.newInt64(), t = cc.newInt64();
    cc.mov(lo, a);
    cc.cqo(hi, lo);
    cc.idiv(hi, lo, b);
    cc.mov(q, lo);
    cc.mov(r, hi);
    cc.test(r, r);
    cc.jz(done);
    cc.mov(t, r);
    cc.xor_(t, b);
    cc.jns(done);  // a nonzero remainder with the divisor's sign is already floored
    cc.dec(q);
    cc.add(r, b);
    cc.bind(done);
    return want_div ? q : r;
  }

  ax::Gp int_op(ScalarOp op, DType t, const ax::Gp& a, const ax::Gp& b) {
    ax::Gp r = cc.newInt64();
    switch (op) {
      case ScalarOp::Add: cc.mov(r, a); cc.add(r, b); return r;
      case ScalarOp::Sub: cc.mov(r, a); cc.sub(r, b); return r;
      case ScalarOp::Mul: cc.mov(r, a); cc.imul(r, b); return r;
      case ScalarOp::And: cc.mov(r, a); cc.and_(r, b); return r;
      case ScalarOp::Or: cc.mov(r, a); cc.or_(r, b); return r;
      case ScalarOp::Xor: cc.mov(r, a); cc.xor_(r, b); return r;
      case ScalarOp::Max: cc.mov(r, a); cc.cmp(a, b); cc.cmovl(r, b); return r;
      case ScalarOp::Min: cc.mov(r, a); cc.cmp(a, b); cc.cmovg(r, b); return r;
      case ScalarOp::FloorDiv: return floor_div_mod(true, a, b);
      case ScalarOp::Mod: return floor_div_mod(false, a, b);
      // Unary (b unused).
      case ScalarOp::Neg: cc.mov(r, a); cc.neg(r); return r;
      case ScalarOp::Square: cc.mov(r, a); cc.imul(r, a); return r;
      case ScalarOp::Abs:  // |MIN| wraps to MIN, as in NumPy
        cc.mov(r, a);
        cc.neg(r);
        cc.cmovs(r, a);
        return r;
      case ScalarOp::Not:
        cc.mov(r, a);
        if (t == DType::Bool) cc.xor_(r, 1);
        else cc.not_(r);
        return r;
      default: return r;
    }
  }

  // The conversion of one element (Note [Casts]); `in` is a Gp for ints/bool, an Xmm for floats.
  void cast(DType from, DType to, const ax::Mem& src, const ax::Mem& dst) {
    if (!is_fp(from)) {
      ax::Gp g = load_int(from, src);
      if (to == DType::Bool) {
        ax::Gp r = new_zero();
        cc.test(g, g);
        cc.setnz(r.r8());
        store_int(to, dst, r);
      } else if (is_fp(to)) {
        // The canonical 64-bit value is exact, so one conversion rounds once.
        ax::Xmm x = cc.newXmm();
        if (e.vex_) {
          cc.vxorps(x, x, x);
          to == DType::Float32 ? cc.vcvtsi2ss(x, x, g) : cc.vcvtsi2sd(x, x, g);
        } else {
          cc.xorps(x, x);
          to == DType::Float32 ? cc.cvtsi2ss(x, g) : cc.cvtsi2sd(x, g);
        }
        store_float(to, dst, x);
      } else {
        store_int(to, dst, g);  // narrower: the low bits
      }
      return;
    }
    ax::Xmm x = load_float(from, src);
    if (is_fp(to)) {
      ax::Xmm y = cc.newXmm();
      if (e.vex_) from == DType::Float32 ? cc.vcvtss2sd(y, x, x) : cc.vcvtsd2ss(y, x, x);
      else from == DType::Float32 ? cc.cvtss2sd(y, x) : cc.cvtsd2ss(y, x);
      store_float(to, dst, y);
      return;
    }
    if (to == DType::Bool) {
      ax::Xmm z = cc.newXmm();
      e.vex_ ? cc.vxorps(z, z, z) : cc.xorps(z, z);
      store_int(to, dst, compare_float(ScalarOp::Ne, from, x, z));
      return;
    }
    // float -> int64 converts at 64 bits; int32 and uint8 go through the 32-bit conversion (out of
    // range gives 0x80000000, of which uint8 keeps the low byte 0), as NumPy's C casts compile.
    ax::Gp g = cc.newInt64();
    const bool f32 = from == DType::Float32;
    if (to == DType::Int64) {
      if (e.vex_) f32 ? cc.vcvttss2si(g, x) : cc.vcvttsd2si(g, x);
      else f32 ? cc.cvttss2si(g, x) : cc.cvttsd2si(g, x);
    } else {
      if (e.vex_) f32 ? cc.vcvttss2si(g.r32(), x) : cc.vcvttsd2si(g.r32(), x);
      else f32 ? cc.cvttss2si(g.r32(), x) : cc.cvttsd2si(g.r32(), x);
    }
    store_int(to, dst, g);
  }
};

void BodyEmitter::lanewise(ScalarOp op, DType out, const std::vector<std::pair<ax::Vec, DType>>& in,
                           const ax::Vec& dst) {
  const int nin = static_cast<int>(in.size());
  std::vector<ax::Gp> base(nin + 1);
  for (int k = 0; k <= nin; ++k) {
    ax::Mem slot = spill_slot(k);
    if (k < nin) vex_ ? movdqu(slot, in[k].first) : void(cc_.movdqu(slot, in[k].first.xmm()));
    base[k] = cc_.newIntPtr();
    cc_.lea(base[k], slot);
  }
  // One element at index `idx` of slot k (a register index in the vector loop, 0 otherwise).
  ax::Gp idx = cc_.newInt64();
  auto elem = [&](int k, DType t) {
    ax::Mem m = ax::ptr(base[k], idx, log2_of(size_of(t)));
    m.setSize(size_of(t));
    return m;
  };
  Label top = cc_.newLabel();
  cc_.xor_(idx.r32(), idx.r32());
  cc_.bind(top);
  LaneOps l{*this, cc_};
  const ax::Mem out_m = elem(nin, out);
  if (op == ScalarOp::Cast) {
    l.cast(in[0].second, out, elem(0, in[0].second), out_m);
  } else if (is_comparison(op)) {
    DType t = in[0].second;
    ax::Gp r = is_fp(t) ? l.compare_float(op, t, l.load_float(t, elem(0, t)), l.load_float(t, elem(1, t)))
                        : l.compare_int(op, l.load_int(t, elem(0, t)), l.load_int(t, elem(1, t)));
    l.store_int(DType::Bool, out_m, r);
  } else if (op == ScalarOp::Where) {
    // Any dtype: the selected element moves as raw bits of its size.
    ax::Gp c = l.load_int(DType::Bool, elem(0, DType::Bool));
    ax::Gp r = l.load_int(out, elem(2, out)), a = l.load_int(out, elem(1, out));
    cc_.test(c, c);
    cc_.cmovnz(r, a);
    l.store_int(out, out_m, r);
  } else {
    ax::Gp a = l.load_int(out, elem(0, out));
    ax::Gp b = nin > 1 ? l.load_int(out, elem(1, out)) : a;
    l.store_int(out, out_m, l.int_op(op, out, a, b));
  }
  if (count_ > 1) {
    cc_.inc(idx);
    cc_.cmp(idx, count_);
    cc_.jl(top);
  }
  ax::Mem res = spill_slot(nin);
  vex_ ? movdqu(dst, res) : void(cc_.movdqu(dst.xmm(), res));
}

// ---- vector forms (AVX2, AVX-512) ----

// The low byte of each element of size `itemsize`, packed into the low `count` bytes of dst.
// AVX-512 has the truncating moves (vpmovdb, vpmovqb). On AVX2, vpshufb gathers within each
// 128-bit lane: lane 0 puts its bytes first, lane 1 right after them (at the same offsets within
// its own lane), so OR-ing the high lane down joins them.
void BodyEmitter::narrow_to_bytes(int itemsize, const ax::Vec& dst, const ax::Vec& a) {
  if (itemsize == 1) return move(dst, a);
  if (evex_) {
    itemsize == 4 ? cc_.vpmovdb(dst.xmm(), a.zmm()) : cc_.vpmovqb(dst.xmm(), a.zmm());
    return;
  }
  const int per_lane = 16 / itemsize;
  uint8_t ctrl[32];
  std::memset(ctrl, 0x80, sizeof ctrl);  // 0x80: zero this byte
  for (int lane = 0; lane < 2; ++lane)
    for (int e = 0; e < per_lane; ++e) ctrl[lane * 16 + lane * per_lane + e] = static_cast<uint8_t>(e * itemsize);
  cc_.vpshufb(dst, a, bytes_constant(ctrl, 32));
  if (count_ * itemsize > 16) {
    ax::Xmm hi = cc_.newXmm();
    cc_.vextracti128(hi, dst.ymm(), 1);
    cc_.vpor(dst.xmm(), dst.xmm(), hi);
  }
}

// AVX2: lane masks (all ones / zeros) of `itemsize` -> bool bytes 0/1 (or 1/0 when negated).
void BodyEmitter::mask_to_bool(int itemsize, bool negate, const ax::Vec& dst, const ax::Vec& mask) {
  ax::Vec b = newv();
  narrow_to_bytes(itemsize, b, mask);
  if (negate) cc_.vpaddb(dst, b, splat_bytes(1));  // 0xff + 1 = 0, 0 + 1 = 1
  else cc_.vpabsb(dst, b);                         // |-1| = 1
}

// AVX2: bool bytes 0/1 -> lane masks of `itemsize` (0 - 1 is all ones).
void BodyEmitter::bool_to_mask(int itemsize, const ax::Vec& dst, const ax::Vec& c) {
  ax::Vec z = zero();
  switch (itemsize) {
    case 1: cc_.vpsubb(dst, z, c); return;
    case 4: {
      ax::Vec w = newv();
      cc_.vpmovzxbd(w, c.xmm());
      cc_.vpsubd(dst, z, w);
      return;
    }
    default: {
      ax::Vec w = newv();
      cc_.vpmovzxbq(w, c.xmm());
      cc_.vpsubq(dst, z, w);
      return;
    }
  }
}

// NB: operands that emit code (constants) are made before cc_.k(): the mask and {z} apply to
// whichever instruction is emitted next.
void BodyEmitter::k_to_bool(const ax::KReg& k, const ax::Vec& dst) {
  const ax::Vec ones = splat_bytes(1);
  cc_.k(k).z().vmovdqu8(dst.zmm(), ones.zmm());
}

// dst = k ? a : b by element of `itemsize`. A merge-masked move rather than vpblendm: the
// allocator treats a masked destination as read, and here it is (it holds b).
void BodyEmitter::k_select(int itemsize, const ax::KReg& k, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b) {
  move(dst, b);
  cc_.k(k).emit(itemsize == 1 ? ax::Inst::kIdVmovdqu8 : itemsize == 4 ? ax::Inst::kIdVmovdqa32 : ax::Inst::kIdVmovdqa64,
                dst.zmm(), a.zmm());
}

void BodyEmitter::int_mul(DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b) {
  switch (size_of(t)) {
    case 4: cc_.vpmulld(dst, a, b); return;
    case 8: {
      if (evex_) return void(cc_.vpmullq(dst, a, b));  // AVX-512DQ
      // No vpmullq before AVX-512: (ah*2^32 + al)(bh*2^32 + bl) mod 2^64
      //   = al*bl + ((ah*bl + al*bh) << 32), from 32x32->64 products.
      ax::Vec ah = newv(), bh = newv(), cross = newv(), low = newv();
      cc_.vpsrlq(ah, a, 32);
      cc_.vpmuludq(ah, ah, b);
      cc_.vpsrlq(bh, b, 32);
      cc_.vpmuludq(bh, a, bh);
      cc_.vpaddq(cross, ah, bh);
      cc_.vpsllq(cross, cross, 32);
      cc_.vpmuludq(low, a, b);
      cc_.vpaddq(dst, low, cross);
      return;
    }
    default: {
      // No byte multiply: the low byte of a 16-bit product depends only on the operands' low
      // bytes, so multiply even bytes in place and odd bytes shifted down, and merge.
      ax::Vec even = newv(), ah = newv(), bh = newv(), odd = newv();
      cc_.vpmullw(even, a, b);
      uint8_t low_bytes[64];
      for (int k = 0; k < 64; ++k) low_bytes[k] = k % 2 ? 0x00 : 0xff;
      const ax::Vec keep = bytes_constant(low_bytes, 64);
      evex_ ? cc_.vpandd(even, even, keep) : cc_.vpand(even, even, keep);
      cc_.vpsrlw(ah, a, 8);
      cc_.vpsrlw(bh, b, 8);
      cc_.vpmullw(odd, ah, bh);
      cc_.vpsllw(odd, odd, 8);
      evex_ ? cc_.vpord(dst, even, odd) : cc_.vpor(dst, even, odd);
      return;
    }
  }
}

void BodyEmitter::int_binary(ScalarOp op, DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b) {
  if (!vex_ || op == ScalarOp::FloorDiv || op == ScalarOp::Mod) return lanewise(op, t, {{a, t}, {b, t}}, dst);
  switch (op) {
    case ScalarOp::Add:
      cc_.emit(by_size(t, ax::Inst::kIdVpaddb, ax::Inst::kIdVpaddd, ax::Inst::kIdVpaddq), dst, a, b);
      return;
    case ScalarOp::Sub:
      cc_.emit(by_size(t, ax::Inst::kIdVpsubb, ax::Inst::kIdVpsubd, ax::Inst::kIdVpsubq), dst, a, b);
      return;
    case ScalarOp::Mul: return int_mul(t, dst, a, b);
    case ScalarOp::And: evex_ ? cc_.vpandd(dst, a, b) : cc_.vpand(dst, a, b); return;
    case ScalarOp::Or: evex_ ? cc_.vpord(dst, a, b) : cc_.vpor(dst, a, b); return;
    case ScalarOp::Xor: evex_ ? cc_.vpxord(dst, a, b) : cc_.vpxor(dst, a, b); return;
    case ScalarOp::Max:
    case ScalarOp::Min: {
      const bool mx = op == ScalarOp::Max;
      if (size_of(t) == 8) {
        if (evex_) {
          mx ? cc_.vpmaxsq(dst, a, b) : cc_.vpminsq(dst, a, b);
          return;
        }
        ax::Vec gt = newv();  // a > b
        cc_.vpcmpgtq(gt, a, b);
        mx ? cc_.vpblendvb(dst, b, a, gt) : cc_.vpblendvb(dst, a, b, gt);
      } else if (size_of(t) == 4) {
        mx ? cc_.vpmaxsd(dst, a, b) : cc_.vpminsd(dst, a, b);
      } else {  // uint8 (and bool 0/1)
        mx ? cc_.vpmaxub(dst, a, b) : cc_.vpminub(dst, a, b);
      }
      return;
    }
    default: return lanewise(op, t, {{a, t}, {b, t}}, dst);
  }
}

void BodyEmitter::int_unary(ScalarOp op, DType t, const ax::Vec& dst, const ax::Vec& a) {
  if (!vex_) return lanewise(op, t, {{a, t}}, dst);
  switch (op) {
    case ScalarOp::Neg:
      cc_.emit(by_size(t, ax::Inst::kIdVpsubb, ax::Inst::kIdVpsubd, ax::Inst::kIdVpsubq), dst, zero(), a);
      return;
    case ScalarOp::Abs:
      if (size_of(t) == 4) {
        cc_.vpabsd(dst, a);
      } else if (size_of(t) == 8) {
        if (evex_) return void(cc_.vpabsq(dst, a));
        ax::Vec neg = newv(), flipped = newv();  // |a| = (a ^ m) - m with m = (a < 0 ? -1 : 0)
        cc_.vpcmpgtq(neg, zero(), a);
        cc_.vpxor(flipped, a, neg);
        cc_.vpsubq(dst, flipped, neg);
      } else {
        move(dst, a);  // unsigned
      }
      return;
    case ScalarOp::Square: return int_mul(t, dst, a, a);
    case ScalarOp::Not:
      if (t == DType::Bool) {
        evex_ ? cc_.vpxord(dst, a, splat_bytes(1)) : cc_.vpxor(dst, a, splat_bytes(1));
      } else if (evex_) {
        cc_.vpxord(dst, a, splat_bytes(0xff));
      } else {
        ax::Vec ones = newv();
        cc_.vpcmpeqd(ones, ones, ones);
        cc_.vpxor(dst, a, ones);
      }
      return;
    default: return lanewise(op, t, {{a, t}}, dst);
  }
}

void BodyEmitter::compare(ScalarOp op, DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b) {
  if (!vex_) return lanewise(op, DType::Bool, {{a, t}, {b, t}}, dst);
  if (evex_) {
    ax::KReg k = cc_.newKq();
    if (is_fp(t)) {
      cc_.emit(t == DType::Float32 ? ax::Inst::kIdVcmpps : ax::Inst::kIdVcmppd, k, a, b, float_predicate(op));
    } else {
      // vpcmp[u] predicates: 0 EQ, 1 LT, 2 LE, 4 NE, 5 NLT (GE), 6 NLE (GT). uint8 and bool
      // compare unsigned.
      int p = 0;
      switch (op) {
        case ScalarOp::Eq: p = 0; break;
        case ScalarOp::Ne: p = 4; break;
        case ScalarOp::Lt: p = 1; break;
        case ScalarOp::Le: p = 2; break;
        case ScalarOp::Gt: p = 6; break;
        default: p = 5; break;  // Ge
      }
      cc_.emit(by_size(t, ax::Inst::kIdVpcmpub, ax::Inst::kIdVpcmpd, ax::Inst::kIdVpcmpq), k, a, b, p);
    }
    return k_to_bool(k, dst);
  }
  ax::Vec m = newv();
  if (is_fp(t)) {
    cc_.emit(t == DType::Float32 ? ax::Inst::kIdVcmpps : ax::Inst::kIdVcmppd, m, a, b, float_predicate(op));
    return mask_to_bool(size_of(t), false, dst, m);
  }
  ax::Vec x = a, y = b;
  if (t == DType::UInt8) {
    // vpcmpgtb is signed: flipping the top bit maps unsigned order onto signed order.
    ax::Vec bias = splat_bytes(0x80);
    x = newv();
    y = newv();
    cc_.vpxor(x, a, bias);
    cc_.vpxor(y, b, bias);
  }
  const InstId eq = by_size(t, ax::Inst::kIdVpcmpeqb, ax::Inst::kIdVpcmpeqd, ax::Inst::kIdVpcmpeqq);
  const InstId gt = by_size(t, ax::Inst::kIdVpcmpgtb, ax::Inst::kIdVpcmpgtd, ax::Inst::kIdVpcmpgtq);
  bool negate = false;
  switch (op) {
    case ScalarOp::Eq: cc_.emit(eq, m, x, y); break;
    case ScalarOp::Ne: cc_.emit(eq, m, x, y); negate = true; break;
    case ScalarOp::Gt: cc_.emit(gt, m, x, y); break;
    case ScalarOp::Lt: cc_.emit(gt, m, y, x); break;
    case ScalarOp::Le: cc_.emit(gt, m, x, y); negate = true; break;
    default: cc_.emit(gt, m, y, x); negate = true; break;  // Ge
  }
  mask_to_bool(size_of(t), negate, dst, m);
}

void BodyEmitter::where(DType t, const ax::Vec& dst, const ax::Vec& c, const ax::Vec& a, const ax::Vec& b) {
  if (!vex_) return lanewise(ScalarOp::Where, t, {{c, DType::Bool}, {a, t}, {b, t}}, dst);
  if (evex_) {
    // Bit j of k: bool byte j is nonzero; the blend then picks whole elements by lane.
    ax::KReg k = cc_.newKq();
    cc_.vptestmb(k, c.zmm(), c.zmm());
    return k_select(size_of(t), k, dst, a, b);
  }
  ax::Vec m = newv();
  bool_to_mask(size_of(t), m, c);
  cc_.vpblendvb(dst, b, a, m);
}

bool BodyEmitter::cast_vector(DType from, DType to, const ax::Vec& dst, const ax::Vec& a) {
  const ax::Xmm ax_ = a.xmm();
  if (to == DType::Bool) {
    if (evex_) {
      ax::KReg k = cc_.newKq();
      if (is_fp(from))
        cc_.emit(from == DType::Float32 ? ax::Inst::kIdVcmpps : ax::Inst::kIdVcmppd, k, a, zero(), 0x04);  // NaN: true
      else
        cc_.emit(by_size(from, ax::Inst::kIdVptestmb, ax::Inst::kIdVptestmd, ax::Inst::kIdVptestmq), k, a, a);
      k_to_bool(k, dst);
      return true;
    }
    ax::Vec m = newv();
    if (is_fp(from)) {
      cc_.emit(from == DType::Float32 ? ax::Inst::kIdVcmpps : ax::Inst::kIdVcmppd, m, a, zero(), 0x04);  // NaN: true
      mask_to_bool(size_of(from), false, dst, m);
    } else {
      cc_.emit(by_size(from, ax::Inst::kIdVpcmpeqb, ax::Inst::kIdVpcmpeqd, ax::Inst::kIdVpcmpeqq), m, a, zero());
      mask_to_bool(size_of(from), true, dst, m);
    }
    return true;
  }
  if (from == DType::Bool) from = DType::UInt8;  // 0/1 bytes are uint8 values
  if (from == to) {
    move(dst, a);
    return true;
  }
  // Widening conversions read the low half of the source register, narrowing ones write the low
  // half of dst (Note [Element widths]: the count elements sit in the low bytes).
  switch (from) {
    case DType::UInt8:
      switch (to) {
        case DType::Int32: cc_.vpmovzxbd(dst, ax_); return true;
        case DType::Int64: cc_.vpmovzxbq(dst, ax_); return true;
        default: {
          ax::Vec w = newv();
          cc_.vpmovzxbd(w, ax_);
          to == DType::Float32 ? cc_.vcvtdq2ps(dst, w) : cc_.vcvtdq2pd(dst, half(w));
          return true;
        }
      }
    case DType::Int32:
      switch (to) {
        case DType::Int64: cc_.vpmovsxdq(dst, half(a)); return true;
        case DType::Float32: cc_.vcvtdq2ps(dst, a); return true;
        case DType::Float64: cc_.vcvtdq2pd(dst, half(a)); return true;
        default: narrow_to_bytes(4, dst, a); return true;  // uint8: the low byte
      }
    case DType::Int64:
      if (to == DType::UInt8) {
        narrow_to_bytes(8, dst, a);
        return true;
      }
      if (evex_) {
        // AVX-512DQ converts int64 like cvtsi2sd/ss (one rounding, MXCSR mode).
        switch (to) {
          case DType::Int32: cc_.vpmovqd(dst.ymm(), a.zmm()); return true;  // the low dword
          case DType::Float32: cc_.vcvtqq2ps(dst.ymm(), a.zmm()); return true;
          default: cc_.vcvtqq2pd(dst.zmm(), a.zmm()); return true;
        }
      }
      if (to == DType::Int32) {
        const uint32_t idx[8] = {0, 2, 4, 6, 0, 0, 0, 0};  // the low dword of each qword
        cc_.vpermd(dst, bytes_constant(idx, 32), a);
        return true;
      }
      if (to == DType::Float64) {
        // No AVX2 instruction, but x = hi * 2**32 + lo with hi its signed high dword and lo its
        // unsigned low dword: hi converts exactly (vcvtdq2pd) and scales exactly, lo becomes
        // exact as the low mantissa bits of 2**52 + lo (minus 2**52), and the one vaddpd rounds
        // the exact sum once, as cvtsi2sd rounds x: the same bits as the lane-wise conversion.
        const uint32_t idx[8] = {1, 3, 5, 7, 0, 0, 0, 0};  // the high dword of each qword
        ax::Vec hi = newv(), hi_d = newv(), lo = newv();
        cc_.vpermd(hi, bytes_constant(idx, 32), a);
        cc_.vcvtdq2pd(hi_d, hi.xmm());
        cc_.vmulpd(hi_d, hi_d, constant(DType::Float64, 4294967296.0));
        const ax::Vec two52 = int_constant(DType::Int64, 0x4330000000000000);  // the double 2**52
        cc_.vpblendd(lo, a, two52, 0xAA);  // odd dwords (the high halves) from 2**52
        cc_.vsubpd(lo, lo, two52);
        cc_.vaddpd(dst, hi_d, lo);
        return true;
      }
      return false;  // to float32: no AVX2 instruction (lane-wise; two roundings otherwise)
    case DType::Float32:
    case DType::Float64: {
      const bool f32 = from == DType::Float32;
      if (to == DType::Int64) {
        if (!evex_) return false;  // no AVX2 instruction (lane-wise)
        // Out of range and NaN give 0x8000000000000000, as cvttsd2si does.
        f32 ? cc_.vcvttps2qq(dst.zmm(), a.ymm()) : cc_.vcvttpd2qq(dst.zmm(), a.zmm());
        return true;
      }
      if (is_fp(to)) {
        f32 ? cc_.vcvtps2pd(dst, half(a)) : cc_.vcvtpd2ps(half(dst), full(a));
        return true;
      }
      // int32 (out of range: 0x80000000, as cvttsd2si) and uint8 (its low byte).
      ax::Vec i = to == DType::Int32 ? dst : newv();
      f32 ? cc_.vcvttps2dq(i, a) : cc_.vcvttpd2dq(half(i), full(a));
      if (to == DType::UInt8) narrow_to_bytes(4, dst, i);
      return true;
    }
    default: return false;
  }
}

// Note [Half types] (jit/lower/loop_ir.h): a half value is its 16 bits packed like int16's, so
// loads and stores move bytes; these casts are the only operations on it, widening to float32
// exactly and rounding float32 to nearest even. F16C converts float16 (every AVX2 CPU has it;
// pointwise_supported checks); bfloat16 is float32's upper half, rounded with integer arithmetic
// (NaN becomes the quiet 0x7fc0, as torch's conversion gives).
void BodyEmitter::half_cast(DType from, DType to, const ax::Vec& dst, const ax::Vec& a) {
  if (rt::dtype_is_half(from)) {
    const ax::Vec f = to == DType::Float32 ? dst : newv();
    if (from == DType::Float16) {
      cc_.vcvtph2ps(full(f), half(a));
    } else {
      cc_.vpmovzxwd(full(f), half(a));
      cc_.vpslld(full(f), full(f), 16);
    }
    if (to != DType::Float32) cast(DType::Float32, to, dst, f);
    return;
  }
  ax::Vec f = a;
  if (from != DType::Float32) {
    f = newv();
    cast(from, DType::Float32, f, a);
  }
  if (to == DType::Float16) {
    cc_.vcvtps2ph(half(dst), full(f), 0);  // imm 0: round to nearest even
    return;
  }
  const ax::Vec r = newv(), nan = newv();
  const ax::Vec one = int_constant(DType::Int32, 1), bias = int_constant(DType::Int32, 0x7fff);
  cc_.vpsrld(full(r), full(f), 16);
  evex_ ? cc_.vpandd(full(r), full(r), full(one)) : cc_.vpand(full(r), full(r), full(one));
  cc_.vpaddd(full(r), full(r), full(bias));
  cc_.vpaddd(full(r), full(r), full(f));
  cc_.vpsrld(full(r), full(r), 16);
  const ax::Vec quiet = int_constant(DType::Int32, 0x7fc0);
  if (evex_) {
    const ax::KReg k = cc_.newKq();
    cc_.vcmpps(k, full(f), full(f), 3);  // unordered: NaN
    cc_.k(k).vmovdqa32(full(r), full(quiet));
    cc_.vpmovdw(half(dst), full(r));
    return;
  }
  cc_.vcmpps(full(nan), full(f), full(f), 3);
  cc_.vblendvps(full(r), full(r), full(quiet), full(nan));
  // 32 -> 16 bits: the pack works within 128-bit lanes, the permute joins the lanes' low halves.
  cc_.vpackusdw(full(r), full(r), full(r));
  cc_.vpermq(full(dst), full(r), 0x08);
}

void BodyEmitter::cast(DType from, DType to, const ax::Vec& dst, const ax::Vec& a) {
  if (rt::dtype_is_half(from) || rt::dtype_is_half(to)) {
    if (from == to) return move(dst, a);
    return half_cast(from, to, dst, a);
  }
  // A uint64 value only arises as the accumulator of a uint8 sum or product (Note [Unsigned
  // accumulators] in reduction_codegen.cpp): an integer converts to it with the bits it gives
  // int64 (zero- or sign-extension, as C's conversions do).
  if (to == DType::UInt64 && !is_fp(from)) to = DType::Int64;
  if (from == to) return move(dst, a);
  if (!vex_ && is_fp(from) && is_fp(to)) {
    from == DType::Float32 ? cc_.cvtss2sd(dst.xmm(), a.xmm())
                           : cc_.cvtsd2ss(dst.xmm(), a.xmm());
    return;
  }
  if (vex_ && cast_vector(from, to, dst, a)) return;
  lanewise(ScalarOp::Cast, to, {{a, from}}, dst);
}

}  // namespace framejit::jit::x86::detail
