// code_extra.h — CPython's per-code-object scratch slots (co_extra), where framejit keeps each code
// object's CodeState: the API under each version's name (3.12 renamed it PyUnstable_* and
// deprecated the underscored 3.11 names), and the slot array read directly for the hot path.
#pragma once

#include <Python.h>

namespace framejit::frontend {

#if PY_VERSION_HEX >= 0x030C0000
inline Py_ssize_t request_code_extra_index(freefunc free_fn) { return PyUnstable_Eval_RequestCodeExtraIndex(free_fn); }
inline int get_code_extra(PyObject* code, Py_ssize_t index, void** extra) {
  return PyUnstable_Code_GetExtra(code, index, extra);
}
inline int set_code_extra(PyObject* code, Py_ssize_t index, void* extra) {
  return PyUnstable_Code_SetExtra(code, index, extra);
}
#else
inline Py_ssize_t request_code_extra_index(freefunc free_fn) { return _PyEval_RequestCodeExtraIndex(free_fn); }
inline int get_code_extra(PyObject* code, Py_ssize_t index, void** extra) { return _PyCode_GetExtra(code, index, extra); }
inline int set_code_extra(PyObject* code, Py_ssize_t index, void* extra) { return _PyCode_SetExtra(code, index, extra); }
#endif

// CPython 3.11-3.13 keep co_extra as this struct (Objects/codeobject.c; only 3.12+ name it, in an
// internal header, as _PyCodeObjectExtra).
struct CodeExtra {
  Py_ssize_t ce_size;
  void* ce_extras[1];
};

/// Slot `index` of `code`'s co_extra read directly: what get_code_extra does, minus the call and
/// its checks. Null when the slot was never set.
inline void* read_code_extra(PyCodeObject* code, Py_ssize_t index) {
  auto* ex = static_cast<CodeExtra*>(code->co_extra);
  return ex && index >= 0 && index < ex->ce_size ? ex->ce_extras[index] : nullptr;
}

/// Rewrites an existing co_extra slot in place: no free function runs (set_code_extra would free
/// the value it replaces). For the tag bits of Note [Tagged co_extra].
inline void retag_code_extra(PyCodeObject* code, Py_ssize_t index, void* value) {
  auto* ex = static_cast<CodeExtra*>(code->co_extra);
  if (ex && index >= 0 && index < ex->ce_size) ex->ce_extras[index] = value;
}

}  // namespace framejit::frontend
