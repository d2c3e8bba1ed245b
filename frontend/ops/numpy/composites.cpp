// composites.cpp — NumPy functions that are other captured ops in a row (outer, flip): traced as
// those ops, so they fuse like hand-written code.
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
  graph_break(BreakKind::Internal, "internal: no composite " + name);
}

}  // namespace framejit::frontend::ops
