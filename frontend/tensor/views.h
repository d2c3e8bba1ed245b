// views.h — framejit.Tensor's views (transpose, reshape, basic indexing ...) and copies,
// made natively with the JIT's own index remaps (jit/lower/views.h).
#pragma once

#include <Python.h>

#include <cstdint>
#include <vector>

namespace framejit::frontend {

// Note [Tensor views]
// A view is new metadata over the same storage, so it is made here directly rather than as a
// single-op graph (Note [Tensor ops outside compiled code]): a compiled program whose result is a
// view makes that view by calling the Tensor method, which must not come back into the JIT. The
// layouts come from jit::apply_view, the remap the JIT applies when a kernel reads through a view,
// so a view computes the same inside and outside compiled code. Errors are NumPy's.

/// t with its dims permuted: result dim d is t's dim perm[d] (axes normalized, a permutation).
/// Empty `perm` reverses the dims (t.T). New ref or null.
PyObject* tensor_permute(PyObject* t, std::vector<int64_t> perm);
/// t.swapaxes(a, b). New ref or null.
PyObject* tensor_swapaxes(PyObject* t, int64_t a, int64_t b);
/// t.reshape(shape) (one -1 allowed): a view when the strides allow it, else a C-ordered copy.
PyObject* tensor_reshape(PyObject* t, const std::vector<int64_t>& shape);
/// t[key] for ints, slices, None, Ellipsis and tuples of them. New ref or null (IndexError ...).
PyObject* tensor_getitem(PyObject* t, PyObject* key);
/// A C-contiguous copy of t (new ref).
PyObject* tensor_copy(PyObject* t);

}  // namespace framejit::frontend
