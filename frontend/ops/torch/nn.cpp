// nn.cpp — torch.nn.functional's layer_norm (traced as the reductions and pointwise ops it is
// made of), dropout and embedding (Note [Torch ops]).
#include "frontend/cpython/pyref.h"
#include "frontend/ops/torch/torch_ops.h"

namespace framejit::frontend::ops::torch_ops {

namespace {

VarPtr number(Tracer& tx, double v) {
  OwnedRef o = OwnedRef::steal(PyFloat_FromDouble(v));
  return tx.wrap_const(o.get());
}

bool is_none(const std::map<std::string, VarPtr>& b, const std::string& k) { return is_absent(b, k); }

}  // namespace

bool is_nn_name(const std::string& name) { return name == "layer_norm" || name == "dropout" || name == "embedding"; }

VarPtr nn_function(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "torch.nn.functional." + name;
  if (name == "layer_norm") {
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
