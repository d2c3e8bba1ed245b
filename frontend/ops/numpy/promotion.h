// promotion.h — result dtypes of ufuncs, reductions and matmul under NumPy 2's rules (NEP 50),
// answered natively, with no NumPy and no Python (see Note [Native promotion]).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/dtype.h"

namespace framejit::frontend::ops {

// Note [Native promotion]
// framejit.Tensor programs trace where NumPy may be absent, and their semantics are NumPy 2's.
// These rules reproduce what NumPy 2 (>= 2.1, 64-bit Linux) answers for the dtypes framejit
// computes: bool, int8..int64, uint8..uint64, float32, float64.
//
//  * Python scalars are "weak" (NEP 50): a Python int takes the integer or float dtype of the
//    tensors it meets (int64 when it meets only bools), a Python float takes their float dtype
//    (float64 when it meets only ints and bools). A Python bool is an ordinary bool operand.
//    0-d tensors are NOT weak: rank never matters.
//  * NumPy resolves a ufunc in one of a few ways: the common dtype of all inputs (add, maximum,
//    clip...); the first loop of its table that every input casts to safely (power, exp, arctan2,
//    floor_divide...); true_divide forces float64 for int/bool pairs; comparisons and logical ops
//    give bool. Each op below names its way and its loop table.
//  * Where NumPy computes in float16 (exp of an int8 array) or complex, the answer is Unsupported:
//    framejit has no such kernels. Where NumPy raises TypeError (boolean subtract, bitwise ops on
//    floats...), the answer is TypeError. Where it raises OverflowError (a Python int that does not
//    fit the integer dtype it becomes), the answer is Overflow; the caller knows the value, so it
//    passes it (PromoOperand::int_value) to get this answer.
//
// tests/python/test_promotion.py compares every answer with the installed NumPy.

enum class OperandKind : uint8_t { Tensor, PyBool, PyInt, PyFloat };

/// A Python int's value, for the range checks of NEP 50 (Python ints are unbounded).
struct PyIntValue {
  bool negative = false;
  uint64_t magnitude = 0; // |value|, when it fits in 64 bits
  bool beyond_64_bits = false;

  static PyIntValue of(int64_t v);
  static PyIntValue of_unsigned(uint64_t v);
  /// A value whose magnitude needs more than 64 bits.
  static PyIntValue huge(bool negative);
  /// Whether the value is representable in the integer (or bool) dtype `t`.
  bool fits(rt::DType t) const;
};

/// One input of an op, as the rules see it: a tensor's dtype, or a Python scalar's kind.
struct PromoOperand {
  OperandKind kind = OperandKind::Tensor;
  rt::DType dtype = rt::DType::Float64; // Tensor only
  /// PyInt only, optional: without it no Overflow answer can be given.
  std::optional<PyIntValue> int_value;

  static PromoOperand tensor(rt::DType t) { return {OperandKind::Tensor, t, std::nullopt}; }
  static PromoOperand py_bool() { return {OperandKind::PyBool, rt::DType::Bool, std::nullopt}; }
  static PromoOperand py_int(std::optional<PyIntValue> v = std::nullopt) {
    return {OperandKind::PyInt, rt::DType::Int64, v};
  }
  static PromoOperand py_float() {
    return {OperandKind::PyFloat, rt::DType::Float64, std::nullopt};
  }
};

enum class PromoStatus : uint8_t {
  Ok,
  TypeError,   // NumPy raises TypeError (or its subclass UFuncTypeError)
  Overflow,    // NumPy 2 raises OverflowError: a Python int out of range for its dtype
  Unsupported, // NumPy answers, but framejit cannot compute it (float16, complex, ...)
};

struct PromoResult {
  PromoStatus status = PromoStatus::Ok;
  /// Ok only: the dtype of the result.
  rt::DType dtype = rt::DType::Bool;
  /// Ok only, elementwise ops: the dtype each input is cast to before the loop runs (NumPy's loop
  /// signature). For a Python scalar it is the dtype its value takes as a graph input.
  std::vector<rt::DType> operand_dtypes;
  /// Not Ok: one sentence, fit for a graph-break reason.
  std::string why;

  bool ok() const { return status == PromoStatus::Ok; }
};

/// An elementwise op by NumPy's ufunc name ("add", "true_divide", "exp", "less", ...; the
/// aliases "divide", "mod", "abs", "pow", "bitwise_not", "acos"... too), or "where"
/// (cond, x, y) and "clip" (a, lo, hi; for a missing bound NumPy calls maximum or minimum).
/// Unary ops take one operand, binary two. An unknown name or arity is Unsupported.
PromoResult elementwise_result(std::string_view op, const std::vector<PromoOperand> &operands);

/// `a op= b` with a tensor `a` (operands[0]): NumPy computes `op` into a's buffer, so the result
/// keeps a's dtype, and it is a TypeError when op's own result does not cast to it within its
/// kind (int8 array += 1.5 is a TypeError; float32 array += float64 array stays float32).
PromoResult inplace_result(std::string_view op, const std::vector<PromoOperand> &operands);

/// A reduction of a tensor of dtype `input`: "sum", "prod", "mean", "var", "std", "max"/"amax",
/// "min"/"amin", "argmax", "argmin", "any", "all". `dtype_kw` is the dtype= argument.
PromoResult reduction_result(std::string_view op, rt::DType input,
                             std::optional<rt::DType> dtype_kw = std::nullopt);

/// np.matmul / np.dot / the @ operator between two tensors.
PromoResult matmul_result(rt::DType a, rt::DType b);

/// The ufunc behind a Python operator, by the operator module's name ("add", "sub", "truediv",
/// "and_", "neg", "matmul"...; in-place names "iadd", "isub"... map to the same ufunc).
/// nullopt for names that are not array operators.
std::optional<std::string_view> ufunc_for_operator(std::string_view op_name);

/// NumPy's type promotion of two dtypes (np.promote_types) over framejit's dtypes and float16.
/// nullopt for complex.
std::optional<rt::DType> promote_types(rt::DType a, rt::DType b);
/// np.can_cast(from, to, "safe").
bool can_cast_safely(rt::DType from, rt::DType to);
/// np.can_cast(from, to, "same_kind").
bool can_cast_same_kind(rt::DType from, rt::DType to);

/// The loop type of a NumPy comparison (==, <, ...) of arrays `arrays` with Python numbers of kinds
/// `numbers` (PyBool, PyInt, PyFloat): a type that holds every operand exactly, so comparing in
/// it answers as NumPy does, under 1.x value-based casting and NEP 50 alike. Arrays promote as
/// np.result_type does; an int number against integer arrays needs int64 (its value is a run-time
/// input); a float number against float arrays becomes the array type, against int32/int64 arrays
/// both become float64. nullopt where NumPy goes through float16 (a float against uint8/bool
/// arrays, or against float16 arrays, which NumPy 1 compares in float32 when the float is past
/// float16's range) or no array takes part.
std::optional<rt::DType> comparison_loop_dtype(const std::vector<rt::DType> &arrays,
                                               const std::vector<OperandKind> &numbers);

} // namespace framejit::frontend::ops
