// composites.cpp — NumPy functions that are other captured ops in a row (outer, flip, the *stack
// family, append): traced as those ops, so they fuse like hand-written code.
#include "frontend/ops/numpy/families.h"

namespace framejit::frontend::ops {

namespace {

VarPtr index_tuple(Tracer& tx, const std::vector<PyObject*>& items) {  // items borrowed
  std::vector<VarPtr> vars;
  for (PyObject* o : items) vars.push_back(tx.wrap_const(o));
  return std::make_shared<SeqVar>(VarKind::Tuple, std::move(vars));
}

}  // namespace

VarPtr composite(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  OwnedRef all = OwnedRef::steal(PySlice_New(nullptr, nullptr, nullptr));
  OwnedRef reversed_ = OwnedRef::steal(PySlice_New(nullptr, nullptr, OwnedRef::steal(PyLong_FromLong(-1)).get()));
  if (name == "outer") {
    // NumPy: multiply(a.ravel()[:, newaxis], b.ravel()[newaxis, :]).
    BREAK_IF(args.size() != 2 || !kwargs.empty(), "numpy.outer(a, b) with out=");
    for (const VarPtr& a : args)
      BREAK_IF(a->kind != VarKind::Tensor, "numpy.outer of a non-array (it would call numpy.asarray)");
    VarPtr a = view_op(tx, "ravel", "numpy.ravel", {args[0]}, {}, false);
    VarPtr b = view_op(tx, "ravel", "numpy.ravel", {args[1]}, {}, false);
    VarPtr col = basic_index(tx, a, index_tuple(tx, {all.get(), Py_None}));
    VarPtr row = basic_index(tx, b, index_tuple(tx, {Py_None, all.get()}));
    return elementwise(tx, "numpy.multiply", numpy_attr("multiply"), {col, row}, {});
  }
  if (name == "flip") {
    // NumPy: m[::-1, ...] along each axis given (every axis when axis=None), a view.
    BREAK_IF(args.empty() || args.size() > 2, "numpy.flip(m, axis=None)");
    const VarPtr& m = args[0];
    BREAK_IF(m->kind != VarKind::Tensor, "numpy.flip of a non-array (it would call numpy.asarray)");
    VarPtr axis_arg = args.size() == 2 ? args[1] : nullptr;
    for (const auto& [k, v] : kwargs) {
      BREAK_IF(k != "axis" || axis_arg, "numpy.flip() keyword " + k);
      axis_arg = v;
    }
    const int rank = tx.meta(m).rank();
    std::vector<bool> flip(static_cast<size_t>(rank), false);
    if (!axis_arg || (axis_arg->kind == VarKind::Const && const_value(axis_arg) == Py_None)) {
      flip.assign(static_cast<size_t>(rank), true);
    } else {
      std::vector<VarPtr> axes = axis_arg->kind == VarKind::Tuple || axis_arg->kind == VarKind::List ||
                                         (axis_arg->kind == VarKind::Const && PyTuple_Check(const_value(axis_arg)))
                                     ? tx.unpack(axis_arg, "axis")
                                     : std::vector<VarPtr>{axis_arg};
      for (const VarPtr& a : axes) flip[static_cast<size_t>(normalize_axis(tx, tx.to_int(a, "axis"), rank))] = true;
    }
    std::vector<PyObject*> items;
    for (bool f : flip) items.push_back(f ? reversed_.get() : all.get());
    return basic_index(tx, m, index_tuple(tx, items));
  }
  if (name == "vstack" || name == "hstack" || name == "dstack" || name == "column_stack" || name == "row_stack") {
    // NumPy: concatenate of atleast_2d (vstack), atleast_1d (hstack: axis 0 for 1-d pieces),
    // atleast_3d along axis 2 (dstack); column_stack makes 1-d pieces columns.
    BREAK_IF(args.size() != 1 || !kwargs.empty(), "numpy." + name + "(tup) with dtype= or casting=");
    std::vector<VarPtr> pieces = tx.unpack(args[0], "numpy." + name + " arrays");
    BREAK_IF(pieces.empty(), "need at least one array to concatenate");
    int64_t axis = 0;
    for (VarPtr& p : pieces) {
      BREAK_IF(p->kind != VarKind::Tensor, "numpy." + name + " of a non-array item (it would call numpy.asarray)");
      if (name == "vstack" || name == "row_stack") {
        p = array_fn(tx, "atleast_2d", {p}, {});
      } else if (name == "dstack") {
        p = array_fn(tx, "atleast_3d", {p}, {});
        axis = 2;
      } else if (name == "hstack") {
        p = array_fn(tx, "atleast_1d", {p}, {});
        axis = tx.meta(pieces[0]).rank() <= 1 ? 0 : 1;
      } else {  // column_stack
        if (tx.meta(p).rank() < 2) p = basic_index(tx, array_fn(tx, "atleast_1d", {p}, {}), index_tuple(tx, {all.get(), Py_None}));
        axis = 1;
      }
    }
    VarPtr seq = std::make_shared<SeqVar>(VarKind::Tuple, std::move(pieces));
    OwnedRef ax = OwnedRef::steal(PyLong_FromLongLong(axis));
    return join(tx, "concatenate", {seq}, {{"axis", tx.wrap_const(ax.get())}});
  }
  if (name == "append") {
    // NumPy: concatenate((arr, values), axis), both raveled first when axis is None.
    BREAK_IF(args.empty() || args.size() > 3, "numpy.append(arr, values, axis=None)");
    VarPtr axis_arg = args.size() == 3 ? args[2] : nullptr;
    for (const auto& [k, v] : kwargs) {
      BREAK_IF(k != "axis" || axis_arg, "numpy.append() keyword " + k);
      axis_arg = v;
    }
    BREAK_IF(args.size() < 2, "numpy.append() needs values");
    std::vector<VarPtr> pieces{args[0], args[1]};
    for (const VarPtr& p : pieces)
      BREAK_IF(p->kind != VarKind::Tensor, "numpy.append of a non-array (it would call numpy.asarray)");
    if (!axis_arg || (axis_arg->kind == VarKind::Const && const_value(axis_arg) == Py_None)) {
      for (VarPtr& p : pieces) p = view_op(tx, "ravel", "numpy.ravel", {p}, {}, false);
      axis_arg = tx.wrap_const(OwnedRef::steal(PyLong_FromLong(0)).get());
    }
    VarPtr seq = std::make_shared<SeqVar>(VarKind::Tuple, std::move(pieces));
    return join(tx, "concatenate", {seq}, {{"axis", axis_arg}});
  }
  graph_break(BreakKind::Internal, "internal: no composite " + name);
}

}  // namespace framejit::frontend::ops
