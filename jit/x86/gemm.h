// gemm.h — framejit's own GEMM: packed, cache-blocked Xbyak micro-kernels (AVX-512 and AVX2 FMA,
// plus a portable path), multithreaded with rt::parallel_for, with a fused epilogue hook.
#pragma once

#include <cstdint>

#include "runtime/dtype.h"

namespace framejit::jit::x86 {

/// Called once per finished block of C (rows [m0, m0+mb), cols [n0, n0+nb)) while it is still in
/// cache, to apply fused bias/activation work in place. `c` points at C[m0][n0]; rows are ldc
/// elements apart. May run on any worker thread, concurrently for disjoint blocks.
using GemmEpilogueFn = void (*)(void* ctx, void* c, int64_t ldc, int64_t m0, int64_t n0, int64_t mb, int64_t nb);

struct GemmArgs {
  rt::DType dtype = rt::DType::Float32;  // Float32 or Float64
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

/// C = A @ B (then the epilogue, per block). Returns false (doing nothing) for an unsupported
/// dtype. Uses host_isa(): Avx512 or Avx2 micro-kernels, or a portable C++ path for Scalar.
bool gemm(const GemmArgs& args);

}  // namespace framejit::jit::x86
