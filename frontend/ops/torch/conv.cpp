// conv.cpp — torch's 2-d convolution and pooling as library steps with exact result shapes
// (Note [Torch ops]): framejit has no convolution kernel yet, so torch computes them, and the
// ops around them stay in the graph.
#include "frontend/cpython/pyref.h"
#include "frontend/ops/torch/torch_ops.h"

namespace framejit::frontend::ops::torch_ops {

namespace {

// An int or a pair of ints (stride=2, padding=(1, 0)), as two ints.
std::pair<int64_t, int64_t> pair_arg(Tracer& tx, std::map<std::string, VarPtr>& b, const std::string& k, int64_t dflt) {
  if (!b.count(k) || is_absent(b, k)) return {dflt, dflt};
  const VarPtr& v = b[k];
  if (is_seq(v) || (is_const(v) && PyTuple_Check(const_value(v)))) {
    const Shape s = parse_shape(tx, v);
    BREAK_IF(s.size() != 2 || !s[0].is_const() || !s[1].is_const(), k + " that is not two ints");
    return {s[0].const_value(), s[1].const_value()};
  }
  BREAK_IF(is_const(v) && PyUnicode_Check(const_value(v)), k + " given as a string");
  const int64_t n = tx.to_int(v, k);
  return {n, n};
}

// floor((n + 2p - d (k - 1) - 1) / s) + 1, the output size of a window sweep.
SymInt out_size(const SymInt& n, int64_t k, int64_t s, int64_t p, int64_t d) {
  return floordiv(n + SymInt(2 * p - d * (k - 1) - 1), SymInt(s)) + SymInt(1);
}

}  // namespace

bool is_conv_name(const std::string& name) {
  return name == "conv2d" || name == "max_pool2d" || name == "avg_pool2d";
}

VarPtr conv_op(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "torch.nn.functional." + name;
  const bool conv = name == "conv2d";
  auto b = conv ? bind_args(user, {"input", "weight", "bias", "stride", "padding", "dilation", "groups"}, args, kwargs)
           : name == "max_pool2d"
               ? bind_args(user, {"input", "kernel_size", "stride", "padding", "dilation", "ceil_mode", "return_indices"},
                           args, kwargs)
               : bind_args(user, {"input", "kernel_size", "stride", "padding", "ceil_mode", "count_include_pad",
                                  "divisor_override"}, args, kwargs);
  const VarPtr& x = b["input"];
  BREAK_IF(!x || x->kind != VarKind::Tensor, user + " of a non-tensor");
  const jit::TensorMeta xm = tx.meta(x);
  BREAK_IF(xm.rank() != 4, user + " of a " + std::to_string(xm.rank()) + "-d input (batched 4-d only)");
  BREAK_IF(!rt::dtype_is_float(xm.dtype), user + " of a " + std::string(rt::dtype_name(xm.dtype)) + " tensor");
  for (const char* k : {"ceil_mode", "return_indices", "divisor_override"})
    if (b.count(k) && !is_absent(b, k)) BREAK_IF(tx.truth(b[k], k), user + "(" + k + "=)");
  int64_t kh = 0, kw = 0;
  SymInt channels = xm.shape[1];
  if (conv) {
    const VarPtr& w = b["weight"];
    BREAK_IF(!w || w->kind != VarKind::Tensor || tx.meta(w).rank() != 4 || tx.meta(w).dtype != xm.dtype,
             user + " with a weight that is not a 4-d tensor of the input's dtype");
    const Shape ws = tx.meta(w).shape;
    // The kernel's size is part of the output-size formula: specialized (a weight's is fixed).
    kh = tx.out().specialize(ws[2], user + " kernel at " + tx.location());
    kw = tx.out().specialize(ws[3], user + " kernel at " + tx.location());
    const int64_t groups = b.count("groups") ? tx.to_int(b["groups"], "groups") : 1;
    BREAK_IF(groups < 1 || !tx.out().sizes_equal(xm.shape[1], ws[1] * SymInt(groups), user + " at " + tx.location()),
             Raises{PyExc_RuntimeError}, user + ": the input's channels do not match weight and groups");
    channels = ws[0];
  } else {
    auto [a, c] = pair_arg(tx, b, "kernel_size", -1);
    BREAK_IF(a < 1 || c < 1, Raises{PyExc_TypeError}, user + "() needs kernel_size");
    kh = a;
    kw = c;
  }
  auto [sh, sw] = pair_arg(tx, b, "stride", conv ? 1 : -1);
  if (sh < 0) sh = kh, sw = kw;  // pooling's stride defaults to its kernel
  auto [ph, pw] = pair_arg(tx, b, "padding", 0);
  auto [dh, dw] = conv || name == "max_pool2d" ? pair_arg(tx, b, "dilation", 1) : std::pair<int64_t, int64_t>{1, 1};
  BREAK_IF(sh < 1 || sw < 1 || ph < 0 || pw < 0 || dh < 1 || dw < 1, Raises{PyExc_RuntimeError}, user + ": bad stride/padding/dilation");
  const SymInt oh = out_size(xm.shape[2], kh, sh, ph, dh), ow = out_size(xm.shape[3], kw, sw, pw, dw);
  const std::string why = user + " at " + tx.location();
  BREAK_IF(!tx.out().decide(oh, CmpOp::Ge, 1, why) || !tx.out().decide(ow, CmpOp::Ge, 1, why), Raises{PyExc_RuntimeError},
           user + ": the output size is too small");
  return add_node(tx, jit::OpKind::Extern, {}, user, args, kwargs, tensor_meta(xm.dtype, {xm.shape[0], channels, oh, ow}));
}

}  // namespace framejit::frontend::ops::torch_ops
