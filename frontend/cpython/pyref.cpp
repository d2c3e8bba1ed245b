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

}  // namespace framejit::frontend
