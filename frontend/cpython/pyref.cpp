// pyref.cpp — small CPython helpers shared by the frontend.
#include "frontend/cpython/pyref.h"

#include <string>

namespace framejit::frontend {

std::string fetch_error_text() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);  // new refs (or null)
  std::string out = type ? reinterpret_cast<PyTypeObject*>(type)->tp_name : "error";
  if (value) {
    if (PyObject* s = PyObject_Str(value)) {
      if (const char* c = PyUnicode_AsUTF8(s)) out += std::string(": ") + c;
      Py_DECREF(s);
    }
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  PyErr_Clear();
  return out;
}

OwnedRef int_tuple(const int64_t* v, int n) {
  OwnedRef r = OwnedRef::steal(PyTuple_New(n));
  if (!r) return r;
  for (int d = 0; d < n; ++d) {
    PyObject* i = PyLong_FromLongLong(v[d]);
    if (!i) return OwnedRef();
    PyTuple_SET_ITEM(r.get(), d, i);  // steals i
  }
  return r;
}

}  // namespace framejit::frontend
