// ops.h — canonical ops: what a call node computes, as an OpKind with typed attributes, decided
// once by frontend/ops when the call is traced. jit/ dispatches on these, never on library names.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "runtime/dtype.h"

namespace framejit::jit {

struct Arg;
struct ElementLoop;  // jit/ir/element_loop.h

/// Every op a traced graph holds. Pointwise ops follow broadcasting; a library's own dtype rules
/// are already resolved into the node's meta and OpAttrs::loop_dtypes.
enum class OpKind : uint8_t {
  Extern,  // anything else: only the library callable (Node::target) can run it
  // Pointwise, unary.
  Neg, Positive, Abs, Sqrt, Square, Reciprocal, Exp, Exp2, Expm1, Log, Log2, Log10, Log1p, Cbrt,
  Sin, Cos, Tan, Arcsin, Arccos, Arctan, Sinh, Cosh, Tanh, Arcsinh, Arccosh, Arctanh, Erf, Sign, Floor,
  Ceil, Trunc, Rint, IsNan, IsInf, IsFinite, Signbit, Deg2Rad, Rad2Deg, Invert, LogicalNot,
  Cast,  // a converting copy to the result dtype (astype)
  // Pointwise, binary.
  Add, Sub, Mul, Div, FloorDiv, Mod, Fmod, Pow, FloatPower, Maximum, Minimum, Fmax, Fmin, Arctan2,
  Hypot, Copysign, Eq, Ne, Lt, Le, Gt, Ge, BitAnd, BitOr, BitXor, LeftShift, RightShift,
  LogicalAnd, LogicalOr, LogicalXor,
  // Pointwise, ternary: where(cond, a, b), clip(a, lo, hi).
  Where, Clip,
  // Reductions.
  Sum, Prod, Mean, Max, Min, Var, Std, ArgMax, ArgMin, Any, All,
  // Matrix products: matmul broadcasts batch dims; dot pairs every batch of A with every one of B.
  Matmul, Dot,
  // Views.
  Transpose, SwapAxes, ExpandDims, Squeeze, Reshape, Ravel, BroadcastTo, GetItem,
  // Copies and splits of an array.
  Copy, Flatten, Split,
  // Joins.
  Concatenate, Stack,
  // Creation.
  Zeros, Ones, Full, Empty, Arange, ZerosLike, OnesLike, EmptyLike, FullLike,
  // Python numbers (run-time scalars): Python's semantics, not an array library's.
  SymSize,  // (tensor, dim): a size of a graph input
  ScalarAdd, ScalarSub, ScalarMul, ScalarTrueDiv, ScalarFloorDiv, ScalarMod, ScalarPow, ScalarAnd,
  ScalarOr, ScalarXor, ScalarLShift, ScalarRShift, ScalarMatmul, ScalarNeg, ScalarPos,
  ScalarInvert, ScalarAbs, ScalarFloat,
  // Writes into arrays (Note [Writes into arrays] in frontend/trace/writes.cpp). IndexPut is
  // functional: (base, key, value) is base with base[index] = value, a new value (attrs.index is
  // the basic index, as GetItem's). CopyInto (input, final) gives a written graph input its final
  // contents: the one write into memory the caller sees.
  IndexPut, CopyInto,
  // A call that writes into one of its arguments (x op= y on a shared array, setitem, ...).
  Mutate,
  // Control flow: nodes owning the graphs of their bodies (Note [Subgraphs] in jit/ir/graph.h).
  // AssociativeScan's body combines two batches of slices (Note [Parallel scans]).
  Cond, WhileLoop, Scan, AssociativeScan,
  // A Python loop over array elements compiled as a loop (OpAttrs::element_loop; Note [Element
  // loops] in frontend/trace/element_loops.cpp): args (*arrays, *numbers); its value is the tuple
  // (*written arrays' new values, *numbers it hands back), selected by getitem nodes.
  Loop,
};

/// A short stable name ("add", "sum", "scalar_add", ...), for logs and tests.
std::string_view op_name(OpKind op);

bool is_pointwise(OpKind op);
bool is_unary_pointwise(OpKind op);
bool is_binary_pointwise(OpKind op);
/// Comparisons: the result is bool and the operands meet in their promoted type.
bool is_comparison_op(OpKind op);
/// logical_and/or/xor/not: every operand is read as bool.
bool is_logical_op(OpKind op);
bool is_reduction(OpKind op);
bool is_view(OpKind op);
bool is_creation(OpKind op);
bool is_scalar_op(OpKind op);
/// Control-flow ops: their nodes own subgraphs (Note [Subgraphs] in jit/ir/graph.h).
bool is_control_flow(OpKind op);
/// Writes into memory the program can observe (an argument), so the call must run even when its
/// value is unused, and no call may be merged across it.
bool mutates(OpKind op);
/// Returns uninitialized memory: two such calls are never the same value.
bool fresh_memory(OpKind op);
/// max/min/argmax/argmin: raise on an empty reduction (there is no identity).
bool reduction_needs_elements(OpKind op);

/// One item of a basic index (x[1:, None, ..., 2]) with its integer parts as graph Args (Int,
/// None, or a Node holding a run-time int), so that passes renumber and fold them.
struct IndexSpecItem {
  enum class Kind : uint8_t { Int, Slice, NewAxis, Ellipsis } kind = Kind::Int;
  std::vector<Arg> parts;  // Int: {index}; Slice: {start, stop, step}; otherwise empty
};

/// The typed attributes of a canonical op. Which fields mean something depends on the kind.
struct OpAttrs {
  /// False when some argument has no typed form here (a run-time axis, out=, initial=, where=,
  /// an order other than C ...): then only the library callable computes the node.
  bool described = true;

  // Reductions.
  bool all_axes = true;
  std::vector<int> axes;  // normalized to [0, rank) of the input, when !all_axes
  bool keepdims = false;
  int64_t ddof = 0;
  /// Reductions: the dtype= argument, when given. Cast: the target dtype.
  std::optional<rt::DType> dtype;

  // Views.
  std::vector<int> perm;              // Transpose, SwapAxes: output dim d is input dim perm[d]
  std::vector<IndexSpecItem> index;   // GetItem, IndexPut, ExpandDims, Squeeze (as the index they equal)
  std::vector<Arg> shape;             // Reshape (one entry may be -1), BroadcastTo: Int or Node

  // Pointwise.
  /// The dtype each operand is converted to before the op runs (the library's loop signature),
  /// one per operand; empty when the library's rule is not one framejit reproduces.
  std::vector<rt::DType> loop_dtypes;
  /// Written as a Python operator (`x ** 0.5`): NumPy's ndarray operators take fast paths that
  /// its ufuncs do not (x ** 0.5 is sqrt(x), which differs from pow at -0.0 and -inf).
  bool operator_form = false;
  /// Pow: the operand that is the exponent (1, or 0 for a reflected call).
  int exponent = 1;

  /// Loop: the compiled loop (shared with every copy of the node; equal only to itself).
  std::shared_ptr<const ElementLoop> element_loop;

  /// Calls fn(arg) on every graph Arg the attributes hold (index parts, shape entries).
  template <typename Fn>
  void for_each_arg(Fn&& fn) {
    for (IndexSpecItem& it : index)
      for (Arg& a : it.parts) fn(a);
    for (Arg& a : shape) fn(a);
  }
  template <typename Fn>
  void for_each_arg(Fn&& fn) const {
    for (const IndexSpecItem& it : index)
      for (const Arg& a : it.parts) fn(a);
    for (const Arg& a : shape) fn(a);
  }
  bool operator==(const OpAttrs& o) const;
};

}  // namespace framejit::jit
