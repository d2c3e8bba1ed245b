// contractions.cpp — numpy.einsum (one and two operands, lowered to transposes, sums,
// elementwise products and matmul, so GEMM-shaped forms reach the GEMM kernel) and numpy.cov
// (NumPy's own mean / subtract / dot / multiply composite).
#include <algorithm>
#include <string>

#include "frontend/ops/numpy/compose.h"

namespace framejit::frontend::ops {

namespace {

using rt::DType;

VarPtr axes_tuple(Tracer& tx, const std::vector<int>& axes) {
  std::vector<VarPtr> items;
  for (int a : axes) items.push_back(int_const(tx, a));
  return std::make_shared<SeqVar>(VarKind::Tuple, std::move(items));
}

VarPtr transpose_to(Tracer& tx, const VarPtr& a, const std::vector<int>& perm) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int>(i);
  if (identity) return a;
  return view_op(tx, "transpose", "numpy.transpose", {a, axes_tuple(tx, perm)}, {}, false);
}

// einsum sums in the operands' type (int32 stays int32, unlike numpy.sum).
VarPtr sum_axes(Tracer& tx, const VarPtr& a, const std::vector<int>& axes, DType dt) {
  if (axes.empty()) return a;
  KwArgs kw{{"dtype", dtype_const(tx, dt)}};
  if (static_cast<int>(axes.size()) != tx.meta(a).rank()) kw.emplace_back("axis", axes_tuple(tx, axes));
  return reduction(tx, "sum", "numpy.sum", {a}, kw, false);
}

struct Term {
  VarPtr value;
  std::string labels;  // one char per axis of value
};

// Sums out of `t` the labels no one else needs (not in `keep`).
void sum_private(Tracer& tx, Term& t, const std::string& keep, DType dt) {
  std::vector<int> axes;
  std::string rest;
  for (size_t i = 0; i < t.labels.size(); ++i) {
    if (keep.find(t.labels[i]) == std::string::npos) axes.push_back(static_cast<int>(i));
    else rest.push_back(t.labels[i]);
  }
  t.value = sum_axes(tx, t.value, axes, dt);
  t.labels = rest;
}

// `t` with its axes in the order of `order` (every label of t is in it).
VarPtr ordered(Tracer& tx, const Term& t, const std::string& order) {
  std::vector<int> perm;
  for (char c : order) {
    size_t at = t.labels.find(c);
    if (at != std::string::npos) perm.push_back(static_cast<int>(at));
  }
  return transpose_to(tx, t.value, perm);
}

SymInt group_size(const std::vector<SymInt>& sizes) {
  SymInt n(1);
  for (const SymInt& s : sizes) n = n * s;
  return n;
}

VarPtr einsum(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  for (const auto& [k, v] : kwargs)
    BREAK_IF(!(is_none(v) || (k == "optimize" && is_const(v) && const_value(v) == Py_False)),
             "numpy.einsum with " + k + "=");
  BREAK_IF(args.empty() || !is_const(args[0]) || !PyUnicode_Check(const_value(args[0])),
           "numpy.einsum without a constant subscripts string");
  std::string spec = PyUnicode_AsUTF8(const_value(args[0]));
  spec.erase(std::remove(spec.begin(), spec.end(), ' '), spec.end());
  BREAK_IF(spec.find("...") != std::string::npos, "numpy.einsum with an ellipsis ('...')");
  std::vector<VarPtr> ops(args.begin() + 1, args.end());
  BREAK_IF(ops.empty() || ops.size() > 2, "numpy.einsum of more than two operands");
  for (const VarPtr& o : ops) BREAK_IF(o->kind != VarKind::Tensor, "numpy.einsum of a non-array operand");
  const size_t arrow = spec.find("->");
  std::string lhs = spec.substr(0, arrow);
  std::vector<std::string> in;
  for (size_t s = 0, c; s <= lhs.size(); s = c + 1) {
    c = lhs.find(',', s);
    if (c == std::string::npos) c = lhs.size();
    in.push_back(lhs.substr(s, c - s));
  }
  BREAK_IF(in.size() != ops.size(), Raises{PyExc_ValueError}, "einsum: more operands than subscripts or fewer");
  std::string out;
  if (arrow != std::string::npos) {
    out = spec.substr(arrow + 2);
  } else {
    // Implicit output: the labels used once, in alphabetical (character) order.
    for (char c = 'A'; c <= 'z'; ++c) {
      int n = 0;
      for (const std::string& s : in) n += static_cast<int>(std::count(s.begin(), s.end(), c));
      if (n == 1) out.push_back(c);
    }
  }
  // Labels: letters; sizes must agree wherever a label appears (einsum broadcasts only with '...').
  std::map<char, SymInt> size;
  for (size_t k = 0; k < ops.size(); ++k) {
    const Shape s = tx.meta(ops[k]).shape;
    BREAK_IF(in[k].size() != s.size(), Raises{PyExc_ValueError},
             "einsum: operand has more dimensions than subscripts given in einstein sum");
    for (size_t d = 0; d < s.size(); ++d) {
      const char c = in[k][d];
      BREAK_IF(!std::isalpha(static_cast<unsigned char>(c)), Raises{PyExc_ValueError}, "einsum: invalid subscript");
      auto [it, fresh] = size.emplace(c, s[d]);
      if (!fresh)
        BREAK_IF(!tx.out().sizes_equal(it->second, s[d], "einsum at " + tx.location()), Raises{PyExc_ValueError},
                 "einsum: operands could not be broadcast together");
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    BREAK_IF(!size.count(out[i]), Raises{PyExc_ValueError}, "einsum: output subscript not in the inputs");
    BREAK_IF(out.find(out[i], i + 1) != std::string::npos, Raises{PyExc_ValueError},
             "einsum: output subscript included multiple times");
  }
  // The operands in their common type, as einsum computes (casting='safe').
  DType dt = tx.meta(ops[0]).dtype;
  if (ops.size() == 2) {
    BREAK_IF((tx.meta(ops[0]).rank() == 0) != (tx.meta(ops[1]).rank() == 0), "numpy.einsum of a 0-d and an n-d array");
    dt = probe_dtype(tx, DTypeRule::Elementwise, "multiply", numpy_attr("multiply"), ops, {}).dtype;
  }
  BREAK_IF(dt == DType::Bool, "numpy.einsum of booleans is not captured yet");
  std::vector<Term> terms;
  for (size_t k = 0; k < ops.size(); ++k)
    terms.push_back({tx.meta(ops[k]).dtype == dt ? ops[k] : cast(tx, ops[k], dt), in[k]});

  // A repeated label in one operand: the diagonal ('ii->', 'ii->i'), for one 2-d operand.
  for (Term& t : terms) {
    if (t.labels.size() == 2 && t.labels[0] == t.labels[1]) {
      BREAK_IF(ops.size() != 1, "numpy.einsum with a repeated subscript in one of two operands");
      t.value = sequence(tx, "diagonal", {t.value}, {});
      t.labels = t.labels.substr(0, 1);
    }
    for (size_t i = 0; i < t.labels.size(); ++i)
      BREAK_IF(t.labels.find(t.labels[i], i + 1) != std::string::npos, "numpy.einsum with a repeated subscript");
  }
  if (terms.size() == 1) {
    sum_private(tx, terms[0], out, dt);
    return ordered(tx, terms[0], out);
  }
  Term& a = terms[0];
  Term& b = terms[1];
  sum_private(tx, a, out + b.labels, dt);
  sum_private(tx, b, out + a.labels, dt);
  std::string batch, left, right, contract;
  for (char c : a.labels) {
    const bool in_b = b.labels.find(c) != std::string::npos, in_out = out.find(c) != std::string::npos;
    (in_b ? (in_out ? batch : contract) : left).push_back(c);
  }
  for (char c : b.labels)
    if (a.labels.find(c) == std::string::npos) right.push_back(c);
  VarPtr none = tx.wrap_const(Py_None), all = slice_of(tx, std::nullopt, std::nullopt);
  if (left.empty() || right.empty() || contract.empty()) {
    // A product broadcast over the union of labels, then a sum over the contracted ones:
    // one fused kernel ('ij,ij->i', 'i,i->', 'i,j->ij', 'ij,j->i').
    const std::string all_labels = batch + left + right + contract;
    auto spread = [&](const Term& t) {
      VarPtr v = ordered(tx, t, all_labels);
      std::vector<VarPtr> items;
      for (char c : all_labels) items.push_back(t.labels.find(c) == std::string::npos ? none : all);
      return index_with(tx, v, std::move(items));
    };
    Term p{ufunc(tx, "multiply", {spread(a), spread(b)}), all_labels};
    sum_private(tx, p, out, dt);
    return ordered(tx, p, out);
  }
  // matmul: a as [batch..., M, K], b as [batch..., K, N], then back to the labels.
  auto sizes = [&](const std::string& ls) {
    std::vector<SymInt> r;
    for (char c : ls) r.push_back(size.at(c));
    return r;
  };
  auto as_3 = [&](const Term& t, const std::string& g1, const std::string& g2) {
    VarPtr v = ordered(tx, t, batch + g1 + g2);
    if (g1.size() == 1 && g2.size() == 1) return v;
    Shape s = sizes(batch);
    s.push_back(group_size(sizes(g1)));
    s.push_back(group_size(sizes(g2)));
    return reshape_to(tx, v, s);
  };
  VarPtr r = linalg(tx, "matmul", "numpy.matmul", {as_3(a, left, contract), as_3(b, contract, right)}, {});
  if (left.size() != 1 || right.size() != 1) {
    Shape s = sizes(batch + left + right);
    r = reshape_to(tx, r, s);
  }
  return ordered(tx, Term{r, batch + left + right}, out);
}

// numpy.cov (NumPy 1.24's function/base.py, without weights): X = array(m, ndmin=2, dtype),
// rows are variables, X -= X.mean(axis=1)[:, None], c = dot(X, X.T) * (1 / (N - ddof)).
VarPtr cov(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = bind_args("cov", {"m", "y", "rowvar", "bias", "ddof", "fweights", "aweights", "*", "dtype"}, args, kwargs);
  BREAK_IF(!b.count("m") || b["m"]->kind != VarKind::Tensor, "numpy.cov of a non-array");
  BREAK_IF(!is_absent(b, "fweights") || !is_absent(b, "aweights"), "numpy.cov with weights");
  const bool rowvar = !b.count("rowvar") || tx.truth(b["rowvar"], "rowvar");
  const bool bias = b.count("bias") && tx.truth(b["bias"], "bias");
  int64_t ddof = bias ? 0 : 1;
  if (!is_absent(b, "ddof")) ddof = tx.to_int(b["ddof"], "ddof");
  auto as_2d = [&](const VarPtr& v, DType dt) {
    BREAK_IF(tx.meta(v).rank() > 2, Raises{PyExc_ValueError}, "m has more than 2 dimensions");
    VarPtr x = tx.meta(v).dtype == dt ? v : cast(tx, v, dt);
    if (tx.meta(x).rank() < 2) {
      Shape s(static_cast<size_t>(2 - tx.meta(x).rank()), SymInt(1));
      for (const SymInt& d : tx.meta(x).shape) s.push_back(d);
      x = reshape_to(tx, x, s);
    }
    if (!rowvar && !tx.out().sizes_equal(tx.meta(x).shape[0], SymInt(1), "cov at " + tx.location()))
      x = view_op(tx, "transpose", "numpy.transpose", {x}, {}, false);
    return x;
  };
  std::vector<VarPtr> operands{b["m"]};
  if (!is_absent(b, "y")) {
    BREAK_IF(b["y"]->kind != VarKind::Tensor, "numpy.cov with a non-array y");
    operands.push_back(b["y"]);
  }
  DType dt;
  if (!is_absent(b, "dtype")) {
    dt = dtype_of(tx, b["dtype"]);
  } else {
    // result_type(m, y, float64): float64 for every real input.
    for (const VarPtr& o : operands)
      BREAK_IF(rt::dtype_is_complex(tx.meta(o).dtype) || tx.meta(o).dtype == DType::Float16,
               "numpy.cov of a complex or float16 array");
    dt = DType::Float64;
  }
  BREAK_IF(dt != DType::Float64 && dt != DType::Float32, "numpy.cov with a dtype other than float32/float64");
  VarPtr x = as_2d(operands[0], dt);
  if (operands.size() == 2) x = concat(tx, {x, as_2d(operands[1], dt)}, 0);
  const Shape s = tx.meta(x).shape;
  if (tx.out().sizes_equal(s[0], SymInt(0), "cov at " + tx.location()))
    return creation(tx, "zeros", {shape_value(tx, {SymInt(0), SymInt(0)})}, {{"dtype", dtype_const(tx, dt)}});
  const SymInt fact = s[1] - SymInt(ddof);
  BREAK_IF(!tx.out().decide(fact, CmpOp::Gt, 0, "cov at " + tx.location()),
           "numpy.cov with ddof >= the number of observations (NumPy warns)");
  VarPtr avg = reduction(tx, "mean", "numpy.mean", {x}, {{"axis", int_const(tx, 1)}}, false);
  VarPtr centered = ufunc(tx, "subtract", {x, index_with(tx, avg, {slice_of(tx, std::nullopt, std::nullopt), tx.wrap_const(Py_None)})});
  VarPtr xt = view_op(tx, "transpose", "numpy.transpose", {centered}, {}, false);
  VarPtr c = linalg(tx, "dot", "numpy.dot", {centered, xt}, {});
  // NumPy: c *= np.true_divide(1, fact), a multiply by the reciprocal (not a divide).
  VarPtr inv = ufunc(tx, "true_divide", {int_const(tx, 1), tx.sym_value(fact)});
  // In place on a float32 c, NumPy multiplies by the float64 scalar cast to float32.
  if (dt == DType::Float32 && !is_const(inv)) inv = cast(tx, inv, DType::Float32);
  c = ufunc(tx, "multiply", {c, inv});
  return view_op(tx, "squeeze", "numpy.squeeze", {c}, {}, false);
}

}  // namespace

VarPtr contraction(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  if (name == "einsum") return einsum(tx, args, kwargs);
  if (name == "cov") return cov(tx, args, kwargs);
  graph_break(BreakKind::Internal, "internal: no contraction " + name);
}

}  // namespace framejit::frontend::ops
