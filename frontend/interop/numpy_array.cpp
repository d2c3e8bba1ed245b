// numpy_array.cpp — NumPy's array adapter: ndarray fields read in place, outputs made through
// NumPy's C API (PyArray_NewFromDescr) or framejit's pool (Note [Pooled arrays]).
#include <string>
#include <type_traits>

#include "frontend/cpython/pyref.h"
#include "frontend/interop/array_adapter.h"
#include "frontend/interop/numpy_abi.h"
#include "frontend/interop/pooled_array.h"
#include "runtime/faults.h"

namespace framejit::frontend {

// NumPy's npy_intp sizes and strides are read in place as int64_t.
static_assert(std::is_same_v<intptr_t, int64_t>, "framejit assumes a 64-bit npy_intp");

namespace {

class NumPyAdapter final : public ArrayAdapter {
public:
  ArrayFields fields(PyObject* o) const override {
    ArrayFields f;
    const NumPyHandles* np = numpy_handles();
    if (!np) return f;
    if (!PyObject_TypeCheck(o, np->ndarray)) {
      // A NumPy scalar reads as a 0-d array over its value (an input like numpy.float64(2.0)).
      if (!PyObject_TypeCheck(o, np->generic)) return f;
      std::optional<rt::DType> dt = numpy_scalar_dtype(np, Py_TYPE(o));
      if (!dt) return f;
      f.data = numpy_scalar_data(o);
      f.dtype = *dt;
      f.ok = true;
      return f;
    }
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

  PyObject* empty(const int64_t* shape, int rank, rt::DType dtype) const override {  // new ref
    if (rt::fault_active(rt::Fault::Alloc)) return PyErr_NoMemory();
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

  PyObject* permuted_view(PyObject* base, const int* outer_first, int rank) const override {  // new ref
    OwnedRef axes = OwnedRef::steal(PyTuple_New(rank));
    if (!axes) return nullptr;
    for (int i = 0; i < rank; ++i) PyTuple_SET_ITEM(axes.get(), outer_first[i], PyLong_FromLong(i));
    return PyObject_CallMethod(base, "transpose", "O", axes.get());
  }

  bool reductions_in_input_order() const override { return true; }
  bool is_private(PyObject* o) const override {
    const NumPyHandles* np = numpy_handles();
    if (!np || Py_TYPE(o) != np->ndarray) return false;  // a subclass may keep its own references
    NdArrayFields* a = as_ndarray(o);
    constexpr int kNeed = kNpyAligned | kNpyWriteable | kNpyCContiguous;
    const bool owns = a->base ? is_private_pool_block(a->base) : (a->flags & kNpyOwnData) != 0;
    return owns && (a->flags & kNeed) == kNeed;
  }
};

}  // namespace

const ArrayAdapter& numpy_adapter() {
  static const NumPyAdapter adapter;  // NB: constant-initialized; no guard, no Python
  return adapter;
}

}  // namespace framejit::frontend
