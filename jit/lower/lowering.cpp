// lowering.cpp — GraphLowering of elementwise nodes into loop-IR operations.
#include "jit/lower/lowering.h"

#include <algorithm>
#include <cmath>

namespace framejit::jit {

namespace {

// The loop-IR operation of a pointwise op the code generators compute, and its arity.
struct PointwiseInfo {
  ScalarOp op;
  int arity;
};

std::optional<PointwiseInfo> pointwise_info(OpKind op) {
  switch (op) {
    case OpKind::Add: return PointwiseInfo{ScalarOp::Add, 2};
    case OpKind::Sub: return PointwiseInfo{ScalarOp::Sub, 2};
    case OpKind::Mul: return PointwiseInfo{ScalarOp::Mul, 2};
    case OpKind::Div: return PointwiseInfo{ScalarOp::Div, 2};
    case OpKind::Neg: return PointwiseInfo{ScalarOp::Neg, 1};
    case OpKind::Abs: return PointwiseInfo{ScalarOp::Abs, 1};
    case OpKind::Sqrt: return PointwiseInfo{ScalarOp::Sqrt, 1};
    case OpKind::Square: return PointwiseInfo{ScalarOp::Square, 1};
    case OpKind::Reciprocal: return PointwiseInfo{ScalarOp::Reciprocal, 1};
    case OpKind::Exp: return PointwiseInfo{ScalarOp::Exp, 1};
    case OpKind::Log: return PointwiseInfo{ScalarOp::Log, 1};
    case OpKind::Log1p: return PointwiseInfo{ScalarOp::Log1p, 1};
    case OpKind::Expm1: return PointwiseInfo{ScalarOp::Expm1, 1};
    case OpKind::Tanh: return PointwiseInfo{ScalarOp::Tanh, 1};
    case OpKind::Sin: return PointwiseInfo{ScalarOp::Sin, 1};
    case OpKind::Cos: return PointwiseInfo{ScalarOp::Cos, 1};
    case OpKind::Tan: return PointwiseInfo{ScalarOp::Tan, 1};
    case OpKind::Arctan: return PointwiseInfo{ScalarOp::Atan, 1};
    case OpKind::Erf: return PointwiseInfo{ScalarOp::Erf, 1};
    case OpKind::Floor: return PointwiseInfo{ScalarOp::Floor, 1};
    case OpKind::Ceil: return PointwiseInfo{ScalarOp::Ceil, 1};
    case OpKind::Maximum: return PointwiseInfo{ScalarOp::Max, 2};
    case OpKind::Minimum: return PointwiseInfo{ScalarOp::Min, 2};
    case OpKind::Pow: return PointwiseInfo{ScalarOp::Pow, 2};
    case OpKind::Arctan2: return PointwiseInfo{ScalarOp::Atan2, 2};
    case OpKind::FloorDiv: return PointwiseInfo{ScalarOp::FloorDiv, 2};
    case OpKind::Mod: return PointwiseInfo{ScalarOp::Mod, 2};
    case OpKind::Eq: return PointwiseInfo{ScalarOp::Eq, 2};
    case OpKind::Ne: return PointwiseInfo{ScalarOp::Ne, 2};
    case OpKind::Lt: return PointwiseInfo{ScalarOp::Lt, 2};
    case OpKind::Le: return PointwiseInfo{ScalarOp::Le, 2};
    case OpKind::Gt: return PointwiseInfo{ScalarOp::Gt, 2};
    case OpKind::Ge: return PointwiseInfo{ScalarOp::Ge, 2};
    case OpKind::BitAnd:
    case OpKind::LogicalAnd: return PointwiseInfo{ScalarOp::And, 2};
    case OpKind::BitOr:
    case OpKind::LogicalOr: return PointwiseInfo{ScalarOp::Or, 2};
    case OpKind::BitXor:
    case OpKind::LogicalXor: return PointwiseInfo{ScalarOp::Xor, 2};
    case OpKind::Invert:
    case OpKind::LogicalNot: return PointwiseInfo{ScalarOp::Not, 1};
    case OpKind::Where: return PointwiseInfo{ScalarOp::Where, 3};
    case OpKind::Cast:
    case OpKind::Positive: return PointwiseInfo{ScalarOp::Cast, 1};  // positive is a copy
    default: return std::nullopt;
  }
}

bool is_float(DType t) { return t == DType::Float32 || t == DType::Float64 || rt::dtype_is_half(t); }
bool is_int(DType t) { return t == DType::Int32 || t == DType::Int64 || t == DType::UInt8; }

// A Python number operand (run-time parameter or constant) as it meets the arrays.
enum class Number : uint8_t { None, Int, Float, Bool };

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

namespace {

// Whether value v is C-ordered at run time, not only dense: an input guarded C-contiguous, a
// creation, or elementwise work on such values alone (a kernel's output takes its inputs' memory
// order: x2 + f, f Fortran-ordered, is Fortran-ordered, though its meta says Contiguous).
bool surely_c_order(const Graph& graph, int v, int depth = 0) {
  const Node& n = graph.node(v);
  if (n.meta.kind != ValueKind::Tensor) return true;  // a number broadcasts
  if (n.meta.layout != Layout::Contiguous || depth > 16) return false;
  if (n.kind == NodeKind::Placeholder) return true;
  if (n.kind != NodeKind::Call) return false;
  if (is_creation(n.op)) return true;
  if (!pointwise_info(n.op) && n.op != OpKind::Cast && n.op != OpKind::Copy) return false;
  bool c = true;
  for (const Arg& a : n.args) a.for_each_node([&](int u) { c = c && surely_c_order(graph, u, depth + 1); });
  return c;
}

}  // namespace

std::optional<PointwiseNode> lower_pointwise(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call) return std::nullopt;
  const TensorMeta& m = node.meta;
  // A NumPy scalar result (arithmetic on NumPy scalars) is a 0-d kernel output that the program
  // hands back as the library's scalar (Note [Scalar steps]).
  if (m.kind != ValueKind::Tensor || !pointwise_dtype(m.dtype)) return std::nullopt;
  if (node.op == OpKind::Copy) {
    // x.copy() or numpy.copy(x) of a C-ordered array: the identity kernel, whose result takes
    // its input's memory order (Note [Output memory order]), C, as both calls do there. Of other
    // layouts the library copies (x.copy() is C-ordered, numpy.copy keeps the order).
    if (node.args.size() != 1 || !node.args[0].is_node() || !node.kwargs.empty()) return std::nullopt;
    const TensorMeta& in = graph.node(static_cast<int>(node.args[0].i)).meta;
    if (in.kind != ValueKind::Tensor || in.scalar_object || in.dtype != m.dtype || m.scalar_object ||
        !surely_c_order(graph, static_cast<int>(node.args[0].i)))
      return std::nullopt;
    const int source = static_cast<int>(node.args[0].i);
    return PointwiseNode{ScalarOp::Cast, m.dtype, {{PointwiseOperand::Kind::Tensor, source, 0}}, {m.dtype}};
  }
  const auto info = pointwise_info(node.op);
  if (!info || !node.attrs.described) return std::nullopt;
  // The operands are the leading args; for astype the rest (dtype, casting, copy) are attributes,
  // and the frontend left a plain converting copy only (described).
  std::vector<Arg> args = node.args;
  if (node.op == OpKind::Cast) {
    if (args.empty() || !args[0].is_node()) return std::nullopt;
    args.resize(1);
  } else if (!node.kwargs.empty()) {
    return std::nullopt;
  }
  if (static_cast<int>(args.size()) != info->arity) return std::nullopt;
  // The library's loop signature, decided by the frontend; none means a rule not reproduced here.
  if (node.attrs.loop_dtypes.size() != args.size()) return std::nullopt;

  PointwiseNode pw{info->op, m.dtype, {}, {}};
  std::vector<DType> arrays;      // dtypes of the tensor operands
  std::vector<Number> numbers;    // per operand: which kind of Python number, or None
  for (const Arg& a : args) {
    PointwiseOperand o{PointwiseOperand::Kind::Const};
    Number num = Number::None;
    switch (a.kind) {
      case Arg::Kind::Node: {
        const TensorMeta& am = graph.node(static_cast<int>(a.i)).meta;
        if (am.kind == ValueKind::Scalar) {
          // Run-time parameters arrive as int64 or double (read_params); a bool as the int64 0 or 1
          // (a loop's `k < n` meeting an array's test).
          if (am.dtype != DType::Int64 && am.dtype != DType::Float64 && am.dtype != DType::Bool) return std::nullopt;
          num = am.dtype == DType::Float64 ? Number::Float : am.dtype == DType::Bool ? Number::Bool : Number::Int;
          o = {PointwiseOperand::Kind::Scalar, static_cast<int>(a.i), 0};
        } else {
          // A library scalar object (a NumPy scalar) reads as a 0-d array; the loop dtypes the
          // frontend decided already hold for every value its guards admit.
          if (!pointwise_dtype(am.dtype)) return std::nullopt;
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

  // The loop type each operand is converted to; `loop` is the type the op itself computes in
  // (where's condition aside).
  if ((is_comparison_op(node.op) || is_logical_op(node.op)) && m.dtype != DType::Bool) return std::nullopt;
  pw.operand_dtypes = node.attrs.loop_dtypes;
  const DType loop = pw.operand_dtypes.back();
  for (DType t : pw.operand_dtypes)
    if (!pointwise_dtype(t)) return std::nullopt;
  const bool arithmetic = !is_comparison_op(node.op) && !is_logical_op(node.op) && node.op != OpKind::Where &&
                          node.op != OpKind::Cast && node.op != OpKind::Positive;

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
    } else if (e == 0.5 && node.attrs.operator_form && is_float(arrays[0])) {
      pw.op = ScalarOp::Sqrt;
      pw.operands.pop_back();
      pw.operand_dtypes.pop_back();
    }
  }
  if (loop == DType::Bool && arithmetic) {
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
  // Note [Half types]: a half loop computes in float32; its result is rounded back where the
  // kernel body is built. A cast to a half type is that rounding itself. A Python number whose
  // loop type says half is converted to it first (NumPy's rule); one the frontend converts to
  // float32 (torch's, which computes scalars in its "opmath" type) stays as it is. A run-time
  // number would need that rounding in the kernel: left to the library.
  for (size_t k = 0; k < pw.operand_dtypes.size() && pw.op != ScalarOp::Cast; ++k) {
    DType& t = pw.operand_dtypes[k];
    if (!rt::dtype_is_half(t)) continue;
    if (pw.operands[k].kind == PointwiseOperand::Kind::Scalar) return std::nullopt;
    if (pw.operands[k].kind == PointwiseOperand::Kind::Const)
      pw.operands[k].value = t == DType::Float16 ? rt::half_to_double(rt::double_to_half(pw.operands[k].value))
                                                 : rt::bfloat16_to_double(rt::double_to_bfloat16(pw.operands[k].value));
    t = DType::Float32;
  }
  if (rt::dtype_is_half(pw.dtype) && pw.op != ScalarOp::Cast) pw.dtype = DType::Float32;
  return pw;
}

namespace {

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

}  // namespace

std::optional<ReductionNode> lower_reduction(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call || node.args.empty()) return std::nullopt;
  const OpKind kind = node.op;
  if (!is_reduction(kind)) return std::nullopt;
  const OpAttrs& attrs = node.attrs;
  // Only reductions whose every argument has a typed form, and the defaults of dtype (out,
  // initial and where are not described): anything else changes what the library computes.
  if (!attrs.described || attrs.dtype || !node.args[0].is_node()) return std::nullopt;
  int input = static_cast<int>(node.args[0].i);
  const TensorMeta& in = graph.node(input).meta;
  const TensorMeta& m = node.meta;
  const int rank = in.rank();
  if (in.kind != ValueKind::Tensor || in.scalar_object || rank == 0 || !pointwise_dtype(in.dtype)) return std::nullopt;
  if (rt::dtype_is_half(in.dtype)) return std::nullopt;  // a half-type result: Note [Half types]
  const bool arg = kind == OpKind::ArgMax || kind == OpKind::ArgMin;
  // The type NumPy 1.24 combines the elements in (Note [Integer reductions]): sums and products
  // of bool and integers in the platform integer (uint64 for unsigned), means of them in
  // float64; max/min and argmax/argmin compare in the array's own type.
  DType value = in.dtype;
  if (kind == OpKind::Any || kind == OpKind::All) {
    value = DType::Bool;  // any is the max of the truth values, all their min (NaN is true)
  } else if (!is_float(in.dtype)) {
    switch (kind) {
      case OpKind::Sum:
      case OpKind::Prod: value = in.dtype == DType::UInt8 ? DType::UInt64 : DType::Int64; break;
      case OpKind::Mean:
      case OpKind::Var:
      case OpKind::Std: value = DType::Float64; break;
      default: break;
    }
  }
  if (m.kind != ValueKind::Tensor || m.dtype != (arg ? DType::Int64 : value)) return std::nullopt;

  ReductionNode r;
  r.dtype = in.dtype;
  r.value_dtype = value;
  r.input = input;
  r.scalar_object = m.scalar_object;
  r.keepdims = attrs.keepdims;
  r.ddof = attrs.ddof;
  r.reduced.assign(rank, attrs.all_axes);
  if (!attrs.all_axes) {
    if (arg && attrs.axes.size() != 1) return std::nullopt;  // argmax takes one axis
    for (int d : attrs.axes) {
      if (d < 0 || d >= rank || r.reduced[d]) return std::nullopt;  // NumPy raises on a repeated axis
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
  if (m.rank() != (r.keepdims ? rank : kept) || (r.scalar_object && (r.keepdims || kept))) return std::nullopt;
  // Reductions of nothing stay with NumPy where it raises (max, argmax...) or warns and returns
  // NaN (mean, var, std), and so do var/std with count - ddof <= 0 (NumPy warns). A sum or product
  // of nothing is its identity, which the program writes itself.
  if (count_bound < 1 && kind != OpKind::Sum && kind != OpKind::Prod) return std::nullopt;
  switch (kind) {
    case OpKind::Sum: r.op = ReduceOp::Sum; break;
    case OpKind::Prod: r.op = ReduceOp::Prod; break;
    case OpKind::Max: r.op = ReduceOp::Max; break;
    case OpKind::Min: r.op = ReduceOp::Min; break;
    case OpKind::Any: r.op = ReduceOp::Max; break;
    case OpKind::All: r.op = ReduceOp::Min; break;
    case OpKind::Mean: r.op = ReduceOp::Sum, r.mean = true; break;
    case OpKind::Var:
    case OpKind::Std:
      if (count_bound <= r.ddof) return std::nullopt;
      r.op = ReduceOp::Sum, r.mean = true, r.var = true, r.sqrt = kind == OpKind::Std;
      break;
    case OpKind::ArgMax: r.op = ReduceOp::ArgMax; break;
    case OpKind::ArgMin: r.op = ReduceOp::ArgMin; break;
    default: return std::nullopt;
  }
  if (!r.mean && r.ddof != 0) return std::nullopt;
  return r;
}

std::optional<MatmulNode> lower_matmul(const Graph& graph, const Node& node, bool half_products, bool vector_products) {
  if (node.kind != NodeKind::Call || node.args.size() != 2 || !node.kwargs.empty()) return std::nullopt;
  if (node.op != OpKind::Matmul && node.op != OpKind::Dot) return std::nullopt;
  if (!node.args[0].is_node() || !node.args[1].is_node()) return std::nullopt;
  int a = static_cast<int>(node.args[0].i), b = static_cast<int>(node.args[1].i);
  const TensorMeta& ma = graph.node(a).meta;
  const TensorMeta& mb = graph.node(b).meta;
  const TensorMeta& m = node.meta;
  if (ma.kind != ValueKind::Tensor || mb.kind != ValueKind::Tensor || m.kind != ValueKind::Tensor) return std::nullopt;
  // Half types (Note [Half types]): where the backend has products of them (a device's).
  if (!is_float(m.dtype) || (rt::dtype_is_half(m.dtype) && !half_products) ||
      ma.dtype != m.dtype || mb.dtype != m.dtype || m.scalar_object)
    return std::nullopt;
  if (ma.scalar_object || mb.scalar_object) return std::nullopt;
  if (vector_products && ((ma.rank() == 1 && mb.rank() == 2) || (ma.rank() == 2 && mb.rank() == 1))) {
    if (m.rank() != 1) return std::nullopt;
    return MatmulNode{a, b, m.dtype, ma.rank() == 1, mb.rank() == 1};
  }
  if (ma.rank() < 2 || mb.rank() < 2) return std::nullopt;
  // np.dot of N-d arrays pairs every batch of A with every batch of B; only matmul broadcasts them.
  if (mb.rank() > 2 && node.op != OpKind::Matmul) return std::nullopt;
  return MatmulNode{a, b, m.dtype};
}

}  // namespace framejit::jit
