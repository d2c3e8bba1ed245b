// source.cpp — printing sources and fetching their values from a frame.
#include "frontend/guards/source.h"

#include <vector>

namespace framejit::frontend {
namespace {
std::string key_text(PyObject* key) {
  if (!key) return "?";
  PyObject* r = PyObject_Repr(key);  // new ref; keys are str/int, whose repr runs no user code
  if (!r) {
    PyErr_Clear();
    return "?";
  }
  std::string s = PyUnicode_AsUTF8(r);
  Py_DECREF(r);
  return s;
}
std::string attr_text(PyObject* key) {
  const char* s = key ? PyUnicode_AsUTF8(key) : nullptr;
  if (!s) {
    PyErr_Clear();
    return "?";
  }
  return s;
}
}  // namespace

std::string Source::to_string() const {
  switch (kind) {
    case SourceKind::Local: return "L['" + name + "']";
    case SourceKind::Global: return "G['" + attr_text(key.get()) + "']";
    case SourceKind::Closure: return "C['" + name + "']";
    case SourceKind::ModuleAttr:
    case SourceKind::InstanceAttr:
    case SourceKind::TypeAttr: return base->to_string() + "." + attr_text(key.get());
    case SourceKind::DictItem: return base->to_string() + "[" + key_text(key.get()) + "]";
    case SourceKind::SeqItem: return base->to_string() + "[" + std::to_string(index) + "]";
    case SourceKind::FuncDefault:
      return base->to_string() + ".__defaults__[" + std::to_string(index) + "]";
    case SourceKind::FuncKwDefault:
      return base->to_string() + ".__kwdefaults__[" + key_text(key.get()) + "]";
    case SourceKind::FuncCell:
      return base->to_string() + ".__closure__[" + std::to_string(index) + "].cell_contents";
    case SourceKind::FuncGlobal:
      return base->to_string() + ".__globals__['" + attr_text(key.get()) + "']";
    case SourceKind::MethodSelf: return base->to_string() + ".__self__";
    case SourceKind::MethodFunc: return base->to_string() + ".__func__";
    case SourceKind::SuperAttr: {
      auto* cls = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(key.get(), 0));
      return "super(" + std::string(cls->tp_name) + ", " + base->to_string() + ")." +
             attr_text(PyTuple_GET_ITEM(key.get(), 1));
    }
  }
  return "?";
}

bool Source::same_step(const Source& o) const {
  if (kind != o.kind || index != o.index) return false;
  if (key.get() == o.key.get()) return true;
  if (!key || !o.key) return false;
  if (Py_TYPE(key.get()) != Py_TYPE(o.key.get())) return false;
  int eq = PyObject_RichCompareBool(key.get(), o.key.get(), Py_EQ);
  if (eq < 0) PyErr_Clear();
  return eq == 1;
}

bool Source::same_as(const Source& o) const {
  if (!same_step(o)) return false;
  if (!base || !o.base) return !base && !o.base;
  return base->same_as(*o.base);
}

SourcePtr local_source(int index, std::string name) {
  return std::make_shared<Source>(Source{SourceKind::Local, nullptr, index, {}, std::move(name)});
}
SourcePtr global_source(PyObject* name) {
  return std::make_shared<Source>(Source{SourceKind::Global, nullptr, -1, OwnedRef::borrow(name), {}});
}
SourcePtr closure_source(int index, std::string name) {
  return std::make_shared<Source>(Source{SourceKind::Closure, nullptr, index, {}, std::move(name)});
}
SourcePtr child_source(SourceKind kind, SourcePtr base, PyObject* key) {
  return std::make_shared<Source>(Source{kind, std::move(base), -1, OwnedRef::borrow(key), {}});
}
SourcePtr child_source(SourceKind kind, SourcePtr base, int index) {
  return std::make_shared<Source>(Source{kind, std::move(base), index, {}, {}});
}

static PyObject* dict_get(PyObject* dict, PyObject* key) {  // borrowed
  if (!dict || !PyDict_Check(dict)) return nullptr;
  PyObject* v = PyDict_GetItemWithError(dict, key);
  if (!v && PyErr_Occurred()) PyErr_Clear();
  return v;
}

static PyObject* cell_contents(PyObject* tuple, int index) {  // borrowed
  if (!tuple || !PyTuple_Check(tuple) || index >= PyTuple_GET_SIZE(tuple)) return nullptr;
  PyObject* cell = PyTuple_GET_ITEM(tuple, index);
  return PyCell_Check(cell) ? PyCell_GET(cell) : nullptr;
}

PyObject* fetch_step(const Source& s, const FrameView& frame, PyObject* base) {
  switch (s.kind) {
    case SourceKind::Local: return frame.localsplus[s.index];
    case SourceKind::Global: {
      PyObject* v = dict_get(frame.globals, s.key.get());
      return v ? v : dict_get(frame.builtins, s.key.get());
    }
    case SourceKind::Closure: return cell_contents(frame.closure, s.index);
    case SourceKind::ModuleAttr:
      return PyModule_Check(base) ? dict_get(PyModule_GetDict(base), s.key.get()) : nullptr;
    case SourceKind::InstanceAttr: {
      PyObject** dictptr = _PyObject_GetDictPtr(base);
      return dictptr && *dictptr ? dict_get(*dictptr, s.key.get()) : nullptr;
    }
    case SourceKind::TypeAttr: {
      PyTypeObject* t = PyType_Check(base) ? reinterpret_cast<PyTypeObject*>(base) : Py_TYPE(base);
      return _PyType_Lookup(t, s.key.get());
    }
    // A dict, or an OrderedDict (whose type the wrapper guarded): the items are the dict's.
    case SourceKind::DictItem: return PyDict_Check(base) ? dict_get(base, s.key.get()) : nullptr;
    case SourceKind::SeqItem:
      if (PyList_CheckExact(base))
        return s.index < PyList_GET_SIZE(base) ? PyList_GET_ITEM(base, s.index) : nullptr;
      if (PyTuple_CheckExact(base))
        return s.index < PyTuple_GET_SIZE(base) ? PyTuple_GET_ITEM(base, s.index) : nullptr;
      return nullptr;
    case SourceKind::FuncDefault: {
      if (!PyFunction_Check(base)) return nullptr;
      PyObject* d = PyFunction_GET_DEFAULTS(base);
      return d && s.index < PyTuple_GET_SIZE(d) ? PyTuple_GET_ITEM(d, s.index) : nullptr;
    }
    case SourceKind::FuncKwDefault:
      return PyFunction_Check(base) ? dict_get(PyFunction_GET_KW_DEFAULTS(base), s.key.get()) : nullptr;
    case SourceKind::FuncCell:
      return PyFunction_Check(base) ? cell_contents(PyFunction_GET_CLOSURE(base), s.index) : nullptr;
    case SourceKind::FuncGlobal: {
      if (!PyFunction_Check(base)) return nullptr;
      auto* fn = reinterpret_cast<PyFunctionObject*>(base);
      PyObject* v = dict_get(fn->func_globals, s.key.get());
      return v ? v : dict_get(fn->func_builtins, s.key.get());
    }
    case SourceKind::MethodSelf: return PyMethod_Check(base) ? PyMethod_GET_SELF(base) : nullptr;
    case SourceKind::MethodFunc: return PyMethod_Check(base) ? PyMethod_GET_FUNCTION(base) : nullptr;
    case SourceKind::SuperAttr:
      return super_lookup(Py_TYPE(base), PyTuple_GET_ITEM(s.key.get(), 0), PyTuple_GET_ITEM(s.key.get(), 1));
  }
  return nullptr;
}

PyObject* super_lookup(PyTypeObject* type, PyObject* start, PyObject* name) {
  PyObject* mro = type->tp_mro;  // borrowed
  if (!mro || !PyTuple_Check(mro)) return nullptr;
  Py_ssize_t n = PyTuple_GET_SIZE(mro), i = 0;
  while (i < n && PyTuple_GET_ITEM(mro, i) != start) ++i;
  for (++i; i < n; ++i) {
    auto* t = reinterpret_cast<PyTypeObject*>(PyTuple_GET_ITEM(mro, i));
    // NB: static builtin types have no tp_dict of their own from 3.12 on; heap types always do.
    PyObject* v = (t->tp_flags & Py_TPFLAGS_HEAPTYPE) ? dict_get(t->tp_dict, name) : _PyType_Lookup(t, name);
    if (v) return v;
  }
  return nullptr;
}

PyObject* fetch_source(const Source& src, const FrameView& frame) {
  PyObject* base = nullptr;
  if (src.base) {
    base = fetch_source(*src.base, frame);
    if (!base) return nullptr;
  }
  return fetch_step(src, frame, base);
}

}  // namespace framejit::frontend
