// arrays.cpp — reading and allocating the arrays programs work on: NumPy arrays or framejit.Tensors.
#include "frontend/backends/arrays.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

#include "frontend/numpy_abi.h"
#include "frontend/pooled_array.h"
#include "frontend/pyref.h"
#include "frontend/tensor_object.h"
#include "runtime/faults.h"

namespace framejit::frontend {

// NumPy's npy_intp sizes and strides are read in place as int64_t.
static_assert(std::is_same_v<intptr_t, int64_t>, "framejit assumes a 64-bit npy_intp");

ArrayFields array_fields(PyObject* o) {
  ArrayFields f;
  if (is_tensor(o)) {
    TensorObject* t = as_tensor(o);
    f.data = t->data;
    f.nd = t->nd;
    f.dims = t->shape;
    f.strides = t->strides;
    f.dtype = t->dtype;
    f.ok = true;
    return f;
  }
  const NumPyHandles* np = numpy_handles();
  if (!np || !PyObject_TypeCheck(o, np->ndarray)) return f;
  NdArrayFields* a = as_ndarray(o);
  std::optional<rt::DType> dt = dtype_from_descr(a->descr);
  if (!dt) return f;
  f.data = a->data;
  f.nd = a->nd;
  f.dims = a->dimensions;
  f.strides = a->strides;
  f.dtype = *dt;
  f.ok = true;
  return f;
}

jit::StridedLayout layout_of(const ArrayFields& a) {
  jit::StridedLayout l;
  l.data = a.data;
  l.nd = a.nd;
  std::copy(a.dims, a.dims + a.nd, l.dims);
  std::copy(a.strides, a.strides + a.nd, l.strides);
  return l;
}

PyObject* new_array(const int64_t* shape, int rank, rt::DType dtype, bool tensors) {  // new ref
  if (rt::fault_active(rt::Fault::Alloc)) return PyErr_NoMemory();
  if (tensors) return tensor_empty(shape, rank, dtype);
  int64_t bytes = rt::dtype_itemsize(dtype);
  for (int d = 0; d < rank; ++d) bytes *= shape[d];
  if (bytes >= kPooledArrayBytes) return new_pooled_array(shape, rank, dtype);
  const NumPyHandles* np = numpy_handles();
  PyObject* descr = np->dtypes[static_cast<int>(dtype)];  // borrowed
  if (!descr) {
    PyErr_Format(PyExc_TypeError, "framejit: NumPy has no dtype %s", std::string(rt::dtype_name(dtype)).c_str());
    return nullptr;
  }
  if (np->capi.new_from_descr) {
    // NB: what np.empty does past its argument parsing; no tuple, no ints, no Python call.
    Py_INCREF(descr);  // PyArray_NewFromDescr steals it, on failure too
    return np->capi.new_from_descr(np->ndarray, descr, rank, shape, /*strides=*/nullptr, /*data=*/nullptr,
                                   /*flags=*/0, /*obj=*/nullptr);
  }
  OwnedRef dims = OwnedRef::steal(PyTuple_New(rank));
  if (!dims) return nullptr;
  for (int d = 0; d < rank; ++d) PyTuple_SET_ITEM(dims.get(), d, PyLong_FromLongLong(shape[d]));  // steals
  PyObject* args[3] = {nullptr, dims.get(), descr};
  return PyObject_Vectorcall(np->empty, args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
}

PyObject* permuted_view(PyObject* base, const int* outer_first, int rank) {  // new ref
  if (is_tensor(base)) {
    TensorObject* t = as_tensor(base);
    int64_t shape[64], strides[64];
    for (int i = 0; i < rank; ++i) {
      shape[outer_first[i]] = t->shape[i];
      strides[outer_first[i]] = t->strides[i];
    }
    return tensor_view(base, t->data, rank, shape, strides);
  }
  OwnedRef axes = OwnedRef::steal(PyTuple_New(rank));
  if (!axes) return nullptr;
  for (int i = 0; i < rank; ++i) PyTuple_SET_ITEM(axes.get(), outer_first[i], PyLong_FromLong(i));
  return PyObject_CallMethod(base, "transpose", "O", axes.get());
}

}  // namespace framejit::frontend
