// python_env.cpp — one-time imports of the Python objects framejit uses from C++.
#include "frontend/python_env.h"

#include <unordered_map>

#include "frontend/numpy_abi.h"
#include "frontend/ops/registry.h"

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
  if (init_numpy_handles()) {
    PyObject* probe = PyImport_ImportModule("framejit._probe");  // new ref
    if (!probe) return false;
    g_env.probe_fn = PyObject_GetAttrString(probe, "result_type");
    Py_DECREF(probe);
    if (!g_env.probe_fn) return false;
  }
  ops::init_registry();
  g_ready = true;
  return true;
}

}  // namespace framejit::frontend
