// lowering.h — GraphLowering: which graph nodes are pointwise element operations the code
// generators can fuse, and their operands as loop-IR terms.
#pragma once

#include <optional>
#include <vector>

#include "jit/ir/graph.h"
#include "jit/lower/loop_ir.h"

namespace framejit::jit {

/// One operand of a pointwise node.
struct PointwiseOperand {
  enum class Kind : uint8_t { Tensor, Scalar, Const } kind;
  int node = -1;     // Tensor/Scalar: the graph value
  double value = 0;  // Const
};

/// A graph node seen as an element operation: out[i] = op(operands[i]...). Each operand is first
/// converted to `operand_dtypes[k]` (NumPy's ufunc loop type: the result type for arithmetic, the
/// promoted operand type for comparisons, bool for logical operations and where's condition).
/// Where's operands are (condition, a, b). Cast's one operand is converted to `dtype` and that
/// conversion is the whole operation.
struct PointwiseNode {
  ScalarOp op;
  DType dtype;  // the result type
  std::vector<PointwiseOperand> operands;
  std::vector<DType> operand_dtypes;
};

/// Whether fused kernels handle values of this dtype: float32, float64, int32, int64, uint8, bool,
/// and the half types float16 and bfloat16 (Note [Half types] in jit/lower/loop_ir.h).
bool pointwise_dtype(DType t);

/// The node as a pointwise operation, if code generation supports it: results and tensor
/// operands of the dtypes above, run-time scalars or constants, and an OpKind whose library
/// semantics the loop IR reproduces exactly. nullopt otherwise (it runs as a call).
std::optional<PointwiseNode> lower_pointwise(const Graph& graph, const Node& node);

/// A reduction the code generators run: sum, prod, max, min, mean, var, std over any set of axes
/// (keepdims or not), argmax/argmin over one axis or the flattened array, of a float32/float64
/// array. var and std become two reductions in fusion (the mean, then the mean of squared
/// deviations from it).
struct ReductionNode {
  ReduceOp op;                // Sum for mean/var/std
  bool mean = false;          // divide by count - ddof (mean, var, std)
  bool var = false;           // reduce the squared deviations from the mean (var, std)
  bool sqrt = false;          // std
  int64_t ddof = 0;
  std::vector<bool> reduced;  // per dim of the operand
  bool keepdims = false;
  bool scalar_object = false;  // every dim reduced without keepdims: NumPy returns a scalar
  DType dtype;                // the operand's
  DType value_dtype;          // what NumPy converts the operand to before combining (Note
                              // [Integer reductions] in jit/x86/reduction_codegen.cpp)
  int input;                  // the reduced value (a tensor node)
};

/// The node as a reduction, if code generation supports it: constant axes; no dtype, out,
/// initial or where arguments (other than their defaults); a reduced element count that cannot be
/// zero (NumPy raises or warns there; sums and products of nothing are their identity, which the
/// program writes) nor, for var/std, at most ddof. nullopt otherwise (it runs as a call).
std::optional<ReductionNode> lower_reduction(const Graph& graph, const Node& node);

/// A matrix product C = A @ B run by framejit's GEMM: A and B of rank >= 2 whose leading dims are
/// batch dims broadcast against each other (B of rank 2 for np.dot), both float32 or both float64.
///
/// With `vector_products` (a host backend's), one operand may be a vector beside a matrix:
/// A(m, k) @ v(k) is A @ v(k, 1) and v(k) @ B(k, n) is v(1, k) @ B, each result without its
/// size-1 dim, as in NumPy (Note [Vector products] in runtime/program.cpp).
struct MatmulNode {
  int a;
  int b;
  DType dtype;
  bool a_vector = false;  // a is 1-D (and b 2-D)
  bool b_vector = false;  // b is 1-D (and a 2-D)
};
std::optional<MatmulNode> lower_matmul(const Graph& graph, const Node& node, bool half_products = false,
                                       bool vector_products = false);

}  // namespace framejit::jit
