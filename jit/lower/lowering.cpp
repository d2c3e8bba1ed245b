// lowering.cpp — GraphLowering of elementwise nodes into loop-IR operations.
#include "jit/lower/lowering.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

namespace framejit::jit {

namespace {

// How an operation chooses the dtype its operands are converted to (NumPy's ufunc loop type).
enum class Loop : uint8_t {
  Result,   // arithmetic: the result dtype
  Promote,  // comparisons: the promoted type of the operands; the result is bool
  Logical,  // logical_and/or/xor/not: every operand as bool
  Select,   // where: condition as bool, the others the result dtype
};

struct TargetInfo {
  ScalarOp op;
  int arity;
  Loop loop = Loop::Result;
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
      {"operator.floordiv", {ScalarOp::FloorDiv, 2}}, {"numpy.floor_divide", {ScalarOp::FloorDiv, 2}},
      {"operator.mod", {ScalarOp::Mod, 2}},         {"numpy.mod", {ScalarOp::Mod, 2}},
      {"numpy.remainder", {ScalarOp::Mod, 2}},
      {"operator.eq", {ScalarOp::Eq, 2, Loop::Promote}}, {"numpy.equal", {ScalarOp::Eq, 2, Loop::Promote}},
      {"operator.ne", {ScalarOp::Ne, 2, Loop::Promote}}, {"numpy.not_equal", {ScalarOp::Ne, 2, Loop::Promote}},
      {"operator.lt", {ScalarOp::Lt, 2, Loop::Promote}}, {"numpy.less", {ScalarOp::Lt, 2, Loop::Promote}},
      {"operator.le", {ScalarOp::Le, 2, Loop::Promote}}, {"numpy.less_equal", {ScalarOp::Le, 2, Loop::Promote}},
      {"operator.gt", {ScalarOp::Gt, 2, Loop::Promote}}, {"numpy.greater", {ScalarOp::Gt, 2, Loop::Promote}},
      {"operator.ge", {ScalarOp::Ge, 2, Loop::Promote}}, {"numpy.greater_equal", {ScalarOp::Ge, 2, Loop::Promote}},
      {"operator.and_", {ScalarOp::And, 2}},        {"numpy.bitwise_and", {ScalarOp::And, 2}},
      {"operator.or_", {ScalarOp::Or, 2}},          {"numpy.bitwise_or", {ScalarOp::Or, 2}},
      {"operator.xor", {ScalarOp::Xor, 2}},         {"numpy.bitwise_xor", {ScalarOp::Xor, 2}},
      {"operator.invert", {ScalarOp::Not, 1}},      {"numpy.invert", {ScalarOp::Not, 1}},
      {"numpy.bitwise_not", {ScalarOp::Not, 1}},
      {"numpy.logical_and", {ScalarOp::And, 2, Loop::Logical}},
      {"numpy.logical_or", {ScalarOp::Or, 2, Loop::Logical}},
      {"numpy.logical_xor", {ScalarOp::Xor, 2, Loop::Logical}},
      {"numpy.logical_not", {ScalarOp::Not, 1, Loop::Logical}},
      {"numpy.where", {ScalarOp::Where, 3, Loop::Select}},
      {"method.astype", {ScalarOp::Cast, 1}},
      {"operator.pos", {ScalarOp::Cast, 1}},        {"numpy.positive", {ScalarOp::Cast, 1}},  // a copy
  };
  return table;
}

bool is_float(DType t) { return t == DType::Float32 || t == DType::Float64; }
bool is_int(DType t) { return t == DType::Int32 || t == DType::Int64 || t == DType::UInt8; }

// NumPy's promotion of two array dtypes (np.result_type), for the dtypes fused kernels handle.
DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  if (is_float(a) && is_float(b)) return DType::Float64;
  if (is_float(a) != is_float(b)) {
    DType f = is_float(a) ? a : b, i = is_float(a) ? b : a;
    // float32 holds uint8 exactly; int32 and int64 need float64.
    return f == DType::Float32 && i == DType::UInt8 ? DType::Float32 : DType::Float64;
  }
  // Both integers: uint8 fits int32 and int64, int32 fits int64.
  return rt::dtype_itemsize(a) >= rt::dtype_itemsize(b) ? a : b;
}

// A Python number operand (run-time parameter or constant) as it meets the arrays.
enum class Number : uint8_t { None, Int, Float, Bool };

// The loop type of a comparison: arrays promote as np.result_type does. A Python number compares
// by value in NumPy 1.24 (value-based casting picks a type holding both operands exactly), which
// int64 does for an integer number against integer arrays; a float number against float arrays
// is converted to the array type first, and against int32/int64 arrays both become float64.
std::optional<DType> comparison_type(const std::vector<DType>& arrays, const std::vector<Number>& numbers) {
  if (arrays.empty()) return std::nullopt;
  DType t = arrays[0];
  for (DType a : arrays) t = promote(t, a);
  for (Number n : numbers) {
    if (n == Number::Bool || n == Number::None) continue;
    if (is_float(t)) continue;
    if (n == Number::Int) {
      t = DType::Int64;
    } else {
      // uint8/bool arrays against a float go through float16 in NumPy: not reproduced.
      if (t != DType::Int32 && t != DType::Int64) return std::nullopt;
      t = DType::Float64;
    }
  }
  return t;
}

// Whether `op` computes in `t` exactly as NumPy's loop for `t` does.
bool op_supported(ScalarOp op, DType t) {
  if (is_comparison(op) || op == ScalarOp::Where || op == ScalarOp::Cast) return true;
  switch (op) {
    case ScalarOp::And:
    case ScalarOp::Or:
    case ScalarOp::Xor:
    case ScalarOp::Not: return !is_float(t);
    case ScalarOp::Add:
    case ScalarOp::Sub:
    case ScalarOp::Mul:
    case ScalarOp::Neg:
    case ScalarOp::Abs:
    case ScalarOp::Square:
    case ScalarOp::Max:
    case ScalarOp::Min: return t != DType::Bool;  // bool forms are rewritten before this check
    // Float floor_divide/remainder need fmod's exact remainder: left to NumPy for now.
    case ScalarOp::FloorDiv:
    case ScalarOp::Mod: return is_int(t);
    default: return is_float(t);  // Div, Pow and the math functions
  }
}

}  // namespace

bool pointwise_dtype(DType t) { return is_float(t) || is_int(t) || t == DType::Bool; }

std::optional<PointwiseNode> lower_pointwise(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call) return std::nullopt;
  const TensorMeta& m = node.meta;
  if (m.kind != ValueKind::Tensor || m.numpy_scalar || !pointwise_dtype(m.dtype)) return std::nullopt;
  auto it = targets().find(node.target);
  if (it == targets().end()) return std::nullopt;
  const TargetInfo info = it->second;
  std::vector<Arg> args = node.args;
  if (info.op == ScalarOp::Cast) {
    // x.astype(dtype[, casting='unsafe', copy=True]): the frontend breaks the graph on any other
    // casting rule or copy=False, so what reaches here is a plain converting copy. `order` could
    // ask for another layout: not fused.
    for (const auto& [k, v] : node.kwargs)
      if (k != "dtype" && k != "casting" && k != "copy") return std::nullopt;
    if (args.empty() || !args[0].is_node()) return std::nullopt;
    args.resize(1);
  } else if (!node.kwargs.empty()) {
    return std::nullopt;
  }
  if (static_cast<int>(args.size()) != info.arity) return std::nullopt;

  PointwiseNode pw{info.op, m.dtype, {}, {}};
  std::vector<DType> arrays;      // dtypes of the tensor operands
  std::vector<Number> numbers;    // per operand: which kind of Python number, or None
  for (const Arg& a : args) {
    PointwiseOperand o{PointwiseOperand::Kind::Const};
    Number num = Number::None;
    switch (a.kind) {
      case Arg::Kind::Node: {
        const TensorMeta& am = graph.node(static_cast<int>(a.i)).meta;
        if (am.kind == ValueKind::Scalar) {
          // Run-time parameters arrive as int64 or double (read_params).
          if (am.dtype != DType::Int64 && am.dtype != DType::Float64) return std::nullopt;
          num = am.dtype == DType::Int64 ? Number::Int : Number::Float;
          o = {PointwiseOperand::Kind::Scalar, static_cast<int>(a.i), 0};
        } else {
          // A 0-d operand may be a NumPy scalar that NumPy 1.24 treats by value.
          if (!pointwise_dtype(am.dtype) || am.numpy_scalar) return std::nullopt;
          arrays.push_back(am.dtype);
          o = {PointwiseOperand::Kind::Tensor, static_cast<int>(a.i), 0};
        }
        break;
      }
      case Arg::Kind::Int:
        // Integer constants ride in a double: only those it holds exactly.
        if (std::abs(static_cast<double>(a.i)) > 9007199254740992.0) return std::nullopt;
        o.value = static_cast<double>(a.i);
        num = Number::Int;
        break;
      case Arg::Kind::Float: o.value = a.f; num = Number::Float; break;
      case Arg::Kind::Bool: o.value = a.i ? 1.0 : 0.0; num = Number::Bool; break;
      default: return std::nullopt;
    }
    pw.operands.push_back(o);
    numbers.push_back(num);
  }
  // A node with no array operand (all scalars) is a 0-d computation; leave it to NumPy.
  if (arrays.empty()) return std::nullopt;

  // The loop type each operand is converted to.
  DType loop = m.dtype;
  switch (info.loop) {
    case Loop::Result: break;
    case Loop::Promote: {
      if (m.dtype != DType::Bool) return std::nullopt;
      auto t = comparison_type(arrays, numbers);
      if (!t) return std::nullopt;
      loop = *t;
      break;
    }
    case Loop::Logical:
      if (m.dtype != DType::Bool) return std::nullopt;
      loop = DType::Bool;
      break;
    case Loop::Select: break;
  }
  for (size_t k = 0; k < pw.operands.size(); ++k)
    pw.operand_dtypes.push_back(info.loop == Loop::Select && k == 0 ? DType::Bool : loop);
  if (info.op == ScalarOp::Cast) pw.operand_dtypes[0] = graph.node(static_cast<int>(args[0].i)).meta.dtype;

  for (size_t k = 0; k < numbers.size(); ++k) {
    // A Python float never meets an integer loop in NumPy (it would make the result float); an
    // operand that claims to is something we do not understand.
    if (numbers[k] == Number::Float && !is_float(pw.operand_dtypes[k])) return std::nullopt;
    // A run-time Python int meeting an integer or bool loop: NumPy 1.24 picks the result type
    // from its value (uint8 + 300 is uint16, int64 + 2**63 is float64), which the graph's
    // metadata fixed for one value only. A constant's value is known, so only those fuse. Weak
    // numbers (NEP 50) keep the loop type whatever their value; the frontend guards the value
    // to the loop type's range, outside which NumPy 2 raises.
    if (numbers[k] == Number::Int && pw.operands[k].kind == PointwiseOperand::Kind::Scalar &&
        !is_float(pw.operand_dtypes[k]) && !graph.weak_scalars)
      return std::nullopt;
  }

  if (pw.op == ScalarOp::Pow && pw.operands[1].kind == PointwiseOperand::Kind::Const) {
    // The ** operator has NumPy's fast paths: x**2 is square(x) and x**0.5 is sqrt(x) (sqrt
    // differs from pow at -0.0 and -inf, so only the operator form of a float array may use it).
    double e = pw.operands[1].value;
    if (e == 2.0) {
      pw.op = ScalarOp::Square;
      pw.operands.pop_back();
      pw.operand_dtypes.pop_back();
    } else if (e == 0.5 && node.target == "operator.pow" && is_float(arrays[0])) {
      pw.op = ScalarOp::Sqrt;
      pw.operands.pop_back();
      pw.operand_dtypes.pop_back();
    }
  }
  if (loop == DType::Bool && info.loop == Loop::Result) {
    // NumPy's bool loops: add is or, multiply is and, maximum/minimum are or/and, abs is itself.
    switch (pw.op) {
      case ScalarOp::Add:
      case ScalarOp::Max: pw.op = ScalarOp::Or; break;
      case ScalarOp::Mul:
      case ScalarOp::Min: pw.op = ScalarOp::And; break;
      case ScalarOp::Abs: pw.op = ScalarOp::Cast; break;
      default: break;
    }
  }
  if (pw.op == ScalarOp::Abs && m.dtype == DType::UInt8) pw.op = ScalarOp::Cast;  // |x| of unsigned
  if (!op_supported(pw.op, loop)) return std::nullopt;
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
  if (in.kind != ValueKind::Tensor || in.numpy_scalar || rank == 0 || !pointwise_dtype(in.dtype)) return std::nullopt;
  const bool arg = target.kind == RedKind::ArgMax || target.kind == RedKind::ArgMin;
  // The type NumPy 1.24 combines the elements in (Note [Integer reductions]): sums and products
  // of bool and integers in the platform integer (uint64 for unsigned), means of them in
  // float64; max/min and argmax/argmin compare in the array's own type.
  DType value = in.dtype;
  if (!is_float(in.dtype)) {
    switch (target.kind) {
      case RedKind::Sum:
      case RedKind::Prod: value = in.dtype == DType::UInt8 ? DType::UInt64 : DType::Int64; break;
      case RedKind::Mean:
      case RedKind::Var:
      case RedKind::Std: value = DType::Float64; break;
      default: break;
    }
  }
  if (m.kind != ValueKind::Tensor || m.dtype != (arg ? DType::Int64 : value)) return std::nullopt;

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
  r.value_dtype = value;
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
  if (ma.rank() < 2 || mb.rank() < 2 || ma.numpy_scalar || mb.numpy_scalar) return std::nullopt;
  // np.dot of N-d arrays pairs every batch of A with every batch of B; only matmul broadcasts them.
  if (mb.rank() > 2 && t != "operator.matmul" && t != "numpy.matmul") return std::nullopt;
  return MatmulNode{a, b, m.dtype};
}

}  // namespace framejit::jit
