// reduction_codegen.cpp — asmjit code generation for row reductions (sum, mean, max, min) with a
// fused pointwise prologue.
#include "jit/x86/reduction_codegen.h"

#include <cmath>

#include "jit/x86/body_emitter_p.h"
#include "runtime/log.h"

namespace framejit::jit::x86 {

namespace {

using namespace detail;

// Note [Reduction kernel ABI]
// `void f(const rt::ReductionCall* call)` reduces one row: call->n elements of the prologue's
// value, its inputs at call->ptr[k] stepping call->stride[k] bytes, into one element at call->out.
// Contiguous rows run a vector loop with kUnroll independent accumulators (to hide the add
// latency), a one-vector loop, and a scalar tail; other rows run the scalar loop. The sum starts
// from -0.0 (the additive identity that keeps a sum of -0.0 negative, as NumPy's reduce does);
// max/min start from ∓inf and propagate NaN like numpy.maximum/minimum. With store_value the
// kernel also writes each element's prologue value to operand nin (ptr[nin], stride[nin]).
constexpr int kUnroll = 4;

double identity(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return -0.0;
    case ReduceOp::Max: return -INFINITY;
    case ReduceOp::Min: return INFINITY;
  }
  return 0;
}

void combine(BodyEmitter& e, ReduceOp op, DType dtype, const ax::Vec& acc, const ax::Vec& v) {
  ax::Vec t = e.newv();
  if (op == ReduceOp::Sum)
    e.arith(ScalarOp::Add, dtype, t, acc, v);
  else
    e.max_min(op == ReduceOp::Max, dtype, t, acc, v);
  e.move(acc, t);
}

Error build(ax::Compiler& cc, const ReductionKernelIR& r, Isa isa) {
  const PointwiseKernelIR& ir = r.prologue;
  const DType dtype = r.dtype();
  const int itemsize = rt::dtype_itemsize(dtype);
  const int nin = static_cast<int>(ir.input_dtypes.size());
  const int params_offset = static_cast<int>(offsetof(rt::ReductionCall, params));

  // A materialized prologue value (store_value) is operand nin, written element by element.
  RowKernel rk = begin_row_kernel<rt::ReductionCall>(cc, isa, nin + (r.store_value ? 1 : 0));
  const ax::Gp call = rk.call, n = rk.n, i = rk.i;
  const std::vector<ax::Gp>& ptr = rk.ptr;
  const std::vector<ax::Gp>& stride = rk.stride;
  BodyEmitter se(cc, isa, 1);
  ax::Vec sacc = se.constant(dtype, identity(r.op));
  Label scalar_loop = cc.newLabel(), done = cc.newLabel();

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
    for (auto& a : vacc) a = ve.constant(dtype, identity(r.op));
    Label unrolled = cc.newLabel(), single = cc.newLabel(), vector_done = cc.newLabel();
    ax::Gp rem = cc.newInt64("rem");
    auto one_vector = [&](const ax::Vec& acc) {
      std::vector<ax::Vec> loaded(nin);
      for (int k = 0; k < nin; ++k) {
        loaded[k] = ve.newv();
        ve.load(dtype, loaded[k], vptr[k]);
        cc.add(vptr[k], vinc[k]);
      }
      std::vector<ax::Vec> vals = emit_body(ve, ir, loaded, vhoisted);
      if (r.store_value) {
        ve.store(dtype, ptr[nin], vals[ir.outputs[0]]);
        cc.add(ptr[nin], vbytes);
      }
      combine(ve, r.op, dtype, acc, vals[ir.outputs[0]]);
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
    for (int u = 1; u < kUnroll; ++u) combine(ve, r.op, dtype, vacc[0], vacc[u]);
    // Fold the lanes into the scalar accumulator.
    ax::Mem lanes_mem = scratch.cloneAdjusted(vbytes * std::max(nin, 1));
    lanes_mem.setSize(vbytes);
    cc.vmovups(lanes_mem, vacc[0]);
    for (int l = 0; l < lanes; ++l) {
      ax::Vec x = se.newv();
      ax::Mem m = lanes_mem.cloneAdjusted(l * itemsize);
      m.setSize(itemsize);
      se.load_mem(dtype, x, m);
      combine(se, r.op, dtype, sacc, x);
    }
    // The vector loop stepped its own input pointers (and the value output's, already past
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
    se.load(dtype, loaded[k], ptr[k]);
  }
  std::vector<ax::Vec> vals = emit_body(se, ir, loaded, shoisted);
  if (r.store_value) {
    se.store(dtype, ptr[nin], vals[ir.outputs[0]]);
    cc.add(ptr[nin], stride[nin]);
  }
  combine(se, r.op, dtype, sacc, vals[ir.outputs[0]]);
  for (int k = 0; k < nin; ++k) cc.add(ptr[k], stride[k]);
  cc.inc(i);
  cc.jmp(scalar_top);
  cc.bind(done);
  if (r.mean) {
    // numpy.mean divides the sum by the count, converted to the array's type.
    ax::Vec count = se.int_to_value(dtype, n);
    ax::Vec q = se.newv();
    se.arith(ScalarOp::Div, dtype, q, sacc, count);
    se.move(sacc, q);
  }
  ax::Gp out = cc.newIntPtr("out");
  cc.mov(out, ax::qword_ptr(call, offsetof(rt::ReductionCall, out)));
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
  // Reductions stay single-dtype float for now: every prologue value has the reduction's dtype.
  for (DType t : ir.input_dtypes)
    if (t != dtype) return false;
  for (const ScalarExpr& e : ir.body)
    if (e.dtype != dtype) return false;
  // The prologue obeys the pointwise generator's rules (same element emitter).
  return pointwise_supported(ir, isa) && ir.input_dtypes.size() + 2 <= static_cast<size_t>(rt::kMaxKernelOperands);
}

Expected<rt::KernelPtr> generate_reduction(const ReductionKernelIR& r, Isa isa, bool want_listing) {
  // AVX-512 code for these kernels is not written yet: such hosts run the AVX2 kernels.
  if (isa == Isa::Avx512) isa = Isa::Avx2;
  return assemble(std::string("reduce_") + isa_name(isa), r.to_string(), want_listing,
                  [&](ax::Compiler& cc) { return build(cc, r, isa); });
}

Expected<rt::KernelPtr> reduction_kernel(const ReductionKernelIR& r) {
  return cached_kernel(r.key(), [&](Isa isa, bool listing) { return generate_reduction(r, isa, listing); });
}

}  // namespace framejit::jit::x86
