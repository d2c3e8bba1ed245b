// sequences.cpp — NumPy's grid and matrix builders traced as the ops NumPy's own Python code runs
// (linspace, eye, identity, tri, tril, triu, diag, diagonal, trace, diff, meshgrid), so that they
// fuse with their readers and keep NumPy's exact dtypes and values.
#include <cmath>

#include "frontend/ops/numpy/compose.h"

namespace framejit::frontend::ops {

namespace {

using rt::DType;

bool is_integer_dtype(DType dt) { return dt != DType::Bool && static_cast<int>(dt) <= static_cast<int>(DType::UInt64); }

// A size argument (N, M, num): a constant or a run-time int whose value is a size expression.
SymInt size_arg(Tracer& tx, const VarPtr& v, const std::string& what) {
  if (auto s = tx.as_sym(v)) {
    if (!s->is_const()) BREAK_IF(!tx.out().decide(*s, CmpOp::Ge, 0, what + " at " + tx.location()),
                                 Raises{PyExc_ValueError}, what + " must be non-negative");
    else BREAK_IF(s->const_value() < 0, Raises{PyExc_ValueError}, what + " must be non-negative");
    return *s;
  }
  int64_t n = tx.to_int(v, what);
  BREAK_IF(n < 0, Raises{PyExc_ValueError}, what + " must be non-negative");
  return SymInt(n);
}

// (cols - rows) over an N x M grid, int64: the diagonal offset of every element.
VarPtr offsets(Tracer& tx, const SymInt& n, const SymInt& m) {
  VarPtr none = tx.wrap_const(Py_None);
  VarPtr all = slice_of(tx, std::nullopt, std::nullopt);
  VarPtr rows = index_with(tx, iota(tx, n, DType::Int64), {all, none});
  VarPtr cols = index_with(tx, iota(tx, m, DType::Int64), {none, all});
  return ufunc(tx, "subtract", {cols, rows});
}

// A Python number argument (a constant or a run-time Python number); arrays break.
void check_number(Tracer& tx, const VarPtr& v, const std::string& what) {
  BREAK_IF((v->kind == VarKind::Tensor && tx.meta(v).rank() != 0) || is_seq(v),
           what + " with array bounds is not captured yet");
  BREAK_IF(v->kind != VarKind::Const && v->kind != VarKind::Scalar && v->kind != VarKind::Tensor,
           what + " with a bound that is " + var_kind_name(v->kind));
  if (v->kind == VarKind::Const) {
    PyObject* c = const_value(v);  // borrowed
    BREAK_IF(PyBool_Check(c) || (!PyLong_Check(c) && !PyFloat_Check(c)), what + " with a non-real bound");
  }
}

VarPtr linspace(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = bind_args("linspace", {"start", "stop", "num", "endpoint", "retstep", "dtype", "axis"}, args, kwargs);
  BREAK_IF(!b.count("start") || !b.count("stop"), Raises{PyExc_TypeError}, "linspace() needs start and stop");
  check_number(tx, b["start"], "numpy.linspace");
  check_number(tx, b["stop"], "numpy.linspace");
  SymInt num = b.count("num") ? size_arg(tx, b["num"], "Number of samples") : SymInt(50);
  const bool endpoint = !b.count("endpoint") || tx.truth(b["endpoint"], "endpoint");
  const bool retstep = b.count("retstep") && tx.truth(b["retstep"], "retstep");
  if (b.count("axis")) {
    // Scalar bounds make a 1-d result: only axis 0 (or -1) exists.
    normalize_axis(tx, tx.to_int(b["axis"], "axis"), 1);
  }
  // NumPy: start * 1.0 and stop * 1.0, then delta = stop - start, step = delta / div.
  VarPtr one = tx.wrap_const(OwnedRef::steal(PyFloat_FromDouble(1.0)).get());
  VarPtr start = ufunc(tx, "multiply", {b["start"], one});
  VarPtr stop = ufunc(tx, "multiply", {b["stop"], one});
  // 0-d array bounds (np.linspace(lo, hi, n) with lo = x.min()): the same steps, computed in the
  // bounds' type, which NumPy's arange then matches only for float64.
  for (const VarPtr& v : {start, stop})
    BREAK_IF(v->kind == VarKind::Tensor && tx.meta(v).dtype != DType::Float64,
             "numpy.linspace with " + std::string(rt::dtype_name(tx.meta(v).dtype)) + " array bounds");
  VarPtr delta = ufunc(tx, "subtract", {stop, start});
  const SymInt div = endpoint ? num - SymInt(1) : num;
  VarPtr y = iota(tx, num, DType::Float64);
  VarPtr step;
  const bool div_positive = div.is_const() ? div.const_value() > 0
                                           : tx.out().decide(div, CmpOp::Gt, 0, "linspace divisor at " + tx.location());
  if (div_positive) {
    // NB: NumPy takes y / div * delta when step underflows to 0; with delta == 0 both give start.
    step = ufunc(tx, "divide", {delta, tx.sym_value(div)});
    y = ufunc(tx, "multiply", {y, step});
  } else {
    step = tx.wrap_const(OwnedRef::steal(PyFloat_FromDouble(NAN)).get());
    y = ufunc(tx, "multiply", {y, delta});
  }
  y = ufunc(tx, "add", {y, start});
  const bool more_than_one = num.is_const() ? num.const_value() > 1
                                            : tx.out().decide(num, CmpOp::Gt, 1, "linspace length at " + tx.location());
  if (endpoint && more_than_one) {
    // y[-1] = stop, as a select so the whole sequence stays one fused kernel.
    VarPtr last = ufunc(tx, "equal", {iota(tx, num, DType::Int64), tx.sym_value(num - SymInt(1))});
    y = ufunc(tx, "where", {last, stop, y});
  }
  if (!is_none(b.count("dtype") ? b["dtype"] : nullptr)) {
    DType dt = dtype_of(tx, b["dtype"]);
    if (is_integer_dtype(dt)) y = ufunc(tx, "floor", {y});
    if (dt != DType::Float64) y = cast(tx, y, dt);
  }
  if (!retstep) return y;
  return std::make_shared<SeqVar>(VarKind::Tuple, std::vector<VarPtr>{y, step});
}

VarPtr eye(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = name == "identity" ? bind_args(name, {"n", "dtype", "*", "like"}, args, kwargs)
                              : bind_args(name, {"N", "M", "k", "dtype", "order", "*", "like"}, args, kwargs);
  BREAK_IF(!is_absent(b, "like"), name + "(like=)");
  if (!is_absent(b, "order")) {
    OwnedRef o = tx.python_value(b["order"], "order");
    BREAK_IF(!PyUnicode_Check(o.get()) || PyUnicode_CompareWithASCIIString(o.get(), "C") != 0,
             "numpy." + name + " with an order other than 'C'");
  }
  const char* n_name = name == "identity" ? "n" : "N";
  BREAK_IF(!b.count(n_name), Raises{PyExc_TypeError}, name + "() needs a size");
  SymInt n = size_arg(tx, b[n_name], "negative dimensions are not allowed:");
  SymInt m = is_absent(b, "M") ? n : size_arg(tx, b["M"], "negative dimensions are not allowed:");
  int64_t k = is_absent(b, "k") ? 0 : tx.to_int(b["k"], "k");
  DType dt = is_absent(b, "dtype") ? DType::Float64 : dtype_of(tx, b["dtype"]);
  VarPtr mask = name == "tri" ? ufunc(tx, "less_equal", {offsets(tx, n, m), int_const(tx, k)})
                              : ufunc(tx, "equal", {offsets(tx, n, m), int_const(tx, k)});
  return dt == DType::Bool ? mask : cast(tx, mask, dt);
}

VarPtr tril_triu(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = bind_args(name, {"m", "k"}, args, kwargs);
  BREAK_IF(!b.count("m") || b["m"]->kind != VarKind::Tensor, "numpy." + name + " of a non-array");
  const VarPtr& a = b["m"];
  const jit::TensorMeta& meta = tx.meta(a);
  BREAK_IF(meta.rank() == 0, "numpy." + name + " of a 0-d array");
  int64_t k = is_absent(b, "k") ? 0 : tx.to_int(b["k"], "k");
  const SymInt cols = meta.shape.back();
  const SymInt rows = meta.rank() >= 2 ? meta.shape[meta.rank() - 2] : cols;
  const DType dt = meta.dtype;
  // NumPy: tril = where(tri(k), m, 0); triu = where(tri(k - 1), 0, m).
  VarPtr d = offsets(tx, rows, cols);
  if (name == "tril") return ufunc(tx, "where", {ufunc(tx, "less_equal", {d, int_const(tx, k)}), a, zero_of(tx, dt)});
  return ufunc(tx, "where", {ufunc(tx, "less_equal", {d, int_const(tx, k - 1)}), zero_of(tx, dt), a});
}

// The k-th diagonal of a 2-d array, as a new array. Element (i, i + k) sits at flat index
// i * (C + 1) + k: the flat data, padded to R * (C + 1), reshaped to R x (C + 1), has the
// diagonal in column k. Symbolic sizes stay symbolic (the min() of the length is guarded).
VarPtr diagonal_of(Tracer& tx, const VarPtr& a, int64_t k) {
  const jit::TensorMeta& meta = tx.meta(a);
  BREAK_IF(meta.rank() != 2, "numpy.diagonal of an array that is not 2-d");
  SymInt r = meta.shape[0], c = meta.shape[1];
  const DType dt = meta.dtype;
  VarPtr flat = view_op(tx, "ravel", "numpy.ravel", {a}, {}, false);
  int64_t col = k;
  if (k < 0) {
    // Row -k onwards: element (i - k, i) is at (i - k) * C + i.
    if (!tx.out().decide(r + SymInt(k), CmpOp::Gt, 0, "diagonal length at " + tx.location()))
      return creation(tx, "zeros", {int_const(tx, 0)}, {{"dtype", dtype_const(tx, dt)}});
    flat = index_with(tx, flat, {slice_of(tx, SymInt(-k) * c, std::nullopt)});
    r = r + SymInt(k);
    col = 0;
  }
  SymInt avail = c - SymInt(col);  // columns at or right of the diagonal's start
  const SymInt len = tx.out().decide(r - avail, CmpOp::Le, 0, "diagonal length at " + tx.location()) ? r : avail;
  if (!tx.out().decide(len, CmpOp::Gt, 0, "diagonal length at " + tx.location()))
    return creation(tx, "zeros", {int_const(tx, 0)}, {{"dtype", dtype_const(tx, dt)}});
  VarPtr pad = creation(tx, "zeros", {tx.sym_value(r)}, {{"dtype", dtype_const(tx, dt)}});
  VarPtr grid = reshape_to(tx, concat(tx, {flat, pad}, 0), {r, c + SymInt(1)});
  return index_with(tx, grid, {slice_of(tx, std::nullopt, len), int_const(tx, col)});
}

VarPtr diag(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = bind_args("diag", {"v", "k"}, args, kwargs);
  BREAK_IF(!b.count("v") || b["v"]->kind != VarKind::Tensor, "numpy.diag of a non-array");
  const VarPtr& v = b["v"];
  int64_t k = is_absent(b, "k") ? 0 : tx.to_int(b["k"], "k");
  const jit::TensorMeta& meta = tx.meta(v);
  if (meta.rank() == 2) return diagonal_of(tx, v, k);
  BREAK_IF(meta.rank() != 1, Raises{PyExc_ValueError}, "Input must be 1- or 2-d.");
  // res[i, i + k] = v[i]: v padded with |k| zeros, read along rows (k >= 0) or columns (k < 0).
  const DType dt = meta.dtype;
  const int64_t ak = k < 0 ? -k : k;
  const SymInt n = meta.shape[0] + SymInt(ak);
  VarPtr padded = v;
  if (ak) padded = concat(tx, {v, creation(tx, "zeros", {int_const(tx, ak)}, {{"dtype", dtype_const(tx, dt)}})}, 0);
  VarPtr none = tx.wrap_const(Py_None), all = slice_of(tx, std::nullopt, std::nullopt);
  VarPtr along = k >= 0 ? index_with(tx, padded, {all, none}) : index_with(tx, padded, {none, all});
  VarPtr mask = ufunc(tx, "equal", {offsets(tx, n, n), int_const(tx, k)});
  return ufunc(tx, "where", {mask, along, zero_of(tx, dt)});
}

VarPtr diagonal(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = name == "trace" ? bind_args(name, {"a", "offset", "axis1", "axis2", "dtype", "out"}, args, kwargs)
                           : bind_args(name, {"a", "offset", "axis1", "axis2"}, args, kwargs);
  BREAK_IF(!b.count("a") || b["a"]->kind != VarKind::Tensor, "numpy." + name + " of a non-array");
  BREAK_IF(!is_absent(b, "out"), "numpy.trace(out=)");
  const int rank = tx.meta(b["a"]).rank();
  BREAK_IF(rank < 2, Raises{PyExc_ValueError}, "diag requires an array of at least two dimensions");
  int a1 = is_absent(b, "axis1") ? 0 : normalize_axis(tx, tx.to_int(b["axis1"], "axis1"), rank);
  int a2 = is_absent(b, "axis2") ? 1 : normalize_axis(tx, tx.to_int(b["axis2"], "axis2"), rank);
  BREAK_IF(rank != 2, "numpy." + name + " of an array that is not 2-d");
  VarPtr a = b["a"];
  if (a1 == 1 && a2 == 0) a = view_op(tx, "transpose", "numpy.transpose", {a}, {}, false);
  else BREAK_IF(a1 == a2, Raises{PyExc_ValueError}, "axis1 and axis2 cannot be the same");
  VarPtr d = diagonal_of(tx, a, is_absent(b, "offset") ? 0 : tx.to_int(b["offset"], "offset"));
  if (name != "trace") return d;
  KwArgs kw{{"axis", int_const(tx, -1)}};
  if (!is_absent(b, "dtype")) kw.emplace_back("dtype", b["dtype"]);
  return reduction(tx, "sum", "numpy.sum", {d}, kw, false);
}

VarPtr diff(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = bind_args("diff", {"a", "n", "axis", "prepend", "append"}, args, kwargs);
  BREAK_IF(!b.count("a") || b["a"]->kind != VarKind::Tensor, "numpy.diff of a non-array");
  BREAK_IF(b.count("prepend") || b.count("append"), "numpy.diff with prepend= or append=");
  VarPtr a = b["a"];
  const int64_t n = is_absent(b, "n") ? 1 : tx.to_int(b["n"], "n");
  BREAK_IF(n < 0, Raises{PyExc_ValueError}, "order must be non-negative but got " + std::to_string(n));
  const int rank = tx.meta(a).rank();
  BREAK_IF(rank == 0, Raises{PyExc_ValueError}, "diff requires input that is at least one dimensional");
  const int axis = normalize_axis(tx, is_absent(b, "axis") ? -1 : tx.to_int(b["axis"], "axis"), rank);
  const char* op = tx.meta(a).dtype == DType::Bool ? "not_equal" : "subtract";
  for (int64_t i = 0; i < n; ++i) {
    VarPtr hi = index_axis(tx, a, axis, slice_of(tx, SymInt(1), std::nullopt));
    VarPtr lo = index_axis(tx, a, axis, slice_of(tx, std::nullopt, SymInt(-1)));
    a = ufunc(tx, op, {hi, lo});
  }
  return a;
}

VarPtr meshgrid(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  bool copy = true, sparse = false, xy = true;
  for (const auto& [k, v] : kwargs) {
    if (k == "copy") copy = tx.truth(v, "copy");
    else if (k == "sparse") sparse = tx.truth(v, "sparse");
    else if (k == "indexing") {
      OwnedRef s = tx.python_value(v, "indexing");
      BREAK_IF(!PyUnicode_Check(s.get()), Raises{PyExc_ValueError}, "Valid values for `indexing` are 'xy' and 'ij'.");
      xy = PyUnicode_CompareWithASCIIString(s.get(), "xy") == 0;
      BREAK_IF(!xy && PyUnicode_CompareWithASCIIString(s.get(), "ij") != 0, Raises{PyExc_ValueError},
               "Valid values for `indexing` are 'xy' and 'ij'.");
    } else {
      graph_break(Raises{PyExc_TypeError}, "meshgrid() got an unexpected keyword argument '" + k + "'");
    }
  }
  const size_t ndim = args.size();
  for (const VarPtr& x : args) BREAK_IF(x->kind != VarKind::Tensor, "numpy.meshgrid of a non-array");
  // NumPy: each x raveled into its own axis (the first two swapped for 'xy'), then broadcast.
  std::vector<VarPtr> out;
  std::vector<SymInt> lengths;
  for (const VarPtr& x : args) lengths.push_back(numel(tx.meta(x).shape));
  for (size_t i = 0; i < ndim; ++i) {
    Shape s(ndim, SymInt(1));
    size_t at = xy && ndim > 1 && i < 2 ? 1 - i : i;
    s[at] = lengths[i];
    out.push_back(reshape_to(tx, args[i], s));
  }
  if (!sparse) {
    Shape full(ndim, SymInt(1));
    for (size_t i = 0; i < ndim; ++i) full[xy && ndim > 1 && i < 2 ? 1 - i : i] = lengths[i];
    for (VarPtr& o : out) o = view_op(tx, "broadcast_to", "numpy.broadcast_to", {o, shape_value(tx, full)}, {}, false);
  }
  if (copy)
    for (VarPtr& o : out) o = view_op(tx, "copy", "numpy.copy", {o}, {}, false);
  return std::make_shared<SeqVar>(VarKind::List, std::move(out));
}

// numpy.indices(dimensions, dtype=int, sparse=False): along axis k, arange(dimensions[k]) with
// every other axis of size 1; broadcast to the full grid and stacked unless sparse (then a tuple).
VarPtr indices(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = bind_args("indices", {"dimensions", "dtype", "sparse"}, args, kwargs);
  BREAK_IF(!b.count("dimensions"), Raises{PyExc_TypeError}, "indices() needs dimensions");
  const DType dt = is_absent(b, "dtype") ? DType::Int64 : dtype_of(tx, b["dtype"]);
  const bool sparse = !is_absent(b, "sparse") && tx.truth(b["sparse"], "sparse");
  std::vector<VarPtr> items = tx.unpack(b["dimensions"], "indices dimensions");
  const size_t nd = items.size();
  Shape full;
  for (const VarPtr& d : items) full.push_back(size_arg(tx, d, "negative dimensions are not allowed:"));
  std::vector<VarPtr> out;
  VarPtr none = tx.wrap_const(Py_None), all = slice_of(tx, std::nullopt, std::nullopt);
  for (size_t k = 0; k < nd; ++k) {
    std::vector<VarPtr> idx(nd, none);
    idx[k] = all;
    VarPtr v = index_with(tx, iota(tx, full[k], dt), std::move(idx));
    if (!sparse) v = view_op(tx, "broadcast_to", "numpy.broadcast_to", {v, shape_value(tx, full)}, {}, false);
    out.push_back(v);
  }
  if (sparse) return std::make_shared<SeqVar>(VarKind::Tuple, std::move(out));
  if (nd == 0) return creation(tx, "empty", {shape_value(tx, {SymInt(0)})}, {{"dtype", dtype_const(tx, dt)}});
  return join(tx, "stack", {std::make_shared<SeqVar>(VarKind::List, std::move(out))}, {});
}

}  // namespace

VarPtr sequence(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  if (name == "linspace") return linspace(tx, args, kwargs);
  if (name == "eye" || name == "identity" || name == "tri") return eye(tx, name, args, kwargs);
  if (name == "tril" || name == "triu") return tril_triu(tx, name, args, kwargs);
  if (name == "diag") return diag(tx, args, kwargs);
  if (name == "diagonal" || name == "trace") return diagonal(tx, name, args, kwargs);
  if (name == "diff") return diff(tx, args, kwargs);
  if (name == "meshgrid") return meshgrid(tx, args, kwargs);
  if (name == "indices") return indices(tx, args, kwargs);
  graph_break(BreakKind::Internal, "internal: no sequence builder " + name);
}

}  // namespace framejit::frontend::ops
