// executor.h — runs compiled kernels over strided buffers: collapses dimensions, splits the work
// into rows, and spreads rows over the thread pool.
#pragma once

#include <cstdint>

#include "runtime/kernel_cache.h"

namespace framejit::rt {

constexpr int kMaxKernelOperands = 16;
constexpr int kMaxKernelParams = 16;

union ParamValue {
  double f;
  int64_t i;
};

/// What a pointwise kernel receives for one row of its iteration space (see Note [Pointwise
/// kernel ABI] in jit/x86/pointwise_codegen.cpp). Operands are the kernel's inputs, then outputs.
struct PointwiseCall {
  int64_t n = 0;           // elements in the row
  int64_t contiguous = 0;  // 1 when every stride is 0 or the operand's element size
  char* ptr[kMaxKernelOperands] = {};
  int64_t stride[kMaxKernelOperands] = {};  // bytes between consecutive elements of the row
  ParamValue params[kMaxKernelParams] = {};
};
using PointwiseFn = void (*)(const PointwiseCall*);

/// What a reduction kernel receives for one row: the prologue's inputs along the row, and where the
/// row's single result goes.
struct ReductionCall {
  int64_t n = 0;
  int64_t contiguous = 0;
  char* ptr[kMaxKernelOperands] = {};
  int64_t stride[kMaxKernelOperands] = {};
  char* out = nullptr;
  ParamValue params[kMaxKernelParams] = {};
};
using ReductionFn = void (*)(const ReductionCall*);

/// One operand of a pointwise launch: a strided view already broadcast to the iteration shape
/// (stride 0 along broadcast dimensions).
struct Operand {
  char* data = nullptr;
  const int64_t* strides = nullptr;  // bytes, one per iteration dimension
  int itemsize = 0;
};

/// Runs `kernel` over the iteration space `shape` (rank dims). Dimensions are collapsed where
/// every operand allows it, the innermost one becomes the kernel's row, and rows (or pieces of a
/// long single row) are spread over the thread pool when there is enough work.
void run_pointwise(const Kernel& kernel, int rank, const int64_t* shape, int num_operands, const Operand* operands,
                   const ParamValue* params, int num_params);

/// Runs a row-reduction kernel: the iteration space is `shape` (rank >= 1); the last dimension is
/// reduced. `out` is the result's base pointer and `out_strides` its byte strides over the first
/// rank-1 dimensions. Rows are spread over the thread pool.
void run_reduction(const Kernel& kernel, int rank, const int64_t* shape, int num_inputs, const Operand* inputs,
                   char* out, const int64_t* out_strides, const ParamValue* params, int num_params);

/// One launch of a row-blocked chain (run_row_blocked): a pointwise or row-reduction kernel over
/// `lead` leading dims shared by the whole chain, plus its own innermost dim of `n` elements.
/// Operand strides cover lead + 1 dims; a reduction writes one value per row at `out`.
struct RowLaunch {
  const Kernel* kernel = nullptr;
  bool reduction = false;
  int64_t n = 0;
  int num_operands = 0;  // pointwise: inputs then outputs; reduction: inputs
  const Operand* operands = nullptr;
  char* out = nullptr;                   // reduction only
  const int64_t* out_strides = nullptr;  // reduction only: bytes, over the leading dims
  const ParamValue* params = nullptr;
  int num_params = 0;
};

/// Runs a chain of launches that share leading (row) dims, block by block: every launch runs on
/// a block of rows before the next block starts, so data a later launch re-reads (the input of a
/// softmax, read by its max, its sum and its division) is still in cache. The caller guarantees
/// that a launch only reads rows of earlier launches' outputs at the same row index (no
/// broadcasting of chain results along leading dims). Each launch computes exactly what it would
/// compute alone (same kernels, same per-row calls), so results do not depend on blocking.
void run_row_blocked(int lead, const int64_t* lead_shape, const RowLaunch* launches, int count);

}  // namespace framejit::rt
