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
  ax::Gp out = cc.newIntPtr("out");
  cc.mov(out, ax::qword_ptr(call, offsetof(rt::ReductionCall, out)));
  RowLoop rows = begin_rows(cc, rk);
  // A bool row's extreme is True for argmax (False for argmin) whenever the row has one, so pass 2
  // alone searches for it, as NumPy's memchr does (Note [Settled truth values]); a row without
  // one gives index 0 and the other value.
  const bool search = dtype == DType::Bool;
  ax::Vec best;
  if (search) {
    best = se.int_constant(dtype, r.op == ReduceOp::ArgMax);
  } else {
    best = reduce_identity(se, extreme, dtype);
    emit_row_fold(cc, isa, r, extreme, rk, se, best);
  }
  // call->extreme_only: pass 1 alone, its extreme to out_value (the executor finds which block of a
  // long row holds the first extreme, then runs both passes on that block only).
  Label row_done = cc.newLabel();
  if (!search) {
    Label both = cc.newLabel();
    cc.cmp(ax::qword_ptr(call, offsetof(rt::ReductionCall, extreme_only)), 0);
    cc.je(both);
    ax::Gp value_out = cc.newIntPtr("value_out");
    cc.mov(value_out, ax::qword_ptr(call, offsetof(rt::ReductionCall, out_value)));
    se.store(dtype, value_out, best);
    cc.jmp(row_done);
    cc.bind(both);
  }

  // Pass 2, from the row's start again.
  row_start(cc, rk, rows.row, nin);
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
  // Unreachable after pass 1 (it folded the very values pass 2 compares); a bool row without the
  // value searched for.
  cc.bind(not_found);
  cc.xor_(i, i);
  if (search) se.move(best, se.int_constant(dtype, r.op != ReduceOp::ArgMax));
  cc.bind(found);
  cc.mov(ax::qword_ptr(out), i);
  Label stored = cc.newLabel();
  ax::Gp out_value = cc.newIntPtr("out_value");  // (with one row only)
  cc.mov(out_value, ax::qword_ptr(call, offsetof(rt::ReductionCall, out_value)));
  cc.test(out_value, out_value);
  cc.jz(stored);
  se.store(dtype, out_value, best);
  cc.bind(stored);
  cc.bind(row_done);
  next_row(cc, rk, rows, out, nin);
  cc.endFunc();
  return cc.finalize();
}

// Note [Column arg-reductions]
// np.argmax(x, axis=1) of a Fortran-order matrix, or of a C-order one with rows of 2 or 8: the
// reduced axis is not the one adjacent in memory (or is too short to pay for a kernel call per
// row: 0.25x NumPy at (100000, 2)). As the column kernel does for max, each reduced row r streams
// by and updates the chunk of outputs the executor gave the call, vectorized over the outputs j:
//
//   best[j] = lowest (highest for argmin); out[j] = 0
//   for r < rows: for j < n:
//     if value(r, j) > best[j] (<), or value(r, j) is NaN and best[j] is not: best[j] = value, out[j] = r
//
// best[] is the call's out_value scratch (n values), out[] the int64 indices. A strict comparison
// keeps the first of equal values (-0.0 ties 0.0), the first NaN wins and nothing replaces it, and
// a row of only the starting value (-inf, or the type's lowest integer) gives index 0: NumPy's
// answers. Float and 32/64-bit integer values; others have no column kernel (the row kernel runs).
bool column_arg_supported(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Int32 || t == DType::Int64;
}

Error build_column_arg_reduction(ax::Compiler& cc, const ReductionKernelIR& r, Isa isa) {
  using Call = rt::ReductionCall;
  const PointwiseKernelIR& ir = r.prologue;
  const DType dtype = r.dtype();
  const bool fp = dtype == DType::Float32 || dtype == DType::Float64;
  const bool f32 = dtype == DType::Float32;
  const bool is_max = r.op == ReduceOp::ArgMax;
  const int itemsize = rt::dtype_itemsize(dtype);
  const int nin = static_cast<int>(ir.input_dtypes.size());
  const int params_offset = static_cast<int>(offsetof(Call, params));

  ColumnKernel ck = begin_column_kernel(cc, isa, nin);
  const ax::Gp call = ck.call, n = ck.n, rows = ck.rows, out = ck.out, out_stride = ck.out_stride, row = ck.row,
               j = ck.j, o = ck.o;
  const std::vector<ax::Gp>&ptr = ck.ptr, &stride = ck.stride, &sptr = ck.sptr;
  ax::Gp bv = cc.newIntPtr("best"), b = cc.newIntPtr("b");
  cc.mov(bv, ax::qword_ptr(call, offsetof(Call, out_value)));
  BodyEmitter se(cc, isa, 1);

  // 1. best[j] = the extreme's identity, out[j] = 0.
  {
    ax::Vec id = reduce_identity(se, is_max ? ReduceOp::Max : ReduceOp::Min, dtype);
    Label top = cc.newLabel(), end = cc.newLabel();
    cc.mov(o, out);
    cc.mov(b, bv);
    cc.xor_(j, j);
    cc.bind(top);
    cc.cmp(j, n);
    cc.jge(end);
    se.store(dtype, b, id);
    cc.mov(ax::qword_ptr(o), 0);
    cc.add(o, out_stride);
    cc.add(b, itemsize);
    cc.inc(j);
    cc.jmp(top);
    cc.bind(end);
  }

  // 2. The rows in order.
  std::vector<ax::Vec> shoisted = hoist(se, ir, call, params_offset);
  Label rows_top = cc.newLabel(), rows_done = cc.newLabel(), scalar_part = cc.newLabel();
  cc.xor_(row, row);
  cc.bind(rows_top);
  cc.cmp(row, rows);
  cc.jge(rows_done);
  cc.xor_(j, j);
  cc.mov(o, out);
  cc.mov(b, bv);
  if (isa != Isa::Scalar) {
    const int vbytes = vector_bytes(isa);
    const int lanes = reduction_lanes(isa, r);
    const bool evex = isa == Isa::Avx512;
    BodyEmitter ve(cc, isa, lanes);
    cc.cmp(ax::qword_ptr(call, offsetof(Call, contiguous)), 0);
    cc.je(scalar_part);
    std::vector<ax::Vec> vhoisted = hoist(ve, ir, call, params_offset);
    ax::Mem scratch = cc.newStack(vbytes * std::max(nin, 1), 64);
    std::vector<ax::Gp> vptr, vinc;
    vector_inputs(cc, ve, isa, ir.input_dtypes, ptr, stride, scratch, vptr, vinc);
    // The row number in every int64 lane.
    ax::Vec rvec = ve.newv();
    cc.vmovq(rvec.xmm(), row);
    evex ? cc.vpbroadcastq(rvec.zmm(), rvec.xmm()) : cc.vpbroadcastq(rvec.ymm(), rvec.xmm());
    const int groups = std::max(1, lanes * 8 / vbytes);  // vectors of int64 indices per step
    ax::Gp rem = cc.newInt64("rem");
    Label top = cc.newLabel();
    cc.bind(top);
    cc.mov(rem, n);
    cc.sub(rem, j);
    cc.cmp(rem, lanes);
    cc.jl(scalar_part);
    ax::Vec v = emit_body(ve, ir, load_inputs(cc, ve, ir, vptr, &vinc), vhoisted)[ir.outputs[0]];
    ax::Vec best = ve.newv();
    ve.load(dtype, best, b);
    if (evex) {
      ax::KReg m = cc.newKq("update");
      if (fp) {
        const InstId vcmp = f32 ? ax::Inst::kIdVcmpps : ax::Inst::kIdVcmppd;
        ax::KReg nan_v = cc.newKq(), num_best = cc.newKq();
        cc.emit(vcmp, m, v.zmm(), best.zmm(), is_max ? 0x1E : 0x11);  // GT_OQ / LT_OQ
        cc.emit(vcmp, nan_v, v.zmm(), v.zmm(), 3);                     // UNORD_Q
        cc.emit(vcmp, num_best, best.zmm(), best.zmm(), 7);            // ORD_Q
        cc.kandq(nan_v, nan_v, num_best);
        cc.korq(m, m, nan_v);
        cc.k(m).emit(f32 ? ax::Inst::kIdVmovaps : ax::Inst::kIdVmovapd, best.zmm(), v.zmm());
      } else {
        const InstId vpcmp = itemsize == 4 ? ax::Inst::kIdVpcmpd : ax::Inst::kIdVpcmpq;
        cc.emit(vpcmp, m, v.zmm(), best.zmm(), is_max ? 6 : 1);  // NLE (greater) / LT, signed
        cc.k(m).emit(itemsize == 4 ? ax::Inst::kIdVmovdqa32 : ax::Inst::kIdVmovdqa64, best.zmm(), v.zmm());
      }
      ve.store(dtype, b, best);
      for (int g = 0; g < groups; ++g) {
        ax::KReg mg = m;
        if (g > 0) {
          mg = cc.newKq();
          cc.kshiftrq(mg, m, 8 * g);
        }
        cc.k(mg).vmovdqu64(ax::zmmword_ptr(o, 64 * g), rvec.zmm());
      }
    } else {
      ax::Vec m = ve.newv();
      if (fp) {
        const InstId vcmp = f32 ? ax::Inst::kIdVcmpps : ax::Inst::kIdVcmppd;
        ax::Vec nan_v = ve.newv(), nan_best = ve.newv();
        cc.emit(vcmp, m.ymm(), v.ymm(), best.ymm(), is_max ? 0x1E : 0x11);
        cc.emit(vcmp, nan_v.ymm(), v.ymm(), v.ymm(), 3);
        cc.emit(vcmp, nan_best.ymm(), best.ymm(), best.ymm(), 3);
        cc.vpandn(nan_v.ymm(), nan_best.ymm(), nan_v.ymm());
        cc.vpor(m.ymm(), m.ymm(), nan_v.ymm());
      } else {
        const InstId gt = itemsize == 4 ? ax::Inst::kIdVpcmpgtd : ax::Inst::kIdVpcmpgtq;
        is_max ? cc.emit(gt, m.ymm(), v.ymm(), best.ymm()) : cc.emit(gt, m.ymm(), best.ymm(), v.ymm());
      }
      cc.vpblendvb(best.ymm(), best.ymm(), v.ymm(), m.ymm());
      ve.store(dtype, b, best);
      for (int g = 0; g < groups; ++g) {
        // This group's four lanes of the mask, widened to 64 bits.
        ax::Ymm m64 = cc.newYmm("m64"), idx = cc.newYmm("idx");
        if (itemsize == 8) {
          m64 = m.ymm();
        } else if (g == 0) {
          cc.vpmovsxdq(m64, m.xmm());
        } else {
          ax::Xmm hi = cc.newXmm();
          cc.vextracti128(hi, m.ymm(), 1);
          cc.vpmovsxdq(m64, hi);
        }
        cc.vmovdqu(idx, ax::ymmword_ptr(o, 32 * g));
        cc.vpblendvb(idx, idx, rvec.ymm(), m64);
        cc.vmovdqu(ax::ymmword_ptr(o, 32 * g), idx);
      }
    }
    cc.add(o, lanes * 8);
    cc.add(b, lanes * itemsize);
    cc.add(j, lanes);
    cc.jmp(top);
  }

  // The outputs from j on (the vector loop's tail, or all of them when strided).
  cc.bind(scalar_part);
  column_scalar_start(cc, ck);
  cc.lea(b, ax::ptr(bv, j, itemsize == 4 ? 2 : 3));
  {
    Label top = cc.newLabel(), end = cc.newLabel(), update = cc.newLabel(), next = cc.newLabel();
    cc.bind(top);
    cc.cmp(j, n);
    cc.jge(end);
    ax::Vec v = emit_body(se, ir, load_inputs(cc, se, ir, sptr, &stride), shoisted)[ir.outputs[0]];
    ax::Vec best = se.newv();
    se.load(dtype, best, b);
    if (fp) {
      const bool vex = isa != Isa::Scalar;
      auto ucomis = [&](const ax::Xmm& a, const ax::Xmm& c) {
        if (vex)
          f32 ? cc.vucomiss(a, c) : cc.vucomisd(a, c);
        else
          f32 ? cc.ucomiss(a, c) : cc.ucomisd(a, c);
      };
      ucomis(best.xmm(), best.xmm());
      cc.jp(next);  // best is NaN: it stays
      ucomis(v.xmm(), v.xmm());
      cc.jp(update);  // v is the first NaN
      // ucomis: "above" (CF = ZF = 0) is strictly greater and ordered.
      is_max ? ucomis(v.xmm(), best.xmm()) : ucomis(best.xmm(), v.xmm());
      cc.ja(update);
      cc.jmp(next);
    } else {
      ax::Gp gv = cc.newInt64("v"), gb = cc.newInt64("b");
      const bool vex = isa != Isa::Scalar;
      if (itemsize == 4) {
        vex ? cc.vmovd(gv.r32(), v.xmm()) : cc.movd(gv.r32(), v.xmm());
        vex ? cc.vmovd(gb.r32(), best.xmm()) : cc.movd(gb.r32(), best.xmm());
        cc.cmp(gv.r32(), gb.r32());
      } else {
        vex ? cc.vmovq(gv, v.xmm()) : cc.movq(gv, v.xmm());
        vex ? cc.vmovq(gb, best.xmm()) : cc.movq(gb, best.xmm());
        cc.cmp(gv, gb);
      }
      is_max ? cc.jg(update) : cc.jl(update);
      cc.jmp(next);
    }
    cc.bind(update);
    se.store(dtype, b, v);
    cc.mov(ax::qword_ptr(o), row);
    cc.bind(next);
    cc.add(o, out_stride);
    cc.add(b, itemsize);
    cc.inc(j);
    cc.jmp(top);
    cc.bind(end);
  }
  column_next_row(cc, ck);
  cc.inc(row);
  cc.jmp(rows_top);
  cc.bind(rows_done);
  cc.endFunc();
  return cc.finalize();
}

}  // namespace framejit::jit::x86::detail
