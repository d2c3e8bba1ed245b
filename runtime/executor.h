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

}  // namespace framejit::rt
