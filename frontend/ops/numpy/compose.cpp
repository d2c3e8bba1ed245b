// compose.cpp — builders for composites: each is one call into an op family.
#include "frontend/ops/numpy/compose.h"

#include <functional>

#include "frontend/interop/numpy_abi.h"

namespace framejit::frontend::ops {

VarPtr int_const(Tracer& tx, int64_t v) { return tx.wrap_const(OwnedRef::steal(PyLong_FromLongLong(v)).get()); }

VarPtr dtype_const(Tracer& tx, rt::DType dt) {
  const NumPyHandles* np = numpy_handles();
  BREAK_IF(!np, "a NumPy dtype without NumPy");
  return tx.wrap_const(np->dtypes[static_cast<int>(dt)]);
}

VarPtr iota(Tracer& tx, const SymInt& n, rt::DType dt) {
  return creation(tx, "arange", {tx.sym_value(n)}, {{"dtype", dtype_const(tx, dt)}});
}

VarPtr ufunc(Tracer& tx, const char* name, const std::vector<VarPtr>& args) {
  return elementwise(tx, std::string("numpy.") + name, numpy_attr(name), args, {});
}

VarPtr cast(Tracer& tx, const VarPtr& t, rt::DType dt) {
  return view_op(tx, "astype", "method.astype", {t, dtype_const(tx, dt)}, {}, true);
}

VarPtr zero_of(Tracer& tx, rt::DType dt) {
  return creation(tx, "zeros", {tx.wrap_const(OwnedRef::steal(PyTuple_New(0)).get())}, {{"dtype", dtype_const(tx, dt)}});
}

VarPtr slice_of(Tracer& tx, std::optional<SymInt> start, std::optional<SymInt> stop, int64_t step) {
  const bool constant = (!start || start->is_const()) && (!stop || stop->is_const());
  auto py = [](const std::optional<SymInt>& s) {  // new ref
    return s ? PyLong_FromLongLong(s->const_value()) : Py_NewRef(Py_None);
  };
  if (constant) {
    OwnedRef a = OwnedRef::steal(py(start)), b = OwnedRef::steal(py(stop));
    OwnedRef c = OwnedRef::steal(PyLong_FromLongLong(step));
    return tx.wrap_const(OwnedRef::steal(PySlice_New(a.get(), b.get(), c.get())).get());
  }
  auto part = [&](const std::optional<SymInt>& s) { return s ? tx.sym_value(*s) : tx.wrap_const(Py_None); };
  return std::make_shared<SliceVar>(part(start), part(stop), step == 1 ? tx.wrap_const(Py_None) : int_const(tx, step));
}

VarPtr index_with(Tracer& tx, const VarPtr& t, std::vector<VarPtr> items) {
  return basic_index(tx, t, std::make_shared<SeqVar>(VarKind::Tuple, std::move(items)));
}

VarPtr index_axis(Tracer& tx, const VarPtr& t, int axis, const VarPtr& item) {
  std::vector<VarPtr> items;
  for (int d = 0; d < axis; ++d) items.push_back(slice_of(tx, std::nullopt, std::nullopt));
  items.push_back(item);
  return index_with(tx, t, std::move(items));
}

VarPtr shape_value(Tracer& tx, const Shape& shape) {
  std::vector<VarPtr> dims;
  for (const SymInt& d : shape) dims.push_back(tx.sym_value(d));
  return std::make_shared<SeqVar>(VarKind::Tuple, std::move(dims));
}

VarPtr reshape_to(Tracer& tx, const VarPtr& t, const Shape& shape) {
  return view_op(tx, "reshape", "numpy.reshape", {t, shape_value(tx, shape)}, {}, false);
}

VarPtr concat(Tracer& tx, const std::vector<VarPtr>& arrays, int axis) {
  if (arrays.size() == 1) return arrays[0];
  return join(tx, "concatenate", {std::make_shared<SeqVar>(VarKind::List, arrays)}, {{"axis", int_const(tx, axis)}});
}

bool is_sequence(const VarPtr& v) {
  return is_seq(v) || (is_const(v) && (PyTuple_CheckExact(const_value(v)) || PyList_CheckExact(const_value(v))));
}

VarPtr array_from_list(Tracer& tx, const VarPtr& seq, const std::string& user) {
  // NumPy's discovery: the nesting is the shape; the widest Python type the dtype.
  enum Rank { kBool, kInt, kFloat };
  Rank widest = kBool;
  Shape shape;
  std::function<void(const VarPtr&, size_t)> walk = [&](const VarPtr& v, size_t depth) {
    if (is_sequence(v)) {
      std::vector<VarPtr> items = tx.unpack(v, user);
      const SymInt n(static_cast<int64_t>(items.size()));
      if (depth == shape.size()) shape.push_back(n);
      else BREAK_IF(!shape[depth].same_as(n), user + " of a ragged list");
      BREAK_IF(items.empty(), user + " of an empty list");
      for (const VarPtr& x : items) walk(x, depth + 1);
      return;
    }
    BREAK_IF(depth != shape.size(), user + " of a ragged list");
    PyObject* h = v->kind == VarKind::Scalar ? as<ScalarVar>(v)->hint.get() : is_const(v) ? const_value(v) : nullptr;
    BREAK_IF(!h, user + " of a list holding " + var_kind_name(v->kind));
    if (PyBool_Check(h)) return;
    if (PyLong_CheckExact(h)) widest = std::max(widest, kInt);
    else if (PyFloat_Check(h) && (PyFloat_CheckExact(h) || v->kind == VarKind::Const)) widest = kFloat;
    else graph_break(user + " of a list holding a " + Py_TYPE(h)->tp_name);
  };
  walk(seq, 0);
  const rt::DType dt = widest == kBool ? rt::DType::Bool : widest == kInt ? rt::DType::Int64 : rt::DType::Float64;
  return tx.add_tensor("numpy.asarray", {tx.to_arg(seq)}, tensor_meta(dt, shape));
}

bool is_none(const VarPtr& v) { return !v || (v->kind == VarKind::Const && const_value(v) == Py_None); }

}  // namespace framejit::frontend::ops
