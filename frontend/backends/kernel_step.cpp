// kernel_step.cpp — binding NumPy arrays to a fused kernel's operands and launching it.
#include "frontend/backends/kernel_step.h"

#include <algorithm>

#include "frontend/numpy_abi.h"
#include "frontend/pyref.h"
#include "jit/x86/gemm.h"
#include "runtime/executor.h"

namespace framejit::frontend {

namespace {
constexpr int kMaxRank = 32;
// Below this many elements, releasing and re-taking the GIL costs more than it frees.
constexpr int64_t kReleaseGilElements = 1 << 16;
// The broadcast of the arrays' shapes (the iteration space of the ufuncs a kernel replaces).
bool broadcast_shape(PyObject** vals, const std::vector<int>& inputs, int& rank, int64_t* shape) {
  rank = 0;
  for (int v : inputs) rank = std::max(rank, as_ndarray(vals[v])->nd);
  if (rank > kMaxRank) {
    PyErr_SetString(PyExc_ValueError, "framejit: kernel operands of more than 32 dimensions");
    return false;
  }
  std::fill(shape, shape + rank, 1);
  for (int v : inputs) {
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
  return true;
}

// An array as a kernel operand over `rank` iteration dims: stride 0 where it is broadcast.
rt::Operand operand_of(PyObject* arr, int rank, int64_t* strides) {
  NdArrayFields* a = as_ndarray(arr);
  for (int d = 0; d < rank; ++d) {
    int src = d - (rank - a->nd);
    strides[d] = src < 0 || a->dimensions[src] == 1 ? 0 : a->strides[src];
  }
  return {a->data, strides, rt::dtype_itemsize(*dtype_from_descr(a->descr))};
}

PyObject* new_array(const int64_t* shape, int rank, rt::DType dtype) {  // new ref
  const NumPyHandles* np = numpy_handles();
  OwnedRef dims = OwnedRef::steal(PyTuple_New(rank));
  for (int d = 0; d < rank; ++d) PyTuple_SET_ITEM(dims.get(), d, PyLong_FromLongLong(shape[d]));
  PyObject* args[3] = {nullptr, dims.get(), np->dtypes[static_cast<int>(dtype)]};
  return PyObject_Vectorcall(np->empty, args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
}

bool read_params(PyObject** vals, const std::vector<int>& params, const std::vector<rt::DType>& dtypes,
                 rt::ParamValue* out) {
  for (size_t p = 0; p < params.size(); ++p) {
    PyObject* v = vals[params[p]];
    if (dtypes[p] == rt::DType::Int64) {
      int overflow = 0;
      out[p].i = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "framejit: integer parameter does not fit 64 bits");
        return false;
      }
    } else {
      out[p].f = PyFloat_AsDouble(v);
    }
    if (PyErr_Occurred()) return false;
  }
  return true;
}

}  // namespace

bool run_kernel_step(const KernelStep& step, PyObject** vals) {
  const size_t nin = step.inputs.size(), nout = step.outputs.size();
  int rank;
  int64_t shape[kMaxRank];
  if (!broadcast_shape(vals, step.inputs, rank, shape)) return false;
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) total *= shape[d];
  for (size_t j = 0; j < nout; ++j) {
    PyObject* out = new_array(shape, rank, step.output_dtypes[j]);
    if (!out) return false;
    Py_XSETREF(vals[step.outputs[j]], out);  // new ref owned by vals
  }
  rt::Operand ops[rt::kMaxKernelOperands];
  int64_t strides[rt::kMaxKernelOperands][kMaxRank];
  for (size_t k = 0; k < nin + nout; ++k)
    ops[k] = operand_of(vals[k < nin ? step.inputs[k] : step.outputs[k - nin]], rank, strides[k]);
  rt::ParamValue params[rt::kMaxKernelParams];
  if (!read_params(vals, step.params, step.param_dtypes, params)) return false;
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

bool run_reduction_step(const ReductionStep& step, PyObject** vals) {
  int rank;
  int64_t shape[kMaxRank];
  if (!broadcast_shape(vals, step.inputs, rank, shape)) return false;
  if (rank != static_cast<int>(step.reduced.size())) {
    PyErr_SetString(PyExc_RuntimeError, "framejit: reduction operands do not have the traced rank");
    return false;
  }
  int64_t out_shape[kMaxRank];
  int out_rank = 0;
  int64_t count = 1, total = 1;
  for (int d = 0; d < rank; ++d) {
    total *= shape[d];
    if (step.reduced[d]) count *= shape[d];
    if (!step.reduced[d] || step.keepdims) out_shape[out_rank++] = step.reduced[d] ? 1 : shape[d];
  }
  if (count == 0) {
    // Lowering only compiles reductions whose counts cannot be zero (sizes 0 and 1 are guarded);
    // should a count still be zero, refuse as NumPy would rather than return garbage.
    PyErr_Format(PyExc_ValueError, "zero-size array to reduction operation %s which has no identity",
                 step.numpy_name);
    return false;
  }
  PyObject* out = new_array(out_shape, out_rank, step.output_dtype);
  if (!out) return false;
  Py_XSETREF(vals[step.output], out);
  NdArrayFields* o = as_ndarray(out);
  int64_t out_strides[kMaxRank];
  for (int d = 0, od = 0; d < rank; ++d) {
    out_strides[d] = step.reduced[d] ? 0 : o->strides[od];
    if (!step.reduced[d] || step.keepdims) ++od;
  }
  rt::Operand ops[rt::kMaxKernelOperands];
  int64_t strides[rt::kMaxKernelOperands][kMaxRank];
  for (size_t k = 0; k < step.inputs.size(); ++k) ops[k] = operand_of(vals[step.inputs[k]], rank, strides[k]);
  rt::ParamValue params[rt::kMaxKernelParams];
  if (!read_params(vals, step.params, step.param_dtypes, params)) return false;
  bool reduced[kMaxRank];
  std::copy(step.reduced.begin(), step.reduced.end(), reduced);

  rt::ReductionLaunch launch;
  launch.row = step.row.get();
  launch.column = step.column.get();
  launch.arg = step.arg;
  launch.arg_max = step.arg_max;
  launch.value_dtype = step.value_dtype;
  launch.ddof = step.ddof;
  launch.rank = rank;
  launch.shape = shape;
  launch.reduced = reduced;
  launch.num_inputs = static_cast<int>(step.inputs.size());
  launch.inputs = ops;
  launch.out = o->data;
  launch.out_strides = out_strides;
  launch.params = params;
  launch.num_params = static_cast<int>(step.params.size());
  if (total >= kReleaseGilElements) {
    Py_BEGIN_ALLOW_THREADS;
    rt::run_reduction(launch);
    Py_END_ALLOW_THREADS;
  } else {
    rt::run_reduction(launch);
  }
  if (step.numpy_scalar) {
    // NumPy hands back a scalar (numpy.float32, numpy.int64...) for a full reduction: arr[()].
    OwnedRef empty = OwnedRef::steal(PyTuple_New(0));
    PyObject* scalar = empty ? PyObject_GetItem(out, empty.get()) : nullptr;  // new ref
    if (!scalar) return false;
    Py_SETREF(vals[step.output], scalar);
  }
  return true;
}

bool run_gemm_step(const GemmStep& step, PyObject** vals) {
  NdArrayFields* a = as_ndarray(vals[step.a]);
  NdArrayFields* b = as_ndarray(vals[step.b]);
  const int rank = a->nd;
  const int64_t m = a->dimensions[rank - 2], k = a->dimensions[rank - 1];
  const int64_t kb = b->dimensions[0], n = b->dimensions[1];
  if (k != kb) {  // guards make this impossible; NumPy's own message if it ever happens
    PyErr_SetString(PyExc_ValueError, "matmul: Input operand 1 has a mismatch in its core dimension 0");
    return false;
  }
  int64_t out_shape[kMaxRank];
  std::copy(a->dimensions, a->dimensions + rank - 1, out_shape);
  out_shape[rank - 1] = n;
  PyObject* out = new_array(out_shape, rank, step.dtype);
  if (!out) return false;
  Py_XSETREF(vals[step.output], out);
  NdArrayFields* c = as_ndarray(out);
  const int64_t item = rt::dtype_itemsize(step.dtype);
  int64_t batches = 1;
  for (int d = 0; d < rank - 2; ++d) batches *= a->dimensions[d];
  jit::x86::GemmArgs g;
  g.dtype = step.dtype;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a_row_stride = a->strides[rank - 2] / item;
  g.a_col_stride = a->strides[rank - 1] / item;
  g.b = b->data;
  g.b_row_stride = b->strides[0] / item;
  g.b_col_stride = b->strides[1] / item;
  g.ldc = n;
  auto run = [&] {
    for (int64_t bi = 0; bi < batches; ++bi) {
      // Offset of batch bi in A (any strides) and in the contiguous C.
      int64_t rem = bi, a_off = 0;
      for (int d = rank - 3; d >= 0; --d) {
        a_off += (rem % a->dimensions[d]) * a->strides[d];
        rem /= a->dimensions[d];
      }
      g.a = a->data + a_off;
      g.c = c->data + bi * m * n * item;
      jit::x86::gemm(g);
    }
  };
  if (batches * m * n * k >= (int64_t{1} << 18)) {
    Py_BEGIN_ALLOW_THREADS;
    run();
    Py_END_ALLOW_THREADS;
  } else {
    run();
  }
  return true;
}

}  // namespace framejit::frontend
