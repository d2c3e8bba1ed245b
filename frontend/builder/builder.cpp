// builder.cpp — VariableBuilder: wraps a real value read from the frame into a traced value,
// recording its Source and installing exactly the guards that make the trace valid for it.
#include <Python.h>

#include <cctype>

#include "frontend/interop/array_adapter.h"
#include "frontend/hook/eval_frame.h"
#include "frontend/interop/numpy_abi.h"
#include "frontend/interop/cupy_array.h"
#include "frontend/interop/torch_array.h"
#include "frontend/trace/op_table.h"
#include "frontend/cpython/python_env.h"
#include "frontend/tensor/object.h"
#include "frontend/trace/tracer.h"

namespace framejit::frontend {

namespace {

std::string device_label(rt::Device d) {
  return d.type == rt::DeviceType::CPU ? "cpu" : "cuda:" + std::to_string(d.index);
}

// A readable placeholder name from a source: L['self'].w -> self_w, L['xs'][0] -> xs_0.
std::string name_from_source(const Source& s) {
  std::string text = s.to_string();
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text.compare(i, 2, "L[") == 0 || text.compare(i, 2, "G[") == 0 || text.compare(i, 2, "C[") == 0) {
      ++i;
      continue;
    }
    char c = text[i];
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_')
      out += c;
    else if (!out.empty() && out.back() != '_')
      out += '_';
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0]))) out = "arg_" + out;
  return out;
}

// numpy.random.Generator or numpy.random.RandomState, exactly (a subclass may draw otherwise).
bool is_random_generator(PyTypeObject* type) {
  static PyObject* kinds[2] = {nullptr, nullptr};  // strong refs, kept for the process
  if (!kinds[0]) {
    OwnedRef mod = OwnedRef::steal(PyImport_ImportModule("numpy.random"));  // new ref
    if (!mod) {
      PyErr_Clear();
      return false;
    }
    kinds[0] = PyObject_GetAttrString(mod.get(), "Generator");
    kinds[1] = PyObject_GetAttrString(mod.get(), "RandomState");
    if (!kinds[0] || !kinds[1]) {
      PyErr_Clear();
      Py_CLEAR(kinds[0]);
      Py_CLEAR(kinds[1]);
      return false;
    }
  }
  PyObject* t = reinterpret_cast<PyObject*>(type);
  return t == kinds[0] || t == kinds[1];
}

bool is_ordered_dict(PyTypeObject* type) {
  static PyObject* ordered = nullptr;  // collections.OrderedDict, kept for the process
  if (!ordered) {
    OwnedRef mod = OwnedRef::steal(PyImport_ImportModule("collections"));
    ordered = mod ? PyObject_GetAttrString(mod.get(), "OrderedDict") : nullptr;
    if (!ordered) {
      PyErr_Clear();
      return false;
    }
  }
  return reinterpret_cast<PyObject*>(type) == ordered;
}

bool is_builtin_type(PyObject* o) {
  static const char* kNames[] = {"int",   "float",  "bool",  "tuple",    "list",  "dict",
                                 "range", "zip",    "enumerate", "str",   "slice", "type",
                                 "object", "reversed", "sorted", "complex", "bytes", "frozenset"};
  PyObject* builtins = python_env().builtins;
  for (const char* n : kNames) {
    PyObject* t = PyObject_GetAttrString(builtins, n);  // new ref
    Py_XDECREF(t);
    if (t == o) return true;
  }
  return false;
}

}  // namespace

VarPtr Tracer::wrap_const(PyObject* value) { return make_const(OwnedRef::borrow(value)); }

VarPtr Tracer::wrap_function_unsourced(PyObject* fn) {
  BREAK_IF(!fn || !PyFunction_Check(fn), "a staticmethod that is not a Python function");
  auto f = std::make_shared<FunctionVar>();
  auto* pf = reinterpret_cast<PyFunctionObject*>(fn);
  f->code = OwnedRef::borrow(pf->func_code);
  f->globals = OwnedRef::borrow(pf->func_globals);
  f->qualname = OwnedRef::borrow(pf->func_qualname);
  f->real = OwnedRef::borrow(fn);
  return f;
}

VarPtr Tracer::wrap(PyObject* value, const SourcePtr& src) {
  std::string key = src->to_string();
  auto it = wrapped_.find(key);
  if (it != wrapped_.end()) return it->second;

  GuardSet& g = out_.guards;
  const NumPyHandles* np = numpy_handles();
  VarPtr v;
  PyTypeObject* type = Py_TYPE(value);

  const bool is_fj_tensor = is_tensor(value);
  const bool is_torch = !is_fj_tensor && is_torch_tensor(value);
  const bool is_cupy = !is_fj_tensor && !is_torch && is_cupy_array(value);
  const bool is_lib = is_torch || is_cupy;  // read through the library's adapter
  ArrayFields lib_fields;
  bool torch_requires_grad = false;
  if (is_torch) {
    // Note [Torch values]
    // A torch tensor is a graph input like an ndarray, guarded on its exact type (torch.Tensor or
    // nn.Parameter), dtype, rank, sizes (0/1 static, others symbolic), contiguity and
    // requires_grad; only CPU tensors of the strided layout are arrays (torch_tensor_facts says). A
    // tensor that requires grad while grad mode is on would need autograd through the graph,
    // which framejit does not build yet: the statement that reads it runs in CPython (with torch's
    // autograd), so .backward() keeps working.
    const std::optional<TorchTensorFacts> facts = torch_tensor_facts(value);
    BREAK_IF(!facts, std::string("a torch tensor that is not a CPU or CUDA tensor of a dtype framejit has (") + key + ")");
    lib_fields = facts->fields;
    torch_requires_grad = facts->requires_grad;
    // Under no_grad or inference_mode it is an input like any other (a model's parameters): its
    // guard holds requires_grad and the caller's grad mode. The mode is the trace's, which a
    // traced `with torch.no_grad():` turns off (Note [Grad-mode blocks]).
    BREAK_IF(torch_requires_grad && grad_enabled_,
             "autograd: " + key + " requires grad under grad mode (framejit does not build backward graphs yet; "
             "the statement runs in CPython with torch's autograd)");
  }
  if (is_cupy) {
    // Note [CuPy values]: a cupy.ndarray is a graph input like a torch CUDA tensor, guarded on its
    // exact type, dtype, rank, sizes, contiguity and device.
    lib_fields = array_adapter(ArrayKind::CuPy)->fields(value);
    BREAK_IF(!lib_fields.ok, std::string("a CuPy array of a dtype framejit does not have (") + key + ")");
  }
  if (is_fj_tensor || is_lib || (np && (type == np->ndarray || PyObject_TypeCheck(value, np->generic)))) {
    bool is_array = is_fj_tensor || is_lib || type == np->ndarray;
    std::optional<rt::DType> dt;
    if (is_fj_tensor) {
      dt = as_tensor(value)->dtype;
    } else if (is_lib) {
      dt = lib_fields.dtype;
    } else if (is_array) {
      dt = dtype_from_descr(as_ndarray(value)->descr);
    } else {
      dt = numpy_scalar_dtype(np, type);
    }
    BREAK_IF(!is_fj_tensor && !is_lib && PyObject_TypeCheck(value, np->ndarray) && !is_array,
             std::string("ndarray subclass ") + type->tp_name + " is not supported");
    BREAK_IF(!dt, std::string("arrays of this dtype (") + type->tp_name +
                      (is_array && !is_fj_tensor && !is_lib ? ", dtype number " + std::to_string(descr_of(value)->type_num) : "") +
                      ") are not supported");
    // Note [NumPy scalars in CuPy graphs]
    // CuPy code takes NumPy scalars as arguments (alpha * A with alpha a numpy.float64), and CuPy
    // 13+ treats them as NumPy 2 does: strongly typed 0-d operands. A NumPy scalar is therefore
    // an input of a CuPy graph on its device too: it claims no device, and its array kind (NumPy)
    // only provisionally, until a CuPy array claims the graph (claim_array_kind). Its program
    // copies the scalar's bytes to the device once per run (Note [Host scalars on a device] in
    // frontend/program/run_program.cpp). Arithmetic on NumPy scalars alone stays NumPy's, on the
    // host: in a CuPy graph it breaks (ops/cupy), and before the first CuPy array it keeps the
    // graph a NumPy one.
    const bool numpy_scalar = !is_fj_tensor && !is_lib && type != np->ndarray;
    // Note [One array kind per graph]
    // A graph computes on NumPy arrays or on framejit.Tensors: its program allocates every result
    // as one kind (Note [Program array kind]). Where both meet, the graph breaks and CPython runs
    // the mix, where a Tensor operator takes the NumPy array as a Tensor view.
    const ArrayKind kind = is_fj_tensor ? ArrayKind::Tensor
                           : is_torch   ? ArrayKind::Torch
                           : is_cupy    ? ArrayKind::CuPy
                                        : ArrayKind::NumPy;
    if (numpy_scalar && (out_.array_kind == ArrayKind::CuPy || out_.array_kind == ArrayKind::NumPy)) {
      // An operand of CuPy's operations (above), or of NumPy's.
    } else if (numpy_scalar && out_.array_kind == ArrayKind::None) {
      out_.array_kind = ArrayKind::NumPy;
      out_.kind_from_scalars = true;
    } else {
      const std::string refused = out_.claim_array_kind(kind);
      BREAK_IF(!refused.empty(), refused + " (" + key + ")");
    }
    // Note [One device per graph]
    // A graph runs on one device, its inputs': the backend follows it (x86 for host arrays, the
    // CUDA backend for device tensors). Tensors on two devices in one graph break it, and the op
    // that mixes them raises as torch's does when CPython runs it. (Checked after the kind: a
    // graph of NumPy scalars that breaks where a CuPy array comes stays on the host.)
    const rt::Device device = is_fj_tensor ? as_tensor(value)->device : is_lib ? lib_fields.device : rt::Device{};
    if (!numpy_scalar) {
      BREAK_IF(out_.has_device && !(out_.device == device), "arrays on " + device_label(out_.device) + " and " +
                                                                 device_label(device) + " in one graph (" + key + ")");
      out_.has_device = true;
      out_.device = device;
    }
    jit::TensorMeta m;
    m.dtype = *dt;
    m.device = device;
    TensorGuard tg;
    tg.device = device;
    tg.kind = is_fj_tensor ? TensorGuard::Kind::Tensor
              : is_torch   ? TensorGuard::Kind::Torch
              : is_cupy    ? TensorGuard::Kind::CuPy
              : is_array   ? TensorGuard::Kind::NdArray
                           : TensorGuard::Kind::NumPyScalar;
    tg.type = type;
    tg.requires_grad = torch_requires_grad;
    tg.grad_enabled = torch_requires_grad && torch_grad_enabled();  // the caller's mode
    int node = static_cast<int>(out_.root_graph().nodes().size());  // the placeholder add_input appends
    if (torch_requires_grad) out_.requires_grad_inputs.push_back(node);
    if (is_array) {
      ArrayFields a = is_lib ? lib_fields : array_fields(value);
      tg.type_num = is_fj_tensor || is_lib ? static_cast<int>(*dt) : descr_of(value)->type_num;
      tg.ndim = a.nd;
      tg.c_contiguous = is_fj_tensor ? (as_tensor(value)->flags & kTensorCContiguous) != 0
                        : is_lib     ? fields_c_contiguous(a)
                                     : (as_ndarray(value)->flags & kNpyCContiguous) != 0;
      m.layout = tg.c_contiguous ? jit::Layout::Contiguous : jit::Layout::Strided;
      // Note [Held array sizes]
      // Arrays the caller passes in get symbolic sizes. Arrays held by objects, globals and
      // closures (weights) keep their sizes while those stay put: static sizes spare guards and
      // let kernels specialize. The code remembers the sizes it saw of each such source; a dim
      // that ever changed is symbolic from the next trace on, so a global grid that grows costs
      // one recompile, not one per size (until the recompile limit sends the code to CPython).
      bool from_args = true;
      for (const Source* s = src.get(); s; s = s->base.get())
        from_args &= s->kind == SourceKind::Local || s->kind == SourceKind::SeqItem || s->kind == SourceKind::DictItem;
      std::vector<int64_t>* held = nullptr;
      if (!from_args && cfg_.held_sizes) {
        auto [it, fresh] = cfg_.held_sizes->try_emplace(key, a.dims, a.dims + a.nd);
        if (!fresh && it->second.size() != static_cast<size_t>(a.nd)) it->second.assign(a.dims, a.dims + a.nd);
        held = &it->second;
      }
      for (int d = 0; d < a.nd; ++d) {
        int64_t n = a.dims[d];
        bool varies = false;
        if (held) {
          int64_t& seen = (*held)[static_cast<size_t>(d)];
          if (seen != n) seen = -1;
          varies = seen == -1;
        }
        if (!cfg_.dynamic || (!from_args && !varies) || n == 0 || n == 1) {
          tg.sizes.push_back(n);
          tg.symbols.push_back(-1);
          m.shape.emplace_back(n);
        } else {
          int id = out_.new_symbol(node, d, n, key + ".shape[" + std::to_string(d) + "]");
          tg.sizes.push_back(TensorGuard::kSymbolic);
          tg.symbols.push_back(id);
          m.shape.push_back(jit::SymInt::symbol(id));
        }
      }
    } else {
      m.scalar_object = true;
    }
    g.add_tensor(src, std::move(tg));
    out_.add_input(src, name_from_source(*src), std::move(m));
    auto t = std::make_shared<TensorVar>(node);
    t->scope = 0;  // an input of the frame's graph, wherever it was first read
    v = std::move(t);
  } else if (value == Py_None || value == Py_Ellipsis || type == &PyBool_Type) {
    g.add_identity(src, value);
    v = make_const(OwnedRef::borrow(value));
  } else if (type == &PyLong_Type || type == &PyFloat_Type) {
    // A module's numbers (np.pi, math.e) are its constants: baked in, so NumPy sees their values
    // (np.sqrt(2 / np.pi) folds to a constant), and guarded like any constant.
    int overflow = 0;
    if (type == &PyLong_Type) PyLong_AsLongLongAndOverflow(value, &overflow);
    if (!cfg_.dynamic || src->kind == SourceKind::ModuleAttr || overflow) {
      // (An int beyond int64 is a constant too: the program reads its numbers as int64, and
      // NumPy gives such a value another type.)
      g.add_equals(src, value);
      v = make_const(OwnedRef::borrow(value));
    } else {
      // A run-time input of the graph: a new value does not recompile unless Python logic needs
      // it, or unless it leaves int64 (then it is traced again, as a constant).
      g.add_type(src, type);
      if (type == &PyLong_Type) {
        RangeGuard r;
        r.is_float = false;
        r.ilo = INT64_MIN;
        r.ihi = INT64_MAX;
        g.add_range(src, r);
      }
      jit::TensorMeta m;
      m.kind = jit::ValueKind::Scalar;
      m.dtype = type == &PyLong_Type ? jit::DType::Int64 : jit::DType::Float64;
      int node = out_.add_input(src, name_from_source(*src), std::move(m));
      auto sv = std::make_shared<ScalarVar>(node, OwnedRef::borrow(value));
      sv->scope = 0;
      v = std::move(sv);
    }
  } else if (type == &PyUnicode_Type || type == &PyBytes_Type || type == &PyComplex_Type) {
    g.add_equals(src, value);
    v = make_const(OwnedRef::borrow(value));
  } else if (type == &PyTuple_Type || type == &PyList_Type) {
    g.add_type(src, type);
    Py_ssize_t n = PySequence_Fast_GET_SIZE(value);
    g.add_length(src, n);
    auto seq = std::make_shared<SeqVar>(type == &PyTuple_Type ? VarKind::Tuple : VarKind::List,
                                        std::vector<VarPtr>{});
    seq->source = src;
    wrapped_[key] = seq;  // registered first: a list that contains itself stays one Var
    for (Py_ssize_t i = 0; i < n; ++i)
      seq->items.push_back(wrap(PySequence_Fast_GET_ITEM(value, i), child_source(SourceKind::SeqItem, src, static_cast<int>(i))));
    return seq;
  } else if (type == &PyDict_Type || is_ordered_dict(type)) {
    // collections.OrderedDict (nn.Module's parameter and module dicts) reads like a dict; its
    // order is its own list's, so its keys are taken by iterating it, and its type is guarded.
    auto d = std::make_shared<DictVar>();
    d->source = src;
    wrapped_[key] = d;
    if (type != &PyDict_Type) g.add_type(src, type);
    OwnedRef keys = OwnedRef::steal(PyTuple_New(PyDict_GET_SIZE(value)));
    Py_ssize_t i = 0;
    OwnedRef it = OwnedRef::steal(PyObject_GetIter(value));
    if (!it) python_error_break("iterating a dict: ");
    while (OwnedRef k = OwnedRef::steal(PyIter_Next(it.get()))) {
      BREAK_IF(!PyUnicode_CheckExact(k.get()) && !PyLong_CheckExact(k.get()), "dict keys other than str/int");
      BREAK_IF(i >= PyTuple_GET_SIZE(keys.get()), "a dict that changed while it was read");
      PyTuple_SET_ITEM(keys.get(), i++, k.release());
    }
    if (PyErr_Occurred()) python_error_break("iterating a dict: ");
    BREAK_IF(i != PyTuple_GET_SIZE(keys.get()), "a dict that changed while it was read");
    g.add_dict_keys(src, keys.get());
    for (Py_ssize_t j = 0; j < i; ++j) {
      PyObject* kk = PyTuple_GET_ITEM(keys.get(), j);
      PyObject* vv = PyDict_GetItem(value, kk);  // borrowed
      d->items.emplace_back(OwnedRef::borrow(kk), wrap(vv, child_source(SourceKind::DictItem, src, kk)));
    }
    return d;
  } else if (is_disabled_function(value)) {
    graph_break("calling a @framejit.disable function (" + key + ")");
  } else if (PyObject* inner = compiled_function_target(value)) {
    // A framejit.compile'd function called from traced code is traced into, like any function.
    g.add_identity(src, value);
    v = wrap_function_unsourced(inner);
  } else if (PyModule_Check(value)) {
    g.add_identity(src, value);
    v = std::make_shared<ModuleVar>(OwnedRef::borrow(value));
  } else if (op_table_owning(value) || PyCFunction_Check(value) || is_builtin_type(value)) {
    g.add_identity(src, value);
    v = std::make_shared<BuiltinVar>(OwnedRef::borrow(value));
  } else if (PyFunction_Check(value)) {
    g.add_identity(src, value);
    auto f = std::make_shared<FunctionVar>();
    auto* pf = reinterpret_cast<PyFunctionObject*>(value);
    f->code = OwnedRef::borrow(pf->func_code);
    f->globals = OwnedRef::borrow(pf->func_globals);
    f->qualname = OwnedRef::borrow(pf->func_qualname);
    f->real = OwnedRef::borrow(value);
    v = f;
  } else if (PyMethod_Check(value) && PyFunction_Check(PyMethod_GET_FUNCTION(value))) {
    // A bound method of a Python function (a with block's __exit__ handed to a resume function):
    // its self and function are read through it, so a call inlines the function.
    g.add_type(src, type);
    VarPtr self = wrap(PyMethod_GET_SELF(value), child_source(SourceKind::MethodSelf, src, 0));
    VarPtr fn = wrap(PyMethod_GET_FUNCTION(value), child_source(SourceKind::MethodFunc, src, 0));
    v = std::make_shared<MethodVar>(std::move(self), std::move(fn));
  } else if (PyType_Check(value)) {
    g.add_identity(src, value);
    auto* t = reinterpret_cast<PyTypeObject*>(value);
    if (np && numpy_scalar_dtype(np, t)) {
      v = make_const(OwnedRef::borrow(value));  // numpy.float32 used as a dtype
    } else if (t->tp_flags & Py_TPFLAGS_HEAPTYPE) {
      v = std::make_shared<ObjectVar>(VarKind::Class, OwnedRef::borrow(value));
    } else {
      v = make_const(OwnedRef::borrow(value));
    }
  } else if (np && PyObject_TypeCheck(value, reinterpret_cast<PyTypeObject*>(np->dtype_fn))) {
    g.add_equals(src, value);
    v = make_const(OwnedRef::borrow(value));
  } else if ((type->tp_flags & Py_TPFLAGS_HEAPTYPE) && !PyLong_Check(value) && !PyFloat_Check(value) &&
             !PyTuple_Check(value) && !PyList_Check(value) && !PyDict_Check(value) &&
             !PyUnicode_Check(value)) {
    g.add_type(src, type);
    v = std::make_shared<ObjectVar>(VarKind::Object, OwnedRef::borrow(value));
  } else if (const TorchHandles* th = torch_handles(); th && (type == th->dtype_type || type == th->device_type)) {
    // torch.float32, torch.device('cpu'): constants like NumPy's dtypes (dtypes are singletons;
    // devices compare by value).
    if (type == th->dtype_type) g.add_identity(src, value);
    else g.add_equals(src, value);
    v = make_const(OwnedRef::borrow(value));
  } else if (np && is_random_generator(type)) {
    // A NumPy random generator is a run-time input: any generator of its type runs the same
    // graph, and the op table captures its draws as library calls on it.
    g.add_type(src, type);
    jit::TensorMeta m;
    m.kind = jit::ValueKind::Object;
    auto o = std::make_shared<ObjectVar>(VarKind::Object, OwnedRef::borrow(value));
    o->node = out_.add_input(src, name_from_source(*src), std::move(m));
    v = o;
  } else if (type->tp_getattro == PyObject_GenericGetAttr && !PyCell_Check(value) && !PyIter_Check(value) &&
             !PyCallable_Check(value)) {
    // Any other object (a C type's instance: a random Generator, a Decimal) is an opaque value
    // guarded by its type: the trace moves it around, and whatever it does with it that the
    // trace cannot follow (a method call) breaks there, keeping the graphs on both sides.
    // Attributes resolve as for any object (the type's MRO, then an instance dict).
    g.add_type(src, type);
    v = std::make_shared<ObjectVar>(VarKind::Object, OwnedRef::borrow(value));
  } else {
    if (PyErr_Occurred()) PyErr_Clear();
    graph_break(std::string("unsupported value of type ") + type->tp_name + " (" + key + ")");
  }
  v->source = src;
  wrapped_[key] = v;
  return v;
}

}  // namespace framejit::frontend
