// body_emitter.cpp — the element emitter shared by the pointwise and reduction generators: float
// arithmetic, loads, stores, constants, parameters, and the dispatch of a kernel body.
#include "jit/x86/body_emitter_p.h"

#include <algorithm>
#include <cstring>

namespace framejit::jit::x86::detail {

namespace {
bool is_f32(DType t) { return t == DType::Float32; }
bool is_fp(DType t) { return t == DType::Float32 || t == DType::Float64; }
}  // namespace

BodyEmitter::BodyEmitter(ax::Compiler& cc, Isa isa, int count)
    : cc_(cc), isa_(isa), count_(count), vex_(isa != Isa::Scalar), math_f32_(cc, isa, DType::Float32),
      math_f64_(cc, isa, DType::Float64) {
  evex_ = isa == Isa::Avx512;
}

ax::Vec BodyEmitter::newv() {
  if (evex_) return cc_.newZmm();
  return vex_ ? ax::Vec(cc_.newYmm()) : ax::Vec(cc_.newXmm());
}

void BodyEmitter::movdqu(const Operand& dst, const Operand& src) {
  cc_.emit(evex_ ? ax::Inst::kIdVmovdqu32 : ax::Inst::kIdVmovdqu, dst, src);
}


InstId BodyEmitter::pick(DType t, InstId vps, InstId vpd, InstId ss, InstId sd) const {
  if (vex_) return is_f32(t) ? vps : vpd;
  return is_f32(t) ? ss : sd;
}

// dst = a op b, using the destructive two-operand SSE form when there is no VEX.
void BodyEmitter::three(InstId id, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b) {
  if (vex_) {
    cc_.emit(id, dst, a, b);
  } else {
    cc_.movaps(dst.xmm(), a.xmm());
    cc_.emit(id, dst, b);
  }
}

void BodyEmitter::arith(ScalarOp op, DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b) {
  InstId id = 0;
  switch (op) {
    case ScalarOp::Add: id = pick(t, ax::Inst::kIdVaddps, ax::Inst::kIdVaddpd, ax::Inst::kIdAddss, ax::Inst::kIdAddsd); break;
    case ScalarOp::Sub: id = pick(t, ax::Inst::kIdVsubps, ax::Inst::kIdVsubpd, ax::Inst::kIdSubss, ax::Inst::kIdSubsd); break;
    case ScalarOp::Mul: id = pick(t, ax::Inst::kIdVmulps, ax::Inst::kIdVmulpd, ax::Inst::kIdMulss, ax::Inst::kIdMulsd); break;
    case ScalarOp::Div: id = pick(t, ax::Inst::kIdVdivps, ax::Inst::kIdVdivpd, ax::Inst::kIdDivss, ax::Inst::kIdDivsd); break;
    default: break;
  }
  three(id, dst, a, b);
}

// Bitwise ops (and/andn/or/xor) on whole registers.
void BodyEmitter::bits(DType t, InstId vex_ps, InstId vex_pd, InstId sse_ps, InstId sse_pd, const ax::Vec& dst,
                       const ax::Vec& a, const ax::Vec& b) {
  InstId id = vex_ ? (is_f32(t) ? vex_ps : vex_pd) : (is_f32(t) ? sse_ps : sse_pd);
  three(id, dst, a, b);
}

// A mask constant (sign bit / everything but the sign bit) as a full register.
ax::Vec BodyEmitter::mask_constant(DType t, bool sign_only) {
  ax::Vec r = newv();
  if (is_f32(t)) {
    uint32_t bitsv = sign_only ? 0x80000000u : 0x7fffffffu;
    ax::Mem m = cc_.newConst(ConstPoolScope::kLocal, &bitsv, 4);
    vex_ ? cc_.vbroadcastss(r, m) : cc_.movss(r.xmm(), m);
  } else {
    uint64_t bitsv = sign_only ? 0x8000000000000000ull : 0x7fffffffffffffffull;
    ax::Mem m = cc_.newConst(ConstPoolScope::kLocal, &bitsv, 8);
    vex_ ? cc_.vbroadcastsd(full(r), m) : cc_.movsd(r.xmm(), m);
  }
  return r;
}

void BodyEmitter::cmp(DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b, int predicate) {
  if (vex_) {
    cc_.emit(is_f32(t) ? ax::Inst::kIdVcmpps : ax::Inst::kIdVcmppd, dst, a, b, predicate);
  } else {
    cc_.movaps(dst.xmm(), a.xmm());
    cc_.emit(is_f32(t) ? ax::Inst::kIdCmpss : ax::Inst::kIdCmpsd, dst, b, predicate);
  }
}

// dst = mask ? a : b (mask lanes all ones or all zeros).
void BodyEmitter::select(DType t, const ax::Vec& dst, const ax::Vec& mask, const ax::Vec& a, const ax::Vec& b) {
  if (vex_) {
    cc_.emit(is_f32(t) ? ax::Inst::kIdVblendvps : ax::Inst::kIdVblendvpd, dst, b, a, mask);
  } else {
    ax::Vec tmp = newv();
    bits(t, ax::Inst::kIdVandps, ax::Inst::kIdVandpd, ax::Inst::kIdAndps, ax::Inst::kIdAndpd, tmp, mask, a);
    bits(t, ax::Inst::kIdVandnps, ax::Inst::kIdVandnpd, ax::Inst::kIdAndnps, ax::Inst::kIdAndnpd, dst, mask, b);
    bits(t, ax::Inst::kIdVorps, ax::Inst::kIdVorpd, ax::Inst::kIdOrps, ax::Inst::kIdOrpd, dst, dst, tmp);
  }
}

void BodyEmitter::max_min(bool is_max, DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b) {
  // NumPy's (a > b || isnan(a)) ? a : b for maximum, < for minimum. NB: strict, so a tie
  // returns b: np.maximum(0.0, -0.0) is -0.0, and a later x / that zero is -inf.
  if (evex_) {
    const InstId vcmp = is_f32(t) ? ax::Inst::kIdVcmpps : ax::Inst::kIdVcmppd;
    ax::KReg keep_a = cc_.newKq(), nan_a = cc_.newKq();
    cc_.emit(vcmp, keep_a, is_max ? b : a, is_max ? a : b, 1);  // LT (ordered)
    cc_.emit(vcmp, nan_a, a, a, 3);                             // UNORD
    cc_.korq(keep_a, keep_a, nan_a);
    return k_select(rt::dtype_itemsize(t), keep_a, dst, a, b);
  }
  ax::Vec keep_a = newv(), nan_a = newv();
  cmp(t, keep_a, is_max ? b : a, is_max ? a : b, 1);  // LT (ordered)
  cmp(t, nan_a, a, a, 3);                             // UNORD
  bits(t, ax::Inst::kIdVorps, ax::Inst::kIdVorpd, ax::Inst::kIdOrps, ax::Inst::kIdOrpd, keep_a, keep_a, nan_a);
  select(t, dst, keep_a, a, b);
}

void BodyEmitter::unary(ScalarOp op, DType t, const ax::Vec& dst, const ax::Vec& a) {
  const bool f32 = is_f32(t);
  switch (op) {
    case ScalarOp::Neg:
      bits(t, ax::Inst::kIdVxorps, ax::Inst::kIdVxorpd, ax::Inst::kIdXorps, ax::Inst::kIdXorpd, dst, a,
           mask_constant(t, true));
      return;
    case ScalarOp::Abs:
      bits(t, ax::Inst::kIdVandps, ax::Inst::kIdVandpd, ax::Inst::kIdAndps, ax::Inst::kIdAndpd, dst, a,
           mask_constant(t, false));
      return;
    case ScalarOp::Square: arith(ScalarOp::Mul, t, dst, a, a); return;
    case ScalarOp::Reciprocal: arith(ScalarOp::Div, t, dst, constant(t, 1.0), a); return;
    case ScalarOp::Sqrt:
      if (vex_) cc_.emit(f32 ? ax::Inst::kIdVsqrtps : ax::Inst::kIdVsqrtpd, dst, a);
      else cc_.emit(f32 ? ax::Inst::kIdSqrtss : ax::Inst::kIdSqrtsd, dst, a);
      return;
    case ScalarOp::Floor:
    case ScalarOp::Ceil: {
      int imm = (op == ScalarOp::Floor ? 1 : 2) | 8;  // round down/up, suppress precision exception
      // vrndscale with scale 0 is vround's EVEX form (same immediate bits).
      if (evex_) cc_.emit(f32 ? ax::Inst::kIdVrndscaleps : ax::Inst::kIdVrndscalepd, dst, a, imm);
      else if (vex_) cc_.emit(f32 ? ax::Inst::kIdVroundps : ax::Inst::kIdVroundpd, dst, a, imm);
      else cc_.emit(f32 ? ax::Inst::kIdRoundss : ax::Inst::kIdRoundsd, dst, a, imm);
      return;
    }
    default: math(t).emit(math_fn_of(op), dst, a); return;
  }
}

void BodyEmitter::binary_math(ScalarOp op, DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b) {
  math(t).emit(math_fn_of(op), dst, a, b);
}

void BodyEmitter::move(const ax::Vec& dst, const ax::Vec& src) {
  if (vex_) cc_.vmovaps(dst, src);
  else cc_.movaps(dst.xmm(), src.xmm());
}

ax::Vec BodyEmitter::int_to_value(DType t, const ax::Gp& g) {
  const bool f32 = is_f32(t);
  ax::Xmm s = cc_.newXmm();
  if (vex_) {
    cc_.vxorps(s, s, s);
    f32 ? cc_.vcvtsi2ss(s, s, g) : cc_.vcvtsi2sd(s, s, g);
    ax::Vec r = newv();
    f32 ? cc_.vbroadcastss(r, s) : cc_.vbroadcastsd(full(r), s);
    return r;
  }
  cc_.xorps(s, s);
  f32 ? cc_.cvtsi2ss(s, g) : cc_.cvtsi2sd(s, g);
  return s;
}

ax::Vec BodyEmitter::zero() {
  ax::Vec z = newv();
  if (evex_) cc_.vpxord(z, z, z);
  else vex_ ? cc_.vpxor(z, z, z) : cc_.pxor(z.xmm(), z.xmm());
  return z;
}

ax::Vec BodyEmitter::bytes_constant(const void* data, int bytes) {
  const int width = vector_bytes(isa_);
  uint8_t buf[64] = {};
  std::memcpy(buf, data, std::min(bytes, width));
  ax::Mem m = cc_.newConst(ConstPoolScope::kLocal, buf, width);
  ax::Vec r = newv();
  vex_ ? movdqu(r, m) : void(cc_.movdqu(r.xmm(), m));
  return r;
}

ax::Vec BodyEmitter::splat_bytes(uint8_t b) {
  uint8_t buf[64];
  std::memset(buf, b, sizeof buf);
  return bytes_constant(buf, vector_bytes(isa_));
}

ax::Vec BodyEmitter::constant(DType t, double v) {
  if (is_fp(t)) {
    ax::Vec r = newv();
    if (is_f32(t)) {
      float f = static_cast<float>(v);
      ax::Mem m = cc_.newConst(ConstPoolScope::kLocal, &f, 4);
      vex_ ? cc_.vbroadcastss(r, m) : cc_.movss(r.xmm(), m);
    } else {
      ax::Mem m = cc_.newConst(ConstPoolScope::kLocal, &v, 8);
      vex_ ? cc_.vbroadcastsd(full(r), m) : cc_.movsd(r.xmm(), m);
    }
    return r;
  }
  // Integers: the value converted as NumPy converts a Python int (wrapping to the width).
  return int_constant(t, t == DType::Bool ? (v != 0) : static_cast<int64_t>(v));
}

ax::Vec BodyEmitter::int_constant(DType t, int64_t v) {
  const int s = rt::dtype_itemsize(t);
  if (t == DType::Bool) v = v != 0;
  uint8_t buf[64];
  for (int k = 0; k < 64; k += s) std::memcpy(buf + k, &v, s);  // little-endian: the low bytes
  return bytes_constant(buf, 64);
}

ax::Mem BodyEmitter::vector_mem(int bytes, const ax::Gp& ptr, int disp) const {
  ax::Mem m = ax::ptr(ptr, disp);
  m.setSize(bytes);
  return m;
}

void BodyEmitter::load_bytes(DType t, const ax::Vec& dst, const ax::Mem& m, int bytes) {
  const ax::Xmm x = dst.xmm();
  if (is_fp(t) && bytes == 64) return void(cc_.vmovups(dst.zmm(), m));
  if (is_fp(t) && bytes == 32) return void(cc_.vmovups(dst.ymm(), m));
  if (is_fp(t) && bytes == 16) return void(vex_ ? cc_.vmovups(x, m) : cc_.movups(x, m));
  switch (bytes) {
    case 64: movdqu(dst.zmm(), m); return;
    case 32: movdqu(dst.ymm(), m); return;
    case 16: vex_ ? movdqu(x, m) : void(cc_.movdqu(x, m)); return;
    case 8:
      if (is_fp(t)) vex_ ? cc_.vmovsd(x, m) : cc_.movsd(x, m);
      else vex_ ? cc_.vmovq(x, m) : cc_.movq(x, m);
      return;
    case 4:
      if (is_fp(t)) vex_ ? cc_.vmovss(x, m) : cc_.movss(x, m);
      else vex_ ? cc_.vmovd(x, m) : cc_.movd(x, m);
      return;
    default: {  // 1 or 2 bytes: through a general-purpose register
      ax::Gp g = cc_.newInt32();
      cc_.movzx(g, m);
      vex_ ? cc_.vmovd(x, g) : cc_.movd(x, g);
      return;
    }
  }
}

void BodyEmitter::store_bytes(DType t, const ax::Mem& m, const ax::Vec& src, int bytes) {
  const ax::Xmm x = src.xmm();
  if (is_fp(t) && bytes == 64) return void(cc_.vmovups(m, src.zmm()));
  if (is_fp(t) && bytes == 32) return void(cc_.vmovups(m, src.ymm()));
  if (is_fp(t) && bytes == 16) return void(vex_ ? cc_.vmovups(m, x) : cc_.movups(m, x));
  switch (bytes) {
    case 64: movdqu(m, src.zmm()); return;
    case 32: movdqu(m, src.ymm()); return;
    case 16: vex_ ? movdqu(m, x) : void(cc_.movdqu(m, x)); return;
    case 8:
      if (is_fp(t)) vex_ ? cc_.vmovsd(m, x) : cc_.movsd(m, x);
      else vex_ ? cc_.vmovq(m, x) : cc_.movq(m, x);
      return;
    case 4:
      if (is_fp(t)) vex_ ? cc_.vmovss(m, x) : cc_.movss(m, x);
      else vex_ ? cc_.vmovd(m, x) : cc_.movd(m, x);
      return;
    default:
      // NB: not (v)movd to a general-purpose register: when the allocator spills the xmm it
      // rewrites that to `movd r32, m32`, which does not exist (asmjit's validation rejects it).
      // The pextr forms only take the vector operand in a register.
      if (vex_) {
        bytes == 1 ? cc_.vpextrb(m, x, 0) : cc_.vpextrw(m, x, 0);
      } else {
        ax::Gp g = cc_.newInt32();
        cc_.pextrw(g, x, 0);
        bytes == 1 ? cc_.mov(m, g.r8()) : cc_.mov(m, g.r16());
      }
      return;
  }
}

void BodyEmitter::load(DType t, const ax::Vec& dst, const ax::Gp& ptr, int disp) {
  const int bytes = count_ * rt::dtype_itemsize(t);
  load_bytes(t, dst, vector_mem(bytes, ptr, disp), bytes);
}

void BodyEmitter::store(DType t, const ax::Gp& ptr, const ax::Vec& src, int disp) {
  const int bytes = count_ * rt::dtype_itemsize(t);
  store_bytes(t, vector_mem(bytes, ptr, disp), src, bytes);
}

namespace {
// The EVEX move of one element size (masking works per element) and the register view that holds
// `bytes`: never below xmm, whose extra lanes the mask leaves alone (count >= 8 on Avx512).
InstId masked_move(int itemsize) {
  switch (itemsize) {
    case 1: return ax::Inst::kIdVmovdqu8;
    case 2: return ax::Inst::kIdVmovdqu16;
    case 4: return ax::Inst::kIdVmovdqu32;
    default: return ax::Inst::kIdVmovdqu64;
  }
}
ax::Vec view_of_bytes(const ax::Vec& v, int bytes) {
  if (bytes == 64) return v.zmm();
  if (bytes == 32) return v.ymm();
  return v.xmm();
}
}  // namespace

void BodyEmitter::load_masked(DType t, const ax::Vec& dst, const ax::Gp& ptr, const ax::KReg& k) {
  const int s = rt::dtype_itemsize(t), bytes = std::max(16, count_ * s);
  cc_.k(k).z().emit(masked_move(s), view_of_bytes(dst, bytes), vector_mem(bytes, ptr, 0));
}

void BodyEmitter::store_masked(DType t, const ax::Gp& ptr, const ax::Vec& src, const ax::KReg& k) {
  const int s = rt::dtype_itemsize(t), bytes = std::max(16, count_ * s);
  cc_.k(k).emit(masked_move(s), vector_mem(bytes, ptr, 0), view_of_bytes(src, bytes));
}

ax::Vec BodyEmitter::param(DType t, const ax::Mem& mem, bool is_int) {
  if (is_fp(t)) {
    const bool f32 = is_f32(t);
    ax::Xmm s = cc_.newXmm();
    if (is_int) {
      ax::Gp g = cc_.newInt64();
      cc_.mov(g, mem);
      if (vex_) {
        cc_.vxorps(s, s, s);
        f32 ? cc_.vcvtsi2ss(s, s, g) : cc_.vcvtsi2sd(s, s, g);
      } else {
        cc_.xorps(s, s);
        f32 ? cc_.cvtsi2ss(s, g) : cc_.cvtsi2sd(s, g);
      }
    } else {
      vex_ ? cc_.vmovsd(s, mem) : cc_.movsd(s, mem);
      if (f32) vex_ ? cc_.vcvtsd2ss(s, s, s) : cc_.cvtsd2ss(s, s);
    }
    if (!vex_) return s;
    ax::Vec r = newv();
    f32 ? cc_.vbroadcastss(r, s) : cc_.vbroadcastsd(full(r), s);
    return r;
  }
  // Integer and bool loops only meet integer parameters (lowering); NumPy converts the Python
  // int to the loop type, keeping the low bits (bool: != 0).
  ax::Gp g = cc_.newInt64();
  cc_.mov(g, mem);
  if (t == DType::Bool) {
    ax::Gp b = cc_.newInt64();
    cc_.xor_(b, b);
    cc_.test(g, g);
    cc_.setnz(b.r8());
    g = b;
  }
  (void)is_int;
  ax::Vec r = newv();
  const ax::Xmm x = r.xmm();
  vex_ ? cc_.vmovq(x, g) : cc_.movq(x, g);
  if (!vex_) return r;
  switch (rt::dtype_itemsize(t)) {
    case 1: cc_.vpbroadcastb(r, x); break;
    case 4: cc_.vpbroadcastd(r, x); break;
    default: cc_.vpbroadcastq(r, x); break;
  }
  return r;
}

std::vector<ax::Vec> emit_body(BodyEmitter& e, const PointwiseKernelIR& ir, const std::vector<ax::Vec>& inputs,
                               const std::vector<ax::Vec>& hoisted) {
  std::vector<ax::Vec> v(ir.body.size());
  for (size_t i = 0; i < ir.body.size(); ++i) {
    const ScalarExpr& x = ir.body[i];
    const DType t = x.dtype;
    switch (x.op) {
      case ScalarOp::Load: v[i] = inputs[x.input]; continue;
      case ScalarOp::Param:
      case ScalarOp::Const: v[i] = hoisted[i]; continue;
      case ScalarOp::Cast:
        if (ir.body[x.a].dtype == t) {
          v[i] = v[x.a];
          continue;
        }
        break;
      default: break;
    }
    v[i] = e.newv();
    if (x.op == ScalarOp::Cast) {
      e.cast(ir.body[x.a].dtype, t, v[i], v[x.a]);
    } else if (is_comparison(x.op)) {
      e.compare(x.op, ir.body[x.a].dtype, v[i], v[x.a], v[x.b]);
    } else if (x.op == ScalarOp::Where) {
      e.where(t, v[i], v[x.c], v[x.a], v[x.b]);
    } else if (!is_fp(t)) {
      if (x.b >= 0) e.int_binary(x.op, t, v[i], v[x.a], v[x.b]);
      else e.int_unary(x.op, t, v[i], v[x.a]);
    } else {
      switch (x.op) {
        case ScalarOp::Add:
        case ScalarOp::Sub:
        case ScalarOp::Mul:
        case ScalarOp::Div: e.arith(x.op, t, v[i], v[x.a], v[x.b]); break;
        case ScalarOp::Max:
        case ScalarOp::Min: e.max_min(x.op == ScalarOp::Max, t, v[i], v[x.a], v[x.b]); break;
        case ScalarOp::Pow:
        case ScalarOp::Atan2: e.binary_math(x.op, t, v[i], v[x.a], v[x.b]); break;
        default: e.unary(x.op, t, v[i], v[x.a]); break;
      }
    }
  }
  return v;
}

std::vector<ax::Vec> hoist(BodyEmitter& e, const PointwiseKernelIR& ir, const ax::Gp& call, int params_offset) {
  std::vector<ax::Vec> h(ir.body.size());
  for (size_t i = 0; i < ir.body.size(); ++i) {
    const ScalarExpr& x = ir.body[i];
    if (x.op == ScalarOp::Const) h[i] = e.constant(x.dtype, x.fconst);
    if (x.op == ScalarOp::Param) {
      int off = static_cast<int>(params_offset + sizeof(rt::ParamValue) * x.input);
      h[i] = e.param(x.dtype, ax::qword_ptr(call, off), ir.param_dtypes[x.input] == DType::Int64);
    }
  }
  return h;
}

std::vector<ax::Vec> load_inputs(ax::Compiler& cc, BodyEmitter& e, const PointwiseKernelIR& ir,
                                 const std::vector<ax::Gp>& ptrs, const std::vector<ax::Gp>* steps) {
  std::vector<ax::Vec> loaded(ir.input_dtypes.size());
  for (size_t k = 0; k < loaded.size(); ++k) {
    loaded[k] = e.newv();
    e.load(ir.input_dtypes[k], loaded[k], ptrs[k]);
    if (steps) cc.add(ptrs[k], (*steps)[k]);
  }
  return loaded;
}

ax::KReg first_lanes(ax::Compiler& cc, const ax::Gp& count) {
  ax::Gp bits = cc.newInt64("tail_bits");
  cc.xor_(bits, bits);
  cc.bts(bits, count);
  cc.dec(bits);  // (1 << count) - 1
  ax::KReg k = cc.newKq("tail");
  cc.kmovq(k, bits);
  return k;
}

std::vector<ax::Vec> load_inputs_masked(BodyEmitter& e, const PointwiseKernelIR& ir, const std::vector<ax::Gp>& ptrs,
                                        const ax::KReg& k) {
  std::vector<ax::Vec> loaded(ir.input_dtypes.size());
  for (size_t i = 0; i < loaded.size(); ++i) {
    loaded[i] = e.newv();
    e.load_masked(ir.input_dtypes[i], loaded[i], ptrs[i], k);
  }
  return loaded;
}

void advance_to(ax::Compiler& cc, const std::vector<ax::Gp>& ptr, const std::vector<ax::Gp>& stride, int count,
                const ax::Gp& i) {
  ax::Gp off = cc.newInt64("off");
  for (int k = 0; k < count; ++k) {
    cc.mov(off, stride[k]);
    cc.imul(off, i);
    cc.add(ptr[k], off);
  }
}

int widest_itemsize(const PointwiseKernelIR& ir) {
  int w = 1;
  for (DType t : ir.input_dtypes) w = std::max(w, rt::dtype_itemsize(t));
  for (DType t : ir.output_dtypes) w = std::max(w, rt::dtype_itemsize(t));
  for (const ScalarExpr& e : ir.body) {
    w = std::max(w, rt::dtype_itemsize(e.dtype));
    // A half type converts through float32 (BodyEmitter::half_cast), either way.
    if (e.op == ScalarOp::Cast && (rt::dtype_is_half(e.dtype) || rt::dtype_is_half(ir.body[e.a].dtype))) w = std::max(w, 4);
  }
  return w;
}

void vector_inputs(ax::Compiler& cc, BodyEmitter& ve, Isa isa, const std::vector<DType>& dtypes,
                   const std::vector<ax::Gp>& ptr, const std::vector<ax::Gp>& stride, const ax::Mem& scratch,
                   std::vector<ax::Gp>& vptr, std::vector<ax::Gp>& vinc) {
  const int vbytes = vector_bytes(isa);
  const int nin = static_cast<int>(dtypes.size());
  vptr.resize(nin);
  vinc.resize(nin);
  for (int k = 0; k < nin; ++k) {
    vptr[k] = cc.newIntPtr("vptr%d", k);
    vinc[k] = cc.newInt64("vinc%d", k);
    ax::Vec b = ve.newv();
    switch (dtypes[k]) {
      case DType::Float32: cc.vbroadcastss(b, ax::dword_ptr(ptr[k])); break;
      case DType::Float64: cc.vbroadcastsd(isa == Isa::Avx512 ? ax::Vec(b.zmm()) : ax::Vec(b.ymm()), ax::qword_ptr(ptr[k])); break;
      case DType::Int32: cc.vpbroadcastd(b, ax::dword_ptr(ptr[k])); break;
      case DType::Int64: cc.vpbroadcastq(b, ax::qword_ptr(ptr[k])); break;
      case DType::Float16:
      case DType::BFloat16: cc.vpbroadcastw(b, ax::word_ptr(ptr[k])); break;
      default: cc.vpbroadcastb(b, ax::byte_ptr(ptr[k])); break;  // uint8, bool
    }
    ax::Mem slot = scratch.cloneAdjusted(vbytes * k);
    slot.setSize(vbytes);
    cc.vmovups(slot, b);
    cc.lea(vptr[k], slot);
    cc.test(stride[k], stride[k]);
    cc.cmovnz(vptr[k], ptr[k]);
    cc.mov(vinc[k], stride[k]);
    cc.imul(vinc[k], vinc[k], ve.count());
  }
}

}  // namespace framejit::jit::x86::detail
