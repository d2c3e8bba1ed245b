// ufunc_methods.cpp — the methods of NumPy's ufuncs (np.add.outer, np.minimum.reduce,
// np.add.accumulate, np.add.reduceat) and the scans cumsum/cumprod. outer and reduce are the
// elementwise and reduction ops they equal; scans have no native op yet and run as extern steps
// whose dtype NumPy itself decides and whose shape is computed here.
#include "frontend/ops/numpy/compose.h"

namespace framejit::frontend::ops {

namespace {

}  // namespace

// The reduction a ufunc's reduce() is (np.sum is add.reduce; np.amax is maximum.reduce ...).
const char* reduction_of_ufunc(const std::string& ufunc_name) {
  if (ufunc_name == "add") return "sum";
  if (ufunc_name == "multiply") return "prod";
  if (ufunc_name == "maximum") return "max";
  if (ufunc_name == "minimum") return "min";
  if (ufunc_name == "logical_and") return "all";
  if (ufunc_name == "logical_or") return "any";
  return nullptr;
}

namespace {

VarPtr outer(Tracer& tx, const std::string& uname, PyObject* ufn, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "numpy." + uname + ".outer";
  BREAK_IF(args.size() != 2, Raises{PyExc_TypeError}, user + "() takes exactly two arguments");
  for (const auto& [k, v] : kwargs) BREAK_IF(!(k == "out" && is_none(v)), user + "() with " + k + "=");
  for (const VarPtr& a : args) BREAK_IF(a->kind != VarKind::Tensor, user + " of a non-array (it would call numpy.asarray)");
  // NumPy: ufunc(a.reshape(a.shape + (1,) * b.ndim), b).
  const int rb = tx.meta(args[1]).rank();
  std::vector<VarPtr> items{tx.wrap_const(Py_Ellipsis)};
  for (int d = 0; d < rb; ++d) items.push_back(tx.wrap_const(Py_None));
  VarPtr a = rb == 0 ? args[0] : index_with(tx, args[0], std::move(items));
  return elementwise(tx, "numpy." + uname, ufn, {a, args[1]}, {});
}

VarPtr reduce(Tracer& tx, const std::string& uname, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "numpy." + uname + ".reduce";
  const char* red = reduction_of_ufunc(uname);
  BREAK_IF(!red, user + " is not supported by framejit yet");
  auto b = bind_args(user, {"array", "axis", "dtype", "out", "keepdims", "initial", "where"}, args, kwargs);
  BREAK_IF(!b.count("array") || b["array"]->kind != VarKind::Tensor, user + " of a non-array (it would call numpy.asarray)");
  for (const char* k : {"out", "initial", "where"}) BREAK_IF(b.count(k), user + "() with " + k + "=");
  const bool logical = uname == "logical_and" || uname == "logical_or";
  BREAK_IF(logical && !is_absent(b, "dtype"), user + "() with dtype=");
  // reduce()'s axis defaults to 0, the reduction functions' to None.
  KwArgs kw{{"axis", b.count("axis") ? b["axis"] : int_const(tx, 0)}};
  if (!is_absent(b, "dtype")) kw.emplace_back("dtype", b["dtype"]);
  if (b.count("keepdims")) kw.emplace_back("keepdims", b["keepdims"]);
  return reduction(tx, red, std::string("numpy.") + red, {b["array"]}, kw, false);
}

// accumulate, cumsum, cumprod: one extern step, exact meta.
VarPtr scan(Tracer& tx, const std::string& target, const std::string& user, PyObject* fn, const std::vector<VarPtr>& args,
            const KwArgs& kwargs, bool axis_default_none) {
  auto b = bind_args(user, {"array", "axis", "dtype", "out"}, args, kwargs);
  BREAK_IF(!b.count("array") || b["array"]->kind != VarKind::Tensor, user + " of a non-array (it would call numpy.asarray)");
  BREAK_IF(!is_absent(b, "out"), user + "() with out=");
  const VarPtr& a = b["array"];
  const jit::TensorMeta& m = tx.meta(a);
  BREAK_IF(m.scalar_object, user + " of a NumPy scalar");
  Shape shape = m.shape;
  KwArgs rec{}, probe_kw{};
  if (axis_default_none && is_absent(b, "axis")) {
    shape = {numel(m.shape)};
  } else {
    BREAK_IF(m.rank() == 0, Raises{PyExc_TypeError}, user + " of a 0-d array");
    const int axis = normalize_axis(tx, b.count("axis") ? tx.to_int(b["axis"], "axis") : 0, m.rank());
    rec.emplace_back("axis", int_const(tx, axis));
    probe_kw.emplace_back("axis", int_const(tx, axis));
  }
  if (!is_absent(b, "dtype")) {
    rec.emplace_back("dtype", b["dtype"]);
    probe_kw.emplace_back("dtype", b["dtype"]);
  }
  DTypeAnswer dt = probe_dtype(tx, DTypeRule::NumPyOnly, user, fn, {a}, probe_kw);
  return tx.add_tensor(target, {tx.to_arg(a)}, tensor_meta(dt.dtype, shape), to_kwargs(tx, rec));
}

VarPtr reduceat(Tracer& tx, const std::string& uname, PyObject* fn, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "numpy." + uname + ".reduceat";
  auto b = bind_args(user, {"array", "indices", "axis", "dtype", "out"}, args, kwargs);
  BREAK_IF(!b.count("array") || b["array"]->kind != VarKind::Tensor, user + " of a non-array (it would call numpy.asarray)");
  BREAK_IF(!b.count("indices"), Raises{PyExc_TypeError}, user + "() needs indices");
  BREAK_IF(!is_absent(b, "out"), user + "() with out=");
  const VarPtr& a = b["array"];
  const jit::TensorMeta& m = tx.meta(a);
  BREAK_IF(m.rank() == 0, Raises{PyExc_TypeError}, user + " of a 0-d array");
  const int axis = normalize_axis(tx, b.count("axis") ? tx.to_int(b["axis"], "axis") : 0, m.rank());
  VarPtr idx = b["indices"];
  SymInt count;
  if (idx->kind == VarKind::Tensor) {
    const jit::TensorMeta& im = tx.meta(idx);
    BREAK_IF(im.rank() != 1, user + " with indices that are not 1-d");
    count = im.shape[0];
  } else {
    // A constant list of ints: its indices are checked now, as NumPy would at the call.
    std::vector<VarPtr> items = tx.unpack(idx, "reduceat indices");
    for (const VarPtr& i : items) tx.to_int(i, "reduceat index");
    count = SymInt(static_cast<int64_t>(items.size()));
    idx = tx.wrap_const(tx.python_value(idx, "reduceat indices").get());
  }
  Shape shape = m.shape;
  shape[axis] = count;
  KwArgs probe_kw{{"axis", int_const(tx, axis)}};
  if (!is_absent(b, "dtype")) probe_kw.emplace_back("dtype", b["dtype"]);
  // The probe's stand-in has one element along every axis: index 0 is valid for it.
  DTypeAnswer dt = probe_dtype(tx, DTypeRule::NumPyOnly, user, fn, {a, tx.wrap_const(OwnedRef::steal(Py_BuildValue("[i]", 0)).get())}, probe_kw);
  return tx.add_tensor("numpy." + uname + ".reduceat", {tx.to_arg(a), tx.to_arg(idx)}, tensor_meta(dt.dtype, shape),
                       to_kwargs(tx, probe_kw));
}

}  // namespace

VarPtr ufunc_method(Tracer& tx, const std::string& uname, const std::string& method, PyObject* bound,
                    const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  PyObject* ufn = numpy_attr(uname.c_str());
  if (method == "outer") return outer(tx, uname, ufn, args, kwargs);
  if (method == "reduce") return reduce(tx, uname, args, kwargs);
  if (method == "accumulate")
    return scan(tx, "numpy." + uname + ".accumulate", "numpy." + uname + ".accumulate", bound, args, kwargs, false);
  if (method == "reduceat") return reduceat(tx, uname, bound, args, kwargs);
  graph_break("numpy." + uname + "." + method + " is not supported by framejit yet");
}

VarPtr cumulative(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  return scan(tx, "numpy." + name, "numpy." + name, numpy_attr(name.c_str()), args, kwargs, true);
}

}  // namespace framejit::frontend::ops
