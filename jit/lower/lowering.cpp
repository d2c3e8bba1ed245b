// lowering.cpp — GraphLowering of elementwise nodes into loop-IR operations.
#include "jit/lower/lowering.h"

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

std::optional<ReductionNode> lower_reduction(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call || node.args.empty() || node.args.size() > 2) return std::nullopt;
  static const std::unordered_map<std::string, std::pair<ReduceOp, bool>> kTargets = {
      {"method.sum", {ReduceOp::Sum, false}},  {"numpy.sum", {ReduceOp::Sum, false}},
      {"method.mean", {ReduceOp::Sum, true}},  {"numpy.mean", {ReduceOp::Sum, true}},
      {"method.max", {ReduceOp::Max, false}},  {"numpy.max", {ReduceOp::Max, false}},
      {"numpy.amax", {ReduceOp::Max, false}},  {"method.min", {ReduceOp::Min, false}},
      {"numpy.min", {ReduceOp::Min, false}},   {"numpy.amin", {ReduceOp::Min, false}},
  };
  auto it = kTargets.find(node.target);
  if (it == kTargets.end() || !node.args[0].is_node()) return std::nullopt;
  int input = static_cast<int>(node.args[0].i);
  const TensorMeta& in = graph.node(input).meta;
  const TensorMeta& m = node.meta;
  if (in.kind != ValueKind::Tensor || in.numpy_scalar || in.rank() == 0 || !is_float(in.dtype)) return std::nullopt;
  if (m.kind != ValueKind::Tensor || m.numpy_scalar || m.dtype != in.dtype) return std::nullopt;
  // An empty row: NumPy's sum of nothing is +0.0 and max of nothing raises; leave those to NumPy.
  if (in.shape.back().is_const() && in.shape.back().const_value() == 0) return std::nullopt;
  const Arg* axis = node.args.size() == 2 ? &node.args[1] : nullptr;
  bool keepdims = false;
  for (const auto& [k, v] : node.kwargs) {
    if (k == "axis") {
      if (axis) return std::nullopt;
      axis = &v;
    } else if (k == "keepdims") {
      if (v.kind != Arg::Kind::Bool) return std::nullopt;
      keepdims = v.i != 0;
    } else {
      return std::nullopt;
    }
  }
  if (!axis) return std::nullopt;  // all axes: a NumPy scalar, or a multi-axis reduction
  const Arg* a = axis;
  if ((a->kind == Arg::Kind::Tuple || a->kind == Arg::Kind::List) && a->items.size() == 1) a = &a->items[0];
  if (a->kind != Arg::Kind::Int || (a->i != -1 && a->i != in.rank() - 1)) return std::nullopt;
  return ReductionNode{it->second.first, it->second.second, keepdims, in.dtype, input};
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
  if (ma.rank() < 2 || mb.rank() < 2 || ma.numpy_scalar || mb.numpy_scalar) return std::nullopt;
  // np.dot of N-d arrays pairs every batch of A with every batch of B; only matmul broadcasts them.
  if (mb.rank() > 2 && t != "operator.matmul" && t != "numpy.matmul") return std::nullopt;
  return MatmulNode{a, b, m.dtype};
}

}  // namespace framejit::jit
