// executor.h — runs compiled kernels over strided buffers: collapses dimensions, splits the work
// into rows, and spreads rows over the thread pool.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"
#include "runtime/fixed_vector.h"
#include "runtime/kernel_cache.h"
#include "runtime/views.h"

namespace framejit::rt {

constexpr int kMaxKernelOperands = 16;
constexpr int kMaxKernelParams = 16;
/// Launches one run_row_blocked call takes (the parts of a chain).
constexpr int kMaxRowLaunches = 8;

union ParamValue {
  double f;
  int64_t i;
};

/// What a pointwise kernel receives for one row of its iteration space (see Note [Pointwise
/// kernel ABI] in jit/x86/pointwise_codegen.cpp). Operands are the kernel's inputs, then outputs.
/// NB: no member initializers: a kernel reads n, contiguous, its operands' ptr and stride and its
/// parameters, and a launch sets just those (zeroing all 400 bytes was a `rep stos` per launch).
/// `PointwiseCall c{}` is all zeros.
struct PointwiseCall {
  int64_t n;           // elements in the row
  int64_t contiguous;  // 1 when every stride is 0 or the operand's element size
  char* ptr[kMaxKernelOperands];
  int64_t stride[kMaxKernelOperands];  // bytes between consecutive elements of the row
  ParamValue params[kMaxKernelParams];
};
using PointwiseFn = void (*)(const PointwiseCall*);

/// What a reduction kernel receives (see Note [Reduction kernel ABI] in
/// jit/x86/reduction_codegen.cpp). The leading fields match PointwiseCall's.
///
///   row form     *out = reduce(value[i] for i < n), element i of input k at ptr[k] + i*stride[k]
///   column form  out[j] = reduce(value[r, j] for r < rows) for j < n, element (r, j) of input k at
///                ptr[k] + r*row_stride[k] + j*stride[k], output j at out + j*out_stride
struct ReductionCall {
  int64_t n = 0;           // row form: elements reduced; column form: outputs
  int64_t contiguous = 0;  // 1 when every inner stride is 0 or the element size (out_stride too)
  char* ptr[kMaxKernelOperands] = {};
  int64_t stride[kMaxKernelOperands] = {};  // bytes between consecutive elements of the inner loop
  char* out = nullptr;
  ParamValue params[kMaxKernelParams] = {};
  int64_t rows = 0;                             // column form: reduced rows
  int64_t row_stride[kMaxKernelOperands] = {};  // column form: bytes between reduced rows
  int64_t out_stride = 0;                       // column form: bytes between outputs
  int64_t accumulate = 0;  // combine into the partial result at out instead of starting afresh
  int64_t finish = 0;      // the last call for these outputs: apply mean's division and sqrt
  int64_t divisor = 1;     // mean: count - ddof
  char* out_value = nullptr;  // argmax/argmin (row form): also store the extreme value here
  int64_t extreme_only = 0;   // argmax/argmin (row form, not bool): only the extreme, at out_value
};
using ReductionFn = void (*)(const ReductionCall*);

/// Called once per finished block of C (rows [m0, m0+mb), cols [n0, n0+nb)) while it is still in
/// cache, to apply fused bias/activation work in place. `c` points at C[m0][n0]; rows are ldc
/// elements apart. May run on any worker thread, concurrently for disjoint blocks.
using GemmEpilogueFn = void (*)(void* ctx, void* c, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb);

/// One matrix product C = A @ B, as a backend's GEMM receives it.
struct GemmCall {
  DType dtype = DType::Float32;  // Float32 or Float64
  int64_t m = 0, n = 0, k = 0;
  // A is m x k, B is k x n, C is m x n; strides in elements (any sign; a transposed operand is
  // just swapped strides). C must not overlap A or B.
  const void* a = nullptr;
  int64_t a_row_stride = 0, a_col_stride = 0;
  const void* b = nullptr;
  int64_t b_row_stride = 0, b_col_stride = 0;
  void* c = nullptr;
  int64_t ldc = 0;  // C's row stride; columns are contiguous
  GemmEpilogueFn epilogue = nullptr;
  void* epilogue_ctx = nullptr;
};
/// A backend's GEMM entry point: false (doing nothing) for a dtype it does not handle.
using GemmFn = bool (*)(const GemmCall& call);

/// One operand of a pointwise launch: a strided view already broadcast to the iteration shape
/// (stride 0 along broadcast dimensions).
struct Operand {
  char* data = nullptr;
  const int64_t* strides = nullptr;  // bytes, one per iteration dimension
  int itemsize = 0;
};

/// Orders the `n` iteration axes in `axes` (dim indices, outermost first; C order on entry) as the
/// operands' memory runs, outermost first (Note [Memory order of axes] in runtime/executor.cpp).
void memory_order(const Operand* operands, int num_operands, int n, int* axes);

/// The iteration space `shape` (rank dims, `operands` strided over it) with size-1 dims dropped,
/// the others in the operands' memory order (memory_order), and neighbours merged where every
/// operand steps through them as one: `dims` and per operand `strides` (outermost first) get the
/// result's dims; returns their number (at least 1, a single element being one dim of size 1).
/// Only for work whose elements are independent (pointwise kernels): the order is any.
int collapse_dims(int rank, const int64_t* shape, int num_operands, const Operand* operands, int64_t* dims,
                  int64_t (*strides)[kMaxRank]);

/// Rows shorter than this run as tiles (Note [Short rows as tiles] in executor.cpp).
constexpr int64_t kShortRow = 8;
/// ... under at least this many rows, and this many rows per tile.
constexpr int64_t kShortRowTile = 256;
/// Note [Short rows as tiles] (executor.cpp): `rows` rows of `row` elements through a pointwise
/// kernel, tiles of consecutive rows per call (operands whose tile is not one contiguous run, or a
/// scalar, are copied through a buffer). Operand k starts at data[k] and steps row_stride[k] bytes
/// per row, col_stride[k] per element; tile_rows rows per call. On the calling thread: a GEMM's
/// epilogue runs it per block.
void run_short_row_tiles(PointwiseFn fn, const PointwiseCall& base, int num_operands, int num_inputs, char* const* data,
                         const int64_t* row_stride, const int64_t* col_stride, const int* itemsize, int64_t rows,
                         int64_t row, int64_t tile_rows);

/// Runs `kernel` over the iteration space `shape` (rank dims). Dimensions are collapsed where
/// every operand allows it, the innermost one becomes the kernel's row, and rows (or pieces of a
/// long single row) are spread over the thread pool when there is enough work.
void run_pointwise(const Kernel& kernel, int rank, const int64_t* shape, int num_operands, const Operand* operands,
                   const ParamValue* params, int num_params);

/// One reduction over a strided iteration space: what to run and on which memory.
struct ReductionLaunch {
  const Kernel* row = nullptr;     // the row-form kernel (always present)
  const Kernel* column = nullptr;  // the column-form kernel; null for argmax/argmin
  bool arg = false;                // argmax/argmin: out holds int64 indices
  bool arg_max = true;             // argmax (else argmin), for combining rows of a flattened arg
  /// max (1) or min (-1), else 0, and `product`: how partial results combine (one long row's pieces
  /// across threads; Note [Split column rows]). Neither, and not arg: a sum.
  int extreme = 0;
  bool product = false;
  DType value_dtype = DType::Float32;  // the reduced values' type
  /// A float sum (sum, mean, var, std) in float32 or float64 (its output's dtype): long rows are
  /// summed pairwise (Note [Pairwise sums] in runtime/reduction_executor.cpp).
  DType pairwise = DType::Bool;    // Bool: not a float sum
  int64_t ddof = 0;                // the mean's divisor is count - ddof
  int rank = 0;
  const int64_t* shape = nullptr;  // the iteration space (the reduced value's shape)
  const bool* reduced = nullptr;   // per dim: reduced (else kept)
  int num_inputs = 0;
  const Operand* inputs = nullptr;  // the prologue's inputs, broadcast to `shape`
  char* out = nullptr;
  const int64_t* out_strides = nullptr;  // per iteration dim, in bytes; 0 along reduced dims
  const ParamValue* params = nullptr;
  int num_params = 0;
};

/// One dim of a reduction's iteration space with every operand's byte stride: the inputs, then
/// the output (0 along reduced dims, so all the elements reduced into an output share it).
struct ReductionDim {
  int64_t size = 1;
  bool reduced = false;
  int64_t stride[kMaxKernelOperands + 1] = {};
};
/// `launch`'s iteration space as Note [Reduction layouts] in runtime/reduction_executor.cpp
/// orders it: size-1 dims dropped, the rest by stride (argmax/argmin: in logical order), and
/// neighbours of one kind that every operand steps through as one merged, into `out` (emptied
/// first; room for one more dim stays for the caller).
void reduction_dims(const ReductionLaunch& launch, FixedVector<ReductionDim, kMaxRank + 1>& out);

/// Runs a reduction: picks the kernel form from the layout (reduced elements innermost in memory:
/// the row kernel; kept elements innermost: the column kernel, which streams whole rows), splits
/// the outputs over the thread pool and accumulates outer reduced dimensions in order, so the
/// result never depends on the number of threads. The number of reduced elements must not be 0.
void run_reduction(const ReductionLaunch& launch);
/// One output's row through `kernel`, `call` set for the whole row (n, ptr and stride of its
/// `num_operands` operands, out, accumulate 0, finish): a float sum's row (`pairwise` float32 or
/// float64) longer than the kernel's block is summed pairwise (Note [Pairwise sums]); any other
/// row is one call.
void run_reduction_row(const Kernel& kernel, DType pairwise, const ReductionCall& call, int num_operands);

/// One launch of a row-blocked chain (run_row_blocked): a pointwise or row-form reduction kernel
/// (Note [Reduction kernel ABI], each row reduced whole) over
/// `lead` leading dims shared by the whole chain, plus its own innermost dim of `n` elements.
/// Operand strides cover lead + 1 dims; a reduction writes one value per row at `out`.
struct RowLaunch {
  const Kernel* kernel = nullptr;
  bool reduction = false;
  int64_t n = 0;
  int num_operands = 0;  // pointwise: inputs then outputs; reduction: inputs
  const Operand* operands = nullptr;
  char* out = nullptr;                   // reduction only
  const int64_t* out_strides = nullptr;  // reduction only: bytes, over the leading dims
  int64_t divisor = 1;                   // reduction only: mean's count - ddof
  DType pairwise = DType::Bool;          // reduction only: as ReductionLaunch::pairwise
  const ParamValue* params = nullptr;
  int num_params = 0;
};

/// Runs a chain of launches that share leading (row) dims, block by block: every launch runs on
/// a block of rows before the next block starts, so data a later launch re-reads (the input of a
/// softmax, read by its max, its sum and its division) is still in cache. The caller guarantees
/// that a launch only reads rows of earlier launches' outputs at the same row index (no
/// broadcasting of chain results along leading dims). Each launch computes exactly what it would
/// compute alone (same kernels, same per-row calls), so results do not depend on blocking.
/// `count` <= kMaxRowLaunches.
void run_row_blocked(int lead, const int64_t* lead_shape, const RowLaunch* launches, int count);

}  // namespace framejit::rt
