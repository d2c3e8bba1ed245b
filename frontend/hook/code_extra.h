// code_extra.h — CPython's per-code-object scratch slots (co_extra), under each version's name:
// 3.12 renamed the API PyUnstable_* and deprecated the underscored 3.11 names.
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

}  // namespace framejit::frontend
