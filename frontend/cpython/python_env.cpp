// python_env.cpp — one-time imports of the Python objects framejit uses from C++.
#include "frontend/cpython/python_env.h"

#include <unordered_map>


namespace framejit::frontend {

namespace {
PythonEnv g_env;
bool g_ready = false;

std::vector<std::string> compute_library_prefixes() {
  std::vector<std::string> out;
  PyObject* sysconfig = PyImport_ImportModule("sysconfig");  // new ref
  if (sysconfig) {
    for (const char* key : {"stdlib", "platstdlib", "purelib", "platlib"}) {
      PyObject* p = PyObject_CallMethod(sysconfig, "get_path", "s", key);  // new ref
      if (p && PyUnicode_Check(p)) out.push_back(PyUnicode_AsUTF8(p));
      Py_XDECREF(p);
    }
    Py_DECREF(sysconfig);
  }
  // framejit's own Python layer never needs tracing.
  PyObject* fj = PyImport_ImportModule("framejit");  // new ref (partially initialized: has __file__)
  if (fj) {
    PyObject* f = PyObject_GetAttrString(fj, "__file__");  // new ref
    if (f && PyUnicode_Check(f)) {
      std::string s = PyUnicode_AsUTF8(f);
      out.push_back(s.substr(0, s.rfind('/') + 1));
    }
    Py_XDECREF(f);
    Py_DECREF(fj);
  }
  PyErr_Clear();
  return out;
}
}  // namespace

const PythonEnv& python_env() { return g_env; }

PyObject* operator_fn(const std::string& name) {
  static std::unordered_map<std::string, PyObject*> cache;  // values: new refs, kept (GIL held)
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  PyObject* fn = PyObject_GetAttrString(g_env.operator_mod, name.c_str());
  if (!fn) PyErr_Clear();
  cache[name] = fn;
  return fn;
}

bool initialize_python_env() {
  if (g_ready) return true;
  g_env.builtins = PyImport_ImportModule("builtins");
  g_env.operator_mod = PyImport_ImportModule("operator");
  g_env.graph_module = PyImport_ImportModule("framejit._graph");
  if (!g_env.builtins || !g_env.operator_mod || !g_env.graph_module) return false;
  g_env.library_prefixes = compute_library_prefixes();
  g_ready = true;
  return true;
}

bool is_library_code(PyCodeObject* code) {
  const std::vector<std::string>& prefixes = python_env().library_prefixes;
  const char* f = PyUnicode_AsUTF8(code->co_filename);
  if (!f) {
    PyErr_Clear();
    return true;
  }
  std::string file = f;
  if (file.rfind("<frozen", 0) == 0) return true;
  // NumPy 1.x builds its __array_function__ dispatch wrappers with exec() under this name.
  if (file.rfind("<__array_function__ internals>", 0) == 0) return true;
  if (file.find("/site-packages/") != std::string::npos || file.find("/dist-packages/") != std::string::npos)
    return true;
  for (const std::string& p : prefixes)
    if (!p.empty() && file.rfind(p, 0) == 0) return true;
  return false;
}

}  // namespace framejit::frontend
