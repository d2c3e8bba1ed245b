// kernel_step.h — running one fused kernel inside a program: NumPy arrays in, new NumPy arrays out.
#pragma once

#include <Python.h>

#include <vector>

#include "runtime/dtype.h"
#include "runtime/kernel_cache.h"

namespace framejit::frontend {

struct KernelStep {
  rt::KernelPtr kernel;
  std::vector<int> inputs;   // program values read as kernel inputs (arrays)
  std::vector<int> params;   // program values read as kernel parameters (Python numbers)
  std::vector<rt::DType> param_dtypes;  // Float64 or Int64
  std::vector<int> outputs;  // program values the kernel produces
  std::vector<rt::DType> output_dtypes;
  /// Inputs whose last use is this kernel: an output may be written into one of them in place
  /// when nothing else can see it (see Note [Output buffer reuse]).
  std::vector<int> dying;
};

/// A row reduction: the prologue's inputs in, one new NumPy array out (the last axis reduced).
struct ReductionStep {
  rt::KernelPtr kernel;
  std::vector<int> inputs;
  std::vector<int> params;
  std::vector<rt::DType> param_dtypes;
  int output = -1;
  rt::DType output_dtype = rt::DType::Float32;
  bool keepdims = false;
  int value_output = -1;  // the reduced operand, stored as an array of the iteration shape (or -1)
};

/// C = A @ B with framejit's GEMM (A's leading dims are a batch; B is 2-D).
struct GemmStep {
  int a = -1, b = -1, output = -1;
  rt::DType dtype = rt::DType::Float32;
  /// A pointwise kernel run on each finished block of C, in place (Note [GEMM epilogues] in
  /// jit/schedule/fusion.h): its inputs include `output`, and its one result, C's array itself,
  /// becomes the value `epilogue.outputs[0]`. No epilogue when epilogue.kernel is null.
  KernelStep epilogue;
};

/// Consecutive kernel and reduction steps that run as one: row block by row block when they
/// share their leading dims and the data is large (rt::run_row_blocked), part by part otherwise.
/// Softmax and layernorm become one pass over memory plus re-reads from cache.
struct ChainStep {
  struct Part {
    bool reduction = false;
    KernelStep kernel;  // !reduction
    ReductionStep red;  // reduction
  };
  std::vector<Part> parts;
};

/// Broadcasts the inputs, allocates the outputs as NumPy arrays and runs the kernel (without the
/// GIL when the work is large). Stores new references into vals[outputs[j]]. False with a Python
/// exception set on failure (MemoryError from the allocation, or a broadcasting error).
bool run_kernel_step(const KernelStep& step, PyObject** vals);

/// Runs a reduction step; stores a new reference into vals[step.output].
bool run_reduction_step(const ReductionStep& step, PyObject** vals);

/// Runs a chain: binds every part (allocating every output) and then runs the kernels.
bool run_chain_step(const ChainStep& chain, PyObject** vals);

/// Runs a GEMM step; stores a new reference into vals[step.output].
bool run_gemm_step(const GemmStep& step, PyObject** vals);

}  // namespace framejit::frontend
