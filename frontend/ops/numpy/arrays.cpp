// arrays.cpp — NumPy's array conversions and shape queries on arrays the trace already holds
// (asarray, asanyarray, array, ascontiguousarray, atleast_1d/2d/3d, shape, ndim, size) and roll:
// each is the same object, a view or a copy exactly where NumPy makes one.
#include "frontend/ops/numpy/compose.h"
#include "frontend/ops/numpy/registry.h"

namespace framejit::frontend::ops {

namespace {

using rt::DType;

// Whether NumPy's array for `v` is C-contiguous on every call (a guarded contiguous input).
bool surely_contiguous(Tracer& tx, const VarPtr& v) {
  const jit::Node& n = tx.node_of(v);
  return n.kind == jit::NodeKind::Placeholder && n.meta.layout == jit::Layout::Contiguous;
}

VarPtr convert(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "numpy." + name;
  auto b = name == "array" ? bind_args(name, {"object", "dtype", "*", "copy", "order", "subok", "ndmin", "like"}, args, kwargs)
                           : bind_args(name, {"a", "dtype", "order", "*", "like"}, args, kwargs);
  const char* first = name == "array" ? "object" : "a";
  BREAK_IF(!b.count(first), Raises{PyExc_TypeError}, name + "() needs an argument");
  const VarPtr& a = b[first];
  if (is_sequence(a) && name != "ascontiguousarray") {
    // A list of Python numbers: a new array of NumPy's discovered dtype.
    claim_numpy_arrays(tx, user + " of a list");
    for (const char* k : {"order", "like", "subok", "ndmin"}) BREAK_IF(!is_absent(b, k), user + " of a list with " + k + "=");
    VarPtr r = array_from_list(tx, a, user);
    if (!is_absent(b, "dtype") && dtype_of(tx, b["dtype"]) != tx.meta(r).dtype) r = cast(tx, r, dtype_of(tx, b["dtype"]));
    return r;
  }
  BREAK_IF(a->kind != VarKind::Tensor, user + " of " + var_kind_name(a->kind) + " (only arrays the trace holds)");
  BREAK_IF(tx.out().array_kind == ArrayKind::Tensor, user + " in a graph of framejit.Tensors");
  BREAK_IF(!is_absent(b, "like"), user + "(like=)");
  if (!is_absent(b, "order")) {
    OwnedRef o = tx.python_value(b["order"], "order");
    BREAK_IF(!PyUnicode_Check(o.get()) || (PyUnicode_CompareWithASCIIString(o.get(), "C") != 0 &&
                                           PyUnicode_CompareWithASCIIString(o.get(), "K") != 0 &&
                                           PyUnicode_CompareWithASCIIString(o.get(), "A") != 0),
             user + " with order='F'");
  }
  BREAK_IF(b.count("subok") && !tx.truth(b["subok"], "subok"), user + "(subok=False)");
  BREAK_IF(b.count("ndmin") && tx.to_int(b["ndmin"], "ndmin") > tx.meta(a).rank(), user + "(ndmin=) that adds dimensions");
  const jit::TensorMeta& m = tx.meta(a);
  BREAK_IF(m.scalar_object, user + " of a NumPy scalar");
  const DType want = is_absent(b, "dtype") ? m.dtype : dtype_of(tx, b["dtype"]);
  const bool copy = name == "array" && (!b.count("copy") || tx.truth(b["copy"], "copy"));
  if (want != m.dtype) return cast(tx, a, want);  // a new array either way
  if (copy) return view_op(tx, "copy", "numpy.copy", {a}, {}, false);
  if (name != "ascontiguousarray") return a;  // the very same object
  // ascontiguousarray: the same object when contiguous, else a copy, and at least 1-d. A reshape
  // to its own shape is a view exactly when NumPy's would be one, which tracks which it is.
  if (m.rank() > 0 && surely_contiguous(tx, a)) return a;
  Shape s = m.shape;
  if (s.empty()) s.emplace_back(1);
  return reshape_to(tx, a, s);
}

VarPtr atleast(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  BREAK_IF(!kwargs.empty(), Raises{PyExc_TypeError}, name + "() takes no keyword arguments");
  const int want = name[8] - '0';  // atleast_<N>d
  std::vector<VarPtr> out;
  VarPtr none = tx.wrap_const(Py_None);
  for (const VarPtr& a : args) {
    BREAK_IF(a->kind != VarKind::Tensor, "numpy." + name + " of " + var_kind_name(a->kind));
    const int rank = tx.meta(a).rank();
    if (rank >= want) {
      out.push_back(a);
    } else if (rank == 0) {
      out.push_back(reshape_to(tx, a, Shape(static_cast<size_t>(want), SymInt(1))));
    } else {
      // NumPy: x[None, :] for 2-d; x[None, :, None] and x[:, :, None] for 3-d.
      VarPtr all = slice_of(tx, std::nullopt, std::nullopt);
      std::vector<VarPtr> items;
      if (want == 2) items = {none, all};
      else if (rank == 1) items = {none, all, none};
      else items = {all, all, none};
      out.push_back(index_with(tx, a, items));
    }
  }
  if (out.size() == 1) return out[0];
  return std::make_shared<SeqVar>(VarKind::List, std::move(out));
}

VarPtr query(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = name == "size" ? bind_args(name, {"a", "axis"}, args, kwargs) : bind_args(name, {"a"}, args, kwargs);
  BREAK_IF(!b.count("a"), Raises{PyExc_TypeError}, name + "() needs an argument");
  const VarPtr& a = b["a"];
  if (a->kind != VarKind::Tensor) {
    // A Python number is a 0-d array to NumPy.
    BREAK_IF(a->kind != VarKind::Scalar && !(is_const(a) && (PyLong_Check(const_value(a)) || PyFloat_Check(const_value(a)))),
             "numpy." + name + " of " + var_kind_name(a->kind));
    if (name == "shape") return std::make_shared<SeqVar>(VarKind::Tuple, std::vector<VarPtr>{});
    if (name == "ndim") return int_const(tx, 0);
    BREAK_IF(!is_absent(b, "axis"), Raises{PyExc_IndexError}, "tuple index out of range");
    return int_const(tx, 1);
  }
  if (name == "size" && !is_absent(b, "axis")) {
    const jit::TensorMeta& m = tx.meta(a);
    return tx.sym_value(m.shape[normalize_axis(tx, tx.to_int(b["axis"], "axis"), m.rank())]);
  }
  return tensor_attr(tx, a, name);
}

VarPtr roll(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = bind_args("roll", {"a", "shift", "axis"}, args, kwargs);
  BREAK_IF(!b.count("a") || b["a"]->kind != VarKind::Tensor, "numpy.roll of a non-array");
  BREAK_IF(!b.count("shift"), Raises{PyExc_TypeError}, "roll() needs a shift");
  VarPtr a = b["a"];
  const jit::TensorMeta& m = tx.meta(a);
  const Shape shape = m.shape;
  auto ints = [&](const VarPtr& v, const char* what) {
    std::vector<int64_t> r;
    if (is_seq(v) || (is_const(v) && PyTuple_Check(const_value(v))))
      for (const VarPtr& x : tx.unpack(v, what)) r.push_back(tx.to_int(x, what));
    else
      r.push_back(tx.to_int(v, what));
    return r;
  };
  std::vector<int64_t> shifts = ints(b["shift"], "shift");
  const bool flat = is_absent(b, "axis");
  std::vector<int64_t> axes = flat ? std::vector<int64_t>{0} : ints(b["axis"], "axis");
  if (flat) {
    BREAK_IF(shifts.size() != 1, "numpy.roll with several shifts and no axis");
    a = view_op(tx, "ravel", "numpy.ravel", {a}, {}, false);
  }
  const int rank = tx.meta(a).rank();
  // Broadcast shifts against axes, summing the shifts of a repeated axis (as NumPy does).
  BREAK_IF(shifts.size() != axes.size() && shifts.size() != 1 && axes.size() != 1, Raises{PyExc_ValueError},
           "'shift' and 'axis' should be scalars or 1D sequences");
  std::vector<int64_t> per_axis(static_cast<size_t>(rank), 0);
  std::vector<bool> touched(static_cast<size_t>(rank), false);
  const size_t n = std::max(shifts.size(), axes.size());
  for (size_t i = 0; i < n; ++i) {
    int ax = normalize_axis(tx, axes[axes.size() == 1 ? 0 : i], rank);
    per_axis[ax] += shifts[shifts.size() == 1 ? 0 : i];
    touched[ax] = true;
  }
  bool rolled = false;
  for (int ax = 0; ax < rank; ++ax) {
    if (!touched[ax]) continue;
    const SymInt len = tx.meta(a).shape[ax];
    if (len.is_const() ? len.const_value() == 0 : !tx.out().decide(len, CmpOp::Gt, 0, "roll length at " + tx.location()))
      continue;
    // out = concatenate(a[n - s:], a[:n - s]) with s = shift mod n.
    const SymInt cut = len - mod(SymInt(per_axis[ax]), len);
    VarPtr tail = index_axis(tx, a, ax, slice_of(tx, cut, std::nullopt));
    VarPtr head = index_axis(tx, a, ax, slice_of(tx, std::nullopt, cut));
    a = concat(tx, {tail, head}, ax);
    rolled = true;
  }
  if (!rolled) a = view_op(tx, "copy", "numpy.copy", {a}, {}, false);  // roll always returns a new array
  if (flat) a = reshape_to(tx, a, shape);
  return a;
}

}  // namespace

VarPtr array_fn(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  if (name == "asarray" || name == "asanyarray" || name == "array" || name == "ascontiguousarray")
    return convert(tx, name, args, kwargs);
  if (name.rfind("atleast_", 0) == 0) return atleast(tx, name, args, kwargs);
  if (name == "shape" || name == "ndim" || name == "size") return query(tx, name, args, kwargs);
  if (name == "roll") return roll(tx, args, kwargs);
  if (name == "isscalar") {
    // Decided by type, which the trace knows: a NumPy scalar or a Python number, str or bytes is a
    // scalar; an array (even 0-d) is not.
    BREAK_IF(args.size() != 1 || !kwargs.empty(), Raises{PyExc_TypeError}, "isscalar() takes one argument");
    const VarPtr& v = args[0];
    bool scalar = false;
    if (v->kind == VarKind::Tensor) {
      scalar = tx.meta(v).scalar_object;
    } else if (v->kind == VarKind::Scalar) {
      scalar = true;
    } else if (v->kind == VarKind::Const) {
      OwnedRef r = OwnedRef::steal(PyObject_CallOneArg(numpy_attr("isscalar"), const_value(v)));  // new ref
      if (!r) python_error_break("numpy.isscalar(): ");
      scalar = r.get() == Py_True;
    } else {
      BREAK_IF(v->kind != VarKind::Tuple && v->kind != VarKind::List && v->kind != VarKind::Dict,
               std::string("numpy.isscalar of ") + var_kind_name(v->kind));
    }
    return tx.wrap_const(scalar ? Py_True : Py_False);
  }
  graph_break(BreakKind::Internal, "internal: no array function " + name);
}

}  // namespace framejit::frontend::ops
