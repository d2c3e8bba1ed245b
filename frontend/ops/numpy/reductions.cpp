// reductions.cpp — sum mean max min prod var std argmax argmin any all, as functions and methods.
#include "frontend/ops/numpy/families.h"

namespace framejit::frontend::ops {

namespace {

std::vector<std::string> params_of(const std::string& name, bool is_method) {
  std::vector<std::string> p;
  if (!is_method) p.push_back("a");
  if (name == "sum" || name == "prod") {
    for (const char* s : {"axis", "dtype", "out", "keepdims", "initial", "where"}) p.push_back(s);
  } else if (name == "mean" || name == "any" || name == "all") {
    if (name == "mean") {
      for (const char* s : {"axis", "dtype", "out", "keepdims", "*", "where"}) p.push_back(s);
    } else {
      for (const char* s : {"axis", "out", "keepdims", "*", "where"}) p.push_back(s);
    }
  } else if (name == "max" || name == "min" || name == "amax" || name == "amin") {
    for (const char* s : {"axis", "out", "keepdims", "initial", "where"}) p.push_back(s);
  } else if (name == "var" || name == "std") {
    for (const char* s : {"axis", "dtype", "out", "ddof", "keepdims", "*", "where"}) p.push_back(s);
  } else {  // argmax argmin
    for (const char* s : {"axis", "out", "*", "keepdims"}) p.push_back(s);
  }
  return p;
}

}  // namespace

VarPtr reduction(Tracer& tx, const std::string& name, const std::string& target, const std::vector<VarPtr>& args,
                 const KwArgs& kwargs, bool is_method) {
  std::vector<VarPtr> rest = args;
  VarPtr self;
  if (is_method) {
    self = rest.front();
    rest.erase(rest.begin());
  }
  auto bound = bind_args(name, params_of(name, is_method), rest, kwargs);
  if (!is_method) {
    BREAK_IF(!bound.count("a"), name + "() missing its array argument");
    self = bound["a"];
  }
  BREAK_IF(self->kind != VarKind::Tensor, "numpy." + name + " of a non-array (it would call numpy.asarray)");
  for (const char* k : {"out", "where", "initial"})
    BREAK_IF(!is_absent(bound, k), name + "() with " + k + "=");

  const jit::TensorMeta& m = tx.meta(self);
  int rank = m.rank();
  auto axes = normalize_axes(tx, bound.count("axis") ? bound["axis"] : nullptr, rank);
  bool keepdims = bound.count("keepdims") && tx.truth(bound["keepdims"], "keepdims");
  bool is_arg = name == "argmax" || name == "argmin";
  BREAK_IF(is_arg && axes && axes->size() > 1, name + "() takes a single axis");

  Shape shape;
  std::vector<bool> reduced(rank, !axes);
  if (axes)
    for (int a : *axes) reduced[a] = true;
  bool empty_reduce = false;
  const bool needs_elements = name == "max" || name == "min" || name == "amax" || name == "amin" || is_arg;
  for (int d = 0; d < rank; ++d) {
    if (reduced[d]) {
      if (m.shape[d].is_const() && m.shape[d].const_value() == 0) empty_reduce = true;
      // A size that may be 0 (x[1:-1] of a symbolic size) is decided here and guarded: the
      // program must not raise half-way, after the graph's writes into inputs were decided.
      if (needs_elements && !m.shape[d].is_const() &&
          !tx.out().decide(m.shape[d], CmpOp::Gt, 0, name + " of a non-empty axis at " + tx.location()))
        empty_reduce = true;
      if (keepdims) shape.emplace_back(1);
    } else {
      shape.push_back(m.shape[d]);
    }
  }
  // max/min/argmax of nothing raise in NumPy; let CPython raise it.
  BREAK_IF(empty_reduce && needs_elements, Raises{PyExc_ValueError}, "zero-size reduction in " + name + "() raises");

  // Ask NumPy's own function for the dtype with normalized arguments.
  KwArgs probe_kwargs;
  for (const char* k : {"axis", "dtype", "keepdims", "ddof"})
    if (!is_absent(bound, k)) probe_kwargs.emplace_back(k, bound[k]);
  PyObject* fn = numpy_attr(name.c_str());
  BREAK_IF(!fn && !uses_native_rules(tx), "numpy has no " + name);
  DTypeAnswer dt = probe_dtype(tx, DTypeRule::Reduction, name, fn, {self}, probe_kwargs);
  // axis and keepdims are specialized above (the result's shape depends on them): record them as
  // the constants they are, so that backends see literal axes also when the program passed them
  // in a variable. ddof is pinned the same way: code generation must know that count - ddof > 0.
  std::vector<VarPtr> rec_args = args;
  KwArgs rec_kwargs = kwargs;
  for (const char* k : {"axis", "keepdims", "ddof"}) {
    if (is_absent(bound, k) || is_const(bound[k])) continue;
    VarPtr v = bound[k];
    VarPtr c = tx.wrap_const(tx.python_value(v, k).get());
    for (auto& a : rec_args)
      if (a == v) a = c;
    for (auto& kw : rec_kwargs)
      if (kw.second == v) kw.second = c;
  }
  // A reduced size known only at run time may be 0 (an empty mask): NumPy's own reduction gives
  // its identity, or NaN and its warnings for a mean (compiled reductions assume elements).
  bool maybe_empty = false;
  for (int d = 0; d < rank; ++d) maybe_empty |= reduced[d] && tx.out().is_unbacked(m.shape[d]);
  VarPtr r = tx.add_tensor(target, to_args(tx, rec_args), tensor_meta(dt.dtype, shape, dt.scalar_object),
                           to_kwargs(tx, rec_kwargs));
  if (maybe_empty) tx.out().graph.nodes()[as<TensorVar>(r)->node].attrs.described = false;
  return r;
}

}  // namespace framejit::frontend::ops
