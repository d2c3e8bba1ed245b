// products.cpp — torch's matrix products: matmul (vector operands included), mm, bmm, linear,
// addmm, baddbmm, addmv as framejit's GEMM plus pointwise epilogues, and einsum as a library step
// (Note [Torch ops], Note [Torch products]).
#include <algorithm>
#include <array>
#include <map>

#include "frontend/cpython/pyref.h"
#include "frontend/interop/torch_array.h"
#include "frontend/ops/numpy/families.h"
#include "frontend/ops/torch/torch_ops.h"

namespace framejit::frontend::ops::torch_ops {

// Note [Torch products]
// A product of matrices is one Matmul node, which the jit backend runs on its GEMM kernel; a
// vector operand is made a matrix of one row (on the left) or one column (on the right) and that
// dim is dropped from the result, as torch.matmul itself does, so vector forms reach the same
// kernel. addmm and its kin are the product scaled and added to `input`, written as the
// pointwise ops they are, so the epilogue fuses into whatever follows: beta * input + alpha * (a @ b),
// with `input` left out entirely when beta is 0 (torch ignores it then: a NaN in it does not
// propagate). The result type, and torch's refusals (a float alpha for integer tensors), come
// from the torch callable itself on stand-ins. Rounding differs from torch's BLAS call, which
// adds input inside the GEMM, by the usual last-bit amounts.
// einsum is one library step: its result shape comes from the subscripts (every label's size
// guarded equal wherever it appears), its dtype from torch.einsum on stand-ins. torch's einsum
// plans and calls bmm itself.

namespace {

using jit::OpKind;

VarPtr product(Tracer& tx, const std::string& name, const VarPtr& a, const VarPtr& b) {
  const std::string user = "torch." + name;
  BREAK_IF(a->kind != VarKind::Tensor || b->kind != VarKind::Tensor, user + " of a non-tensor");
  const Answer r = probe(tx, torch_attr(name.c_str()), user, {a, b});
  const Shape sa = shape_of(tx, a), sb = shape_of(tx, b);
  if (name == "mm") BREAK_IF(sa.size() != 2 || sb.size() != 2, Raises{PyExc_RuntimeError}, "mm: tensors must be 2-D");
  if (name == "bmm") BREAK_IF(sa.size() != 3 || sb.size() != 3, Raises{PyExc_RuntimeError}, "bmm: tensors must be 3-D");
  if (name == "mv") BREAK_IF(sa.size() != 2 || sb.size() != 1, Raises{PyExc_RuntimeError}, "mv: expected a matrix and a vector");
  BREAK_IF(sa.empty() || sb.empty(), Raises{PyExc_RuntimeError}, "both arguments to matmul need to be at least 1D");
  const SymInt ka = sa.back(), kb = sb.size() == 1 ? sb[0] : sb[sb.size() - 2];
  BREAK_IF(!tx.out().sizes_equal(ka, kb, user + " at " + tx.location()), Raises{PyExc_RuntimeError},
           user + ": mat1 and mat2 shapes cannot be multiplied");
  BREAK_IF(r.dtype != tx.meta(a).dtype || r.dtype != tx.meta(b).dtype, user + " of mixed dtypes");
  if (sa.size() == 1 || sb.size() == 1) {
    // Note [Torch products]: a vector is a one-row or one-column matrix for the product.
    VarPtr a2 = sa.size() == 1 ? shape_op(tx, "unsqueeze", {a, int_const(tx, 0)}, {}) : a;
    VarPtr b2 = sb.size() == 1 ? shape_op(tx, "unsqueeze", {b, int_const(tx, 1)}, {}) : b;
    VarPtr y = product(tx, "matmul", a2, b2);
    if (sb.size() == 1) y = shape_op(tx, "squeeze", {y, int_const(tx, -1)}, {});
    if (sa.size() == 1) y = shape_op(tx, "squeeze", {y, int_const(tx, sb.size() == 1 ? -1 : -2)}, {});
    return y;
  }
  // matmul's shape rules are NumPy's for matrices (batch dims broadcast).
  Shape batch_a(sa.begin(), sa.end() - 2), batch_b(sb.begin(), sb.end() - 2);
  Shape out = broadcast_shapes(tx, {batch_a, batch_b});
  out.push_back(sa[sa.size() - 2]);
  out.push_back(sb.back());
  return add_node(tx, OpKind::Matmul, {}, "torch.matmul", {a, b}, {}, tensor_meta(r.dtype, std::move(out)));
}

// The Python number `v` (absent: 1) and whether it is 0 or 1, which need no node.
struct Factor {
  VarPtr value;
  bool zero = false, one = true;
};

Factor factor_arg(std::map<std::string, VarPtr>& b, const char* key) {
  Factor f;
  if (is_absent(b, key)) return f;
  f.value = b[key];
  BREAK_IF(!is_const(f.value) || !PyNumber_Check(const_value(f.value)), std::string(key) + "= that is not a constant number");
  const double v = PyFloat_AsDouble(const_value(f.value));
  if (PyErr_Occurred()) python_error_break(std::string(key) + "=: ");
  f.zero = v == 0;
  f.one = v == 1;
  return f;
}

// beta * input + alpha * (a @ b) (Note [Torch products]).
VarPtr add_product(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "torch." + name;
  // torch's own argument names: addmm(input, mat1, mat2), baddbmm(input, batch1, batch2), addmv(input, mat, vec).
  using Names = std::array<const char*, 3>;
  const Names keys = name == "addmm"     ? Names{"input", "mat1", "mat2"}
                     : name == "baddbmm" ? Names{"input", "batch1", "batch2"}
                                         : Names{"input", "mat", "vec"};
  auto b = bind_args(user, {keys[0], keys[1], keys[2], "*", "beta", "alpha"}, args, kwargs);
  for (int k = 0; k < 3; ++k)
    BREAK_IF(!b.count(keys[k]) || b[keys[k]]->kind != VarKind::Tensor, user + " of a non-tensor " + keys[k]);
  const VarPtr input = b[keys[0]], m1 = b[keys[1]], m2 = b[keys[2]];
  KwArgs probe_kw;
  for (const char* k : {"beta", "alpha"})
    if (!is_absent(b, k)) probe_kw.emplace_back(k, b[k]);
  const Answer r = probe(tx, torch_attr(name.c_str()), user, {input, m1, m2}, probe_kw);
  const Factor beta = factor_arg(b, "beta"), alpha = factor_arg(b, "alpha");
  // For integer tensors torch converts a float alpha or beta to the tensors' type first (1.13
  // truncates 0.5 to 0); what it does there is left to it.
  for (const Factor* f : {&beta, &alpha})
    BREAK_IF(f->value && !rt::dtype_is_float(r.dtype) && PyFloat_Check(const_value(f->value)),
             user + " of integer tensors with a float alpha or beta");
  VarPtr y = product(tx, name == "addmm" ? "mm" : name == "baddbmm" ? "bmm" : "mv", m1, m2);
  // input must broadcast to the product's shape, even when beta is 0 (torch checks it then too).
  const Shape out = shape_of(tx, y);
  const Shape both = broadcast_shapes(tx, {shape_of(tx, input), out});
  bool fits = both.size() == out.size();
  for (size_t d = 0; fits && d < out.size(); ++d) fits = tx.out().sizes_equal(both[d], out[d], user + " at " + tx.location());
  BREAK_IF(!fits, Raises{PyExc_RuntimeError}, user + ": input does not broadcast to the product's shape");
  if (!alpha.one) y = pointwise(tx, "mul", {y, alpha.value}, {});
  if (!beta.zero) y = pointwise(tx, "add", {beta.one ? input : pointwise(tx, "mul", {input, beta.value}, {}), y}, {});
  if (tx.meta(y).dtype != r.dtype) y = pointwise(tx, "to", {y, tx.wrap_const(torch_handles()->dtypes[static_cast<int>(r.dtype)])}, {});
  return y;
}

VarPtr einsum(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  BREAK_IF(!kwargs.empty(), "torch.einsum with keyword arguments");
  BREAK_IF(args.empty() || !is_const(args[0]) || !PyUnicode_Check(const_value(args[0])),
           "torch.einsum without a constant subscripts string");
  std::vector<VarPtr> ops(args.begin() + 1, args.end());
  if (ops.size() == 1 && is_seq(ops[0])) ops = as<SeqVar>(ops[0])->items;  // einsum(spec, [a, b])
  for (const VarPtr& o : ops) BREAK_IF(o->kind != VarKind::Tensor, "torch.einsum of a non-tensor operand");
  BREAK_IF(ops.empty(), Raises{PyExc_RuntimeError}, "einsum(): must provide at least one operand");
  std::string spec = PyUnicode_AsUTF8(const_value(args[0]));
  spec.erase(std::remove(spec.begin(), spec.end(), ' '), spec.end());
  BREAK_IF(spec.find("...") != std::string::npos, "torch.einsum with an ellipsis ('...')");
  OwnedRef spec_obj = OwnedRef::steal(PyUnicode_FromString(spec.c_str()));
  const VarPtr spec_var = tx.wrap_const(spec_obj.get());
  const VarPtr operands = std::make_shared<SeqVar>(VarKind::Tuple, ops);
  // torch's verdict (subscripts, operand count and ranks, dtypes) first: what it refuses raises.
  const Answer r = probe(tx, torch_attr("einsum"), "torch.einsum", {spec_var, operands});
  const size_t arrow = spec.find("->");
  const std::string lhs = spec.substr(0, arrow);
  std::vector<std::string> in;
  for (size_t s = 0, c; s <= lhs.size(); s = c + 1) {
    c = lhs.find(',', s);
    if (c == std::string::npos) c = lhs.size();
    in.push_back(lhs.substr(s, c - s));
  }
  BREAK_IF(in.size() != ops.size(), BreakKind::Internal, "torch.einsum: subscripts and operands disagree after torch accepted them");
  std::map<char, SymInt> size;
  for (size_t k = 0; k < ops.size(); ++k) {
    const Shape s = shape_of(tx, ops[k]);
    BREAK_IF(in[k].size() != s.size(), BreakKind::Internal, "torch.einsum: an operand's rank after torch accepted it");
    for (size_t d = 0; d < s.size(); ++d) {
      auto [it, fresh] = size.emplace(in[k][d], s[d]);
      // torch broadcasts a label of size 1 against others; that case runs in CPython.
      if (!fresh)
        BREAK_IF(!tx.out().sizes_equal(it->second, s[d], "torch.einsum at " + tx.location()),
                 "torch.einsum with a label of different sizes (torch broadcasts size 1)");
    }
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = spec.substr(arrow + 2);
  } else {
    for (const auto& [c, n] : size) {  // implicit output: the labels used once, in order
      int uses = 0;
      for (const std::string& s : in) uses += static_cast<int>(std::count(s.begin(), s.end(), c));
      if (uses == 1) out.push_back(c);
    }
  }
  Shape shape;
  for (char c : out) shape.push_back(size.at(c));
  BREAK_IF(shape.size() != r.shape.size(), BreakKind::Internal, "torch.einsum: the result's rank differs from torch's");
  return add_node(tx, OpKind::Extern, {}, "torch.einsum", {spec_var, operands}, {}, tensor_meta(r.dtype, std::move(shape)));
}

}  // namespace

bool is_product_name(const std::string& name) {
  return name_in(name, {"matmul", "mm", "bmm", "mv", "linear", "addmm", "baddbmm", "addmv", "einsum"});
}

VarPtr product_op(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "torch." + name;
  if (name == "einsum") return einsum(tx, args, kwargs);
  if (name == "addmm" || name == "baddbmm" || name == "addmv") return add_product(tx, name, args, kwargs);
  if (name == "linear") {
    auto b = bind_args(user, {"input", "weight", "bias"}, args, kwargs);
    const VarPtr& x = b["input"];
    const VarPtr& w = b["weight"];
    BREAK_IF(!x || x->kind != VarKind::Tensor, user + " of a non-tensor");
    BREAK_IF(!w || w->kind != VarKind::Tensor || tx.meta(w).rank() != 2, user + " with a weight that is not a matrix");
    VarPtr y = product(tx, "matmul", x, shape_op(tx, "t", {w}, {}));
    if (is_absent(b, "bias")) return y;
    return pointwise(tx, "add", {y, b["bias"]}, {});
  }
  BREAK_IF(args.size() != 2 || !kwargs.empty(), user + " with " + std::to_string(args.size()) + " operands");
  return product(tx, name, args[0], args[1]);
}

}  // namespace framejit::frontend::ops::torch_ops
