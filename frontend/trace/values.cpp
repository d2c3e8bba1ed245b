// values.cpp — turning traced values into Python values, graph arguments and the return spec.
#include <Python.h>

#include "frontend/interop/numpy_abi.h"
#include "frontend/trace/op_table.h"
#include "frontend/trace/tracer.h"

namespace framejit::frontend {

namespace {

bool fits_int64(PyObject* o) {
  int overflow = 0;
  PyLong_AsLongLongAndOverflow(o, &overflow);
  if (PyErr_Occurred()) PyErr_Clear();
  return overflow == 0;
}

}  // namespace

OwnedRef Tracer::python_value(const VarPtr& v, const std::string& why) {
  switch (v->kind) {
    case VarKind::Const: return as<ConstVar>(v)->value;
    case VarKind::Scalar: {
      auto* s = as<ScalarVar>(v);
      // Note [Loop-carried numbers]: no value to pin.
      bool carried = s->loop_carried;
      for (auto& d : s->deps) carried = carried || d->loop_carried;
      BREAK_IF(carried, std::string(body_ops_name()) + ": Python logic on a number the loop carries (" + why + " at " +
                            location() + "); only array values and graph arithmetic may depend on it");
      // Python logic needs the number itself: pin it (and whatever it was computed from).
      if (s->sym) out_.specialize(*s->sym, why + " at " + location());
      if (s->source) out_.guards.add_equals(s->source, s->hint.get());
      for (auto& d : s->deps) {
        if (d->source) out_.guards.add_equals(d->source, d->hint.get());
        if (d->sym && !d->sym->is_const()) out_.specialize(*d->sym, why + " at " + location());
      }
      return s->hint;
    }
    case VarKind::Tuple:
    case VarKind::List: {
      auto& items = as<SeqVar>(v)->items;
      OwnedRef r = OwnedRef::steal(v->kind == VarKind::Tuple ? PyTuple_New(items.size())
                                                             : PyList_New(items.size()));
      for (size_t i = 0; i < items.size(); ++i) {
        PyObject* x = python_value(items[i], why).release();  // stolen by SET_ITEM below
        if (v->kind == VarKind::Tuple)
          PyTuple_SET_ITEM(r.get(), i, x);
        else
          PyList_SET_ITEM(r.get(), i, x);
      }
      return r;
    }
    case VarKind::Slice: {
      auto* sl = as<SliceVar>(v);
      OwnedRef a = python_value(sl->start, why), b = python_value(sl->stop, why), c = python_value(sl->step, why);
      return OwnedRef::steal(PySlice_New(a.get(), b.get(), c.get()));
    }
    case VarKind::Dict: {
      OwnedRef r = OwnedRef::steal(PyDict_New());
      for (auto& [k, x] : as<DictVar>(v)->items)
        if (PyDict_SetItem(r.get(), k.get(), python_value(x, why).get()) < 0) python_error_break();
      return r;
    }
    case VarKind::Set: {
      OwnedRef copy = OwnedRef::steal(PySet_New(as<SetVar>(v)->set.get()));  // new ref
      if (!copy) python_error_break("copying a set: ");
      return copy;
    }
    case VarKind::Builtin: return as<BuiltinVar>(v)->obj;
    case VarKind::Module: return as<ModuleVar>(v)->module;
    case VarKind::Object:
    case VarKind::Class: return as<ObjectVar>(v)->obj;
    case VarKind::Function:
      if (as<FunctionVar>(v)->real) return as<FunctionVar>(v)->real;
      break;
    case VarKind::Tensor:
      graph_break(BreakKind::DataDependent,
                  "the value of an array is needed at trace time (" + why + ")");
    default: break;
  }
  graph_break(std::string("a Python value of ") + var_kind_name(v->kind) + " is needed (" + why + ")");
}

int64_t Tracer::to_int(const VarPtr& v, const std::string& why) {
  OwnedRef o = python_value(v, why);
  BREAK_IF(PyFloat_Check(o.get()), why + " must be an integer, got a float");
  Py_ssize_t r = PyNumber_AsSsize_t(o.get(), PyExc_OverflowError);
  if (r == -1 && PyErr_Occurred()) graph_break(why + ": " + fetch_error_text());
  return r;
}

bool Tracer::truth(const VarPtr& v, const std::string& why) {
  switch (v->kind) {
    case VarKind::Const: {
      int r = PyObject_IsTrue(const_value(v));
      if (r < 0) python_error_break("truth value: ");
      return r == 1;
    }
    case VarKind::Scalar: {
      auto* s = as<ScalarVar>(v);
      if (s->sym) return out_.decide(*s->sym, CmpOp::Ne, 0, why + " at " + location());
      int r = PyObject_IsTrue(python_value(v, why).get());
      return r == 1;
    }
    case VarKind::Tuple:
    case VarKind::List: return !as<SeqVar>(v)->items.empty();
    case VarKind::Dict: return !as<DictVar>(v)->items.empty();
    case VarKind::Set: return PySet_GET_SIZE(as<SetVar>(v)->set.get()) != 0;
    case VarKind::Tensor:
      graph_break(BreakKind::DataDependent,
                  "the truth value of an array depends on its data (" + why + ")");
    case VarKind::Function:
    case VarKind::Method:
    case VarKind::Builtin:
    case VarKind::Module:
    case VarKind::Class:
    case VarKind::AttrMethod: return true;
    case VarKind::Object: {
      PyTypeObject* t = Py_TYPE(as<ObjectVar>(v)->obj.get());
      BREAK_IF((t->tp_as_number && t->tp_as_number->nb_bool) ||
                   (t->tp_as_mapping && t->tp_as_mapping->mp_length) ||
                   (t->tp_as_sequence && t->tp_as_sequence->sq_length),
               "truth value of an object with __bool__ or __len__");
      return true;
    }
    default: break;
  }
  graph_break(std::string("truth value of ") + var_kind_name(v->kind));
}

std::vector<VarPtr> Tracer::unpack(const VarPtr& v, const std::string& why) {
  switch (v->kind) {
    case VarKind::Tuple:
    case VarKind::List: return as<SeqVar>(v)->items;
    case VarKind::Dict: {
      std::vector<VarPtr> keys;
      for (auto& kv : as<DictVar>(v)->items) keys.push_back(wrap_const(kv.first.get()));
      return keys;
    }
    case VarKind::Iterator: {
      auto* it = as<IteratorVar>(v);
      std::vector<VarPtr> rest(it->items.begin() + it->pos, it->items.end());
      it->pos = it->items.size();
      return rest;
    }
    case VarKind::Set: {
      // CPython iterates a set in its table order; ours was built by the same insertions.
      std::vector<VarPtr> items;
      OwnedRef it = OwnedRef::steal(PyObject_GetIter(as<SetVar>(v)->set.get()));
      while (OwnedRef x = OwnedRef::steal(PyIter_Next(it.get()))) items.push_back(wrap_const(x.get()));
      return items;
    }
    case VarKind::Const: {
      PyObject* c = const_value(v);
      BREAK_IF(!PyTuple_CheckExact(c) && !PyList_CheckExact(c) && !PyRange_Check(c) &&
                   !PyUnicode_CheckExact(c) && !PyBytes_CheckExact(c) && !PyFrozenSet_CheckExact(c),
               std::string("iterating over ") + Py_TYPE(c)->tp_name + " (" + why + ")");
      OwnedRef it = OwnedRef::steal(PyObject_GetIter(c));
      if (!it) python_error_break("iteration failed: ");
      std::vector<VarPtr> items;
      while (OwnedRef x = OwnedRef::steal(PyIter_Next(it.get()))) {
        items.push_back(wrap_const(x.get()));
        BREAK_IF(items.size() > 100000, BreakKind::Limit,
                 "iterating over too many items at trace time");
      }
      if (PyErr_Occurred()) python_error_break("iteration failed: ");
      return items;
    }
    case VarKind::Tensor: {
      const jit::TensorMeta& m = meta(v);
      BREAK_IF(m.rank() == 0, Raises{PyExc_TypeError}, "iteration over a 0-d array");
      int64_t n = out_.specialize(m.shape[0], "iterating over an array's rows at " + location());
      std::vector<VarPtr> rows;
      for (int64_t i = 0; i < n; ++i) {
        OwnedRef idx = OwnedRef::steal(PyLong_FromLongLong(i));
        rows.push_back(array_ops().getitem(*this, v, wrap_const(idx.get())));
      }
      return rows;
    }
    case VarKind::Object: {
      // An object whose class defines __iter__ in Python (nn.Sequential, nn.ModuleList): what that
      // __iter__ returns, iterated in turn.
      PyObject* o = as<ObjectVar>(v)->obj.get();
      OwnedRef name = OwnedRef::steal(PyUnicode_FromString("__iter__"));
      PyObject* fn = name ? _PyType_Lookup(Py_TYPE(o), name.get()) : nullptr;  // borrowed
      if (!fn || !PyFunction_Check(fn) || !v->source) break;
      VarPtr it = call(wrap(fn, child_source(SourceKind::TypeAttr, v->source, name.get())), {v}, {});
      BREAK_IF(it->kind == VarKind::Object, std::string("iterating over ") + Py_TYPE(o)->tp_name + " (" + why + ")");
      return unpack(it, why);
    }
    default: break;
  }
  graph_break(std::string("iterating over ") + var_kind_name(v->kind) + " (" + why + ")");
}

const jit::Node& Tracer::node_of(const VarPtr& v) const {
  if (v->kind == VarKind::Tensor) return out_.graph_at(as<TensorVar>(v)->scope).node(as<TensorVar>(v)->node);
  return out_.graph_at(as<ScalarVar>(v)->scope).node(as<ScalarVar>(v)->node);
}

const jit::TensorMeta& Tracer::meta(const VarPtr& v) const { return node_of(v).meta; }

// Note [Tracing bodies]: a value of an enclosing scope read in a body becomes a placeholder of the
// body's graph (one per value and body), and of every body between, so each body reads only its
// own placeholders; the control-flow node passes the outer values in.
int Tracer::lift(const VarPtr& v, int scope) {
  const int here = out_.scope();
  if (scope == here) return v->kind == VarKind::Tensor ? as<TensorVar>(v)->node : as<ScalarVar>(v)->node;
  std::vector<Lifted>& lifted = lifted_[here - 1];
  for (const Lifted& l : lifted)
    if (l.outer.get() == v.get()) return l.placeholder;
  const jit::Node& outer = node_of(v);
  jit::TensorMeta m = outer.meta;
  int p = out_.graph.add_placeholder(outer.name, std::move(m));
  lifted.push_back({v, p});
  return p;
}

jit::Arg Tracer::to_arg(const VarPtr& v) {
  switch (v->kind) {
    case VarKind::Tensor: return jit::Arg::node(lift(v, as<TensorVar>(v)->scope));
    case VarKind::Scalar: return jit::Arg::node(lift(v, as<ScalarVar>(v)->scope));
    case VarKind::Object:
      if (as<ObjectVar>(v)->node >= 0) {
        if (in_body()) refuse_in_body("a draw from a random generator");
        return jit::Arg::node(as<ObjectVar>(v)->node);
      }
      break;
    case VarKind::Tuple:
    case VarKind::List: {
      std::vector<jit::Arg> items;
      for (auto& x : as<SeqVar>(v)->items) items.push_back(to_arg(x));
      return v->kind == VarKind::Tuple ? jit::Arg::tuple(std::move(items)) : jit::Arg::list(std::move(items));
    }
    case VarKind::Const: {
      PyObject* c = const_value(v);
      if (c == Py_None) return jit::Arg::none();
      if (c == Py_Ellipsis) return jit::Arg::ellipsis();
      if (PyBool_Check(c)) return jit::Arg::boolean(c == Py_True);
      if (PyLong_CheckExact(c)) {
        BREAK_IF(!fits_int64(c), "an integer constant does not fit 64 bits");
        return jit::Arg::integer(PyLong_AsLongLong(c));
      }
      if (PyFloat_CheckExact(c)) return jit::Arg::real(PyFloat_AS_DOUBLE(c));
      if (PyFloat_Check(c)) {
        // numpy.float64 (a float subclass): NumPy 1.x treats it by value exactly as a Python
        // float, so it passes as one. NumPy 2 types it strongly, which an Arg cannot say.
        const NumPyHandles* np = numpy_handles();
        BREAK_IF(!np || np->major >= 2 || !PyObject_TypeCheck(c, np->generic),
                 std::string("cannot pass a ") + Py_TYPE(c)->tp_name + " constant into the graph");
        return jit::Arg::real(PyFloat_AS_DOUBLE(c));
      }
      if (PyUnicode_CheckExact(c)) return jit::Arg::str(PyUnicode_AsUTF8(c));
      if (PyTuple_CheckExact(c) || PyList_CheckExact(c)) {
        std::vector<jit::Arg> items;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(c);
        for (Py_ssize_t i = 0; i < n; ++i)
          items.push_back(to_arg(wrap_const(PySequence_Fast_GET_ITEM(c, i))));
        return PyTuple_CheckExact(c) ? jit::Arg::tuple(std::move(items)) : jit::Arg::list(std::move(items));
      }
      if (PySlice_Check(c)) {
        auto* s = reinterpret_cast<PySliceObject*>(c);
        return jit::Arg::slice(to_arg(wrap_const(s->start)), to_arg(wrap_const(s->stop)),
                               to_arg(wrap_const(s->step)));
      }
      // dtypes and NumPy scalar types: an argument such as dtype=np.float32
      if (const NumPyHandles* np = numpy_handles()) {
        OwnedRef d = OwnedRef::steal(PyObject_CallOneArg(np->dtype_fn, c));
        if (d) {
          if (auto dt = dtype_from_descr(d.get())) return jit::Arg::dtype(*dt);
        }
        PyErr_Clear();
      }
      graph_break(std::string("cannot pass a ") + Py_TYPE(c)->tp_name + " constant into the graph");
    }
    case VarKind::Slice: {
      auto* sl = as<SliceVar>(v);
      return jit::Arg::slice(to_arg(sl->start), to_arg(sl->stop), to_arg(sl->step));
    }
    case VarKind::Builtin: {
      // Python's own types stand for dtypes in NumPy calls (astype(float), zeros(n, int)).
      PyObject* o = as<BuiltinVar>(v)->obj.get();
      if (o == reinterpret_cast<PyObject*>(&PyFloat_Type)) return jit::Arg::dtype(rt::DType::Float64);
      if (o == reinterpret_cast<PyObject*>(&PyLong_Type)) return jit::Arg::dtype(rt::DType::Int64);
      if (o == reinterpret_cast<PyObject*>(&PyBool_Type)) return jit::Arg::dtype(rt::DType::Bool);
      const NumPyHandles* np = numpy_handles();
      if (PyType_Check(o) && np) {
        OwnedRef d = OwnedRef::steal(PyObject_CallOneArg(np->dtype_fn, o));
        if (d)
          if (auto dt = dtype_from_descr(d.get())) return jit::Arg::dtype(*dt);
        PyErr_Clear();
      }
      break;
    }
    default: break;
  }
  graph_break(std::string("cannot pass ") + var_kind_name(v->kind) + " into the graph");
}

VarPtr Tracer::add_tensor(const std::string& target, std::vector<jit::Arg> args, jit::TensorMeta m,
                          std::vector<std::pair<std::string, jit::Arg>> kwargs) {
  out_.saw_tensor = true;
  int node = array_ops().add_call(out_.graph, target, std::move(args), std::move(kwargs), std::move(m));
  check_raise_under_handler(node);
  check_raise_after_write(node);
  check_grad_use(node);
  note_where(node);
  return std::make_shared<TensorVar>(node);
}

VarPtr Tracer::add_scalar(const std::string& target, std::vector<jit::Arg> args, PyObject* hint,
                          std::optional<jit::SymInt> sym, std::vector<std::shared_ptr<ScalarVar>> deps) {
  jit::TensorMeta m;
  m.kind = jit::ValueKind::Scalar;
  m.dtype = PyBool_Check(hint) ? jit::DType::Bool : PyLong_Check(hint) ? jit::DType::Int64 : jit::DType::Float64;
  int node = array_ops().add_call(out_.graph, target, std::move(args), {}, std::move(m));
  check_raise_under_handler(node);
  check_raise_after_write(node);
  check_grad_use(node);
  note_where(node);
  auto s = std::make_shared<ScalarVar>(node, OwnedRef::borrow(hint));
  s->sym = std::move(sym);
  s->deps = std::move(deps);
  return s;
}

VarPtr Tracer::sym_value(const jit::SymInt& e) {
  if (e.is_const()) {
    OwnedRef c = OwnedRef::steal(PyLong_FromLongLong(e.const_value()));
    return wrap_const(c.get());
  }
  for (const SymNode& m : sym_nodes_) {
    if (m.e.same_as(e)) {
      OwnedRef h = OwnedRef::steal(PyLong_FromLongLong(out_.hint(e)));
      auto v = std::make_shared<ScalarVar>(m.node, h);
      v->scope = m.scope;
      v->sym = e;
      return v;
    }
  }
  std::vector<jit::Arg> args;
  std::string target;
  using K = jit::SymInt::Kind;
  switch (e.kind()) {
    case K::Symbol: {
      const jit::SymbolInfo& info = out_.root_graph().symbols()[e.symbol_id()];
      target = "sym_size";
      auto input = std::make_shared<TensorVar>(info.placeholder);  // a frame input, lifted into a body
      input->scope = 0;
      args = {to_arg(input), jit::Arg::integer(info.dim)};
      break;
    }
    case K::Add: target = "operator.add"; break;
    case K::Mul: target = "operator.mul"; break;
    case K::FloorDiv: target = "operator.floordiv"; break;
    case K::Mod: target = "operator.mod"; break;
    case K::Const: break;
  }
  if (e.kind() != K::Symbol) args = {to_arg(sym_value(e.lhs())), to_arg(sym_value(e.rhs()))};
  OwnedRef h = OwnedRef::steal(PyLong_FromLongLong(out_.hint(e)));
  VarPtr v = add_scalar(target, std::move(args), h.get(), e, {});
  sym_nodes_.push_back({e, as<ScalarVar>(v)->node, out_.scope()});
  return v;
}

std::optional<jit::SymInt> Tracer::as_sym(const VarPtr& v) {
  if (v->kind == VarKind::Scalar) {
    auto* s = as<ScalarVar>(v);
    if (s->sym) return s->sym;
    if (!PyLong_CheckExact(s->hint.get())) return std::nullopt;
    return jit::SymInt(to_int(v, "an integer used as a size"));
  }
  if (v->kind == VarKind::Const) {
    PyObject* c = const_value(v);
    if (PyLong_CheckExact(c) && fits_int64(c)) return jit::SymInt(PyLong_AsLongLong(c));
  }
  return std::nullopt;
}

OutputSpec Tracer::output_spec(const VarPtr& v, std::vector<jit::Arg>& outs) {
  OutputSpec spec;
  auto from_slot = [&](const SourcePtr& src) {
    spec.kind = OutputSpec::Kind::Slot;
    spec.index = out_.guards.slot_for(src);
  };
  switch (v->kind) {
    case VarKind::Tensor:
    case VarKind::Scalar: {
      int node = v->kind == VarKind::Tensor ? as<TensorVar>(v)->node : as<ScalarVar>(v)->node;
      if ((out_.graph.node(node).kind == jit::NodeKind::Placeholder && v->source) || is_written_input(v.get())) {
        from_slot(v->source);  // a returned input is the very same object
        return spec;
      }
      spec.kind = OutputSpec::Kind::Value;
      // A replay's value that the frame's outputs already hold is that same object
      // (Note [Side effects]).
      if (reuse_value_outputs_) {
        if (auto it = value_outputs_.find(v.get()); it != value_outputs_.end()) {
          spec.index = it->second;
          return spec;
        }
      }
      if (v->kind == VarKind::Tensor) {
        const int view = view_of_written_input(*as<TensorVar>(v));
        if (view >= 0) node = view;
      }
      spec.index = static_cast<int>(outs.size());
      value_outputs_.emplace(v.get(), spec.index);
      outs.push_back(jit::Arg::node(node));
      return spec;
    }
    case VarKind::Const:
      spec.kind = OutputSpec::Kind::Const;
      spec.value = as<ConstVar>(v)->value;
      return spec;
    case VarKind::Tuple:
    case VarKind::List:
      if (v->source && v->kind == VarKind::List) {  // the caller's own list object
        from_slot(v->source);
        return spec;
      }
      spec.kind = v->kind == VarKind::Tuple ? OutputSpec::Kind::Tuple : OutputSpec::Kind::List;
      spec.value = as<SeqVar>(v)->named_type;  // a named tuple: its type, called on the items
      for (auto& x : as<SeqVar>(v)->items) spec.items.push_back(output_spec(x, outs));
      return spec;
    case VarKind::Dict:
      if (v->source) {
        from_slot(v->source);
        return spec;
      }
      spec.kind = OutputSpec::Kind::Dict;
      for (auto& [k, x] : as<DictVar>(v)->items) {
        spec.keys.push_back(k);
        spec.items.push_back(output_spec(x, outs));
      }
      return spec;
    case VarKind::AttrMethod:
      if (!v->source) {
        // The bound method, looked up again on its value (what the original's LOAD_ATTR did).
        const auto* m = as<AttrMethodVar>(v);
        // A container the trace made is rebuilt wherever it appears: the method's self would be a
        // second object, not the one the frame holds.
        BREAK_IF(!m->self->source && (m->self->kind == VarKind::List || m->self->kind == VarKind::Dict ||
                                      m->self->kind == VarKind::Tuple || m->self->kind == VarKind::Set),
                 std::string("a method of a ") + var_kind_name(m->self->kind) + " made inside the function is live");
        spec.kind = OutputSpec::Kind::Attr;
        spec.value = OwnedRef::steal(PyUnicode_FromString(m->name.c_str()));
        BREAK_IF(!spec.value, BreakKind::Internal, "cannot make a method name");
        spec.items.push_back(output_spec(m->self, outs));
        return spec;
      }
      from_slot(v->source);
      return spec;
    default:
      BREAK_IF(!v->source, std::string("returning ") + var_kind_name(v->kind) + " made inside the function");
      from_slot(v->source);
      return spec;
  }
}

void Tracer::build_output(const VarPtr& ret) {
  std::vector<jit::Arg> outs;
  out_.output = output_spec(ret, outs);
  std::unordered_set<const Var*> shared;  // the lists and dicts the return value rebuilds
  std::vector<VarPtr> todo{ret};
  while (!todo.empty()) {
    VarPtr v = std::move(todo.back());
    todo.pop_back();
    if (!v || v->source) continue;
    if (v->kind == VarKind::List || v->kind == VarKind::Dict) shared.insert(v.get());
    if (is_seq(v))
      for (const VarPtr& x : as<SeqVar>(v)->items) todo.push_back(x);
    if (v->kind == VarKind::Dict)
      for (const auto& kv : as<DictVar>(v)->items) todo.push_back(kv.second);
  }
  build_replays(outs, shared);
  add_copy_backs(outs);
  out_.graph.set_output(std::move(outs));
}

}  // namespace framejit::frontend
