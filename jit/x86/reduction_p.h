// reduction_p.h — pieces the reduction generators share: the row, column and arg kernels.
#pragma once

#include "jit/x86/body_emitter_p.h"

namespace framejit::jit::x86::detail {

/// The value a reduction starts from, in every lane: combining it with v gives v exactly (-0.0
/// for float sums, so that a sum of -0.0 stays -0.0 as in NumPy; 0 for integer sums; 1 for
/// products; ∓inf for float max/min, the type's lowest/highest value for integers, False/True for
/// bool max/min).
ax::Vec reduce_identity(BodyEmitter& e, ReduceOp op, DType dtype);

/// acc = op(acc, v): add, multiply, or NumPy's maximum/minimum (floats: NaN propagates; integers
/// wrap; bool max/min are logical or/and). See Note [Integer reductions].
void reduce_combine(BodyEmitter& e, ReduceOp op, DType dtype, const ax::Vec& acc, const ax::Vec& v);

/// Elements per vector-loop step of a reduction prologue (Note [Element widths]).
int reduction_lanes(Isa isa, const ReductionKernelIR& r);

/// Note [Reduction kernel ABI]: the row form's loop over call->rows rows (at least one). Emitted
/// as: begin_rows, the row's code (from rk's pointers, i = 0), its store at `out`, next_row.
struct RowLoop {
  ax::Gp rows, row;
  Label top;
};
RowLoop begin_rows(ax::Compiler& cc, RowKernel& rk);
/// rk's pointers at row `row`'s start (call->ptr + row * call->row_stride), i = 0.
void row_start(ax::Compiler& cc, RowKernel& rk, const ax::Gp& row, int num_operands);
/// Steps `out` by call->out_stride and the pointers to the next row, and loops while rows remain.
void next_row(ax::Compiler& cc, RowKernel& rk, RowLoop& l, const ax::Gp& out, int num_operands);

/// One bit per lane of a bool value (lane 0 lowest) in `bits`; bits above `lanes` are cleared.
/// `lanes` 1 reads lane 0 alone, whatever the ISA.
void bool_lane_bits(ax::Compiler& cc, Isa isa, const ax::Vec& b, const ax::Gp& bits, int lanes);

/// Folds the prologue's value over the row (elements rk.i .. rk.n-1, pointers rk.ptr stepping
/// rk.stride) into `sacc` (scalar width) with `op`. Contiguous rows run vector accumulators (see
/// Note [Reduction kernel ABI]); the pointers and rk.i are consumed.
void emit_row_fold(ax::Compiler& cc, Isa isa, const ReductionKernelIR& r, ReduceOp op, RowKernel& rk,
                   BodyEmitter& se, const ax::Vec& sacc);

/// call->divisor (mean's count - ddof) in the kernel type, at the emitter's width.
ax::Vec load_divisor(ax::Compiler& cc, BodyEmitter& e, DType dtype, const ax::Gp& call);
/// v = sqrt(v / divisor), each step only when the IR asks for it (mean, sqrt).
void emit_finish(BodyEmitter& e, const ReductionKernelIR& r, const ax::Vec& divisor, const ax::Vec& v);

/// The registers both column kernels start with: the call, its outputs n, rows, out, out_stride,
/// each input's pointer and stride, the row and output counters, an output pointer o, and the
/// scalar loop's input pointers sptr.
struct ColumnKernel {
  ax::Gp call, n, rows, out, out_stride, row, j, o;
  std::vector<ax::Gp> ptr, stride, sptr;
};
ColumnKernel begin_column_kernel(ax::Compiler& cc, Isa isa, int num_inputs);
/// sptr[k] = ptr[k] + j * stride[k], o = out + j * out_stride: where the scalar loop picks up a row.
void column_scalar_start(ax::Compiler& cc, ColumnKernel& ck);
/// ptr[k] += call->row_stride[k].
void column_next_row(ax::Compiler& cc, ColumnKernel& ck);

/// The arg kernel (row form): see arg_reduction_codegen.cpp.
Error build_arg_reduction(ax::Compiler& cc, const ReductionKernelIR& r, Isa isa);
/// The column form of argmax/argmin (Note [Column arg-reductions]), for the value dtypes
/// column_arg_supported accepts.
bool column_arg_supported(DType t);
Error build_column_arg_reduction(ax::Compiler& cc, const ReductionKernelIR& r, Isa isa);
/// The column kernel: see column_reduction_codegen.cpp.
Error build_column_reduction(ax::Compiler& cc, const ReductionKernelIR& r, Isa isa);

}  // namespace framejit::jit::x86::detail
