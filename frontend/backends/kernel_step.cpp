// kernel_step.cpp — binding NumPy arrays to a fused kernel's operands and launching it.
#include "frontend/backends/kernel_step.h"

#include <algorithm>

#include "frontend/numpy_abi.h"
#include "frontend/pyref.h"
#include "runtime/executor.h"

namespace framejit::frontend {

namespace {
constexpr int kMaxRank = 32;
// Below this many elements, releasing and re-taking the GIL costs more than it frees.
constexpr int64_t kReleaseGilElements = 1 << 16;
}  // namespace

bool run_kernel_step(const KernelStep& step, PyObject** vals) {
  const NumPyHandles* np = numpy_handles();
  const size_t nin = step.inputs.size(), nout = step.outputs.size();

  // The iteration space is the broadcast of the inputs' shapes, as in the ufunc they replace.
  int rank = 0;
  for (int v : step.inputs) rank = std::max(rank, as_ndarray(vals[v])->nd);
  if (rank > kMaxRank) {
    PyErr_SetString(PyExc_ValueError, "framejit: kernel operands of more than 32 dimensions");
    return false;
  }
  int64_t shape[kMaxRank];
  std::fill(shape, shape + rank, 1);
  for (int v : step.inputs) {
    NdArrayFields* a = as_ndarray(vals[v]);
    for (int d = 0; d < a->nd; ++d) {
      int64_t& s = shape[rank - a->nd + d];
      int64_t n = a->dimensions[d];
      if (n != 1 && s != 1 && n != s) {
        PyErr_SetString(PyExc_ValueError, "framejit: operands could not be broadcast together");
        return false;
      }
      if (n != 1) s = n;
    }
  }

  OwnedRef dims = OwnedRef::steal(PyTuple_New(rank));
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) {
    PyTuple_SET_ITEM(dims.get(), d, PyLong_FromLongLong(shape[d]));
    total *= shape[d];
  }
  for (size_t j = 0; j < nout; ++j) {
    PyObject* args[3] = {nullptr, dims.get(), np->dtypes[static_cast<int>(step.output_dtypes[j])]};
    PyObject* out = PyObject_Vectorcall(np->empty, args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
    if (!out) {
      for (size_t i = 0; i < j; ++i) Py_CLEAR(vals[step.outputs[i]]);
      return false;
    }
    Py_XSETREF(vals[step.outputs[j]], out);  // new ref owned by vals
  }

  rt::Operand ops[rt::kMaxKernelOperands];
  int64_t strides[rt::kMaxKernelOperands][kMaxRank];
  for (size_t k = 0; k < nin + nout; ++k) {
    PyObject* arr = vals[k < nin ? step.inputs[k] : step.outputs[k - nin]];
    NdArrayFields* a = as_ndarray(arr);
    for (int d = 0; d < rank; ++d) {
      int src = d - (rank - a->nd);
      strides[k][d] = src < 0 || a->dimensions[src] == 1 ? 0 : a->strides[src];
    }
    ops[k] = {a->data, strides[k], rt::dtype_itemsize(k < nin ? *dtype_from_descr(a->descr) : step.output_dtypes[k - nin])};
  }
  rt::ParamValue params[rt::kMaxKernelParams];
  for (size_t p = 0; p < step.params.size(); ++p) {
    PyObject* v = vals[step.params[p]];
    if (step.param_dtypes[p] == rt::DType::Int64) {
      int overflow = 0;
      params[p].i = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "framejit: integer parameter does not fit 64 bits");
        return false;
      }
    } else {
      params[p].f = PyFloat_AsDouble(v);
    }
    if (PyErr_Occurred()) return false;
  }

  const int nops = static_cast<int>(nin + nout);
  const int nparams = static_cast<int>(step.params.size());
  if (total >= kReleaseGilElements) {
    Py_BEGIN_ALLOW_THREADS;
    rt::run_pointwise(*step.kernel, rank, shape, nops, ops, params, nparams);
    Py_END_ALLOW_THREADS;
  } else {
    rt::run_pointwise(*step.kernel, rank, shape, nops, ops, params, nparams);
  }
  return true;
}

}  // namespace framejit::frontend
