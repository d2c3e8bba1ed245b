// arg_reduction_codegen.cpp — asmjit code for argmax/argmin over a row: the extreme by the row
// fold, then the index of its first occurrence.
#include <cmath>

#include "jit/x86/reduction_p.h"

namespace framejit::jit::x86::detail {

// Two passes over the row, both computing the prologue's value:
//   1. best = max (min) of the row, NaN propagating (emit_row_fold, as for max/min);
//   2. the first i with value[i] == best, or with value[i] NaN: a NaN anywhere makes best NaN and
//      the first NaN the answer, as in NumPy. Without NaN the second test never fires.
// Both passes send each element through the same instructions (the same vector blocks from the
// row start, the same scalar code after), so pass 2 sees bit for bit the values pass 1 folded.
// Ties go to the first index, and -0.0 == 0.0 as in NumPy's comparisons. Pass 2 stops at the
// hit, so a row is read about 1.5 times on average.
// The index goes to call->out (int64); with call->out_value, the extreme goes there too (the
// executor combines rows of a flattened argmax). Integer and bool values have no NaN: pass 2 is
// the equality test alone, done by the emitter's integer comparison (bool bytes, then one bit per
// lane).
namespace {

// One bit per lane of a bool value (lane 0 lowest) in `bits`; bits above `lanes` are cleared.
// `lanes` 1 reads lane 0 alone, whatever the ISA.
void bool_lane_bits(ax::Compiler& cc, Isa isa, const ax::Vec& b, const ax::Gp& bits, int lanes) {
  if (lanes > 1 && isa == Isa::Avx512) {
    ax::KReg k = cc.newKq();
    cc.vptestmb(k, b.zmm(), b.zmm());
    cc.kmovq(bits, k);
  } else if (lanes > 1) {
    // Bool bytes are 0 or 1: shifting each 16-bit pair left by 7 moves bit 0 of both bytes to
    // their top bits, which vpmovmskb collects.
    ax::Ymm t = cc.newYmm();
    cc.vpsllw(t, b.ymm(), 7);
    cc.vpmovmskb(bits.r32(), t);
  } else {
    // NB: pextrw, not movd: the allocator may turn a spilled movd source into a memory operand
    // with a general-purpose destination, a form that does not exist (see store_bytes).
    isa == Isa::Scalar ? cc.pextrw(bits.r32(), b.xmm(), 0) : cc.vpextrw(bits.r32(), b.xmm(), 0);
  }
  if (lanes < 32) cc.and_(bits.r32(), (1 << lanes) - 1);
  else if (lanes == 32) cc.mov(bits.r32(), bits.r32());  // clears bits 32-63
}

}  // namespace

Error build_arg_reduction(ax::Compiler& cc, const ReductionKernelIR& r, Isa isa) {
  const PointwiseKernelIR& ir = r.prologue;
  const DType dtype = r.dtype();
  const bool fp = dtype == DType::Float32 || dtype == DType::Float64;
  const bool f32 = dtype == DType::Float32;
  const int nin = static_cast<int>(ir.input_dtypes.size());
  const int params_offset = static_cast<int>(offsetof(rt::ReductionCall, params));
  const ReduceOp extreme = r.op == ReduceOp::ArgMax ? ReduceOp::Max : ReduceOp::Min;

  RowKernel rk = begin_row_kernel<rt::ReductionCall>(cc, isa, nin);
  const ax::Gp call = rk.call, n = rk.n, i = rk.i;
  BodyEmitter se(cc, isa, 1);
  ax::Vec best = reduce_identity(se, extreme, dtype);
  emit_row_fold(cc, isa, r, extreme, rk, se, best);

  // Pass 2, from the row's start again.
  cc.xor_(i, i);
  for (int k = 0; k < nin; ++k)
    cc.mov(rk.ptr[k], ax::qword_ptr(call, static_cast<int>(offsetof(rt::ReductionCall, ptr) + 8 * k)));
  Label found = cc.newLabel(), scalar_loop = cc.newLabel();
  if (isa != Isa::Scalar) {
    const int vbytes = vector_bytes(isa);
    const int lanes = reduction_lanes(isa, r);
    BodyEmitter ve(cc, isa, lanes);
    cc.cmp(ax::qword_ptr(call, offsetof(rt::ReductionCall, contiguous)), 0);
    cc.je(scalar_loop);
    std::vector<ax::Vec> vhoisted = hoist(ve, ir, call, params_offset);
    ax::Mem scratch = cc.newStack(vbytes * std::max(nin, 1), 64);
    std::vector<ax::Gp> vptr, vinc;
    vector_inputs(cc, ve, isa, ir.input_dtypes, rk.ptr, rk.stride, scratch, vptr, vinc);
    ax::Vec vbest = ve.newv();
    switch (rt::dtype_itemsize(dtype)) {  // lane 0 of `best` in every lane
      case 1: cc.vpbroadcastb(vbest, best.xmm()); break;
      case 4: cc.vpbroadcastd(vbest, best.xmm()); break;
      default: cc.vpbroadcastq(vbest, best.xmm()); break;
    }
    ax::Gp rem = cc.newInt64("rem"), bits = cc.newInt64("bits");
    Label top = cc.newLabel(), hit = cc.newLabel(), vector_done = cc.newLabel();
    cc.bind(top);
    cc.mov(rem, n);
    cc.sub(rem, i);
    cc.cmp(rem, lanes);
    cc.jl(vector_done);
    ax::Vec v = emit_body(ve, ir, load_inputs(cc, ve, ir, vptr, &vinc), vhoisted)[ir.outputs[0]];
    // One bit per lane, lane 0 lowest: (v == best) | isnan(v).
    if (!fp) {
      ax::Vec eq = ve.newv();
      ve.compare(ScalarOp::Eq, dtype, eq, v, vbest);
      bool_lane_bits(cc, isa, eq, bits, lanes);
    } else {
      const InstId vcmp = f32 ? ax::Inst::kIdVcmpps : ax::Inst::kIdVcmppd;
      if (isa == Isa::Avx512) {
        ax::KReg eq = cc.newKq(), nan = cc.newKq();
        cc.emit(vcmp, eq, v, vbest, 0);  // EQ_OQ
        cc.emit(vcmp, nan, v, v, 3);     // UNORD: v is NaN
        cc.korq(eq, eq, nan);
        cc.kmovq(bits, eq);
      } else {
        ax::Vec eq = ve.newv(), nan = ve.newv();
        cc.emit(vcmp, eq, v, vbest, 0);
        cc.emit(vcmp, nan, v, v, 3);
        cc.emit(f32 ? ax::Inst::kIdVorps : ax::Inst::kIdVorpd, eq, eq, nan);
        cc.emit(f32 ? ax::Inst::kIdVmovmskps : ax::Inst::kIdVmovmskpd, bits.r32(), eq);
      }
      // Lanes past `lanes` (a float value narrower than the prologue's widest) are don't-care.
      if (lanes * rt::dtype_itemsize(dtype) < vbytes) cc.and_(bits.r32(), (1 << lanes) - 1);
    }
    cc.test(bits, bits);
    cc.jnz(hit);
    cc.add(i, lanes);
    cc.jmp(top);
    cc.bind(hit);
    cc.bsf(bits, bits);  // the lowest lane that matched: the first index
    cc.add(i, bits);
    cc.jmp(found);
    cc.bind(vector_done);
    advance_to(cc, rk.ptr, rk.stride, nin, i);
  }

  cc.bind(scalar_loop);
  std::vector<ax::Vec> shoisted = hoist(se, ir, call, params_offset);
  Label top = cc.newLabel(), not_equal = cc.newLabel(), not_found = cc.newLabel();
  cc.bind(top);
  cc.cmp(i, n);
  cc.jge(not_found);
  ax::Vec value = emit_body(se, ir, load_inputs(cc, se, ir, rk.ptr), shoisted)[ir.outputs[0]];
  if (!fp) {
    ax::Vec eq = se.newv();
    ax::Gp bits = cc.newInt64("bits");
    se.compare(ScalarOp::Eq, dtype, eq, value, best);
    bool_lane_bits(cc, isa, eq, bits, 1);
    cc.test(bits, bits);
    cc.jnz(found);
  } else {
    ax::Xmm v = value.xmm();
    const bool vex = isa != Isa::Scalar;
    auto ucomis = [&](const ax::Xmm& a, const ax::Xmm& b) {
      if (vex)
        f32 ? cc.vucomiss(a, b) : cc.vucomisd(a, b);
      else
        f32 ? cc.ucomiss(a, b) : cc.ucomisd(a, b);
    };
    // ucomis sets ZF for equal and for unordered, PF only for unordered.
    ucomis(v, best.xmm());
    cc.jp(not_equal);
    cc.je(found);
    cc.bind(not_equal);
    ucomis(v, v);
    cc.jp(found);  // v is NaN
  }
  for (int k = 0; k < nin; ++k) cc.add(rk.ptr[k], rk.stride[k]);
  cc.inc(i);
  cc.jmp(top);
  cc.bind(not_found);  // unreachable (pass 1 folded the very values pass 2 compares): say index 0
  cc.xor_(i, i);
  cc.bind(found);
  ax::Gp out = cc.newIntPtr("out");
  cc.mov(out, ax::qword_ptr(call, offsetof(rt::ReductionCall, out)));
  cc.mov(ax::qword_ptr(out), i);
  Label done = cc.newLabel();
  cc.mov(out, ax::qword_ptr(call, offsetof(rt::ReductionCall, out_value)));
  cc.test(out, out);
  cc.jz(done);
  se.store(dtype, out, best);
  cc.bind(done);
  cc.endFunc();
  return cc.finalize();
}

}  // namespace framejit::jit::x86::detail
