// reductions.cpp — torch's reductions with dim/keepdim, arg-reductions, max/min with indices,
// var/std, and softmax/log_softmax traced as the reductions they are made of (Note [Torch ops]).
#include <cmath>

#include "frontend/cpython/pyref.h"
#include "frontend/ops/torch/torch_ops.h"

namespace framejit::frontend::ops::torch_ops {

namespace {

using jit::OpKind;
using rt::DType;

bool truth(Tracer& tx, std::map<std::string, VarPtr>& b, const std::string& k, bool dflt) {
  if (!b.count(k) || (is_const(b[k]) && const_value(b[k]) == Py_None)) return dflt;
  return tx.truth(b[k], k);
}

VarPtr bool_const(Tracer& tx, bool v) { return tx.wrap_const(v ? Py_True : Py_False); }

VarPtr axes_const(Tracer& tx, const std::vector<int>& axes) {
  OwnedRef t = OwnedRef::steal(PyTuple_New(static_cast<Py_ssize_t>(axes.size())));
  for (size_t i = 0; t && i < axes.size(); ++i) PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), PyLong_FromLong(axes[i]));
  if (!t) python_error_break("a dim tuple: ");
  return tx.wrap_const(t.get());
}

// The reduction node `op` of x over `axes` (nullopt: all), as the torch call `target`.
VarPtr reduce(Tracer& tx, OpKind op, const std::string& target, const VarPtr& x, std::optional<std::vector<int>> axes,
              bool keepdim, DType dtype, int64_t ddof = 0, bool convert = false) {
  const Shape in = shape_of(tx, x);
  const int rank = static_cast<int>(in.size());
  jit::OpAttrs attrs;
  attrs.all_axes = !axes;
  if (axes) attrs.axes = *axes;
  attrs.keepdims = keepdim;
  attrs.ddof = ddof;
  if (convert) attrs.dtype = dtype;  // torch sums ints and bools as int64, converting as it reads
  Shape out;
  for (int d = 0; d < rank; ++d) {
    const bool reduced = !axes || std::find(axes->begin(), axes->end(), d) != axes->end();
    if (!reduced) out.push_back(in[static_cast<size_t>(d)]);
    else if (keepdim) out.emplace_back(1);
  }
  if (jit::reduction_needs_elements(op)) {
    SymInt n(1);
    for (int d = 0; d < rank; ++d)
      if (!axes || std::find(axes->begin(), axes->end(), d) != axes->end()) n = n * in[static_cast<size_t>(d)];
    BREAK_IF(!tx.out().decide(n, CmpOp::Gt, 0, target + " at " + tx.location()), Raises{PyExc_IndexError},
             target + "(): Expected reduction dim to be specified for input.numel() == 0.");
  }
  KwArgs kw;
  const bool int_dim = op == OpKind::ArgMax || op == OpKind::ArgMin || op == OpKind::Prod || op == OpKind::Any ||
                       op == OpKind::All;  // these take one int dim
  if (axes) kw.emplace_back("dim", int_dim ? tx.wrap_const(OwnedRef::steal(PyLong_FromLong((*axes)[0])).get())
                                           : axes_const(tx, *axes));
  if (op == OpKind::Var || op == OpKind::Std) kw.emplace_back("unbiased", bool_const(tx, ddof == 1));
  if (keepdim) kw.emplace_back("keepdim", bool_const(tx, true));
  return add_node(tx, op, std::move(attrs), target, {x}, kw, tensor_meta(dtype, std::move(out)));
}

std::optional<std::vector<int>> dims_of(Tracer& tx, std::map<std::string, VarPtr>& b, int rank) {
  if (!b.count("dim") || (is_const(b["dim"]) && const_value(b["dim"]) == Py_None)) return std::nullopt;
  auto axes = normalize_axes(tx, b["dim"], rank);
  // torch: dim=() (and []) reduces every dim, like None.
  if (axes && axes->empty()) return std::nullopt;
  return axes;
}

}  // namespace

bool is_reduction_name(const std::string& name) {
  return name_in(name, {"sum",    "mean", "amax",    "amin",        "prod", "max", "min", "argmax",
                                       "argmin", "var",  "std",     "softmax",     "log_softmax", "any", "all",
                                       "logsumexp", "norm", "normalize"});
}

VarPtr reduction(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "torch." + name;
  BREAK_IF(args.empty() || args[0]->kind != VarKind::Tensor, user + " of a non-tensor");
  const VarPtr& x = args[0];
  const int rank = tx.meta(x).rank();
  PyObject* fn = torch_attr(name.c_str());
  // Note [Composites in float32] (pointwise.cpp): torch's reductions of a half type accumulate in
  // float32 and round once, as its softmax does: traced on x.float(), the result converted back
  // (argmax's int64 stays). max/min with a dim (a named tuple) and the composites torch itself
  // spells op by op (logsumexp, normalize) keep the half type.
  const bool widened = name == "softmax" || name == "log_softmax" || name == "sum" || name == "mean" || name == "prod" ||
                       name == "amax" || name == "amin" || name == "var" || name == "std" || name == "norm" ||
                       name == "argmax" || name == "argmin" ||
                       ((name == "max" || name == "min") && args.size() == 1 && kwargs.empty());
  if (widened && args[0]->kind == VarKind::Tensor && rt::dtype_is_half(tx.meta(args[0]).dtype))
    return in_opmath(tx, args, [&](const std::vector<VarPtr>& a) { return reduction(tx, name, a, kwargs); });
  if (name == "softmax" || name == "log_softmax") {
    auto b = bind_args(user, {"input", "dim", "dtype", "_stacklevel"}, args, kwargs);
    BREAK_IF(!b.count("dim") || is_absent(b, "dim"), user + " without dim (deprecated implicit dim)");
    BREAK_IF(!is_absent(b, "dtype"), user + "(dtype=)");
    const int d = normalize_axis(tx, tx.to_int(b["dim"], "softmax dim"), std::max(rank, 1));
    const Answer r = probe(tx, fn, user, {x}, {{"dim", b["dim"]}});
    BREAK_IF(!rt::dtype_is_float(r.dtype), user + " of a " + std::string(rt::dtype_name(r.dtype)) + " tensor");
    BREAK_IF(rank == 0, user + " of a 0-d tensor");
    // exp(x - max) / sum(exp(x - max)): the max keeps exp in range, as torch's kernel does.
    VarPtr m = reduce(tx, OpKind::Max, "torch.amax", x, std::vector<int>{d}, true, r.dtype);
    VarPtr shifted = pointwise(tx, "sub", {x, m}, {});
    VarPtr e = pointwise(tx, "exp", {shifted}, {});
    VarPtr s = reduce(tx, OpKind::Sum, "torch.sum", e, std::vector<int>{d}, true, r.dtype);
    if (name == "softmax") return pointwise(tx, "div", {e, s}, {});
    return pointwise(tx, "sub", {shifted, pointwise(tx, "log", {s}, {})}, {});
  }
  if (name == "logsumexp") {
    // torch's own formulation: log(sum(exp(x - m))) + m, with an infinite m taken as 0 (so rows of
    // -inf give -inf, not NaN).
    auto b = bind_args(user, {"input", "dim", "keepdim"}, args, kwargs);
    BREAK_IF(!b.count("dim"), Raises{PyExc_TypeError}, "logsumexp() needs dim");
    const auto axes = dims_of(tx, b, rank);
    const bool keep = truth(tx, b, "keepdim", false);
    const Answer r = probe(tx, fn, user, {x}, {{"dim", b["dim"]}});
    BREAK_IF(!rt::dtype_is_float(r.dtype), user + " of a " + std::string(rt::dtype_name(r.dtype)) + " tensor");
    VarPtr m = reduce(tx, OpKind::Max, "torch.amax", x, axes, true, r.dtype);
    VarPtr inf = pointwise(tx, "isinf", {m}, {});
    VarPtr m0 = join_op(tx, "masked_fill", {m, inf, tx.wrap_const(OwnedRef::steal(PyFloat_FromDouble(0.0)).get())}, {});
    VarPtr e = pointwise(tx, "exp", {pointwise(tx, "sub", {x, m0}, {})}, {});
    VarPtr s = reduce(tx, OpKind::Sum, "torch.sum", e, axes, keep, r.dtype);
    VarPtr mk = keep ? m0 : reduce(tx, OpKind::Max, "torch.amax", m0, axes, false, r.dtype);  // m0 without its kept dims
    return pointwise(tx, "add", {pointwise(tx, "log", {s}, {}), mk}, {});
  }
  if (name == "norm" || name == "normalize") {
    // The 2-norm (sqrt of the sum of squares), the 1-norm and the inf-norm; normalize divides by
    // the norm clamped to eps.
    auto b = name == "norm" ? bind_args(user, {"input", "p", "dim", "keepdim", "dtype"}, args, kwargs)
                            : bind_args("torch.nn.functional.normalize", {"input", "p", "dim", "eps", "out"}, args, kwargs);
    BREAK_IF(!is_absent(b, name == "norm" ? "dtype" : "out"), user + " with dtype= or out=");
    double p = 2.0;
    if (b.count("p") && !is_absent(b, "p")) {
      PyObject* pv = is_const(b["p"]) ? const_value(b["p"]) : nullptr;  // borrowed
      BREAK_IF(!pv, user + " with a p that is not a constant");
      if (PyUnicode_Check(pv)) {
        BREAK_IF(std::string(PyUnicode_AsUTF8(pv)) != "fro", user + " with p='" + PyUnicode_AsUTF8(pv) + "'");
      } else {
        p = PyFloat_AsDouble(pv);
        if (PyErr_Occurred()) python_error_break(user + ": ");
      }
    }
    BREAK_IF(p != 1.0 && p != 2.0 && !std::isinf(p), user + " with p=" + std::to_string(p) + " is not captured yet");
    const Answer r = probe(tx, torch_attr("norm"), user, {x});
    BREAK_IF(!rt::dtype_is_float(r.dtype), user + " of a " + std::string(rt::dtype_name(r.dtype)) + " tensor");
    std::optional<std::vector<int>> axes;
    bool keep = false;
    if (name == "norm") {
      axes = dims_of(tx, b, rank);
      keep = truth(tx, b, "keepdim", false);
    } else {
      const int d = normalize_axis(tx, b.count("dim") ? tx.to_int(b["dim"], "dim") : 1, std::max(rank, 1));
      axes = std::vector<int>{d};
      keep = true;
    }
    VarPtr a = pointwise(tx, "abs", {x}, {});
    VarPtr n = std::isinf(p) ? reduce(tx, OpKind::Max, "torch.amax", a, axes, keep, r.dtype)
               : p == 1.0    ? reduce(tx, OpKind::Sum, "torch.sum", a, axes, keep, r.dtype)
                             : pointwise(tx, "sqrt", {reduce(tx, OpKind::Sum, "torch.sum", pointwise(tx, "mul", {x, x}, {}), axes, keep, r.dtype)}, {});
    if (name == "norm") return n;
    const double eps = b.count("eps") ? PyFloat_AsDouble(tx.python_value(b["eps"], "normalize eps").get()) : 1e-12;
    if (PyErr_Occurred()) python_error_break(user + ": ");
    return pointwise(tx, "div", {x, pointwise(tx, "clamp_min", {n, tx.wrap_const(OwnedRef::steal(PyFloat_FromDouble(eps)).get())}, {})}, {});
  }
  if (name == "max" || name == "min") {
    // max(x): the largest element; max(x, dim): (values, indices); max(x, other): maximum.
    if (args.size() == 2 && args[1]->kind == VarKind::Tensor && kwargs.empty())
      return pointwise(tx, name == "max" ? "maximum" : "minimum", args, {});
    auto b = bind_args(user, {"input", "dim", "keepdim"}, args, kwargs);
    const Answer r = probe(tx, fn, user, {x});
    const OpKind op = name == "max" ? OpKind::Max : OpKind::Min;
    if (!b.count("dim")) return reduce(tx, op, name == "max" ? "torch.amax" : "torch.amin", x, std::nullopt, false, r.dtype);
    const auto axes = dims_of(tx, b, rank);
    BREAK_IF(!axes || axes->size() != 1, user + " with a dim that is not one int");
    const bool keep = truth(tx, b, "keepdim", false);
    VarPtr values = reduce(tx, op, name == "max" ? "torch.amax" : "torch.amin", x, axes, keep, r.dtype);
    VarPtr indices = reduce(tx, name == "max" ? OpKind::ArgMax : OpKind::ArgMin, name == "max" ? "torch.argmax" : "torch.argmin",
                            x, axes, keep, DType::Int64);
    auto out = std::make_shared<SeqVar>(VarKind::Tuple, std::vector<VarPtr>{values, indices});
    // torch's (values, indices) is torch.return_types.<name>, a named tuple.
    if (PyObject* rt_module = torch_attr("return_types")) {
      OwnedRef type = OwnedRef::steal(PyObject_GetAttrString(rt_module, name.c_str()));
      if (!type) PyErr_Clear();
      out->named_type = std::move(type);
      out->field_names = {"values", "indices"};
    }
    return out;
  }
  if (name == "argmax" || name == "argmin") {
    auto b = bind_args(user, {"input", "dim", "keepdim"}, args, kwargs);
    const Answer r = probe(tx, fn, user, {x});
    (void)r;
    const auto axes = dims_of(tx, b, rank);
    BREAK_IF(axes && axes->size() != 1, user + " with a dim that is not one int");
    const bool keep = truth(tx, b, "keepdim", false);
    BREAK_IF(!axes && keep, user + "(keepdim=True) without dim");
    return reduce(tx, name == "argmax" ? OpKind::ArgMax : OpKind::ArgMin, "torch." + name, x, axes, keep, DType::Int64);
  }
  if (name == "var" || name == "std") {
    auto b = bind_args(user, {"input", "dim", "unbiased", "keepdim", "*", "correction"}, args, kwargs);
    const bool keep = truth(tx, b, "keepdim", false);
    int64_t ddof = truth(tx, b, "unbiased", true) ? 1 : 0;
    if (!is_absent(b, "correction")) ddof = tx.to_int(b["correction"], "correction");
    BREAK_IF(ddof != 0 && ddof != 1, user + " with correction " + std::to_string(ddof));
    const Answer r = probe(tx, fn, user, {x});
    BREAK_IF(!rt::dtype_is_float(r.dtype), user + " of a " + std::string(rt::dtype_name(r.dtype)) + " tensor");
    return reduce(tx, name == "var" ? OpKind::Var : OpKind::Std, "torch." + name, x, dims_of(tx, b, rank), keep, r.dtype,
                  ddof);
  }
  // sum mean amax amin prod any all
  auto b = bind_args(user, {"input", "dim", "keepdim", "*", "dtype"}, args, kwargs);
  BREAK_IF(!is_absent(b, "dtype"), user + "(dtype=)");
  const bool keep = truth(tx, b, "keepdim", false);
  const auto axes = dims_of(tx, b, rank);
  KwArgs probe_kw;
  if (axes) probe_kw.emplace_back("dim", axes_const(tx, *axes));
  if (name == "prod" || name == "any" || name == "all") {
    // These take one int dim, or none.
    BREAK_IF(axes && axes->size() != 1, user + " over several dims");
    probe_kw.clear();
    if (axes) probe_kw.emplace_back("dim", tx.wrap_const(OwnedRef::steal(PyLong_FromLong((*axes)[0])).get()));
  }
  const Answer r = probe(tx, fn, user, {x}, probe_kw);
  const OpKind op = name == "sum"    ? OpKind::Sum
                    : name == "mean" ? OpKind::Mean
                    : name == "amax" ? OpKind::Max
                    : name == "amin" ? OpKind::Min
                    : name == "prod" ? OpKind::Prod
                    : name == "any"  ? OpKind::Any
                                     : OpKind::All;
  const bool convert = (op == OpKind::Sum || op == OpKind::Prod) && r.dtype != tx.meta(x).dtype;
  return reduce(tx, op, "torch." + name, x, axes, keep, r.dtype, 0, convert);
}

}  // namespace framejit::frontend::ops::torch_ops
