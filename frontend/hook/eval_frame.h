// eval_frame.h — the PEP 523 frame evaluator: which frames framejit sees, and the callables that
// turn it on (framejit.compile wrappers, install(), disable()).
#pragma once

#include <Python.h>

#include <memory>

#include "frontend/options/config.h"

namespace framejit::frontend {

/// Creates the framejit.compile wrapper of `fn` (new ref). The wrapper owns `cfg`.
PyObject* make_compiled_function(PyObject* fn, std::shared_ptr<CompileConfig> cfg);
/// Creates the @framejit.disable wrapper (new ref): `fn` and everything it calls run in CPython.
PyObject* make_disabled_function(PyObject* fn);
/// Whether `obj` is a framejit.disable wrapper (the tracer refuses to inline those).
bool is_disabled_function(PyObject* obj);
/// The Python function a framejit.compile wrapper wraps (borrowed), or null for anything else.
PyObject* compiled_function_target(PyObject* obj);
/// The backend a framejit.compile wrapper was made with (borrowed), or null for anything else.
PyObject* compiled_function_backend(PyObject* obj);

/// framejit.install()/uninstall(): the process-wide default config (null: none).
void install(std::shared_ptr<CompileConfig> cfg);
void uninstall();
bool installed();

/// Benchmark reference: installs (or removes) a frame evaluator that only calls CPython's own, to
/// measure what any PEP 523 evaluator costs. False (nothing done) while framejit's hook is active.
bool set_bare_evaluator(bool on);

/// Runs `fn(*args, **kwargs)` with `cfg` active on this thread (used by explain()). New ref.
PyObject* call_with_config(PyObject* fn, PyObject* args, PyObject* kwargs, CompileConfig* cfg);

/// Registers the wrapper types; call once from module init. False with an exception set on error.
bool init_hook_types(PyObject* module);

}  // namespace framejit::frontend
