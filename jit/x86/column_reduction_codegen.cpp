// column_reduction_codegen.cpp — asmjit code for column reductions: out[j] = op(out[j], v[r, j])
// over the reduced rows r, vectorized over the outputs j (axis=0 of a C-ordered matrix, and every
// layout whose kept elements are the adjacent ones).
#include <cmath>

#include "jit/x86/reduction_p.h"

namespace framejit::jit::x86::detail {

ColumnKernel begin_column_kernel(ax::Compiler& cc, Isa isa, int num_inputs) {
  using Call = rt::ReductionCall;
  ColumnKernel ck;
  FuncNode* fn = cc.addFunc(FuncSignatureT<void, const void*>(CallConvId::kHost));
  ck.call = cc.newIntPtr("call");
  fn->setArg(0, ck.call);
  set_frame_isa(fn, isa);
  ck.n = cc.newInt64("n"), ck.rows = cc.newInt64("rows"), ck.out = cc.newIntPtr("out");
  ck.out_stride = cc.newInt64("out_stride"), ck.row = cc.newInt64("row"), ck.j = cc.newInt64("j");
  ck.o = cc.newIntPtr("o");
  cc.mov(ck.n, ax::qword_ptr(ck.call, offsetof(Call, n)));
  cc.mov(ck.rows, ax::qword_ptr(ck.call, offsetof(Call, rows)));
  cc.mov(ck.out, ax::qword_ptr(ck.call, offsetof(Call, out)));
  cc.mov(ck.out_stride, ax::qword_ptr(ck.call, offsetof(Call, out_stride)));
  for (int k = 0; k < num_inputs; ++k) {
    ck.ptr.push_back(cc.newIntPtr("ptr%d", k));
    ck.stride.push_back(cc.newInt64("stride%d", k));
    ck.sptr.push_back(cc.newIntPtr("sptr%d", k));
    cc.mov(ck.ptr[k], ax::qword_ptr(ck.call, static_cast<int>(offsetof(Call, ptr) + 8 * k)));
    cc.mov(ck.stride[k], ax::qword_ptr(ck.call, static_cast<int>(offsetof(Call, stride) + 8 * k)));
  }
  return ck;
}

void column_scalar_start(ax::Compiler& cc, ColumnKernel& ck) {
  for (size_t k = 0; k < ck.ptr.size(); ++k) {
    cc.mov(ck.sptr[k], ck.stride[k]);
    cc.imul(ck.sptr[k], ck.j);
    cc.add(ck.sptr[k], ck.ptr[k]);
  }
  cc.mov(ck.o, ck.out_stride);
  cc.imul(ck.o, ck.j);
  cc.add(ck.o, ck.out);
}

void column_next_row(ax::Compiler& cc, ColumnKernel& ck) {
  for (size_t k = 0; k < ck.ptr.size(); ++k)
    cc.add(ck.ptr[k], ax::qword_ptr(ck.call, static_cast<int>(offsetof(rt::ReductionCall, row_stride) + 8 * k)));
}

// Why this form: when the kept elements are adjacent in memory, reducing one output at a time
// would walk memory with a large stride (and a new page per element). Instead every reduced row
// streams by contiguously and is combined into the chunk of outputs the executor gave this call,
// which stays in L1. The outputs accumulate row after row, which is NumPy's own order for such
// layouts, so sums round as NumPy's do.
//
//   out[j] = identity                        unless call->accumulate
//   for r < rows: for j < n: out[j] = op(out[j], value(r, j))     vector over j, scalar tail
//   out[j] = sqrt(out[j] / divisor)          with call->finish, each step as the IR asks
//
// as written; the kernel folds the first two and the last two steps into the first and last rows.
//
// Inputs broadcast along j (stride 0, e.g. a per-row weight) are re-broadcast for every row.
Error build_column_reduction(ax::Compiler& cc, const ReductionKernelIR& r, Isa isa) {
  using Call = rt::ReductionCall;
  const PointwiseKernelIR& ir = r.prologue;
  const DType dtype = r.dtype();
  const int itemsize = rt::dtype_itemsize(dtype);
  const int nin = static_cast<int>(ir.input_dtypes.size());
  const int params_offset = static_cast<int>(offsetof(Call, params));

  ColumnKernel ck = begin_column_kernel(cc, isa, nin);
  const ax::Gp call = ck.call, n = ck.n, rows = ck.rows, out = ck.out, out_stride = ck.out_stride, row = ck.row,
               j = ck.j, o = ck.o;
  const std::vector<ax::Gp>&ptr = ck.ptr, &stride = ck.stride, &sptr = ck.sptr;
  BodyEmitter se(cc, isa, 1);

  // A scalar loop over the outputs j .. n-1 at `o` (stepping out_stride): per_element(value slot).
  auto each_output = [&](auto&& per_element) {
    Label top = cc.newLabel(), end = cc.newLabel();
    cc.bind(top);
    cc.cmp(j, n);
    cc.jge(end);
    per_element();
    cc.add(o, out_stride);
    cc.inc(j);
    cc.jmp(top);
    cc.bind(end);
  };

  // 1. Without rows, the outputs start from the identity, unless they hold a partial result. With
  // rows, the first one's values are stored as they are (op(identity, v) is v, -0.0 sums
  // included): one pass over the outputs fewer, a third of the traffic of a two-row sum.
  Label started = cc.newLabel();
  ax::Gp fresh = cc.newInt64("fresh");  // the row being combined is the outputs' first
  cc.xor_(fresh, fresh);
  cc.cmp(ax::qword_ptr(call, offsetof(Call, accumulate)), 0);
  cc.sete(fresh.r8());
  cc.test(rows, rows);
  cc.jnz(started);
  cc.test(fresh, fresh);
  cc.jz(started);
  {
    ax::Vec id = reduce_identity(se, r.op, dtype);
    cc.mov(o, out);
    cc.xor_(j, j);
    each_output([&] { se.store(dtype, o, id); });
  }
  cc.bind(started);

  // 2. Combine the rows in order. The last row of a finishing call also finishes (mean's
  // division, std's sqrt) before it stores: another pass saved.
  const bool finishes = r.mean || r.sqrt;
  ax::Gp finishing = cc.newInt64("finishing"), last_row = cc.newInt64("last_row");
  ax::Vec sdivisor;
  if (finishes) {
    sdivisor = load_divisor(cc, se, dtype, call);
    cc.mov(last_row, rows);
    cc.dec(last_row);
  }
  // acc = v on the outputs' first row, else op(out, v); finished on the finishing row.
  auto combine = [&](BodyEmitter& e, const ax::Vec& v, const ax::Vec& divisor, int disp) {
    ax::Vec acc = e.newv();
    Label use_value = cc.newLabel(), combined = cc.newLabel();
    cc.test(fresh, fresh);
    cc.jnz(use_value);
    e.load(dtype, acc, o, disp);
    reduce_combine(e, r.op, dtype, acc, v);
    cc.jmp(combined);
    cc.bind(use_value);
    e.move(acc, v);
    cc.bind(combined);
    if (finishes) {
      Label stored = cc.newLabel();
      cc.test(finishing, finishing);
      cc.jz(stored);
      emit_finish(e, r, divisor, acc);
      cc.bind(stored);
    }
    e.store(dtype, o, acc, disp);
  };
  std::vector<ax::Vec> shoisted = hoist(se, ir, call, params_offset);
  const int lanes = isa == Isa::Scalar ? 1 : reduction_lanes(isa, r);
  BodyEmitter ve(cc, isa, lanes);
  std::vector<ax::Vec> vhoisted;
  ax::Vec vdivisor;
  if (isa != Isa::Scalar) {
    vhoisted = hoist(ve, ir, call, params_offset);
    if (finishes) vdivisor = load_divisor(cc, ve, dtype, call);
  }
  Label rows_top = cc.newLabel(), rows_done = cc.newLabel(), scalar_part = cc.newLabel();
  cc.xor_(row, row);
  cc.bind(rows_top);
  cc.cmp(row, rows);
  cc.jge(rows_done);
  if (finishes) {
    cc.xor_(finishing, finishing);
    cc.cmp(row, last_row);
    cc.sete(finishing.r8());
    cc.and_(finishing, ax::qword_ptr(call, offsetof(Call, finish)));
  }
  cc.xor_(j, j);
  cc.mov(o, out);
  if (isa != Isa::Scalar) {
    const int vbytes = vector_bytes(isa);
    const int out_bytes = lanes * itemsize;  // one vector of outputs (less than vbytes when a
                                             // prologue value is wider than the result)
    cc.cmp(ax::qword_ptr(call, offsetof(Call, contiguous)), 0);
    cc.je(scalar_part);
    ax::Mem scratch = cc.newStack(vbytes * std::max(nin, 1), 64);
    std::vector<ax::Gp> vptr, vinc;
    vector_inputs(cc, ve, isa, ir.input_dtypes, ptr, stride, scratch, vptr, vinc);
    ax::Gp rem = cc.newInt64("rem");
    // One vector of outputs: out[j..j+lanes) = op(out[...], value(row, j..j+lanes)).
    auto one_vector = [&](int u) {
      ax::Vec v = emit_body(ve, ir, load_inputs(cc, ve, ir, vptr, &vinc), vhoisted)[ir.outputs[0]];
      combine(ve, v, vdivisor, u * out_bytes);
    };
  // kUnroll vectors per trip (independent outputs: the unrolling only saves loop overhead),
    // then one at a time.
    constexpr int kUnroll = 4;
    Label unrolled = cc.newLabel(), single = cc.newLabel();
    cc.bind(unrolled);
    cc.mov(rem, n);
    cc.sub(rem, j);
    cc.cmp(rem, kUnroll * lanes);
    cc.jl(single);
    for (int u = 0; u < kUnroll; ++u) one_vector(u);
    cc.add(o, kUnroll * out_bytes);
    cc.add(j, kUnroll * lanes);
    cc.jmp(unrolled);
    cc.bind(single);
    cc.mov(rem, n);
    cc.sub(rem, j);
    cc.cmp(rem, lanes);
    cc.jl(scalar_part);
    one_vector(0);
    cc.add(o, out_bytes);
    cc.add(j, lanes);
    cc.jmp(single);
  }
  // The outputs from j on (a vector loop's tail, or all of a strided row).
  cc.bind(scalar_part);
  column_scalar_start(cc, ck);
  each_output([&] {
    ax::Vec v = emit_body(se, ir, load_inputs(cc, se, ir, sptr, &stride), shoisted)[ir.outputs[0]];
    combine(se, v, sdivisor, 0);
  });
  column_next_row(cc, ck);
  cc.xor_(fresh, fresh);
  cc.inc(row);
  cc.jmp(rows_top);
  cc.bind(rows_done);

  // 3. Without rows, a finishing call finishes what the outputs hold.
  if (finishes) {
    Label done = cc.newLabel();
    cc.test(rows, rows);
    cc.jnz(done);
    cc.cmp(ax::qword_ptr(call, offsetof(Call, finish)), 0);
    cc.je(done);
    ax::Vec divisor = sdivisor;
    cc.mov(o, out);
    cc.xor_(j, j);
    each_output([&] {
      ax::Vec v = se.newv();
      se.load(dtype, v, o);
      emit_finish(se, r, divisor, v);
      se.store(dtype, o, v);
    });
    cc.bind(done);
  }
  cc.endFunc();
  return cc.finalize();
}

}  // namespace framejit::jit::x86::detail
