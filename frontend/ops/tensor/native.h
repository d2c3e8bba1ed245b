// native.h — the framejit.Tensor ops that neither the JIT nor (where it is missing) NumPy
// computes, as plain native loops: float floor_divide and remainder, integer matmul, and the store
// of an in-place operator's result.
#pragma once

#include <Python.h>

namespace framejit::frontend {

/// a // b (floor = true) or a % b on Tensors or Python numbers (at least one Tensor), for the
/// float dtypes. New ref, or null with an exception (NotImplementedError for other dtypes).
PyObject* tensor_float_divmod(PyObject* a, PyObject* b, bool floor);

/// a @ b for integer and bool Tensors of rank 1 or 2 (the GEMM is float only), with NumPy's
/// wrap-around. New ref, or null with an exception (NotImplementedError for other cases).
PyObject* tensor_int_matmul(PyObject* a, PyObject* b);

/// `dst op= other` after `result = dst op other` was computed: stores `result` into dst's memory
/// as NumPy's in-place operators do (Note [In-place Tensor operators]). Returns dst (new ref), or
/// null with NumPy's exception: a result that does not fit dst's shape (ValueError), a cast
/// 'same_kind' does not allow (TypeError, naming `ufunc`), a read-only dst (ValueError).
PyObject* tensor_store_inplace(PyObject* dst, PyObject* result, const char* ufunc);

}  // namespace framejit::frontend
