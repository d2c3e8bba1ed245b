// kernel_step.h — running one fused kernel inside a program: arrays in, new arrays out.
#pragma once

#include <Python.h>

#include <vector>

#include "jit/lower/views.h"
#include "runtime/dtype.h"
#include "runtime/kernel_cache.h"

namespace framejit::frontend {

/// The program's values as steps read them: Python objects in `vals`, and folded views (Note
/// [Folded views] in jit/schedule/fusion.cpp) that have no object and are read through their
/// source's layout.
class ValueStore {
public:
  explicit ValueStore(PyObject** v) : vals(v) {}
  virtual ~ValueStore() = default;
  /// Value v's layout and element size. False with a Python exception set.
  virtual bool layout(int v, jit::StridedLayout& out, int& itemsize) = 0;
  /// Whether v is a folded view (then vals[v] may be null).
  virtual bool is_folded(int v) const = 0;
  /// Whether reading v may run NumPy's copying reshape (a folded reshape somewhere in its views),
  /// which reads v's source data at bind time.
  virtual bool may_copy(int v) const = 0;

  PyObject** vals;  // values, new refs or null, owned by the program run
  /// New arrays are framejit.Tensors, not NumPy arrays (Note [Program array kind]).
  bool tensors = false;
};

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
  /// The reduced operand, stored as an array of the iteration shape (or -1). Only for reductions
  /// of the last axis alone, which then run row by row (the form that stores them).
  int value_output = -1;
};

/// C = A @ B with framejit's GEMM (batch dims of A and B broadcast as numpy.matmul's do).
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
bool run_kernel_step(const KernelStep& step, ValueStore& values);

/// Runs a reduction step; stores a new reference into vals[step.output].
bool run_reduction_step(const ReductionStep& step, ValueStore& values);

/// Runs a chain: binds every part (allocating every output) and then runs the kernels.
bool run_chain_step(const ChainStep& chain, ValueStore& values);

/// Runs a GEMM step; stores a new reference into vals[step.output].
bool run_gemm_step(const GemmStep& step, ValueStore& values);

}  // namespace framejit::frontend
