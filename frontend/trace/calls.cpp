// calls.cpp — calls while tracing: inlining user functions, methods and __call__, Python builtins,
// attribute loads and subscripts.
#include <Python.h>

#include <algorithm>
#include <cstring>

#include "frontend/cpython/python_env.h"
#include "frontend/interop/numpy_abi.h"
#include "frontend/trace/op_table.h"
#include "frontend/tensor/object.h"
#include "frontend/trace/python_ops.h"
#include "frontend/trace/tracer.h"

namespace framejit::frontend {

namespace {

std::string str_of(PyObject* o) {
  const char* s = o && PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : nullptr;
  if (!s) {
    PyErr_Clear();
    return "?";
  }
  return s;
}

PyObject* builtin(const char* name) {  // borrowed from the builtins module
  PyObject* mod = python_env().builtins;
  PyObject* r = PyObject_GetAttrString(mod, name);  // new ref
  Py_XDECREF(r);  // builtins keeps it alive
  return r;
}

// The module a builtin function belongs to, e.g. "math" for math.sqrt ("" if none).
std::string module_of(PyObject* fn) {
  if (!PyCFunction_Check(fn)) return "";
  PyObject* self = PyCFunction_GET_SELF(fn);  // borrowed: the module for module functions
  if (self && PyModule_Check(self)) {
    const char* n = PyModule_GetName(self);
    if (n) return n;
    PyErr_Clear();
  }
  return "";
}

// A failed getattr on a real object: missing (AttributeError, which hasattr answers False to), or
// any other exception the lookup raised. Clears the error; the message is `what` either way.
[[noreturn]] void missing_attribute_break(const std::string& what) {
  bool missing = !PyErr_Occurred() || PyErr_ExceptionMatches(PyExc_AttributeError);
  if (missing) {
    PyErr_Clear();
    graph_break(BreakKind::MissingAttribute, what);
  }
  OwnedRef type = OwnedRef::borrow(PyErr_Occurred());  // borrowed -> new ref
  PyErr_Clear();
  graph_break(Raises{type.get()}, what);
}

// Note [Numba dispatchers]
// Code written for Numba calls its own @numba.jit helpers (a kernel's conv2d, relu, matmul...).
// Such a call is traced as a call of the helper's Python source, the dispatcher's py_func: what
// the helper means in Python (what CPython runs with NUMBA_DISABLE_JIT), which is what framejit
// compiles everywhere; the dispatcher's own machine code is not used. Numba's reading can differ
// where Numba's typing does (its ints wrap at 64 bits, fastmath reorders sums): framejit keeps
// Python's and NumPy's. The guard on py_func (an instance attribute) pins the helper. Only
// dispatchers of an imported Numba are recognised (numba.core.dispatcher.Dispatcher). Compiled
// loops inline such a helper like any Python function (Tracer::numba_source, element_loops.cpp).
PyObject* numba_python_function(PyObject* obj) {  // borrowed, or null
  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  PyObject* mod = PyDict_GetItemString(modules, "numba.core.dispatcher");  // borrowed
  if (!mod) return nullptr;
  OwnedRef cls = OwnedRef::steal(PyObject_GetAttrString(mod, "Dispatcher"));
  if (!cls || !PyType_Check(cls.get())) {
    PyErr_Clear();
    return nullptr;
  }
  if (!PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(cls.get()))) return nullptr;
  PyObject** dictptr = _PyObject_GetDictPtr(obj);
  if (!dictptr || !*dictptr) return nullptr;
  PyObject* f = PyDict_GetItemString(*dictptr, "py_func");  // borrowed
  return f && PyFunction_Check(f) ? f : nullptr;
}

}  // namespace

VarPtr Tracer::numba_source(const VarPtr& fn) {
  if (fn->kind != VarKind::Object) return nullptr;
  PyObject* py_func = numba_python_function(as<ObjectVar>(fn)->obj.get());
  if (!py_func) return nullptr;
  OwnedRef name = OwnedRef::steal(PyUnicode_FromString("py_func"));
  return wrap(py_func, child_source(SourceKind::InstanceAttr, fn->source, name.get()));
}

VarPtr Tracer::call(const VarPtr& fn, std::vector<VarPtr> args, KwArgs kwargs) {
  if (auto* g = dynamic_cast<GradModeVar*>(fn.get()); g && g->role == GradModeVar::Role::Exit)
    return exit_grad_block(args);  // Note [Grad-mode blocks]
  switch (fn->kind) {
    case VarKind::Function: return inline_function(fn, std::move(args), std::move(kwargs));
    case VarKind::Method: {
      auto* m = as<MethodVar>(fn);
      args.insert(args.begin(), m->self);
      return call(m->fn, std::move(args), std::move(kwargs));
    }
    case VarKind::AttrMethod: {
      auto* m = as<AttrMethodVar>(fn);
      const VarPtr& self = m->self;
      if (self->kind == VarKind::Tensor) return array_ops().call_method(*this, self, m->name, std::move(args), std::move(kwargs));
      if (self->kind == VarKind::Object && as<ObjectVar>(self)->node >= 0) {
        // Only NumPy's objects are graph inputs (random generators): NumPy's table captures them.
        if (out_.array_kind == ArrayKind::None) out_.array_kind = ArrayKind::NumPy;
        return array_ops().call_method(*this, self, m->name, std::move(args), std::move(kwargs));
      }
      if (self->kind == VarKind::List && (m->name == "append" || m->name == "extend" || m->name == "pop" ||
                                           m->name == "insert" || m->name == "clear" || m->name == "reverse")) {
        // append/extend on a list the function received: logged (Note [Side effects]).
        const bool outside = self->source != nullptr;
        if (self->scope < out_.scope()) refuse_in_body("list." + m->name + " on a list made outside it");
        BREAK_IF(outside && m->name != "append" && m->name != "extend", BreakKind::SideEffect,
                 "list." + m->name + " on a list the function received (a side effect)");
        BREAK_IF(!kwargs.empty(), "keyword arguments to list." + m->name);
        auto& items = as<SeqVar>(self)->items;
        if (m->name == "append" && args.size() == 1) {
          if (outside) log_container_store(self, nullptr, args[0]);
          items.push_back(args[0]);
          return wrap_const(Py_None);
        }
        if (m->name == "extend" && args.size() == 1) {
          std::vector<VarPtr> xs = unpack(args[0], "list.extend");
          if (outside) {
            BREAK_IF(args[0].get() == self.get(), BreakKind::SideEffect, "extending a list the function received by itself");
            for (const VarPtr& x : xs) log_container_store(self, nullptr, x);
          }
          for (auto& x : xs) items.push_back(x);
          return wrap_const(Py_None);
        }
        BREAK_IF(outside, BreakKind::SideEffect, "list." + m->name + " with these arguments on a list the function received");
        if (m->name == "pop" && args.size() <= 1) {
          BREAK_IF(items.empty(), Raises{PyExc_IndexError}, "pop from empty list");
          int64_t i = args.empty() ? -1 : to_int(args[0], "list.pop index");
          int64_t n = static_cast<int64_t>(items.size());
          if (i < 0) i += n;
          BREAK_IF(i < 0 || i >= n, Raises{PyExc_IndexError}, "pop index out of range");
          VarPtr r = items[i];
          items.erase(items.begin() + i);
          return r;
        }
        if (m->name == "insert" && args.size() == 2) {
          int64_t i = to_int(args[0], "list.insert index");
          int64_t n = static_cast<int64_t>(items.size());
          if (i < 0) i = std::max<int64_t>(0, i + n);
          i = std::min(i, n);
          items.insert(items.begin() + i, args[1]);
          return wrap_const(Py_None);
        }
        if (m->name == "clear" && args.empty()) {
          items.clear();
          return wrap_const(Py_None);
        }
        if (m->name == "reverse" && args.empty()) {
          std::reverse(items.begin(), items.end());
          return wrap_const(Py_None);
        }
      }
      if (self->kind == VarKind::Dict && kwargs.empty()) {
        auto* d = as<DictVar>(self);
        if (m->name == "items" || m->name == "keys" || m->name == "values") {
          std::vector<VarPtr> out;
          for (auto& [k, v] : d->items) {
            VarPtr kv = wrap_const(k.get());
            if (m->name == "items")
              out.push_back(std::make_shared<SeqVar>(VarKind::Tuple, std::vector<VarPtr>{kv, v}));
            else
              out.push_back(m->name == "keys" ? kv : v);
          }
          return std::make_shared<SeqVar>(VarKind::List, std::move(out));
        }
        if (m->name == "get" && (args.size() == 1 || args.size() == 2)) {
          OwnedRef key = python_value(args[0], "dict key");
          for (auto& [k, v] : d->items) {
            int eq = PyObject_RichCompareBool(k.get(), key.get(), Py_EQ);
            if (eq < 0) PyErr_Clear();
            if (eq == 1) return v;
          }
          return args.size() == 2 ? args[1] : wrap_const(Py_None);
        }
      }
      if (self->kind == VarKind::Const || is_seq(self)) {
        // Methods of immutable builtin values (str.format, tuple.index ...) run for real.
        OwnedRef obj = python_value(self, "method call");
        BREAK_IF(!PyUnicode_CheckExact(obj.get()) && !PyTuple_CheckExact(obj.get()) &&
                     !PyLong_CheckExact(obj.get()) && !PyFloat_CheckExact(obj.get()) &&
                     !(PyList_CheckExact(obj.get()) && (m->name == "index" || m->name == "count")),
                 "calling " + m->name + " on " + Py_TYPE(obj.get())->tp_name);
        OwnedRef meth = OwnedRef::steal(PyObject_GetAttrString(obj.get(), m->name.c_str()));
        if (!meth) python_error_break();
        OwnedRef pargs = OwnedRef::steal(PyTuple_New(args.size()));
        for (size_t i = 0; i < args.size(); ++i)
          PyTuple_SET_ITEM(pargs.get(), i, python_value(args[i], "method argument").release());
        OwnedRef pkw = OwnedRef::steal(PyDict_New());
        for (auto& [k, v] : kwargs) PyDict_SetItemString(pkw.get(), k.c_str(), python_value(v, "method argument").get());
        OwnedRef r = OwnedRef::steal(PyObject_Call(meth.get(), pargs.get(), pkw.get()));
        if (!r) python_error_break("Python raised ", " in " + m->name + "()");
        return wrap_const(r.get());
      }
      graph_break("calling method " + m->name + " of " + var_kind_name(self->kind));
    }
    case VarKind::Builtin: return call_builtin(fn, std::move(args), std::move(kwargs));
    case VarKind::Object: {
      if (VarPtr r = tables_object_call(*this, fn, args, kwargs)) return r;  // an nn.Module
      // obj(...) runs type(obj).__call__(obj, ...)
      PyObject* obj = as<ObjectVar>(fn)->obj.get();
      if (VarPtr source = numba_source(fn)) return call(source, std::move(args), std::move(kwargs));
      OwnedRef name = OwnedRef::steal(PyUnicode_FromString("__call__"));
      PyObject* call_fn = _PyType_Lookup(Py_TYPE(obj), name.get());  // borrowed
      BREAK_IF(!call_fn || !PyFunction_Check(call_fn),
               std::string("calling a ") + Py_TYPE(obj)->tp_name + " object without a Python __call__");
      VarPtr fvar = wrap(call_fn, child_source(SourceKind::TypeAttr, fn->source, name.get()));
      args.insert(args.begin(), fn);
      return call(fvar, std::move(args), std::move(kwargs));
    }
    case VarKind::Const:
      if (const_value(fn) == reinterpret_cast<PyObject*>(&PySuper_Type)) {
        // super() (3.11 compiles every super() to a call; 3.12+ only the ones it cannot fold into
        // LOAD_SUPER_ATTR, such as s = super(); s.f()).
        BREAK_IF(!kwargs.empty() || (args.size() != 0 && args.size() != 2), "super() with these arguments");
        return args.empty() ? zero_arg_super() : std::make_shared<SuperVar>(args[0], args[1]);
      }
      break;
    case VarKind::Class: {
      // NumPy's type-information classes are pure functions of a dtype: numpy.finfo(float).eps
      // is a constant, made at trace time (the class is guarded by identity as it is read).
      PyObject* cls = as<ObjectVar>(fn)->obj.get();
      if (VarPtr m = grad_mode_manager(cls, args, kwargs)) return m;  // Note [Grad-mode blocks]
      auto is_numpy = [&](const char* name) {
        const NumPyHandles* np = numpy_handles();
        OwnedRef a = OwnedRef::steal(np ? PyObject_GetAttrString(np->module, name) : nullptr);  // new ref
        if (!a) PyErr_Clear();
        return a && a.get() == cls;
      };
      if ((is_numpy("finfo") || is_numpy("iinfo")) && kwargs.empty() && args.size() == 1 &&
          args[0]->kind != VarKind::Tensor && args[0]->kind != VarKind::Scalar) {
        OwnedRef dtype = python_value(args[0], "the dtype of numpy.finfo/iinfo");
        OwnedRef r = OwnedRef::steal(PyObject_CallOneArg(cls, dtype.get()));  // new ref
        if (!r) python_error_break(std::string("numpy.") + reinterpret_cast<PyTypeObject*>(cls)->tp_name + "(): ");
        return wrap_const(r.get());
      }
    }
      graph_break(std::string("constructing a ") +
                  reinterpret_cast<PyTypeObject*>(as<ObjectVar>(fn)->obj.get())->tp_name +
                  " object inside the traced function");
    default: break;
  }
  if (fn->kind == VarKind::Const) {
    // Name what was called in the user's terms: "calling <class '_io.StringIO'>".
    OwnedRef r = OwnedRef::steal(PyObject_Repr(const_value(fn)));  // new ref
    const char* text = r ? PyUnicode_AsUTF8(r.get()) : nullptr;    // borrowed buffer
    if (!text) PyErr_Clear();
    std::string what = text ? std::string(text).substr(0, 80) : "a constant";
    graph_break("calling " + what + ", which framejit does not capture");
  }
  graph_break(std::string("calling ") + var_kind_name(fn->kind));
}

VarPtr Tracer::inline_function(const VarPtr& fnv, std::vector<VarPtr> args, KwArgs kwargs) {
  auto* fn = as<FunctionVar>(fnv);
  switch (fn->real ? higher_order_op(fn->real.get()) : HigherOrderOp::None) {
    case HigherOrderOp::Cond: return call_cond(std::move(args), std::move(kwargs));
    case HigherOrderOp::WhileLoop: return call_while_loop(std::move(args), std::move(kwargs));
    case HigherOrderOp::ForiLoop: return call_fori_loop(std::move(args), std::move(kwargs));
    case HigherOrderOp::Scan: return call_scan(std::move(args), std::move(kwargs));
    case HigherOrderOp::Map: return call_map(std::move(args), std::move(kwargs));
    case HigherOrderOp::AssociativeScan: return call_associative_scan(std::move(args), std::move(kwargs));
    case HigherOrderOp::None: break;
  }
  auto* code = reinterpret_cast<PyCodeObject*>(fn->code.get());
  std::string name = str_of(fn->qualname.get());
  BREAK_IF(depth_ >= cfg_.max_inline_depth, BreakKind::Limit,
           "call depth limit reached inlining " + name);
  // Library functions (NumPy's Python layer, the standard library, site-packages) are not traced
  // into: either an op table knows them or they run in CPython. torch.nn's modules are the
  // exception: their forward methods and containers are model code (Note [Torch modules]).
  if (fn->real) {
    PyObject* mod = PyFunction_GET_MODULE(fn->real.get());  // borrowed, may be null
    std::string module = mod && PyUnicode_Check(mod) ? str_of(mod) : "";
    // torch's grad-mode decorators make a fresh manager per call with clone(), which is
    // self.__class__(...): a manager the trace then enters (Note [Grad-mode blocks]).
    const bool grad_clone = (module == "torch.autograd.grad_mode" || module == "torch.utils._contextlib") &&
                            name.size() > 6 && name.compare(name.size() - 6, 6, ".clone") == 0;
    const bool model_code = module.rfind("torch.nn.modules.", 0) == 0 || grad_clone;
    BREAK_IF(!model_code && (is_library_code(code) || module == "numpy" || module.rfind("numpy.", 0) == 0),
             (module.empty() ? "" : module + ".") + name + " is not supported by framejit yet");
  }
  BREAK_IF(code->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE),
           "calling generator or coroutine function " + name);
  // A loop that ran the trace out of budget twice is not traced a third time (Note [Remembered
  // failures]): break at the call, before its trip count is specialized.
  BREAK_IF(cfg_.gave_up_loop && cfg_.gave_up_loop(code), BreakKind::Limit,
           name + " ran the trace out of instructions before; it runs in CPython");

  TraceFrame f;
  f.code = code;
  f.globals = fn->globals;
  f.builtins = fn->real ? OwnedRef::borrow(reinterpret_cast<PyFunctionObject*>(fn->real.get())->func_builtins)
                        : (current_ ? current_->builtins : OwnedRef());
  f.globals_base = fn->real ? fn->source : fn->globals_base;
  f.locals.resize(code->co_nlocalsplus);

  // Python's argument binding: positionals, keywords, *args, **kwargs, then defaults.
  int argcount = code->co_argcount, posonly = code->co_posonlyargcount;
  int kwonly = code->co_kwonlyargcount;
  bool has_varargs = code->co_flags & CO_VARARGS, has_varkw = code->co_flags & CO_VARKEYWORDS;
  int nparams = argcount + kwonly;
  int slot_varargs = has_varargs ? nparams : -1;
  int slot_varkw = has_varkw ? nparams + (has_varargs ? 1 : 0) : -1;

  size_t npos = std::min<size_t>(args.size(), argcount);
  for (size_t i = 0; i < npos; ++i) f.locals[i] = args[i];
  if (args.size() > static_cast<size_t>(argcount)) {
    BREAK_IF(!has_varargs, Raises{PyExc_TypeError},
             name + "() takes " + std::to_string(argcount) + " positional arguments but " +
                 std::to_string(args.size()) + " were given");
    f.locals[slot_varargs] = std::make_shared<SeqVar>(
        VarKind::Tuple, std::vector<VarPtr>(args.begin() + argcount, args.end()));
  } else if (has_varargs) {
    f.locals[slot_varargs] = std::make_shared<SeqVar>(VarKind::Tuple, std::vector<VarPtr>{});
  }
  std::shared_ptr<DictVar> extra_kw;
  if (has_varkw) {
    extra_kw = std::make_shared<DictVar>();
    f.locals[slot_varkw] = extra_kw;
  }
  for (auto& [k, v] : kwargs) {
    int found = -1;
    for (int i = posonly; i < nparams; ++i)
      if (str_of(PyTuple_GET_ITEM(code->co_localsplusnames, i)) == k) found = i;
    if (found >= 0) {
      BREAK_IF(f.locals[found] != nullptr, Raises{PyExc_TypeError},
               name + "() got multiple values for argument '" + k + "'");
      f.locals[found] = v;
    } else {
      BREAK_IF(!extra_kw, Raises{PyExc_TypeError},
               name + "() got an unexpected keyword argument '" + k + "'");
      OwnedRef key = OwnedRef::steal(PyUnicode_FromString(k.c_str()));
      extra_kw->items.emplace_back(key, v);
    }
  }
  // Defaults: for a real function, read from its __defaults__/__kwdefaults__ through its source.
  PyObject* real = fn->real.get();
  PyObject* real_defaults = real ? PyFunction_GET_DEFAULTS(real) : nullptr;
  PyObject* real_kwdefaults = real ? PyFunction_GET_KW_DEFAULTS(real) : nullptr;
  int ndefaults = real ? (real_defaults ? static_cast<int>(PyTuple_GET_SIZE(real_defaults)) : 0)
                       : static_cast<int>(fn->defaults.size());
  for (int i = 0; i < argcount; ++i) {
    if (f.locals[i]) continue;
    int d = i - (argcount - ndefaults);
    BREAK_IF(d < 0, Raises{PyExc_TypeError},
             name + "() missing required argument '" +
                 str_of(PyTuple_GET_ITEM(code->co_localsplusnames, i)) + "'");
    if (!real) {
      f.locals[i] = fn->defaults[d];
    } else if (fnv->source) {
      f.locals[i] = wrap(PyTuple_GET_ITEM(real_defaults, d), child_source(SourceKind::FuncDefault, fnv->source, d));
    } else {
      f.locals[i] = wrap_const(PyTuple_GET_ITEM(real_defaults, d));
    }
  }
  for (int i = argcount; i < nparams; ++i) {
    if (f.locals[i]) continue;
    PyObject* pname = PyTuple_GET_ITEM(code->co_localsplusnames, i);
    VarPtr v;
    if (!real) {
      for (auto& [k, dv] : fn->kwdefaults) {
        int eq = PyObject_RichCompareBool(k.get(), pname, Py_EQ);
        if (eq == 1) v = dv;
      }
    } else if (real_kwdefaults) {
      PyObject* dv = PyDict_GetItemWithError(real_kwdefaults, pname);  // borrowed
      if (dv) v = fnv->source ? wrap(dv, child_source(SourceKind::FuncKwDefault, fnv->source, pname)) : wrap_const(dv);
    }
    BREAK_IF(!v, Raises{PyExc_TypeError},
             name + "() missing required keyword-only argument '" + str_of(pname) + "'");
    f.locals[i] = v;
  }
  // Free variables: the last co_nfreevars slots are the function's closure cells.
  int nfree = code->co_nfreevars;
  if (nfree > 0) {
    int first = code->co_nlocalsplus - nfree;
    if (real) {
      BREAK_IF(!fnv->source, "calling a closure whose cells cannot be guarded");
      for (int i = 0; i < nfree; ++i) {
        auto cell = std::make_shared<CellVar>();
        cell->source = child_source(SourceKind::FuncCell, fnv->source, i);
        f.locals[first + i] = cell;
      }
    } else {
      BREAK_IF(static_cast<int>(fn->closure.size()) != nfree, BreakKind::Internal,
               "internal: closure size mismatch");
      for (int i = 0; i < nfree; ++i) f.locals[first + i] = fn->closure[i];
    }
  }

  ++depth_;
  VarPtr r;
  try {
    r = run_frame(f);
  } catch (...) {
    --depth_;
    throw;
  }
  --depth_;
  return r;
}

VarPtr Tracer::call_builtin(const VarPtr& fnv, std::vector<VarPtr> args, KwArgs kwargs) {
  PyObject* fn = as<BuiltinVar>(fnv)->obj.get();
  if (OpTable* table = op_table_owning(fn)) return table->call_function(*this, fn, std::move(args), std::move(kwargs));

  auto is = [&](const char* name) { return fn == builtin(name); };
  auto nargs = args.size();
  if (is("len") && nargs == 1 && kwargs.empty()) {
    const VarPtr& a = args[0];
    if (a->kind == VarKind::Tensor) {
      const jit::TensorMeta& m = meta(a);
      BREAK_IF(m.rank() == 0, Raises{PyExc_TypeError}, "len() of a 0-d array");
      return sym_value(m.shape[0]);
    }
    if (is_seq(a)) return wrap_const(OwnedRef::steal(PyLong_FromSize_t(as<SeqVar>(a)->items.size())).get());
    if (a->kind == VarKind::Dict)
      return wrap_const(OwnedRef::steal(PyLong_FromSize_t(as<DictVar>(a)->items.size())).get());
    if (a->kind == VarKind::Set)
      return wrap_const(OwnedRef::steal(PyLong_FromSsize_t(PySet_GET_SIZE(as<SetVar>(a)->set.get()))).get());
    if (a->kind == VarKind::Object && a->source) {
      // An object whose class defines __len__ in Python (nn.ModuleList, nn.Sequential): inlined, as
      // __getitem__ and __iter__ are.
      PyObject* o = as<ObjectVar>(a)->obj.get();
      static PyObject* len_name = PyUnicode_InternFromString("__len__");  // immortal
      PyObject* len_fn = _PyType_Lookup(Py_TYPE(o), len_name);            // borrowed
      if (len_fn && PyFunction_Check(len_fn)) {
        VarPtr n = call(wrap(len_fn, child_source(SourceKind::TypeAttr, a->source, len_name)), {a}, {});
        BREAK_IF(!as_sym(n), Raises{PyExc_TypeError}, "__len__ returned something other than an int");
        return n;
      }
    }
    if (is_const(a)) {
      // Builtin constants only: their length runs no user code.
      PyObject* c = const_value(a);
      BREAK_IF(!PyUnicode_CheckExact(c) && !PyTuple_CheckExact(c) && !PyBytes_CheckExact(c) && !PyRange_Check(c) &&
                   !PyFrozenSet_CheckExact(c),
               std::string("len() of a ") + Py_TYPE(c)->tp_name);
      return wrap_const(OwnedRef::steal(PyLong_FromSsize_t(PyObject_Length(c))).get());
    }
  }
  if (is("isinstance") && nargs == 2 && kwargs.empty()) {
    OwnedRef cls = python_value(args[1], "isinstance class");
    const VarPtr& a = args[0];
    PyObject* probe = nullptr;  // an object of the same type as the traced value
    OwnedRef holder;
    switch (a->kind) {
      case VarKind::Tensor: {
        const jit::TensorMeta& m = meta(a);
        if (out().array_kind == ArrayKind::Tensor && !m.scalar_object) {
          const int64_t empty = 0;
          holder = OwnedRef::steal(tensor_empty(&empty, 1, m.dtype));
        } else if (out().array_kind == ArrayKind::Torch || out().array_kind == ArrayKind::CuPy) {
          const int64_t empty = 0;
          holder = OwnedRef::steal(array_adapter(out().array_kind)->empty(&empty, 1, m.dtype));
        } else if (const NumPyHandles* np = numpy_handles()) {
          holder = m.scalar_object ? OwnedRef::steal(PyObject_CallMethod(np->dtypes[static_cast<int>(m.dtype)], "type", "i", 0))
                                  : OwnedRef::steal(PyObject_CallFunction(np->empty, "(i)", 0));
        }
        probe = holder.get();
        break;
      }
      case VarKind::Scalar: probe = as<ScalarVar>(a)->hint.get(); break;
      case VarKind::Tuple: holder = OwnedRef::steal(PyTuple_New(0)); probe = holder.get(); break;
      case VarKind::List: holder = OwnedRef::steal(PyList_New(0)); probe = holder.get(); break;
      case VarKind::Dict: holder = OwnedRef::steal(PyDict_New()); probe = holder.get(); break;
      default: holder = python_value(a, "isinstance"); probe = holder.get(); break;
    }
    BREAK_IF(!probe, "isinstance on " + std::string(var_kind_name(a->kind)));
    int r = PyObject_IsInstance(probe, cls.get());
    if (r < 0) python_error_break("isinstance raised ");
    return wrap_const(r ? Py_True : Py_False);
  }
  if ((is("getattr") && (nargs == 2 || nargs == 3)) || (is("hasattr") && nargs == 2)) {
    OwnedRef name = python_value(args[1], "attribute name");
    BREAK_IF(!PyUnicode_Check(name.get()), Raises{PyExc_TypeError},
             "attribute name must be a string");
    try {
      VarPtr r = load_attr(args[0], name.get());
      return is("hasattr") ? wrap_const(Py_True) : r;
    } catch (const GraphBreak& b) {
      // A missing attribute on a value we can see is a fact we can decide; anything else is not.
      if (b.kind != BreakKind::MissingAttribute) throw;
      if (is("hasattr")) return wrap_const(Py_False);
      if (nargs == 3) return args[2];
      throw;
    }
  }
  if (is("iter") && nargs == 1 && kwargs.empty()) {
    if (args[0]->kind == VarKind::Iterator) return args[0];  // iter(it) is it
    return std::make_shared<IteratorVar>(unpack(args[0], "iter()"));
  }
  if (is("range") || is("zip") || is("enumerate") || is("tuple") || is("list")) {
    BREAK_IF(!kwargs.empty() && !is("enumerate"), "keyword arguments to a builtin");
    if (is("range")) {
      if (VarPtr r = pending_range_for(args)) return r;
      OwnedRef pargs = OwnedRef::steal(PyTuple_New(nargs));
      for (size_t i = 0; i < nargs; ++i)
        PyTuple_SET_ITEM(pargs.get(), i, python_value(args[i], "range() bound").release());
      OwnedRef r = OwnedRef::steal(PyObject_Call(fn, pargs.get(), nullptr));
      if (!r) python_error_break("range() raised ");
      return wrap_const(r.get());
    }
    if (is("tuple") || is("list")) {
      std::vector<VarPtr> items = nargs ? unpack(args[0], std::string(is("tuple") ? "tuple" : "list") + "()")
                                        : std::vector<VarPtr>{};
      return std::make_shared<SeqVar>(is("tuple") ? VarKind::Tuple : VarKind::List, std::move(items));
    }
    if (is("zip")) {
      std::vector<std::vector<VarPtr>> cols;
      size_t n = SIZE_MAX;
      for (auto& a : args) {
        cols.push_back(unpack(a, "zip()"));
        n = std::min(n, cols.back().size());
      }
      if (args.empty()) n = 0;
      std::vector<VarPtr> rows;
      for (size_t i = 0; i < n; ++i) {
        std::vector<VarPtr> row;
        for (auto& c : cols) row.push_back(c[i]);
        rows.push_back(std::make_shared<SeqVar>(VarKind::Tuple, std::move(row)));
      }
      return std::make_shared<IteratorVar>(std::move(rows));
    }
    // enumerate(iterable, start=0)
    BREAK_IF(nargs < 1 || nargs > 2, "enumerate() arguments");
    int64_t start = nargs == 2 ? to_int(args[1], "enumerate start") : 0;
    for (auto& [k, v] : kwargs) {
      BREAK_IF(k != "start", "enumerate() keyword " + k);
      start = to_int(v, "enumerate start");
    }
    std::vector<VarPtr> rows;
    int64_t i = start;
    for (auto& x : unpack(args[0], "enumerate()")) {
      OwnedRef idx = OwnedRef::steal(PyLong_FromLongLong(i++));
      rows.push_back(std::make_shared<SeqVar>(VarKind::Tuple, std::vector<VarPtr>{wrap_const(idx.get()), x}));
    }
    return std::make_shared<IteratorVar>(std::move(rows));
  }
  if ((is("min") || is("max") || is("sum")) && kwargs.empty()) {
    std::vector<VarPtr> items = nargs == 1 ? unpack(args[0], "min/max/sum") : args;
    bool any_tensor = false;
    for (auto& x : items) any_tensor |= x->kind == VarKind::Tensor;
    if (is("sum") && (any_tensor || nargs == 1)) {
      // sum(xs) is 0 + xs[0] + xs[1] + ..., whatever the items are.
      VarPtr acc = nargs == 2 ? args[1] : wrap_const(OwnedRef::steal(PyLong_FromLong(0)).get());
      if (nargs == 2) items = unpack(args[0], "sum()");
      for (auto& x : items) acc = binary_op(*this, 0 /* NB_ADD */, acc, x);
      return acc;
    }
    BREAK_IF(any_tensor, BreakKind::DataDependent,
             "builtin min/max over arrays (the truth value of an array comparison)");
    // Sizes keep their symbols when the answer is decidable from guards.
    bool all_sym = !items.empty();
    for (auto& x : items) all_sym &= as_sym(x).has_value();
    if (all_sym && items.size() >= 1) {
      VarPtr best = items[0];
      for (size_t i = 1; i < items.size(); ++i) {
        VarPtr better = compare_op(*this, is("min") ? Py_LT : Py_GT, items[i], best);
        if (truth(better, "min/max")) best = items[i];
      }
      return best;
    }
  }
  std::string mod = module_of(fn);
  // operator.index (nn.ModuleList's indexing, range arithmetic): ints and sizes are their own index.
  const bool index_fn = mod == "_operator" && PyCFunction_Check(fn) &&
                        std::string_view(reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name) == "index";
  if (index_fn && nargs == 1 && kwargs.empty()) {
    const VarPtr& a = args[0];
    if ((a->kind == VarKind::Scalar && PyLong_CheckExact(as<ScalarVar>(a)->hint.get())) ||
        (a->kind == VarKind::Const && PyLong_CheckExact(const_value(a))))
      return a;
  }
  // Pure builtins on constants (abs, int, float, bool, round, divmod, pow, math.*): run them.
  bool pure = mod == "math" || is("abs") || is("int") || is("float") || is("bool") || is("round") ||
              is("divmod") || is("pow") || is("min") || is("max") || is("str") || is("sum") ||
              is("sorted") || is("reversed") || is("repr") || is("type") || is("callable") ||
              is("slice") || is("dict") || is("any") || is("all") || index_fn;
  BREAK_IF(!pure, std::string("calling builtin ") +
                      (PyCFunction_Check(fn) ? reinterpret_cast<PyCFunctionObject*>(fn)->m_ml->ml_name
                                             : Py_TYPE(fn)->tp_name));
  if (is("type") && nargs == 1) {
    if (args[0]->kind == VarKind::Object) return wrap_const(reinterpret_cast<PyObject*>(Py_TYPE(as<ObjectVar>(args[0])->obj.get())));
  }
  if ((is("abs") || is("float") || is("int") || is("bool")) && nargs == 1 && kwargs.empty()) {
    if (args[0]->kind == VarKind::Tensor) {
      BREAK_IF(!is("abs"), BreakKind::DataDependent,
               "converting an array to a Python number needs its data");
      return array_ops().unary(*this, "abs", args[0]);
    }
    // abs() of a size falls through to specialization below (rare).
  }
  if (is("dict") && nargs == 0) {
    auto d = std::make_shared<DictVar>();
    for (auto& [k, v] : kwargs) d->items.emplace_back(OwnedRef::steal(PyUnicode_FromString(k.c_str())), v);
    return d;
  }
  if (is("reversed") && nargs == 1) {
    std::vector<VarPtr> items = unpack(args[0], "reversed()");
    std::reverse(items.begin(), items.end());
    return std::make_shared<IteratorVar>(std::move(items));
  }
  // Float scalars that only feed array math stay run-time values through float()/abs().
  if ((is("float") || is("abs")) && nargs == 1 && args[0]->kind == VarKind::Scalar &&
      PyFloat_CheckExact(as<ScalarVar>(args[0])->hint.get()) && kwargs.empty()) {
    auto* s = as<ScalarVar>(args[0]);
    OwnedRef r = OwnedRef::steal(PyObject_CallOneArg(fn, s->hint.get()));
    if (!r) python_error_break();
    // (A loop-carried number passes its mark on: its hint is no value to decide on, Note
    // [Loop-carried numbers].)
    auto deps = s->source || s->loop_carried
                    ? std::vector<std::shared_ptr<ScalarVar>>{std::static_pointer_cast<ScalarVar>(args[0])}
                    : s->deps;
    return add_scalar(is("float") ? "builtins.float" : "builtins.abs", {to_arg(args[0])}, r.get(), std::nullopt, deps);
  }
  OwnedRef pargs = OwnedRef::steal(PyTuple_New(nargs));
  for (size_t i = 0; i < nargs; ++i) {
    BREAK_IF(args[i]->kind == VarKind::Tensor, "passing an array to a Python builtin");
    PyTuple_SET_ITEM(pargs.get(), i, python_value(args[i], "builtin argument").release());
  }
  OwnedRef pkw;
  if (!kwargs.empty()) {
    pkw = OwnedRef::steal(PyDict_New());
    for (auto& [k, v] : kwargs) PyDict_SetItemString(pkw.get(), k.c_str(), python_value(v, "builtin argument").get());
  }
  OwnedRef r = OwnedRef::steal(PyObject_Call(fn, pargs.get(), pkw.get()));
  if (!r) python_error_break("Python raised ");
  if (PyIter_Check(r.get()) && !PyUnicode_Check(r.get())) {
    std::vector<VarPtr> items;
    while (OwnedRef x = OwnedRef::steal(PyIter_Next(r.get()))) items.push_back(wrap_const(x.get()));
    return std::make_shared<IteratorVar>(std::move(items));
  }
  return wrap_const(r.get());
}

VarPtr Tracer::load_attr(const VarPtr& obj, PyObject* name) {
  std::string n = str_of(name);
  switch (obj->kind) {
    case VarKind::Tensor: return array_ops().attr(*this, obj, n);
    case VarKind::Module: {
      PyObject* mod = as<ModuleVar>(obj)->module.get();
      PyObject* v = PyDict_GetItemWithError(PyModule_GetDict(mod), name);  // borrowed
      if (!v) {
        PyErr_Clear();
        // A module subclass whose class forwards attributes (torch._VF to torch._C's functions): a
        // builtin function it answers with is a constant, as the function objects of a C extension
        // do not change.
        if (Py_TYPE(mod) != &PyModule_Type) {
          static PyObject* getattr_name = PyUnicode_InternFromString("__getattr__");  // immortal
          if (_PyType_Lookup(Py_TYPE(mod), getattr_name)) {
            OwnedRef r = OwnedRef::steal(PyObject_GetAttr(mod, name));
            if (r && PyCFunction_Check(r.get())) return std::make_shared<BuiltinVar>(std::move(r));
            PyErr_Clear();
          }
        }
        // A module __getattr__ (PEP 562) may still answer: only without one is the name missing.
        BreakKind kind = PyDict_GetItemString(PyModule_GetDict(mod), "__getattr__")
                             ? BreakKind::Unsupported
                             : BreakKind::MissingAttribute;
        graph_break(kind, "module '" +
                              std::string(PyModule_GetName(mod) ? PyModule_GetName(mod) : "?") +
                              "' has no attribute '" + n + "' in its __dict__");
      }
      return wrap(v, child_source(SourceKind::ModuleAttr, obj->source, name));
    }
    case VarKind::Object: {
      if (VarPtr w = attr_written(obj, name)) return w;  // Note [Side effects]
      if (VarPtr r = tables_object_attr(*this, obj, n)) return r;  // an nn.Module's parameters ...
      PyObject* o = as<ObjectVar>(obj)->obj.get();
      PyObject* type_attr = _PyType_Lookup(Py_TYPE(o), name);  // borrowed
      // A graph input's methods (a random generator's draws) are the op table's to capture.
      if (as<ObjectVar>(obj)->node >= 0 && type_attr && PyObject_TypeCheck(type_attr, &PyMethodDescr_Type))
        return std::make_shared<AttrMethodVar>(obj, n);
      // obj.__class__: the type its guard (or its making, in the trace) pins.
      if (n == "__class__" && obj->source)
        return std::make_shared<ObjectVar>(VarKind::Class, OwnedRef::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o))));
      // Data descriptors (properties, __slots__) take precedence and run code: not traced yet.
      BREAK_IF(type_attr && Py_TYPE(type_attr)->tp_descr_set,
               "attribute '" + n + "' is a property or slot of " + Py_TYPE(o)->tp_name);
      PyObject** dictptr = _PyObject_GetDictPtr(o);
      if (dictptr && *dictptr) {
        PyObject* v = PyDict_GetItemWithError(*dictptr, name);  // borrowed
        if (v) return wrap(v, child_source(SourceKind::InstanceAttr, obj->source, name));
        PyErr_Clear();
      }
      if (type_attr) {
        SourcePtr src = child_source(SourceKind::TypeAttr, obj->source, name);
        if (obj->source) out_.guards.add_no_instance_attr(obj->source, name);
        if (PyFunction_Check(type_attr)) return std::make_shared<MethodVar>(obj, wrap(type_attr, src));
        BREAK_IF(Py_TYPE(type_attr)->tp_descr_get && !PyType_Check(type_attr) &&
                     Py_TYPE(type_attr) != &PyStaticMethod_Type,
                 "attribute '" + n + "' of " + Py_TYPE(o)->tp_name + " is a descriptor");
        if (Py_TYPE(type_attr) == &PyStaticMethod_Type) {
          PyObject* f = PyObject_GetAttrString(type_attr, "__func__");  // new ref
          add_identity_guard(src, type_attr);
          VarPtr fv = wrap_function_unsourced(f);
          Py_XDECREF(f);
          return fv;
        }
        return wrap(type_attr, src);
      }
      // Past the instance dict and the type, only a __getattr__ could still answer.
      graph_break(Py_TYPE(o)->tp_getattro == PyObject_GenericGetAttr ? BreakKind::MissingAttribute
                                                                     : BreakKind::Unsupported,
                  std::string("'") + Py_TYPE(o)->tp_name + "' object has no attribute '" + n + "'");
    }
    case VarKind::Class: {
      if (VarPtr w = attr_written(obj, name)) return w;  // Note [Side effects]
      PyObject* cls = as<ObjectVar>(obj)->obj.get();
      PyObject* v = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(cls), name);  // borrowed
      BREAK_IF(!v, BreakKind::MissingAttribute,
               std::string("type object '") + reinterpret_cast<PyTypeObject*>(cls)->tp_name +
                   "' has no attribute '" + n + "'");
      BREAK_IF(Py_TYPE(v)->tp_descr_get && !PyFunction_Check(v) && !PyType_Check(v),
               "class attribute '" + n + "' is a descriptor");
      return wrap(v, child_source(SourceKind::TypeAttr, obj->source, name));
    }
    case VarKind::Tuple:
      for (size_t i = 0; i < as<SeqVar>(obj)->field_names.size(); ++i)  // a named tuple's field
        if (as<SeqVar>(obj)->field_names[i] == n) return as<SeqVar>(obj)->items[i];
      return std::make_shared<AttrMethodVar>(obj, n);
    case VarKind::List:
    case VarKind::Dict: return std::make_shared<AttrMethodVar>(obj, n);
    case VarKind::Super: return super_attr(as<SuperVar>(obj)->cls, as<SuperVar>(obj)->self, name);
    case VarKind::Const: {
      PyObject* c = const_value(obj);
      OwnedRef v = OwnedRef::steal(PyObject_GetAttr(c, name));
      if (!v)
        missing_attribute_break("'" + std::string(Py_TYPE(c)->tp_name) +
                                "' object has no attribute '" + n + "'");
      if (PyCFunction_Check(v.get()) || Py_TYPE(v.get()) == &PyMethodDescr_Type ||
          PyObject_HasAttrString(v.get(), "__self__") == 1)
        return std::make_shared<AttrMethodVar>(obj, n);
      return wrap_const(v.get());
    }
    case VarKind::Builtin: {
      // e.g. numpy.float32.__name__ or a ufunc's attributes: read-only facts of a guarded object
      PyObject* b = as<BuiltinVar>(obj)->obj.get();
      OwnedRef v = OwnedRef::steal(PyObject_GetAttr(b, name));
      if (!v)
        missing_attribute_break("'" + std::string(Py_TYPE(b)->tp_name) +
                                "' object has no attribute '" + n + "'");
      // A method an op table captures (numpy.add.outer): the guarded builtin fixes which one it is.
      if (op_table_owning(v.get())) return std::make_shared<BuiltinVar>(std::move(v));
      if (PyCallable_Check(v.get())) {
        // In the user's terms: "numpy.add.at", not "attribute at of a builtin".
        OwnedRef owner = OwnedRef::steal(PyObject_GetAttrString(b, "__name__"));
        if (!owner) PyErr_Clear();
        std::string qual = owner && PyUnicode_Check(owner.get()) ? str_of(owner.get()) + "." + n : n;
        if (op_table_owning(b)) qual = "numpy." + qual;
        graph_break(qual + " is not supported by framejit yet");
      }
      return wrap_const(v.get());
    }
    case VarKind::Scalar: {
      PyObject* h = as<ScalarVar>(obj)->hint.get();
      if (n == "real" && !PyFloat_Check(h)) return obj;
      if (n == "real") return obj;
      break;
    }
    default: break;
  }
  graph_break("attribute '" + n + "' of " + var_kind_name(obj->kind));
}

VarPtr Tracer::super_attr(const VarPtr& cls, const VarPtr& self, PyObject* name) {
  std::string n = str_of(name);
  BREAK_IF(cls->kind != VarKind::Class, "super() whose class is " + std::string(var_kind_name(cls->kind)));
  BREAK_IF(self->kind != VarKind::Object || !self->source,
           "super() of " + std::string(var_kind_name(self->kind)) + " (only methods of objects the function received)");
  PyObject* start = as<ObjectVar>(cls)->obj.get();  // borrowed
  PyObject* obj = as<ObjectVar>(self)->obj.get();    // borrowed
  BREAK_IF(!PyType_IsSubtype(Py_TYPE(obj), reinterpret_cast<PyTypeObject*>(start)),
           "super(type, obj): obj is not an instance of type");
  PyObject* v = super_lookup(Py_TYPE(obj), start, name);  // borrowed
  BREAK_IF(!v, BreakKind::MissingAttribute, "'super' object has no attribute '" + n + "'");
  BREAK_IF(!PyFunction_Check(v), "super()." + n + " is a " + Py_TYPE(v)->tp_name + ", not a Python function");
  // The guard re-runs the lookup from self's type (itself guarded) and checks it finds this very
  // function, so a class attribute assigned later recompiles.
  OwnedRef key = OwnedRef::steal(PyTuple_Pack(2, start, name));  // new ref
  return std::make_shared<MethodVar>(self, wrap(v, child_source(SourceKind::SuperAttr, self->source, key.get())));
}

VarPtr Tracer::get_item(const VarPtr& obj, const VarPtr& index) {
  switch (obj->kind) {
    case VarKind::Tensor: return array_ops().getitem(*this, obj, index);
    case VarKind::Tuple:
    case VarKind::List: {
      auto& items = as<SeqVar>(obj)->items;
      OwnedRef idx = python_value(index, "sequence index");
      if (PySlice_Check(idx.get())) {
        Py_ssize_t start, stop, step, len;
        if (PySlice_GetIndicesEx(idx.get(), items.size(), &start, &stop, &step, &len) < 0)
          python_error_break();
        std::vector<VarPtr> out;
        for (Py_ssize_t i = 0, j = start; i < len; ++i, j += step) out.push_back(items[j]);
        return std::make_shared<SeqVar>(obj->kind, std::move(out));
      }
      Py_ssize_t i = PyNumber_AsSsize_t(idx.get(), PyExc_IndexError);
      if (i == -1 && PyErr_Occurred()) python_error_break();
      Py_ssize_t n = static_cast<Py_ssize_t>(items.size());
      if (i < 0) i += n;
      BREAK_IF(i < 0 || i >= n, Raises{PyExc_IndexError},
               std::string(obj->kind == VarKind::Tuple ? "tuple" : "list") + " index out of range");
      return items[i];
    }
    case VarKind::Dict: {
      OwnedRef key = python_value(index, "dict key");
      for (auto& [k, v] : as<DictVar>(obj)->items) {
        int eq = PyObject_RichCompareBool(k.get(), key.get(), Py_EQ);
        if (eq < 0) PyErr_Clear();
        if (eq == 1) return v;
      }
      graph_break(Raises{PyExc_KeyError}, "KeyError in a dict lookup");
    }
    case VarKind::Builtin: {
      // A library object indexed with slices (numpy.mgrid[...]): its table traces the result.
      PyObject* b = as<BuiltinVar>(obj)->obj.get();  // borrowed
      if (OpTable* table = op_table_owning(b))
        if (VarPtr r = table->object_getitem(*this, b, index)) return r;
      break;
    }
    case VarKind::Const: {
      OwnedRef key = python_value(index, "index");
      OwnedRef r = OwnedRef::steal(PyObject_GetItem(const_value(obj), key.get()));
      if (!r) python_error_break("indexing a constant raised ");
      return wrap_const(r.get());
    }
    case VarKind::Object: {
      // An object whose class defines __getitem__ in Python (nn.ModuleDict, nn.ModuleList): inlined.
      PyObject* o = as<ObjectVar>(obj)->obj.get();
      OwnedRef name = OwnedRef::steal(PyUnicode_FromString("__getitem__"));
      PyObject* fn = name ? _PyType_Lookup(Py_TYPE(o), name.get()) : nullptr;  // borrowed
      if (!fn || !PyFunction_Check(fn) || !obj->source) break;
      return call(wrap(fn, child_source(SourceKind::TypeAttr, obj->source, name.get())), {obj, index}, {});
    }
    default: break;
  }
  graph_break(std::string("indexing ") + var_kind_name(obj->kind));
}

}  // namespace framejit::frontend
