// python_env.h — the Python objects framejit uses from C++, imported once while `framejit` is
// being imported (under the import lock), so no lazy import can ever run on the hot path or race
// between threads.
#pragma once

#include <Python.h>

#include <string>
#include <vector>

namespace framejit::frontend {

/// All new references, held for the life of the process.
struct PythonEnv {
  PyObject* builtins = nullptr;      // the builtins module
  PyObject* operator_mod = nullptr;  // the operator module
  PyObject* graph_module = nullptr;  // framejit._graph
  std::vector<std::string> library_prefixes;  // stdlib, site-packages, framejit itself
};

// Note [One-time initialization]
// C++ function-local statics whose initializer calls into Python deadlock: the initializer can
// release the GIL (an import reads files), a second thread then blocks on the static's guard
// while holding the GIL, and the first never gets the GIL back. Everything framejit needs from
// Python is therefore set up here, once, from framejit/__init__.py.

/// Imports and computes everything above (module init then imports NumPy and installs the op
/// tables). Returns false with a Python exception set on failure. Idempotent.
bool initialize_python_env();
/// The environment; valid after initialize_python_env().
const PythonEnv& python_env();

/// operator.<name> (borrowed, looked up once per name; null when there is no such function).
PyObject* operator_fn(const std::string& name);

/// Whether a code object belongs to the standard library, site-/dist-packages or framejit itself.
bool is_library_code(PyCodeObject* code);

}  // namespace framejit::frontend
