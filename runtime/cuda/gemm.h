// gemm.h — matrix products on a CUDA device through cuBLASLt, dlopen'ed like the driver
// (Note [Device GEMMs]).
#pragma once

#include <cstddef>
#include <cstdint>

#include "framejit/status.h"
#include "runtime/dtype.h"
#include "runtime/executor.h"
#include "runtime/kernel_cache.h"

namespace framejit::rt::cuda {

/// One operand of a device product, strides in elements (a size-1 dim's stride is ignored). The
/// batch stride steps from one product of a batch to the next (0: the same matrix for each).
struct GemmMatrix {
  const void* data = nullptr;
  int64_t row_stride = 0, col_stride = 0, batch_stride = 0;
};

/// C[i] = A[i] @ B[i] for i < batches: A is m x k, B is k x n, C is m x n with rows ldc apart and
/// batches c_batch_stride apart (elements), on the current stream of `device`
/// (runtime/cuda/memory.h). Float32 or Float64 (other dtypes are unsupported).
struct DeviceGemmCall {
  int device = 0;
  DType dtype = DType::Float32;
  int64_t m = 0, n = 0, k = 0, batches = 1;
  GemmMatrix a, b;
  void* c = nullptr;
  int64_t ldc = 0, c_batch_stride = 0;
};

/// Whether a rows x cols matrix with these element strides is one cuBLAS reads in place: one
/// of its strides 1 and the other at least the extent along it, neither negative. Others are
/// copied into C order first (the caller's pack kernel).
bool blas_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride);

// Note [Small device products]
// A product with few rows (a batch of 8 through a linear layer) is a matrix-vector product in
// disguise: memory-bound on B, and on cuBLAS's side mostly host time (a cublasLtMatmul call costs
// the host about as much as three kernel launches) plus a second launch for the epilogue. So
// products of at most kSmallGemmMaxRows rows run as framejit's own kernel, with the epilogue
// (bias, activation, whatever pointwise work was fused) applied before C is stored: one launch
// per layer. The kernel takes any strides. A block of kSmallGemmThreads threads owns a tile of
// kSmallGemmWarps columns of C for kSmallGemmTileRows rows at a time (more rows: the tile loop
// reads B again): warp w owns column j0 + w, its lanes stride through k, then the lanes' sums are
// added in butterfly order (deterministic). B's column is contiguous for x @ W.T of a linear
// layer; for a C-ordered B the block's warps read neighbouring columns, one memory sector per row
// of k between them. The finished tile goes through shared memory to all the block's threads,
// each applying the epilogue to some (row, column) pairs. The ABI is SmallGemmArgs, one
// parameter by value; strides in bytes; epilogue operand k at ptr[k] + i*row_stride[k] +
// j*col_stride[k] (slot `c_input` of the epilogue unused: that input is the product).
constexpr int kSmallGemmMaxRows = 32;
constexpr int kSmallGemmTileRows = 8;
constexpr int kSmallGemmThreads = 256;
constexpr int kSmallGemmWarps = kSmallGemmThreads / 32;
struct SmallGemmArgs {
  uint32_t m, n, k, pad;
  uint64_t a, b, c;
  int64_t a_rs, a_cs, b_rs, b_cs, ldc;
  uint64_t ptr[kMaxKernelOperands];
  int64_t row_stride[kMaxKernelOperands];
  int64_t col_stride[kMaxKernelOperands];
  ParamValue params[kMaxKernelParams];
};
constexpr int kSgM = 0, kSgN = 4, kSgK = 8, kSgA = 16, kSgB = 24, kSgC = 32;
constexpr int kSgARs = 40, kSgACs = 48, kSgBRs = 56, kSgBCs = 64, kSgLdc = 72, kSgPtr = 80;
constexpr int kSgRowStride = kSgPtr + 8 * kMaxKernelOperands;
constexpr int kSgColStride = kSgRowStride + 8 * kMaxKernelOperands;
constexpr int kSgParams = kSgColStride + 8 * kMaxKernelOperands;
constexpr int kSgSize = kSgParams + 8 * kMaxKernelParams;
static_assert(offsetof(SmallGemmArgs, a) == kSgA &&
              offsetof(SmallGemmArgs, ldc) == kSgLdc && offsetof(SmallGemmArgs, ptr) == kSgPtr &&
              offsetof(SmallGemmArgs, row_stride) == kSgRowStride && offsetof(SmallGemmArgs, col_stride) == kSgColStride &&
              offsetof(SmallGemmArgs, params) == kSgParams && sizeof(SmallGemmArgs) == kSgSize);

/// One small product for a framejit kernel: C (m x n, rows ldc bytes apart, contiguous columns)
/// = A @ B, strides in bytes; the epilogue's other operands as 2-d strided arrays over C.
struct SmallGemmCall {
  int64_t m = 0, n = 0, k = 0;
  const void* a = nullptr;
  int64_t a_rs = 0, a_cs = 0;
  const void* b = nullptr;
  int64_t b_rs = 0, b_cs = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  int itemsize = 4;
  int num_operands = 0;  // the epilogue's inputs (C's slot included, unused)
  const void* ptr[kMaxKernelOperands] = {};
  int64_t row_stride[kMaxKernelOperands] = {}, col_stride[kMaxKernelOperands] = {};
  const ParamValue* params = nullptr;
  int num_params = 0;
};
/// Issues `kernel` (jit/cuda's small GEMM) for `call` on the current stream of its device.
Status run_small_gemm(const Kernel& kernel, const SmallGemmCall& call);

/// Ok when a cuBLASLt library can be loaded (once per process), else why not.
Status gemm_library();

/// Issues the product; every operand must have a blas_layout. An error names the cuBLASLt call
/// and its status.
Status run_gemm(const DeviceGemmCall& call);

}  // namespace framejit::rt::cuda
