// lowering.cpp — GraphLowering of elementwise nodes into loop-IR operations.
#include "jit/lower/lowering.h"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace framejit::jit {

namespace {

struct TargetInfo {
  ScalarOp op;
  int arity;
};

const std::unordered_map<std::string, TargetInfo>& targets() {
  static const std::unordered_map<std::string, TargetInfo> table = {
      {"operator.add", {ScalarOp::Add, 2}},         {"numpy.add", {ScalarOp::Add, 2}},
      {"operator.sub", {ScalarOp::Sub, 2}},         {"numpy.subtract", {ScalarOp::Sub, 2}},
      {"operator.mul", {ScalarOp::Mul, 2}},         {"numpy.multiply", {ScalarOp::Mul, 2}},
      {"operator.truediv", {ScalarOp::Div, 2}},     {"numpy.divide", {ScalarOp::Div, 2}},
      {"numpy.true_divide", {ScalarOp::Div, 2}},    {"operator.neg", {ScalarOp::Neg, 1}},
      {"numpy.negative", {ScalarOp::Neg, 1}},       {"builtins.abs", {ScalarOp::Abs, 1}},
      {"numpy.abs", {ScalarOp::Abs, 1}},            {"numpy.absolute", {ScalarOp::Abs, 1}},
      {"numpy.fabs", {ScalarOp::Abs, 1}},           {"numpy.sqrt", {ScalarOp::Sqrt, 1}},
      {"numpy.square", {ScalarOp::Square, 1}},      {"numpy.reciprocal", {ScalarOp::Reciprocal, 1}},
      {"numpy.exp", {ScalarOp::Exp, 1}},            {"numpy.log", {ScalarOp::Log, 1}},
      {"numpy.log1p", {ScalarOp::Log1p, 1}},        {"numpy.expm1", {ScalarOp::Expm1, 1}},
      {"numpy.tanh", {ScalarOp::Tanh, 1}},          {"numpy.sin", {ScalarOp::Sin, 1}},
      {"numpy.cos", {ScalarOp::Cos, 1}},            {"numpy.tan", {ScalarOp::Tan, 1}},
      {"numpy.arctan", {ScalarOp::Atan, 1}},        {"numpy.floor", {ScalarOp::Floor, 1}},
      {"numpy.ceil", {ScalarOp::Ceil, 1}},          {"numpy.maximum", {ScalarOp::Max, 2}},
      {"numpy.minimum", {ScalarOp::Min, 2}},        {"numpy.power", {ScalarOp::Pow, 2}},
      {"operator.pow", {ScalarOp::Pow, 2}},         {"numpy.arctan2", {ScalarOp::Atan2, 2}},
  };
  return table;
}

bool is_float(DType t) { return t == DType::Float32 || t == DType::Float64; }

}  // namespace

std::optional<PointwiseNode> lower_pointwise(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call || !node.kwargs.empty()) return std::nullopt;
  const TensorMeta& m = node.meta;
  if (m.kind != ValueKind::Tensor || m.numpy_scalar || !is_float(m.dtype)) return std::nullopt;
  auto it = targets().find(node.target);
  if (it == targets().end() || static_cast<int>(node.args.size()) != it->second.arity) return std::nullopt;

  PointwiseNode pw{it->second.op, m.dtype, {}};
  for (const Arg& a : node.args) {
    PointwiseOperand o{PointwiseOperand::Kind::Const};
    switch (a.kind) {
      case Arg::Kind::Node: {
        const TensorMeta& am = graph.node(static_cast<int>(a.i)).meta;
        if (am.kind == ValueKind::Scalar) {
          if (am.dtype == DType::Bool) return std::nullopt;
          o = {PointwiseOperand::Kind::Scalar, static_cast<int>(a.i), 0};
        } else {
          // NumPy computes in the result type; an operand of another type is a cast we do not
          // fuse yet, and a 0-d operand may be a NumPy scalar that NumPy treats by value.
          if (am.dtype != m.dtype || am.numpy_scalar) return std::nullopt;
          o = {PointwiseOperand::Kind::Tensor, static_cast<int>(a.i), 0};
        }
        break;
      }
      case Arg::Kind::Int: o.value = static_cast<double>(a.i); break;
      case Arg::Kind::Float: o.value = a.f; break;
      case Arg::Kind::Bool: o.value = a.i ? 1.0 : 0.0; break;
      default: return std::nullopt;
    }
    pw.operands.push_back(o);
  }
  if (pw.op == ScalarOp::Pow && pw.operands[1].kind == PointwiseOperand::Kind::Const) {
    // The ** operator has NumPy's fast paths: x**2 is square(x) and x**0.5 is sqrt(x) (sqrt
    // differs from pow at -0.0 and -inf, so only the operator form may use it).
    double e = pw.operands[1].value;
    if (e == 2.0) {
      pw.op = ScalarOp::Square;
      pw.operands.pop_back();
    } else if (e == 0.5 && node.target == "operator.pow") {
      pw.op = ScalarOp::Sqrt;
      pw.operands.pop_back();
    }
  }
  // A node with no array operand (all scalars) is a 0-d computation; leave it to NumPy.
  bool any_tensor = false;
  for (auto& o : pw.operands) any_tensor |= o.kind == PointwiseOperand::Kind::Tensor;
  if (!any_tensor) return std::nullopt;
  return pw;
}

namespace {

enum class RedKind : uint8_t { Sum, Prod, Max, Min, Mean, Var, Std, ArgMax, ArgMin };

struct RedTarget {
  RedKind kind;
  std::vector<const char*> params;  // positional parameters after the array, in NumPy's order
};

const std::unordered_map<std::string, RedTarget>& reduction_targets() {
  using V = std::vector<const char*>;
  static const V kSum{"axis", "dtype", "out", "keepdims", "initial", "where"};
  static const V kMean{"axis", "dtype", "out", "keepdims"};
  static const V kMax{"axis", "out", "keepdims", "initial", "where"};
  static const V kVar{"axis", "dtype", "out", "ddof", "keepdims"};
  static const V kArg{"axis", "out"};
  static const std::unordered_map<std::string, RedTarget> table = [] {
    std::unordered_map<std::string, RedTarget> t;
    auto add = [&](const char* name, RedKind kind, const V& params) {
      t[std::string("method.") + name] = {kind, params};
      t[std::string("numpy.") + name] = {kind, params};
    };
    add("sum", RedKind::Sum, kSum);
    add("prod", RedKind::Prod, kSum);
    add("max", RedKind::Max, kMax);
    add("amax", RedKind::Max, kMax);
    add("min", RedKind::Min, kMax);
    add("amin", RedKind::Min, kMax);
    add("mean", RedKind::Mean, kMean);
    add("var", RedKind::Var, kVar);
    add("std", RedKind::Std, kVar);
    add("argmax", RedKind::ArgMax, kArg);
    add("argmin", RedKind::ArgMin, kArg);
    return t;
  }();
  return table;
}

// A lower bound of a size: symbols are sizes >= 2 (guards specialize 0 and 1); 0 when unknown.
int64_t size_lower_bound(const SymInt& s) {
  switch (s.kind()) {
    case SymInt::Kind::Const: return s.const_value();
    case SymInt::Kind::Symbol: return 2;
    case SymInt::Kind::Add:
    case SymInt::Kind::Mul: {
      int64_t a = size_lower_bound(s.lhs()), b = size_lower_bound(s.rhs());
      if (a < 0 || b < 0) return 0;
      return s.kind() == SymInt::Kind::Add ? a + b : a * b;
    }
    default: return 0;
  }
}

bool is_none(const Arg* a) { return !a || a->kind == Arg::Kind::None; }

}  // namespace

std::optional<ReductionNode> lower_reduction(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call || node.args.empty()) return std::nullopt;
  auto it = reduction_targets().find(node.target);
  if (it == reduction_targets().end() || !node.args[0].is_node()) return std::nullopt;
  const RedTarget& target = it->second;
  int input = static_cast<int>(node.args[0].i);
  const TensorMeta& in = graph.node(input).meta;
  const TensorMeta& m = node.meta;
  const int rank = in.rank();
  if (in.kind != ValueKind::Tensor || in.numpy_scalar || rank == 0 || !is_float(in.dtype)) return std::nullopt;
  const bool arg = target.kind == RedKind::ArgMax || target.kind == RedKind::ArgMin;
  if (m.kind != ValueKind::Tensor || m.dtype != (arg ? DType::Int64 : in.dtype)) return std::nullopt;

  // Bind the arguments to NumPy's parameter names (positional after the array, then keywords).
  std::unordered_map<std::string, const Arg*> bound;
  if (node.args.size() - 1 > target.params.size()) return std::nullopt;
  for (size_t p = 1; p < node.args.size(); ++p) bound[target.params[p - 1]] = &node.args[p];
  for (const auto& [k, v] : node.kwargs) {
    if (bound.count(k)) return std::nullopt;
    bound[k] = &v;
  }
  auto get = [&](const char* name) -> const Arg* {
    auto b = bound.find(name);
    return b == bound.end() ? nullptr : b->second;
  };
  for (const auto& [k, v] : bound) {
    static const char* kKnown[] = {"axis", "dtype", "out", "keepdims", "initial", "where", "ddof"};
    bool known = false;
    for (const char* n : kKnown) known |= k == n;
    if (!known) return std::nullopt;
  }
  // Only the defaults of dtype/out/initial/where: anything else changes what NumPy computes.
  if (!is_none(get("dtype")) || !is_none(get("out")) || get("initial")) return std::nullopt;
  if (const Arg* w = get("where"); w && !(w->kind == Arg::Kind::Bool && w->i)) return std::nullopt;

  ReductionNode r;
  r.dtype = in.dtype;
  r.input = input;
  r.numpy_scalar = m.numpy_scalar;
  if (const Arg* k = get("keepdims")) {
    if (k->kind != Arg::Kind::Bool && k->kind != Arg::Kind::Int) return std::nullopt;
    r.keepdims = k->i != 0;
  }
  if (const Arg* d = get("ddof")) {
    if (d->kind != Arg::Kind::Int) return std::nullopt;
    r.ddof = d->i;
  }
  r.reduced.assign(rank, false);
  const Arg* axis = get("axis");
  if (is_none(axis)) {
    r.reduced.assign(rank, true);
  } else {
    std::vector<const Arg*> axes;
    if (axis->kind == Arg::Kind::Tuple || axis->kind == Arg::Kind::List) {
      if (arg) return std::nullopt;  // argmax takes one axis
      for (const Arg& a : axis->items) axes.push_back(&a);
    } else {
      axes.push_back(axis);
    }
    for (const Arg* a : axes) {
      if (a->kind != Arg::Kind::Int || a->i < -rank || a->i >= rank) return std::nullopt;
      int d = static_cast<int>(a->i < 0 ? a->i + rank : a->i);
      if (r.reduced[d]) return std::nullopt;  // NumPy raises on a repeated axis
      r.reduced[d] = true;
    }
  }
  // The result's rank must be what these axes give (and a NumPy scalar only when nothing is left).
  int kept = 0;
  int64_t count_bound = 1;
  for (int d = 0; d < rank; ++d) {
    if (r.reduced[d]) count_bound *= std::max<int64_t>(size_lower_bound(in.shape[d]), 0);
    else ++kept;
  }
  if (m.rank() != (r.keepdims ? rank : kept) || (r.numpy_scalar && (r.keepdims || kept))) return std::nullopt;
  // Reductions of nothing (NumPy raises, or warns and returns NaN) and var/std with
  // count - ddof <= 0 (NumPy warns) stay with NumPy.
  if (count_bound < 1) return std::nullopt;
  switch (target.kind) {
    case RedKind::Sum: r.op = ReduceOp::Sum; break;
    case RedKind::Prod: r.op = ReduceOp::Prod; break;
    case RedKind::Max: r.op = ReduceOp::Max; break;
    case RedKind::Min: r.op = ReduceOp::Min; break;
    case RedKind::Mean: r.op = ReduceOp::Sum, r.mean = true; break;
    case RedKind::Var:
    case RedKind::Std:
      if (count_bound <= r.ddof) return std::nullopt;
      r.op = ReduceOp::Sum, r.mean = true, r.var = true, r.sqrt = target.kind == RedKind::Std;
      break;
    case RedKind::ArgMax: r.op = ReduceOp::ArgMax; break;
    case RedKind::ArgMin: r.op = ReduceOp::ArgMin; break;
  }
  if (!r.mean && r.ddof != 0) return std::nullopt;
  return r;
}

std::optional<MatmulNode> lower_matmul(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call || node.args.size() != 2 || !node.kwargs.empty()) return std::nullopt;
  const std::string& t = node.target;
  if (t != "operator.matmul" && t != "numpy.matmul" && t != "numpy.dot" && t != "method.dot") return std::nullopt;
  if (!node.args[0].is_node() || !node.args[1].is_node()) return std::nullopt;
  int a = static_cast<int>(node.args[0].i), b = static_cast<int>(node.args[1].i);
  const TensorMeta& ma = graph.node(a).meta;
  const TensorMeta& mb = graph.node(b).meta;
  const TensorMeta& m = node.meta;
  if (ma.kind != ValueKind::Tensor || mb.kind != ValueKind::Tensor || m.kind != ValueKind::Tensor) return std::nullopt;
  if (!is_float(m.dtype) || ma.dtype != m.dtype || mb.dtype != m.dtype || m.numpy_scalar) return std::nullopt;
  if (ma.rank() < 2 || mb.rank() != 2 || ma.numpy_scalar || mb.numpy_scalar) return std::nullopt;
  return MatmulNode{a, b, m.dtype};
}

}  // namespace framejit::jit
