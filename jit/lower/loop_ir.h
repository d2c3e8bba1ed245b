// loop_ir.h — the backend-neutral loop-level IR that GraphLowering produces and code generators
// (x86 today, PTX later) consume: fused pointwise kernels as SSA bodies over element values.
#pragma once

#include <cstdint>
#include <optional>
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
  Erf,
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
/// Whether `op` is a transcendental function: evaluated by a math routine of tens of instructions
/// per element (the code generators' injectors), so recomputing it costs more than a memory read.
bool scalar_op_is_math(ScalarOp op);
/// Whether `op` is a comparison (Bool result, operands in another dtype).
inline bool is_comparison(ScalarOp op) { return op >= ScalarOp::Eq && op <= ScalarOp::Ge; }

// Note [Casts]
// Cast follows what NumPy 1.24 does on x86-64 (its cast loops are C casts): float -> int
// truncates toward zero and a value out of range (or NaN) gives the "integer indefinite"
// INT_MIN of the conversion instruction; float -> uint8 converts to int32 first and keeps the low
// byte; int -> narrower int keeps the low bits; anything -> bool is `x != 0` (NaN is true);
// bool -> anything is 0 or 1; int64 -> float32 rounds once (not through float64).

// Note [Half types]
// float16 and bfloat16 are storage types: every operation on them computes in float32 and rounds
// its result back, as NumPy's float16 loops and torch's eager kernels do, so a fused chain gives
// eager's bits (for the basic arithmetic; math routines within their ulp bounds before the
// rounding). Lowering spells that out (lower_pointwise, FusionState::pointwise_ir): an operation
// whose loop type is a half type computes in float32, and its value is a Cast to the half type,
// which consumers Cast back to float32. So a half-typed expression in a kernel body is only
//   - a Load of a half input,
//   - a Cast to a half type from float32, or from bool, uint8 or another half type (exact in
//     float32, so one rounding; from float64 or wider integers it would round twice: refused);
// and a Cast from a half type goes anywhere (through float32, exactly). Backends represent a half
// value as its 16 bits, load and store them as such, and implement only those casts
// (half_types_placed checks the rule). A reduction's prologue may widen a half input to float32
// (softmax and layer norm of a half tensor run in float32, Note [Composites in float32] in
// frontend/ops/torch/pointwise.cpp; torch's sum of a bfloat16 tensor is traced as the float32 sum
// of x.float(), rounded once, the same way). A reduction whose result is of a half type is not
// lowered: it must accumulate in float32 and round once, which the reduction kernels,
// accumulating into their output, do not do. Products of half types run on a
// device (cuBLASLt, float32 accumulation); the x86 GEMM has none.

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

  /// Whether the kernel is one a code generator can take as it stands: a body and outputs, operands
  /// and parameters within the launch ABIs' limits, loads and outputs of their operands' dtypes.
  /// Backends add their own dtype and op tests.
  bool well_formed() const;
  /// Readable text (FRAMEJIT_LOGS=kernels): `t3 = add(t1, t2) : f32` ...
  std::string to_string() const;
  /// A string that identifies the kernel's code (the kernel cache key, with the ISA).
  std::string key() const;
};

/// A matrix product C = A @ B of `dtype` whose finished elements go through `epilogue` before they
/// are stored (a device's small products, Note [Small device products] in runtime/cuda/gemm.h):
/// the epilogue's input `c_input` is the product's element, its other inputs are arrays over C's
/// shape, its one output is C's element. No epilogue (c_input -1): C is the product.
struct GemmKernelIR {
  DType dtype = DType::Float32;
  PointwiseKernelIR epilogue;
  int c_input = -1;
  std::string key() const;
};

/// Whether a half type appears among the kernel's values (Note [Half types]).
bool has_half_types(const PointwiseKernelIR& ir);
/// Whether every half-typed expression is one Note [Half types] allows.
bool half_types_placed(const PointwiseKernelIR& ir);

/// Note [Sigmoid from its formula]: rewrites 1 / (1 + exp(-x)) (reciprocal or division, either
/// order of the sum) into sigmoid(x) where the intermediate values have no other use, and drops
/// the expressions that become dead. Loads and parameters stay (their indices are the ABI's).
void fuse_sigmoid(PointwiseKernelIR& ir);

/// out[i] = in[i] for one array of `dtype`: a copy into another layout (a device product's operand
/// packed into C order, rt::GemmStep::pack).
PointwiseKernelIR copy_kernel(DType dtype);

enum class ReduceOp : uint8_t { Sum, Prod, Max, Min, ArgMax, ArgMin };
const char* reduce_op_name(ReduceOp op);
inline bool is_arg_reduce(ReduceOp op) { return op == ReduceOp::ArgMax || op == ReduceOp::ArgMin; }

/// A reduction of a value computed per element by a pointwise prologue (often just a load; for
/// softmax's sum, exp(x - max)) over some dimensions of its iteration space. Which dimensions are
/// reduced, and how the reduced elements lie in memory, are run-time matters (see Note [Reduction
/// kernel ABI] in jit/x86/reduction_codegen.cpp): the IR only says what is combined and how the
/// result is finished.
///
///   op        sum / prod / max / min combine values; argmax / argmin find the first index of the
///             extreme (int64 result; NaN counts as the extreme, as in NumPy)
///   mean      the result is divided by (count - ddof), count = the number of reduced elements
///             (numpy.mean with ddof 0; numpy.var's final division with its ddof)
///   sqrt      then its square root is taken (numpy.std)
struct ReductionKernelIR {
  PointwiseKernelIR prologue;  // exactly one output: the value reduced
  ReduceOp op = ReduceOp::Sum;
  bool mean = false;
  int64_t ddof = 0;
  bool sqrt = false;
  /// Also store each element's prologue value (the reduced operand) to an array of the iteration
  /// shape, for consumers that would otherwise recompute an expensive prologue (softmax's exp).
  /// Row form only (see Note [Stored reduction operands]).
  bool store_value = false;

  /// The type of the reduced value (the result's for all but argmax/argmin, which give int64).
  /// The prologue converts to it as NumPy does before combining: an int32 sum reduces int64
  /// values, an integer mean float64 ones (Note [Integer reductions] in
  /// jit/x86/reduction_codegen.cpp).
  DType dtype() const { return prologue.output_dtypes.front(); }
  DType result_dtype() const { return is_arg_reduce(op) ? DType::Int64 : dtype(); }
  std::string to_string() const;
  std::string key() const { return to_string(); }
};

/// The prologue a backend compiles for `r`, or nothing when `r` is not a reduction the library
/// does (Note [Integer reductions] in jit/x86/reduction_codegen.cpp: means and stored values in
/// floats only, bool only max/min and the arg forms, uint64 only as a uint8 or bool sum's or
/// product's accumulator). For that accumulator it is the int64 twin, the same bits (Note
/// [Unsigned accumulators]). Backends add their own tests of the prologue.
std::optional<PointwiseKernelIR> reduction_prologue(const ReductionKernelIR& r);

/// Consecutive kernels and reductions of the last axis over the same rows, as one kernel: a device
/// backend's form of a chain step (rt::ChainStep). Each row runs the parts in order. Part j reads
/// its inputs from memory, except an input that is the result of an earlier reduction part (one
/// value per row), which it takes from that part directly; the launcher checks that the input is
/// broadcast along the row before using the kernel.
struct RowChainIR {
  struct Part {
    bool reduction = false;
    PointwiseKernelIR kernel;  // !reduction
    ReductionKernelIR red;     // reduction
    /// Per input: the earlier reduction part whose result it is, or -1.
    std::vector<int> forwarded;
    /// Per input: the row cache it reads (an array read by several parts: the first of them
    /// fills the cache as it reads memory, the later ones read the cache), or -1.
    std::vector<int> cached;
  };
  std::vector<Part> parts;
  int caches = 0;  // at most kMaxRowCaches: a backend that fuses chains keeps this many
  static constexpr int kMaxRowCaches = 4;

  std::string to_string() const;
};

}  // namespace framejit::jit
