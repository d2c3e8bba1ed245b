// pointwise_codegen.cpp — asmjit code generation for fused pointwise kernels.
#include "jit/x86/pointwise_codegen.h"

#include <asmjit/x86.h>

#include <cstddef>

#include "jit/lower/lowering.h"
#include "jit/x86/body_emitter_p.h"
#include "runtime/executor.h"
#include "runtime/log.h"

namespace framejit::jit::x86 {

namespace {

using namespace detail;

// Note [Pointwise kernel ABI]
// A kernel is `void f(const rt::PointwiseCall* call)` and processes one row: call->n elements,
// operand k at call->ptr[k] stepping call->stride[k] bytes (inputs first, then outputs). When
// call->contiguous is set every stride is 0 (a broadcast operand) or the element size, and the
// kernel runs its vector loop: broadcast inputs are copied W times into a stack scratch so the
// loop body is the same plain vector load for every input. The remainder (on Avx2; Avx512 masks
// it, Note [Masked tail]), and every row that is not contiguous, runs the scalar loop with the
// actual strides. Operands may have different
// itemsizes (the strides are in bytes); the vector loop handles W elements of every operand per
// iteration (Note [Element widths]). Parameters arrive as doubles or int64 and are converted to
// the type they meet once, before the loops, as NumPy converts a Python number before the ufunc
// loop.
//
// Note [Masked tail]
// On Avx512 a contiguous row's last n % W elements run the vector body once more under a lane
// mask: masked loads neither read past the array nor fault, masked stores leave the bytes after
// the row alone, and the dropped lanes compute on zeros (kernels report no floating-point events,
// and integer division checks its divisor). A 1000-element float32 row is 62 vector iterations
// plus one masked one instead of 8 trips through the scalar loop; an 8-element row is one masked
// pass. Every element still goes through the same instructions as in the vector loop.

Error build(ax::Compiler& cc, const PointwiseKernelIR& ir, Isa isa) {
  const int nin = static_cast<int>(ir.input_dtypes.size());
  const int nout = static_cast<int>(ir.outputs.size());
  const int nops = nin + nout;

  RowKernel rk = begin_row_kernel<rt::PointwiseCall>(cc, isa, nops);
  const ax::Gp call = rk.call, n = rk.n, i = rk.i;
  const std::vector<ax::Gp>& ptr = rk.ptr;
  const std::vector<ax::Gp>& stride = rk.stride;
  Label scalar_loop = cc.newLabel(), done = cc.newLabel();

  if (isa != Isa::Scalar) {
    // ---- vector loop (contiguous rows) ----
    const int lanes = vector_bytes(isa) / widest_itemsize(ir);
    BodyEmitter ve(cc, isa, lanes);
    Label vector_loop = cc.newLabel(), vector_done = cc.newLabel();
    cc.cmp(ax::qword_ptr(call, offsetof(rt::PointwiseCall, contiguous)), 0);
    cc.je(scalar_loop);
    std::vector<ax::Vec> vhoisted = hoist(ve, ir, call, offsetof(rt::PointwiseCall, params));
    ax::Mem scratch = cc.newStack(vector_bytes(isa) * std::max(nin, 1), 64);
    std::vector<ax::Gp> vptr, vinc;
    vector_inputs(cc, ve, isa, ir.input_dtypes, ptr, stride, scratch, vptr, vinc);
    std::vector<ax::Gp> voptr(nout);
    for (int j = 0; j < nout; ++j) {
      voptr[j] = cc.newIntPtr("voptr%d", j);
      cc.mov(voptr[j], ptr[nin + j]);
    }
    ax::Gp rem = cc.newInt64("rem");
    cc.bind(vector_loop);
    cc.mov(rem, n);
    cc.sub(rem, i);
    cc.cmp(rem, lanes);
    cc.jl(vector_done);
    std::vector<ax::Vec> vals = emit_body(ve, ir, load_inputs(cc, ve, ir, vptr), vhoisted);
    for (int j = 0; j < nout; ++j) {
      ve.store(ir.output_dtypes[j], voptr[j], vals[ir.outputs[j]]);
      cc.add(voptr[j], lanes * rt::dtype_itemsize(ir.output_dtypes[j]));
    }
    for (int k = 0; k < nin; ++k) cc.add(vptr[k], vinc[k]);
    cc.add(i, lanes);
    cc.jmp(vector_loop);
    cc.bind(vector_done);
    if (isa == Isa::Avx512) {
      // The last rem < W elements in one masked pass (Note [Masked tail]).
      cc.test(rem, rem);
      cc.jz(done);
      const ax::KReg tail = first_lanes(cc, rem);
      std::vector<ax::Vec> tvals = emit_body(ve, ir, load_inputs_masked(ve, ir, vptr, tail), vhoisted);
      for (int j = 0; j < nout; ++j) ve.store_masked(ir.output_dtypes[j], voptr[j], tvals[ir.outputs[j]], tail);
      cc.jmp(done);
    } else {
      // The scalar loop finishes the row from element i.
      advance_to(cc, ptr, stride, nops, i);
    }
  }

  // ---- scalar loop (tails and strided rows) ----
  cc.bind(scalar_loop);
  BodyEmitter se(cc, isa, 1);
  std::vector<ax::Vec> shoisted = hoist(se, ir, call, offsetof(rt::PointwiseCall, params));
  Label scalar_top = cc.newLabel();
  cc.bind(scalar_top);
  cc.cmp(i, n);
  cc.jge(done);
  std::vector<ax::Vec> vals = emit_body(se, ir, load_inputs(cc, se, ir, ptr), shoisted);
  for (int j = 0; j < nout; ++j) se.store(ir.output_dtypes[j], ptr[nin + j], vals[ir.outputs[j]]);
  for (int k = 0; k < nops; ++k) cc.add(ptr[k], stride[k]);
  cc.inc(i);
  cc.jmp(scalar_top);
  cc.bind(done);
  cc.endFunc();
  return cc.finalize();
}

}  // namespace

bool pointwise_supported(const PointwiseKernelIR& ir, Isa isa) {
  if (!ir.well_formed()) return false;
  // Note [Half types]: vector conversions only (F16C with AVX2, AVX-512 has them).
  if (has_half_types(ir) && (isa == Isa::Scalar || !CpuInfo::host().features().x86().hasF16C() ||
                             !half_types_placed(ir)))
    return false;
  for (DType t : ir.input_dtypes)
    if (!pointwise_dtype(t)) return false;
  for (const ScalarExpr& e : ir.body) {
    if (!pointwise_dtype(e.dtype)) return false;
    if (scalar_op_is_math(e.op) && !math_injector_supports(math_fn_of(e.op), e.dtype)) return false;
    if ((e.op == ScalarOp::Floor || e.op == ScalarOp::Ceil) && isa == Isa::Scalar &&
        !CpuInfo::host().features().x86().hasSSE4_1())
      return false;
  }
  return true;
}

Expected<rt::KernelPtr> generate_pointwise(const PointwiseKernelIR& ir, Isa isa, bool want_listing) {
  KernelTraits traits;
  // Note [Buffered strided rows] in runtime/executor.cpp.
  if (isa != Isa::Scalar) traits.buffered_inputs = static_cast<int>(ir.input_dtypes.size());
  return assemble(std::string("pointwise_") + isa_name(isa), ir.to_string(), want_listing,
                  [&](ax::Compiler& cc) { return build(cc, ir, isa); }, traits);
}

Expected<rt::KernelPtr> pointwise_kernel(const PointwiseKernelIR& ir) {
  return cached_kernel(ir.key(), [&](Isa isa, bool listing) { return generate_pointwise(ir, isa, listing); });
}

}  // namespace framejit::jit::x86
