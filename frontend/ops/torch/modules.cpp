// modules.cpp — nn.Module calls and attributes (Note [Torch modules]).
#include "frontend/cpython/pyref.h"
#include "frontend/interop/torch_array.h"
#include "frontend/ops/torch/torch_ops.h"

namespace framejit::frontend::ops::torch_ops {

// Note [Torch modules]
// A call of an nn.Module is inlined as its class's forward(self, ...), the way Module.__call__
// ends when no hook is registered: the module's own hook dicts are read through their sources,
// so their (empty) key sets are guarded and a hook registered later recompiles; a module with
// hooks, or any global module hook (checked when traced, not guarded), runs in CPython with that
// reason. Attributes follow Module.__getattr__: what the instance dict or the class has first,
// then the _parameters, _buffers and _modules dicts, each read through its source. So
// parameters and buffers are graph inputs (their contents read at every call: an optimizer step
// needs no recompile), `training` is a guarded constant, and submodules are objects whose calls
// inline in turn. nn.Sequential and nn.ModuleList iterate over their _modules dict like any dict.

namespace {

PyObject* module_class() {
  static PyObject* cls = nullptr;  // torch.nn.Module, kept for the process
  if (!cls && torch_handles()) {
    OwnedRef nn = OwnedRef::steal(PyImport_ImportModule("torch.nn"));
    cls = nn ? PyObject_GetAttrString(nn.get(), "Module") : nullptr;
    if (!cls) PyErr_Clear();
  }
  return cls;
}

bool is_module(PyObject* o) {
  PyObject* cls = module_class();
  if (!cls) return false;
  const int r = PyObject_IsInstance(o, cls);
  if (r < 0) PyErr_Clear();
  return r == 1;
}

PyObject* instance_dict(PyObject* o) {  // borrowed or null
  PyObject** dp = _PyObject_GetDictPtr(o);
  return dp && *dp && PyDict_Check(*dp) ? *dp : nullptr;
}

PyObject* str(const char* s) {  // a new str (caller steals)
  return PyUnicode_FromString(s);
}

}  // namespace

VarPtr module_attr(Tracer& tx, const VarPtr& obj, const std::string& name) {
  PyObject* o = as<ObjectVar>(obj)->obj.get();
  if (!is_module(o) || !obj->source) return nullptr;
  PyObject* dict = instance_dict(o);
  OwnedRef key = OwnedRef::steal(str(name.c_str()));
  if (!dict || !key) return nullptr;
  if (PyDict_GetItemWithError(dict, key.get()) || _PyType_Lookup(Py_TYPE(o), key.get())) return nullptr;
  PyErr_Clear();
  for (const char* holder : {"_parameters", "_buffers", "_modules"}) {
    OwnedRef hk = OwnedRef::steal(str(holder));
    PyObject* d = PyDict_GetItemWithError(dict, hk.get());  // borrowed
    if (!d || !PyDict_Check(d)) continue;
    PyObject* v = PyDict_GetItemWithError(d, key.get());  // borrowed
    if (!v) continue;
    SourcePtr src = child_source(SourceKind::DictItem, child_source(SourceKind::InstanceAttr, obj->source, hk.get()),
                                 key.get());
    return tx.wrap(v, src);
  }
  PyErr_Clear();
  return nullptr;
}

VarPtr module_call(Tracer& tx, const VarPtr& obj, std::vector<VarPtr>& args, KwArgs& kwargs) {
  PyObject* o = as<ObjectVar>(obj)->obj.get();
  if (!is_module(o)) return nullptr;
  const std::string type_name = Py_TYPE(o)->tp_name;
  BREAK_IF(!obj->source, "calling an nn.Module (" + type_name + ") made inside the traced function");
  PyObject* dict = instance_dict(o);
  BREAK_IF(!dict, "an nn.Module (" + type_name + ") without an instance dict");
  for (const char* hooks : {"_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
                            "_forward_hooks_with_kwargs", "_forward_pre_hooks_with_kwargs"}) {
    OwnedRef hk = OwnedRef::steal(str(hooks));
    PyObject* d = PyDict_GetItemWithError(dict, hk.get());  // borrowed
    if (!d) {
      PyErr_Clear();
      continue;
    }
    BREAK_IF(!PyDict_Check(d) || PyDict_GET_SIZE(d) != 0,
             type_name + " has " + std::string(hooks + 1) + ": the module call runs in CPython");
    tx.wrap(d, child_source(SourceKind::InstanceAttr, obj->source, hk.get()));  // guards the empty key set
  }
  {
    OwnedRef mod = OwnedRef::steal(PyImport_ImportModule("torch.nn.modules.module"));
    for (const char* g : {"_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks",
                          "_global_backward_pre_hooks"}) {
      OwnedRef d = mod ? OwnedRef::steal(PyObject_GetAttrString(mod.get(), g)) : OwnedRef();
      if (!d) {
        PyErr_Clear();
        continue;
      }
      BREAK_IF(PyDict_Check(d.get()) && PyDict_GET_SIZE(d.get()) != 0,
               std::string("a global nn.Module hook (") + g + ") is registered: module calls run in CPython");
    }
  }
  OwnedRef fwd_name = OwnedRef::steal(str("forward"));
  BREAK_IF(PyDict_GetItemWithError(dict, fwd_name.get()), type_name + " has its own forward attribute");
  PyErr_Clear();
  PyObject* fwd = _PyType_Lookup(Py_TYPE(o), fwd_name.get());  // borrowed
  BREAK_IF(!fwd || !PyFunction_Check(fwd), type_name + ".forward is not a Python function");
  VarPtr f = tx.wrap(fwd, child_source(SourceKind::TypeAttr, obj->source, fwd_name.get()));
  std::vector<VarPtr> call_args{obj};
  call_args.insert(call_args.end(), args.begin(), args.end());
  return tx.call(f, std::move(call_args), std::move(kwargs));
}

}  // namespace framejit::frontend::ops::torch_ops
