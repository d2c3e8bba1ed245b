// loop_ir.h — the backend-neutral loop-level IR that GraphLowering produces and code generators
// (x86 today, PTX later) consume: fused pointwise kernels as SSA bodies over element values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/dtype.h"

namespace framejit::jit {

using rt::DType;

/// One element-level operation of a kernel body.
enum class ScalarOp : uint8_t {
  Load,   // element of kernel input `input`
  Param,  // run-time scalar parameter `input` (a Python number that feeds the graph)
  Const,  // constant `fconst`
  Cast,   // a -> dtype, as NumPy's unsafe cast does (Note [Casts])
  Neg,
  Abs,
  Sqrt,
  Square,
  Reciprocal,
  Exp,
  Log,
  Log1p,
  Expm1,
  Tanh,
  Sigmoid,
  Sin,
  Cos,
  Tan,
  Atan,
  Floor,
  Ceil,
  Add,
  Sub,
  Mul,
  Div,
  Max,  // NumPy maximum: NaN propagates
  Min,  // NumPy minimum: NaN propagates
  Pow,
  Atan2,
  // Comparisons: operands share one compute dtype, the result is Bool. NaN compares unequal to
  // everything (so Ne is true and the others false), as IEEE and NumPy say.
  Eq,
  Ne,
  Lt,
  Le,
  Gt,
  Ge,
  // Bool: logical and/or/xor/not. Integers: bitwise (Not is ~x).
  And,
  Or,
  Xor,
  Not,
  // Integers only, NumPy semantics: the quotient rounds toward -inf, the remainder takes the
  // divisor's sign, x // 0 == x % 0 == 0, and MIN // -1 wraps to MIN.
  FloorDiv,
  Mod,
  Where,  // c ? a : b; `c` is a Bool expression, a and b have the result dtype
};
const char* scalar_op_name(ScalarOp op);
int scalar_op_arity(ScalarOp op);  // 0 for Load/Param/Const, 3 for Where
/// Whether `op` is a comparison (Bool result, operands in another dtype).
inline bool is_comparison(ScalarOp op) { return op >= ScalarOp::Eq && op <= ScalarOp::Ge; }

// Note [Casts]
// Cast follows what NumPy 1.24 does on x86-64 (its cast loops are C casts): float -> int
// truncates toward zero and a value out of range (or NaN) gives the "integer indefinite"
// INT_MIN of the conversion instruction; float -> uint8 converts to int32 first and keeps the low
// byte; int -> narrower int keeps the low bits; anything -> bool is `x != 0` (NaN is true);
// bool -> anything is 0 or 1; int64 -> float32 rounds once (not through float64).

struct ScalarExpr {
  ScalarOp op;
  DType dtype;
  int a = -1, b = -1;  // operand expression indices (earlier in the body)
  int input = -1;      // Load: kernel input index; Param: parameter index
  double fconst = 0;   // Const (an integer constant is integral and exact in a double)
  int c = -1;          // Where: the condition
};

/// A fused pointwise kernel: out_j[i] = body(in_0[i], ..., in_k[i], params) for every index i of
/// the iteration space. Every expression has its own dtype (a kernel may load int32, compute in
/// float64 and store bool); a Load has its input's dtype and an output expression has its
/// output's dtype. The iteration space (shape) and every operand's strides are run-time
/// arguments: one kernel serves every batch size and every layout (broadcast operands have
/// stride 0).
struct PointwiseKernelIR {
  std::vector<DType> input_dtypes;
  std::vector<DType> param_dtypes;  // Float64 or Int64: how the parameter arrives
  std::vector<ScalarExpr> body;     // SSA, in order
  std::vector<int> outputs;         // body indices stored to output j
  std::vector<DType> output_dtypes;

  /// Readable text (FRAMEJIT_LOGS=kernels): `t3 = add(t1, t2) : f32` ...
  std::string to_string() const;
  /// A string that identifies the kernel's code (the kernel cache key, with the ISA).
  std::string key() const;
};

enum class ReduceOp : uint8_t { Sum, Max, Min };
const char* reduce_op_name(ReduceOp op);

/// A row reduction: out[r] = reduce(value(r, 0..n-1)) over the innermost dimension, where the
/// value is computed per element by a pointwise prologue (often just a load; for softmax's sum,
/// exp(x - max)). `mean` divides the sum by n, as numpy.mean does.
struct ReductionKernelIR {
  PointwiseKernelIR prologue;  // exactly one output: the value reduced
  ReduceOp op = ReduceOp::Sum;
  bool mean = false;
  /// Also store each element's prologue value (the reduced operand) to an array of the iteration
  /// shape, for consumers that would otherwise recompute an expensive prologue (softmax's exp).
  bool store_value = false;

  DType dtype() const { return prologue.output_dtypes.front(); }
  std::string to_string() const;
  std::string key() const { return to_string(); }
};

}  // namespace framejit::jit
