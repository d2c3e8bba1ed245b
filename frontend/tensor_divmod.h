// tensor_divmod.h — float floor_divide and remainder on framejit.Tensors, computed natively where
// neither the JIT nor NumPy can (see Note [Float divmod without NumPy]).
#pragma once

#include <Python.h>

namespace framejit::frontend {

/// a // b (floor = true) or a % b on Tensors or Python numbers (at least one Tensor), for the
/// float dtypes. New ref, or null with an exception (NotImplementedError for other dtypes).
PyObject* tensor_float_divmod(PyObject* a, PyObject* b, bool floor);

}  // namespace framejit::frontend
