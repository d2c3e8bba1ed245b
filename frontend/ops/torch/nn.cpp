// nn.cpp — torch.nn.functional's layer_norm, cross_entropy and nll_loss (traced as the ops they
// are made of), dropout and embedding (Note [Torch ops]).
#include "frontend/cpython/pyref.h"
#include "frontend/interop/torch_array.h"
#include "frontend/ops/torch/torch_ops.h"

namespace framejit::frontend::ops::torch_ops {

namespace {

VarPtr number(Tracer& tx, double v) {
  OwnedRef o = OwnedRef::steal(PyFloat_FromDouble(v));
  return tx.wrap_const(o.get());
}

bool is_none(const std::map<std::string, VarPtr>& b, const std::string& k) { return is_absent(b, k); }

}  // namespace

bool is_nn_name(const std::string& name) {
  return name == "layer_norm" || name == "dropout" || name == "embedding" || name == "cross_entropy" ||
         name == "nll_loss" || name == "binary_cross_entropy";
}

VarPtr nn_function(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "torch.nn.functional." + name;
  if (name == "binary_cross_entropy") {
    // -(t * log(p) + (1 - t) * log(1 - p)), each log clamped at -100 as torch's kernel does.
    auto b = bind_args(user, {"input", "target", "weight", "size_average", "reduce", "reduction"}, args, kwargs);
    const VarPtr& p = b["input"];
    const VarPtr& t = b["target"];
    BREAK_IF(!p || !t || p->kind != VarKind::Tensor || t->kind != VarKind::Tensor, user + " of non-tensors");
    for (const char* k : {"weight", "size_average", "reduce"}) BREAK_IF(!is_none(b, k), user + "(" + k + "=)");
    std::string mode = "mean";
    if (!is_none(b, "reduction")) mode = PyUnicode_AsUTF8(tx.python_value(b["reduction"], "reduction").get());
    BREAK_IF(mode != "mean" && mode != "sum" && mode != "none", Raises{PyExc_ValueError}, mode + " is not a valid value for reduction");
    const jit::TensorMeta pm = tx.meta(p), tm = tx.meta(t);
    BREAK_IF(!rt::dtype_is_float(pm.dtype) || tm.dtype != pm.dtype, user + " of " + std::string(rt::dtype_name(pm.dtype)) +
                                                                        " and " + std::string(rt::dtype_name(tm.dtype)));
    bool same_shape = pm.rank() == tm.rank();
    for (int d = 0; same_shape && d < pm.rank(); ++d)
      same_shape = tx.out().sizes_equal(pm.shape[static_cast<size_t>(d)], tm.shape[static_cast<size_t>(d)], user + " at " + tx.location());
    BREAK_IF(!same_shape, Raises{PyExc_ValueError}, "Using a target size that is different to the input size is deprecated");
    VarPtr floor = number(tx, -100.0);
    VarPtr one = number(tx, 1.0);
    VarPtr log_p = pointwise(tx, "clamp_min", {pointwise(tx, "log", {p}, {}), floor}, {});
    VarPtr log_q = pointwise(tx, "clamp_min", {pointwise(tx, "log", {operator_pointwise(tx, "sub", {one, p})}, {}), floor}, {});
    VarPtr pos = pointwise(tx, "mul", {t, log_p}, {});
    VarPtr neg = pointwise(tx, "mul", {operator_pointwise(tx, "sub", {one, t}), log_q}, {});
    VarPtr losses = pointwise(tx, "neg", {pointwise(tx, "add", {pos, neg}, {})}, {});
    if (mode == "none") return losses;
    return reduction(tx, mode == "sum" ? "sum" : "mean", {losses}, {});
  }
  if (name == "cross_entropy" || name == "nll_loss") {
    // Class indices over dim 1 of (N, C) scores: nll_loss(log_softmax(x, 1), target), the targets
    // equal to ignore_index left out of the sum and of the count the mean divides by.
    auto b = bind_args(user, {"input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction",
                              "label_smoothing"}, args, kwargs);
    const VarPtr& x = b["input"];
    const VarPtr& t = b["target"];
    BREAK_IF(!x || !t || x->kind != VarKind::Tensor || t->kind != VarKind::Tensor, user + " of non-tensors");
    for (const char* k : {"weight", "size_average", "reduce"}) BREAK_IF(!is_none(b, k), user + "(" + k + "=)");
    if (b.count("label_smoothing"))
      BREAK_IF(PyFloat_AsDouble(tx.python_value(b["label_smoothing"], "label_smoothing").get()) != 0.0,
               user + " with label smoothing");
    std::string mode = "mean";
    if (!is_none(b, "reduction")) {
      OwnedRef r = tx.python_value(b["reduction"], "reduction");
      BREAK_IF(!PyUnicode_Check(r.get()), Raises{PyExc_ValueError}, "reduction must be a string");
      mode = PyUnicode_AsUTF8(r.get());
    }
    BREAK_IF(mode != "mean" && mode != "sum" && mode != "none", Raises{PyExc_ValueError},
             mode + " is not a valid value for reduction");
    const int64_t ignore = b.count("ignore_index") ? tx.to_int(b["ignore_index"], "ignore_index") : -100;
    const jit::TensorMeta xm = tx.meta(x), tm = tx.meta(t);
    BREAK_IF(xm.rank() != 2 || tm.rank() != 1 || tm.dtype != rt::DType::Int64, user + " other than (N, C) scores and N int64 class indices");
    BREAK_IF(!rt::dtype_is_float(xm.dtype), user + " of " + std::string(rt::dtype_name(xm.dtype)) + " scores");
    BREAK_IF(!tx.out().sizes_equal(xm.shape[0], tm.shape[0], user + " at " + tx.location()), Raises{PyExc_ValueError},
             "Expected input batch_size to match target batch_size");
    OwnedRef one = OwnedRef::steal(PyLong_FromLong(1));
    VarPtr logp = name == "cross_entropy" ? reduction(tx, "log_softmax", {x, tx.wrap_const(one.get())}, {}) : x;
    OwnedRef ig = OwnedRef::steal(PyLong_FromLongLong(ignore));
    VarPtr keep = pointwise(tx, "ne", {t, tx.wrap_const(ig.get())}, {});
    VarPtr safe = join_op(tx, "masked_fill", {t, pointwise(tx, "logical_not", {keep}, {}),
                                              tx.wrap_const(OwnedRef::steal(PyLong_FromLong(0)).get())}, {});
    VarPtr rows = join_op(tx, "arange", {tx.sym_value(xm.shape[0])}, {});
    VarPtr picked = torch_getitem(tx, logp, std::make_shared<SeqVar>(VarKind::Tuple, std::vector<VarPtr>{rows, safe}));
    VarPtr losses = join_op(tx, "masked_fill", {pointwise(tx, "neg", {picked}, {}), pointwise(tx, "logical_not", {keep}, {}),
                                                tx.wrap_const(OwnedRef::steal(PyFloat_FromDouble(0.0)).get())}, {});
    if (mode == "none") return losses;
    VarPtr total = reduction(tx, "sum", {losses}, {});
    if (mode == "sum") return total;
    VarPtr as_float = pointwise(tx, "to", {keep, tx.wrap_const(torch_handles()->dtypes[static_cast<int>(xm.dtype)])}, {});
    return pointwise(tx, "div", {total, reduction(tx, "sum", {as_float}, {})}, {});
  }
  if (name == "layer_norm") {
    // Note [Composites in float32] (pointwise.cpp).
    if (!args.empty() && args[0]->kind == VarKind::Tensor && rt::dtype_is_half(tx.meta(args[0]).dtype))
      return in_opmath(tx, args, [&](const std::vector<VarPtr>& a) { return nn_function(tx, name, a, kwargs); });
    auto b = bind_args(user, {"input", "normalized_shape", "weight", "bias", "eps"}, args, kwargs);
    const VarPtr& x = b["input"];
    BREAK_IF(!x || x->kind != VarKind::Tensor, user + " of a non-tensor");
    BREAK_IF(!b.count("normalized_shape"), Raises{PyExc_TypeError}, "layer_norm() needs normalized_shape");
    const Shape norm = parse_shape(tx, b["normalized_shape"]);
    const Shape in = shape_of(tx, x);
    BREAK_IF(norm.empty() || norm.size() > in.size(), Raises{PyExc_RuntimeError},
             "layer_norm: normalized_shape does not match the input's trailing dims");
    for (size_t i = 0; i < norm.size(); ++i)
      BREAK_IF(!tx.out().sizes_equal(norm[i], in[in.size() - norm.size() + i], user + " at " + tx.location()),
               Raises{PyExc_RuntimeError}, "layer_norm: normalized_shape does not match the input's trailing dims");
    const double eps = b.count("eps") ? PyFloat_AsDouble(tx.python_value(b["eps"], "layer_norm eps").get()) : 1e-5;
    if (PyErr_Occurred()) python_error_break("layer_norm eps: ");
    // The stand-ins have sizes 1: so has the normalized shape asked with them.
    OwnedRef ones = OwnedRef::steal(PyTuple_New(static_cast<Py_ssize_t>(norm.size())));
    for (size_t i = 0; ones && i < norm.size(); ++i) PyTuple_SET_ITEM(ones.get(), static_cast<Py_ssize_t>(i), PyLong_FromLong(1));
    if (!ones) python_error_break("layer_norm: ");
    std::vector<VarPtr> probe_args{x, tx.wrap_const(ones.get())};
    const Answer r = probe(tx, functional_attr("layer_norm"), user, probe_args);
    BREAK_IF(!rt::dtype_is_float(r.dtype), user + " of a " + std::string(rt::dtype_name(r.dtype)) + " tensor");
    std::vector<VarPtr> dims;
    for (size_t i = 0; i < norm.size(); ++i) {
      OwnedRef d = OwnedRef::steal(PyLong_FromSsize_t(static_cast<Py_ssize_t>(in.size() - norm.size() + i)));
      dims.push_back(tx.wrap_const(d.get()));
    }
    VarPtr dim = std::make_shared<SeqVar>(VarKind::Tuple, dims);
    VarPtr yes = tx.wrap_const(Py_True);
    // (x - mean) * rsqrt(var + eps), the biased variance over the normalized dims, as torch's
    // kernel computes it; then weight and bias.
    VarPtr mean = reduction(tx, "mean", {x, dim}, {{"keepdim", yes}});
    VarPtr centered = pointwise(tx, "sub", {x, mean}, {});
    VarPtr var = reduction(tx, "var", {x, dim}, {{"unbiased", tx.wrap_const(Py_False)}, {"keepdim", yes}});
    VarPtr y = pointwise(tx, "mul", {centered, pointwise(tx, "rsqrt", {pointwise(tx, "add", {var, number(tx, eps)}, {})}, {})}, {});
    if (!is_none(b, "weight")) y = pointwise(tx, "mul", {y, b["weight"]}, {});
    if (!is_none(b, "bias")) y = pointwise(tx, "add", {y, b["bias"]}, {});
    return y;
  }
  if (name == "dropout") {
    auto b = bind_args(user, {"input", "p", "training", "inplace"}, args, kwargs);
    const VarPtr& x = b["input"];
    BREAK_IF(!x || x->kind != VarKind::Tensor, user + " of a non-tensor");
    const bool training = !b.count("training") || tx.truth(b["training"], "dropout training");
    const bool inplace = b.count("inplace") && tx.truth(b["inplace"], "dropout inplace");
    const double p = b.count("p") ? PyFloat_AsDouble(tx.python_value(b["p"], "dropout p").get()) : 0.5;
    if (PyErr_Occurred()) python_error_break("dropout p: ");
    BREAK_IF(p < 0 || p > 1, Raises{PyExc_ValueError}, "dropout probability has to be between 0 and 1");
    if (!training) return x;  // torch hands back the input itself
    BREAK_IF(inplace, user + "(inplace=True) in training mode");
    // Training: torch's own call draws from torch's generator, in program order (a Mutate step,
    // as NumPy's random draws are).
    // NB: no probe: a stand-in call would draw from the generator too. Dropout keeps the dtype.
    const rt::DType dt = tx.meta(x).dtype;
    BREAK_IF(!rt::dtype_is_float(dt), user + " of a " + std::string(rt::dtype_name(dt)) + " tensor");
    return add_node(tx, jit::OpKind::Mutate, {}, user, {x, number(tx, p), tx.wrap_const(Py_True)}, {},
                    tensor_meta(dt, shape_of(tx, x)));
  }
  // embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse): rows of
  // weight, gathered by torch (which raises on an index out of range).
  auto b = bind_args(user, {"input", "weight", "padding_idx", "max_norm", "norm_type", "scale_grad_by_freq", "sparse"},
                     args, kwargs);
  BREAK_IF(!is_none(b, "max_norm"), user + "(max_norm=) renormalizes weight in place");
  const VarPtr& idx = b["input"];
  const VarPtr& w = b["weight"];
  BREAK_IF(!idx || !w || idx->kind != VarKind::Tensor || w->kind != VarKind::Tensor, user + " of non-tensors");
  BREAK_IF(tx.meta(w).rank() != 2, Raises{PyExc_RuntimeError}, "'weight' must be 2-D");
  // NB: no probe: ones as indices would be out of range of a one-row stand-in. The rows keep
  // weight's dtype; indices other than int32/int64 make torch raise, in CPython.
  const rt::DType it = tx.meta(idx).dtype;
  BREAK_IF(it != rt::DType::Int64 && it != rt::DType::Int32, user + " with " + std::string(rt::dtype_name(it)) + " indices");
  Shape out = shape_of(tx, idx);
  out.push_back(shape_of(tx, w)[1]);
  return add_node(tx, jit::OpKind::Extern, {}, user, {idx, w}, {}, tensor_meta(tx.meta(w).dtype, std::move(out)));
}

}  // namespace framejit::frontend::ops::torch_ops
