// eager.h — framejit.Tensor operations outside compiled code: each runs as a single-op
// graph through the same tracer, guards, cache and JIT as a compiled function.
#pragma once

#include <Python.h>

namespace framejit::frontend {

/// Runs `fn(*args)` — a small Python function (framejit/_tensor.py) whose body is one Tensor op —
/// as a compiled graph: the code's cache entry whose guards pass, else a new one traced now. The
/// result holds Tensors where the op made arrays. New ref, or null with the exception the op
/// raised. See Note [Tensor ops outside compiled code].
PyObject* run_tensor_op(PyObject* fn, PyObject* const* args, Py_ssize_t nargs);

}  // namespace framejit::frontend
