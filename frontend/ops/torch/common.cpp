// common.cpp — what every torch family shares: stand-in probes of torch's result types, torch's
// dtype constants, node creation (Note [Torch ops]).
#include "frontend/cpython/pyref.h"
#include "frontend/interop/torch_array.h"
#include "frontend/ops/torch/torch_ops.h"

namespace framejit::frontend::ops::torch_ops {

namespace {

// The stand-in of one traced value for a probe: a tensor becomes ones of its dtype with every
// size 1 (rank kept), a number is itself, a container holds stand-ins. New ref.
OwnedRef stand_in(Tracer& tx, const VarPtr& v, const std::string& user) {
  const TorchHandles* h = torch_handles();
  switch (v->kind) {
    case VarKind::Tensor: {
      const jit::TensorMeta& m = tx.meta(v);
      PyObject* dt = h->dtypes[static_cast<int>(m.dtype)];  // borrowed
      BREAK_IF(!dt, user + " of a " + std::string(rt::dtype_name(m.dtype)) + " tensor");
      OwnedRef size = OwnedRef::steal(PyTuple_New(m.rank()));
      for (int d = 0; size && d < m.rank(); ++d) {
        // NB: a size 0 stays 0 (it is static): torch checks empty operands differently.
        const bool empty = m.shape[static_cast<size_t>(d)].is_const() && m.shape[static_cast<size_t>(d)].const_value() == 0;
        PyTuple_SET_ITEM(size.get(), d, PyLong_FromLong(empty ? 0 : 1));
      }
      OwnedRef args = OwnedRef::steal(PyTuple_Pack(1, size.get()));
      OwnedRef kw = OwnedRef::steal(PyDict_New());
      if (!args || !kw || PyDict_SetItemString(kw.get(), "dtype", dt) < 0) python_error_break("a stand-in: ");
      OwnedRef ones = OwnedRef::steal(PyObject_GetAttrString(h->module, "ones"));
      OwnedRef t = ones ? OwnedRef::steal(PyObject_Call(ones.get(), args.get(), kw.get())) : OwnedRef();
      if (!t) python_error_break("a stand-in: ");
      return t;
    }
    case VarKind::Tuple:
    case VarKind::List: {
      const auto& items = as<SeqVar>(v)->items;
      OwnedRef out = OwnedRef::steal(v->kind == VarKind::Tuple ? PyTuple_New(static_cast<Py_ssize_t>(items.size()))
                                                               : PyList_New(static_cast<Py_ssize_t>(items.size())));
      for (size_t i = 0; out && i < items.size(); ++i) {
        PyObject* x = stand_in(tx, items[i], user).release();
        if (v->kind == VarKind::Tuple) PyTuple_SET_ITEM(out.get(), static_cast<Py_ssize_t>(i), x);
        else PyList_SET_ITEM(out.get(), static_cast<Py_ssize_t>(i), x);
      }
      return out;
    }
    case VarKind::Scalar: return OwnedRef::borrow(as<ScalarVar>(v)->hint.get());
    case VarKind::Const: return OwnedRef::borrow(const_value(v));
    default: graph_break(user + " with an operand that is " + var_kind_name(v->kind));
  }
}

}  // namespace

PyObject* torch_attr(const char* name) {
  const TorchHandles* h = torch_handles();
  if (!h) return nullptr;
  PyObject* r = PyObject_GetAttrString(h->module, name);  // new ref, kept by the module
  if (!r) {
    PyErr_Clear();
    return nullptr;
  }
  Py_DECREF(r);
  return r;
}

PyObject* functional_attr(const char* name) {
  static PyObject* functional = nullptr;  // torch.nn.functional, kept for the process
  if (!functional) {
    functional = PyImport_ImportModule("torch.nn.functional");
    if (!functional) {
      PyErr_Clear();
      return nullptr;
    }
  }
  PyObject* r = PyObject_GetAttrString(functional, name);
  if (!r) {
    PyErr_Clear();
    return nullptr;
  }
  Py_DECREF(r);  // the module keeps it
  return r;
}

Answer probe(Tracer& tx, PyObject* fn, const std::string& user, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  BREAK_IF(!fn, BreakKind::Internal, "no torch callable for " + user);
  OwnedRef pargs = OwnedRef::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t i = 0; pargs && i < args.size(); ++i)
    PyTuple_SET_ITEM(pargs.get(), static_cast<Py_ssize_t>(i), stand_in(tx, args[i], user).release());
  OwnedRef pkw = OwnedRef::steal(PyDict_New());
  if (!pargs || !pkw) python_error_break("a probe: ");
  for (const auto& [k, v] : kwargs)
    if (PyDict_SetItemString(pkw.get(), k.c_str(), stand_in(tx, v, user).get()) < 0) python_error_break("a probe: ");
  // Through framejit._externs.quiet_call: a stand-in's warnings are not the user's.
  static PyObject* quiet = [] {  // kept for the process
    OwnedRef mod = OwnedRef::steal(PyImport_ImportModule("framejit._externs"));
    PyObject* f = mod ? PyObject_GetAttrString(mod.get(), "quiet_call") : nullptr;
    if (!f) PyErr_Clear();
    return f;
  }();
  OwnedRef r;
  if (quiet) {
    OwnedRef with_fn = OwnedRef::steal(PyTuple_New(PyTuple_GET_SIZE(pargs.get()) + 1));
    if (!with_fn) python_error_break("a probe: ");
    PyTuple_SET_ITEM(with_fn.get(), 0, Py_NewRef(fn));
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(pargs.get()); ++i)
      PyTuple_SET_ITEM(with_fn.get(), i + 1, Py_NewRef(PyTuple_GET_ITEM(pargs.get(), i)));
    r = OwnedRef::steal(PyObject_Call(quiet, with_fn.get(), pkw.get()));
  } else {
    r = OwnedRef::steal(PyObject_Call(fn, pargs.get(), pkw.get()));
  }
  if (!r) python_error_break(user + ": torch raised ");
  BREAK_IF(!is_torch_tensor(r.get()), user + " returns a " + std::string(Py_TYPE(r.get())->tp_name) + ", not a tensor");
  OwnedRef dt = OwnedRef::steal(PyObject_GetAttrString(r.get(), "dtype"));
  std::optional<rt::DType> d = dt ? dtype_of_torch(dt.get()) : std::nullopt;
  if (!dt) PyErr_Clear();
  BREAK_IF(!d, user + " gives a dtype framejit does not have");
  Answer a{*d, {}};
  OwnedRef shape = OwnedRef::steal(PyObject_GetAttrString(r.get(), "shape"));
  if (shape && PyTuple_Check(shape.get()))
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(shape.get()); ++i)
      a.shape.push_back(PyLong_AsLongLong(PyTuple_GET_ITEM(shape.get(), i)));
  if (!shape) PyErr_Clear();
  return a;
}

rt::DType dtype_arg(Tracer& tx, const VarPtr& v, const std::string& what) {
  (void)tx;
  std::optional<rt::DType> d = is_const(v) ? dtype_of_torch(const_value(v)) : std::nullopt;
  BREAK_IF(!d, what + " that is not a torch dtype framejit has");
  return *d;
}

VarPtr int_const(Tracer& tx, int64_t v) {
  OwnedRef o = OwnedRef::steal(PyLong_FromLongLong(v));
  return tx.wrap_const(o.get());
}

VarPtr add_node(Tracer& tx, jit::OpKind op, jit::OpAttrs attrs, const std::string& target,
                const std::vector<VarPtr>& args, const KwArgs& kwargs, jit::TensorMeta meta) {
  int node = tx.out().graph.add_call(op, std::move(attrs), target, to_args(tx, args), to_kwargs(tx, kwargs),
                                     std::move(meta));
  tx.out().saw_tensor = true;
  tx.check_raise_under_handler(node);
  tx.check_grad_use(node);
  return std::make_shared<TensorVar>(node);
}

}  // namespace framejit::frontend::ops::torch_ops
