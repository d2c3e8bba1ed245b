// reduction_codegen.cpp — asmjit code generation for row reductions (sum, prod, mean, max, min,
// var/std's final pass) with a fused pointwise prologue, and the pieces other reduction forms share.
#include "jit/x86/reduction_codegen.h"

#include <cmath>

#include "jit/x86/reduction_p.h"
#include "runtime/log.h"

namespace framejit::jit::x86 {
namespace detail {

// Note [Reduction kernel ABI]
// Every reduction kernel is `void f(const rt::ReductionCall* call)`; the executor picks the form
// from the layout (Note [Reduction layouts] in runtime/reduction_executor.cpp).
//
// Row form (this file): reduces call->n elements of the prologue's value, input k at
// call->ptr[k] stepping call->stride[k] bytes, into the one element at call->out. Contiguous rows
// run a vector loop with kUnroll independent accumulators (to hide the add latency), a one-vector
// loop, and a scalar tail; other rows run the scalar loop. The accumulation starts from the
// identity (reduce_identity), or with call->accumulate from the partial result already at
// call->out (outer reduced dims the executor walks); with call->finish the result is divided by
// call->divisor (mean, var) and square-rooted (std) before it is stored. With store_value the row
// kernel also writes each element's prologue value to operand nin (ptr[nin], stride[nin]).
//
// Column form (column_reduction_codegen.cpp): out[j] = op(out[j], value[r, j]) for each reduced
// row r in order, vectorized over j. Arg form (arg_reduction_codegen.cpp): the row form's fold
// finds the extreme, then a second pass finds its first index.
//
// max/min follow numpy.maximum/minimum (NaN propagates); argmax/argmin return the first NaN.
constexpr int kUnroll = 4;

double reduce_identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return -0.0;
    case ReduceOp::Prod: return 1.0;
    case ReduceOp::Max:
    case ReduceOp::ArgMax: return -INFINITY;
    case ReduceOp::Min:
    case ReduceOp::ArgMin: return INFINITY;
  }
  return 0;
}

void reduce_combine(BodyEmitter& e, ReduceOp op, DType dtype, const ax::Vec& acc, const ax::Vec& v) {
  ax::Vec t = e.newv();
  if (op == ReduceOp::Sum)
    e.arith(ScalarOp::Add, dtype, t, acc, v);
  else if (op == ReduceOp::Prod)
    e.arith(ScalarOp::Mul, dtype, t, acc, v);
  else
    e.max_min(op == ReduceOp::Max || op == ReduceOp::ArgMax, dtype, t, acc, v);
  e.move(acc, t);
}

ax::Vec load_divisor(ax::Compiler& cc, BodyEmitter& e, DType dtype, const ax::Gp& call) {
  ax::Gp d = cc.newInt64("divisor");
  cc.mov(d, ax::qword_ptr(call, offsetof(rt::ReductionCall, divisor)));
  return e.int_to_value(dtype, d);  // numpy.mean/var divide by the count converted to the array's type
}

void emit_finish(BodyEmitter& e, const ReductionKernelIR& r, const ax::Vec& divisor, const ax::Vec& v) {
  ax::Vec q = e.newv();
  if (r.mean) {
    e.arith(ScalarOp::Div, r.dtype(), q, v, divisor);
    e.move(v, q);
  }
  if (r.sqrt) {
    e.unary(ScalarOp::Sqrt, r.dtype(), q, v);
    e.move(v, q);
  }
}

void emit_row_fold(ax::Compiler& cc, Isa isa, const ReductionKernelIR& r, ReduceOp op, RowKernel& rk,
                   BodyEmitter& se, const ax::Vec& sacc) {
  const PointwiseKernelIR& ir = r.prologue;
  const DType dtype = r.dtype();
  const int itemsize = rt::dtype_itemsize(dtype);
  const int nin = static_cast<int>(ir.input_dtypes.size());
  const int params_offset = static_cast<int>(offsetof(rt::ReductionCall, params));
  const ax::Gp call = rk.call, n = rk.n, i = rk.i;
  const std::vector<ax::Gp>& ptr = rk.ptr;
  const std::vector<ax::Gp>& stride = rk.stride;
  Label scalar_loop = cc.newLabel(), done = cc.newLabel();

  // A stored prologue value (store_value) is operand nin, written element by element.
  const bool store = r.store_value && !is_arg_reduce(op);
  if (isa != Isa::Scalar) {
    const int vbytes = vector_bytes(isa);
    const int lanes = vbytes / itemsize;
    BodyEmitter ve(cc, isa, lanes);
    cc.cmp(ax::qword_ptr(call, offsetof(rt::ReductionCall, contiguous)), 0);
    cc.je(scalar_loop);
    std::vector<ax::Vec> vhoisted = hoist(ve, ir, call, params_offset);
    ax::Mem scratch = cc.newStack(vbytes * std::max(nin, 1) + vbytes, 64);
    std::vector<ax::Gp> vptr, vinc;
    vector_inputs(cc, ve, isa, ir.input_dtypes, ptr, stride, scratch, vptr, vinc);
    std::vector<ax::Vec> vacc(kUnroll);
    for (auto& a : vacc) a = ve.constant(dtype, reduce_identity(op));
    Label unrolled = cc.newLabel(), single = cc.newLabel(), vector_done = cc.newLabel();
    ax::Gp rem = cc.newInt64("rem");
    auto one_vector = [&](const ax::Vec& acc) {
      std::vector<ax::Vec> loaded(nin);
      for (int k = 0; k < nin; ++k) {
        loaded[k] = ve.newv();
        ve.load(ir.input_dtypes[k], loaded[k], vptr[k]);
        cc.add(vptr[k], vinc[k]);
      }
      std::vector<ax::Vec> vals = emit_body(ve, ir, loaded, vhoisted);
      if (store) {
        ve.store(dtype, ptr[nin], vals[ir.outputs[0]]);
        cc.add(ptr[nin], vbytes);
      }
      reduce_combine(ve, op, dtype, acc, vals[ir.outputs[0]]);
    };
    cc.bind(unrolled);
    cc.mov(rem, n);
    cc.sub(rem, i);
    cc.cmp(rem, kUnroll * lanes);
    cc.jl(single);
    for (int u = 0; u < kUnroll; ++u) one_vector(vacc[u]);
    cc.add(i, kUnroll * lanes);
    cc.jmp(unrolled);
    cc.bind(single);
    cc.mov(rem, n);
    cc.sub(rem, i);
    cc.cmp(rem, lanes);
    cc.jl(vector_done);
    one_vector(vacc[0]);
    cc.add(i, lanes);
    cc.jmp(single);
    cc.bind(vector_done);
    for (int u = 1; u < kUnroll; ++u) reduce_combine(ve, op, dtype, vacc[0], vacc[u]);
    // Fold the lanes into the scalar accumulator.
    ax::Mem lanes_mem = scratch.cloneAdjusted(vbytes * std::max(nin, 1));
    lanes_mem.setSize(vbytes);
    cc.vmovups(lanes_mem, vacc[0]);
    for (int l = 0; l < lanes; ++l) {
      ax::Vec x = se.newv();
      ax::Mem m = lanes_mem.cloneAdjusted(l * itemsize);
      m.setSize(itemsize);
      se.load_mem(dtype, x, m);
      reduce_combine(se, op, dtype, sacc, x);
    }
    // The vector loop stepped its own input pointers (and the stored values', already past
    // element i); the scalar tail continues the inputs from element i.
    ax::Gp off = cc.newInt64("off");
    for (int k = 0; k < nin; ++k) {
      cc.mov(off, stride[k]);
      cc.imul(off, i);
      cc.add(ptr[k], off);
    }
  }

  cc.bind(scalar_loop);
  std::vector<ax::Vec> shoisted = hoist(se, ir, call, params_offset);
  Label scalar_top = cc.newLabel();
  cc.bind(scalar_top);
  cc.cmp(i, n);
  cc.jge(done);
  std::vector<ax::Vec> loaded(nin);
  for (int k = 0; k < nin; ++k) {
    loaded[k] = se.newv();
    se.load(ir.input_dtypes[k], loaded[k], ptr[k]);
  }
  std::vector<ax::Vec> vals = emit_body(se, ir, loaded, shoisted);
  if (store) {
    se.store(dtype, ptr[nin], vals[ir.outputs[0]]);
    cc.add(ptr[nin], stride[nin]);
  }
  reduce_combine(se, op, dtype, sacc, vals[ir.outputs[0]]);
  for (int k = 0; k < nin; ++k) cc.add(ptr[k], stride[k]);
  cc.inc(i);
  cc.jmp(scalar_top);
  cc.bind(done);
}

}  // namespace detail

using namespace detail;

namespace {

Error build_row(ax::Compiler& cc, const ReductionKernelIR& r, Isa isa) {
  const int nin = static_cast<int>(r.prologue.input_dtypes.size());
  RowKernel rk = begin_row_kernel<rt::ReductionCall>(cc, isa, nin + (r.store_value ? 1 : 0));
  const DType dtype = r.dtype();
  BodyEmitter se(cc, isa, 1);
  ax::Gp out = cc.newIntPtr("out");
  cc.mov(out, ax::qword_ptr(rk.call, offsetof(rt::ReductionCall, out)));
  ax::Vec sacc = se.constant(dtype, reduce_identity(r.op));
  Label fresh = cc.newLabel();
  cc.cmp(ax::qword_ptr(rk.call, offsetof(rt::ReductionCall, accumulate)), 0);
  cc.je(fresh);
  se.load(dtype, sacc, out);
  cc.bind(fresh);
  emit_row_fold(cc, isa, r, r.op, rk, se, sacc);
  if (r.mean || r.sqrt) {
    Label store = cc.newLabel();
    cc.cmp(ax::qword_ptr(rk.call, offsetof(rt::ReductionCall, finish)), 0);
    cc.je(store);
    emit_finish(se, r, load_divisor(cc, se, dtype, rk.call), sacc);
    cc.bind(store);
  }
  se.store(dtype, out, sacc);
  cc.endFunc();
  return cc.finalize();
}

}  // namespace

bool reduction_supported(const ReductionKernelIR& r, Isa isa) {
  const PointwiseKernelIR& ir = r.prologue;
  if (ir.outputs.size() != 1) return false;
  const DType dtype = r.dtype();
  if (dtype != DType::Float32 && dtype != DType::Float64) return false;
  if (is_arg_reduce(r.op) && (r.mean || r.sqrt || r.store_value)) return false;
  if (r.sqrt && !r.mean) return false;
  // Reductions stay single-dtype float for now: every prologue value has the reduction's dtype.
  for (DType t : ir.input_dtypes)
    if (t != dtype) return false;
  for (const ScalarExpr& e : ir.body)
    if (e.dtype != dtype) return false;
  // The prologue obeys the pointwise generator's rules (same element emitter); room for the
  // stored values' operand.
  return pointwise_supported(ir, isa) && ir.input_dtypes.size() + 2 <= static_cast<size_t>(rt::kMaxKernelOperands);
}

Expected<rt::KernelPtr> generate_reduction(const ReductionKernelIR& r, Isa isa, bool want_listing) {
  const bool arg = is_arg_reduce(r.op);
  return assemble(std::string(arg ? "argreduce_" : "reduce_") + isa_name(isa), r.to_string(), want_listing,
                  [&](ax::Compiler& cc) { return arg ? build_arg_reduction(cc, r, isa) : build_row(cc, r, isa); });
}

Expected<rt::KernelPtr> generate_column_reduction(const ReductionKernelIR& r, Isa isa, bool want_listing) {
  if (is_arg_reduce(r.op)) return Status::internal("argmax/argmin have no column kernel");
  return assemble(std::string("reduce_columns_") + isa_name(isa), r.to_string(), want_listing,
                  [&](ax::Compiler& cc) { return build_column_reduction(cc, r, isa); });
}

Expected<ReductionKernels> reduction_kernels(const ReductionKernelIR& r) {
  ReductionKernels ks;
  auto row = cached_kernel(r.key(), [&](Isa isa, bool listing) { return generate_reduction(r, isa, listing); });
  if (!row) return row.error();
  ks.row = *row;
  if (!is_arg_reduce(r.op) && !r.store_value) {  // storing reductions run their rows only
    auto column = cached_kernel("columns\n" + r.key(),
                                [&](Isa isa, bool listing) { return generate_column_reduction(r, isa, listing); });
    if (!column) return column.error();
    ks.column = *column;
  }
  return ks;
}

}  // namespace framejit::jit::x86
