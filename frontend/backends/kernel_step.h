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
};

/// A reduction: the prologue's inputs in, one new NumPy array (or NumPy scalar) out.
struct ReductionStep {
  rt::KernelPtr row;     // the row-form kernel
  rt::KernelPtr column;  // the column-form kernel (null for argmax/argmin)
  std::vector<int> inputs;
  std::vector<int> params;
  std::vector<rt::DType> param_dtypes;
  int output = -1;
  rt::DType value_dtype = rt::DType::Float32;   // the reduced values'
  rt::DType output_dtype = rt::DType::Float32;  // int64 for argmax/argmin
  std::vector<bool> reduced;  // per dim of the iteration space
  bool keepdims = false;
  bool numpy_scalar = false;
  bool arg = false, arg_max = false;
  int64_t ddof = 0;
  const char* numpy_name = "sum";  // the ufunc NumPy's messages name (maximum, minimum, ...)
};

/// C = A @ B with framejit's GEMM (A's leading dims are a batch; B is 2-D).
struct GemmStep {
  int a = -1, b = -1, output = -1;
  rt::DType dtype = rt::DType::Float32;
};

/// Broadcasts the inputs, allocates the outputs as NumPy arrays and runs the kernel (without the
/// GIL when the work is large). Stores new references into vals[outputs[j]]. False with a Python
/// exception set on failure (MemoryError from the allocation, or a broadcasting error).
bool run_kernel_step(const KernelStep& step, PyObject** vals);

/// Runs a reduction step; stores a new reference into vals[step.output].
bool run_reduction_step(const ReductionStep& step, PyObject** vals);

/// Runs a GEMM step; stores a new reference into vals[step.output].
bool run_gemm_step(const GemmStep& step, PyObject** vals);

}  // namespace framejit::frontend
