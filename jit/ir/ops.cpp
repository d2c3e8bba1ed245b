// ops.cpp — names and properties of canonical ops (see ops.h).
#include "jit/ir/ops.h"

#include "jit/ir/graph.h"

namespace framejit::jit {

std::string_view op_name(OpKind op) {
  switch (op) {
    case OpKind::Extern: return "extern";
    case OpKind::Neg: return "neg";
    case OpKind::Positive: return "positive";
    case OpKind::Abs: return "abs";
    case OpKind::Sqrt: return "sqrt";
    case OpKind::Square: return "square";
    case OpKind::Reciprocal: return "reciprocal";
    case OpKind::Exp: return "exp";
    case OpKind::Exp2: return "exp2";
    case OpKind::Expm1: return "expm1";
    case OpKind::Log: return "log";
    case OpKind::Log2: return "log2";
    case OpKind::Log10: return "log10";
    case OpKind::Log1p: return "log1p";
    case OpKind::Cbrt: return "cbrt";
    case OpKind::Sin: return "sin";
    case OpKind::Cos: return "cos";
    case OpKind::Tan: return "tan";
    case OpKind::Arcsin: return "arcsin";
    case OpKind::Arccos: return "arccos";
    case OpKind::Arctan: return "arctan";
    case OpKind::Sinh: return "sinh";
    case OpKind::Cosh: return "cosh";
    case OpKind::Tanh: return "tanh";
    case OpKind::Arcsinh: return "arcsinh";
    case OpKind::Arccosh: return "arccosh";
    case OpKind::Arctanh: return "arctanh";
    case OpKind::Erf: return "erf";
    case OpKind::Sign: return "sign";
    case OpKind::Floor: return "floor";
    case OpKind::Ceil: return "ceil";
    case OpKind::Trunc: return "trunc";
    case OpKind::Rint: return "rint";
    case OpKind::IsNan: return "isnan";
    case OpKind::IsInf: return "isinf";
    case OpKind::IsFinite: return "isfinite";
    case OpKind::Signbit: return "signbit";
    case OpKind::Deg2Rad: return "deg2rad";
    case OpKind::Rad2Deg: return "rad2deg";
    case OpKind::Invert: return "invert";
    case OpKind::LogicalNot: return "logical_not";
    case OpKind::Cast: return "cast";
    case OpKind::Add: return "add";
    case OpKind::Sub: return "sub";
    case OpKind::Mul: return "mul";
    case OpKind::Div: return "div";
    case OpKind::FloorDiv: return "floor_divide";
    case OpKind::Mod: return "mod";
    case OpKind::Fmod: return "fmod";
    case OpKind::Pow: return "pow";
    case OpKind::FloatPower: return "float_power";
    case OpKind::Maximum: return "maximum";
    case OpKind::Minimum: return "minimum";
    case OpKind::Fmax: return "fmax";
    case OpKind::Fmin: return "fmin";
    case OpKind::Arctan2: return "arctan2";
    case OpKind::Hypot: return "hypot";
    case OpKind::Copysign: return "copysign";
    case OpKind::Eq: return "eq";
    case OpKind::Ne: return "ne";
    case OpKind::Lt: return "lt";
    case OpKind::Le: return "le";
    case OpKind::Gt: return "gt";
    case OpKind::Ge: return "ge";
    case OpKind::BitAnd: return "bitwise_and";
    case OpKind::BitOr: return "bitwise_or";
    case OpKind::BitXor: return "bitwise_xor";
    case OpKind::LeftShift: return "left_shift";
    case OpKind::RightShift: return "right_shift";
    case OpKind::LogicalAnd: return "logical_and";
    case OpKind::LogicalOr: return "logical_or";
    case OpKind::LogicalXor: return "logical_xor";
    case OpKind::Where: return "where";
    case OpKind::Clip: return "clip";
    case OpKind::Sum: return "sum";
    case OpKind::Prod: return "prod";
    case OpKind::Mean: return "mean";
    case OpKind::Max: return "max";
    case OpKind::Min: return "min";
    case OpKind::Var: return "var";
    case OpKind::Std: return "std";
    case OpKind::ArgMax: return "argmax";
    case OpKind::ArgMin: return "argmin";
    case OpKind::Any: return "any";
    case OpKind::All: return "all";
    case OpKind::Matmul: return "matmul";
    case OpKind::Dot: return "dot";
    case OpKind::Transpose: return "transpose";
    case OpKind::SwapAxes: return "swapaxes";
    case OpKind::ExpandDims: return "expand_dims";
    case OpKind::Squeeze: return "squeeze";
    case OpKind::Reshape: return "reshape";
    case OpKind::Ravel: return "ravel";
    case OpKind::BroadcastTo: return "broadcast_to";
    case OpKind::GetItem: return "getitem";
    case OpKind::Copy: return "copy";
    case OpKind::Flatten: return "flatten";
    case OpKind::Split: return "split";
    case OpKind::Concatenate: return "concatenate";
    case OpKind::Stack: return "stack";
    case OpKind::Zeros: return "zeros";
    case OpKind::Ones: return "ones";
    case OpKind::Full: return "full";
    case OpKind::Empty: return "empty";
    case OpKind::Arange: return "arange";
    case OpKind::ZerosLike: return "zeros_like";
    case OpKind::OnesLike: return "ones_like";
    case OpKind::EmptyLike: return "empty_like";
    case OpKind::FullLike: return "full_like";
    case OpKind::SymSize: return "input_size";
    case OpKind::ScalarAdd: return "scalar_add";
    case OpKind::ScalarSub: return "scalar_sub";
    case OpKind::ScalarMul: return "scalar_mul";
    case OpKind::ScalarTrueDiv: return "scalar_truediv";
    case OpKind::ScalarFloorDiv: return "scalar_floordiv";
    case OpKind::ScalarMod: return "scalar_mod";
    case OpKind::ScalarPow: return "scalar_pow";
    case OpKind::ScalarAnd: return "scalar_and";
    case OpKind::ScalarOr: return "scalar_or";
    case OpKind::ScalarXor: return "scalar_xor";
    case OpKind::ScalarLShift: return "scalar_lshift";
    case OpKind::ScalarRShift: return "scalar_rshift";
    case OpKind::ScalarMatmul: return "scalar_matmul";
    case OpKind::ScalarNeg: return "scalar_neg";
    case OpKind::ScalarPos: return "scalar_pos";
    case OpKind::ScalarInvert: return "scalar_invert";
    case OpKind::ScalarAbs: return "scalar_abs";
    case OpKind::ScalarFloat: return "scalar_float";
    case OpKind::IndexPut: return "index_put";
    case OpKind::CopyInto: return "copy_into";
    case OpKind::Mutate: return "mutate";
    case OpKind::Cond: return "cond";
    case OpKind::WhileLoop: return "while_loop";
    case OpKind::Scan: return "scan";
    case OpKind::AssociativeScan: return "associative_scan";
    case OpKind::Loop: return "loop";
  }
  return "?";
}

bool is_unary_pointwise(OpKind op) { return op >= OpKind::Neg && op <= OpKind::Cast; }
bool is_binary_pointwise(OpKind op) { return op >= OpKind::Add && op <= OpKind::LogicalXor; }
bool is_pointwise(OpKind op) { return op >= OpKind::Neg && op <= OpKind::Clip; }
bool is_comparison_op(OpKind op) { return op >= OpKind::Eq && op <= OpKind::Ge; }
bool is_logical_op(OpKind op) {
  return op == OpKind::LogicalAnd || op == OpKind::LogicalOr || op == OpKind::LogicalXor ||
         op == OpKind::LogicalNot;
}
bool is_reduction(OpKind op) { return op >= OpKind::Sum && op <= OpKind::All; }
bool is_view(OpKind op) { return op >= OpKind::Transpose && op <= OpKind::GetItem; }
bool is_creation(OpKind op) { return op >= OpKind::Zeros && op <= OpKind::FullLike; }
bool is_scalar_op(OpKind op) { return op >= OpKind::SymSize && op <= OpKind::ScalarFloat; }
bool is_control_flow(OpKind op) { return op >= OpKind::Cond && op <= OpKind::AssociativeScan; }

bool mutates(OpKind op) { return op == OpKind::Mutate || op == OpKind::CopyInto; }
bool fresh_memory(OpKind op) { return op == OpKind::Empty || op == OpKind::EmptyLike; }
bool reduction_needs_elements(OpKind op) {
  return op == OpKind::Max || op == OpKind::Min || op == OpKind::ArgMax || op == OpKind::ArgMin;
}

bool OpAttrs::operator==(const OpAttrs& o) const {
  if (index.size() != o.index.size()) return false;
  for (size_t k = 0; k < index.size(); ++k)
    if (index[k].kind != o.index[k].kind || index[k].parts != o.index[k].parts) return false;
  return described == o.described && all_axes == o.all_axes && axes == o.axes &&
         keepdims == o.keepdims && ddof == o.ddof && dtype == o.dtype && perm == o.perm &&
         shape == o.shape && loop_dtypes == o.loop_dtypes && operator_form == o.operator_form &&
         exponent == o.exponent && element_loop == o.element_loop;
}

}  // namespace framejit::jit
