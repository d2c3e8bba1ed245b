// gemm.h — framejit's own GEMM: packed, cache-blocked Xbyak micro-kernels (AVX-512 and AVX2 FMA,
// plus a portable path), multithreaded with rt::parallel_for, with a fused epilogue hook.
#pragma once

#include <cstdint>

#include "runtime/executor.h"

namespace framejit::jit::x86 {

using GemmEpilogueFn = rt::GemmEpilogueFn;
using GemmArgs = rt::GemmCall;

/// C = A @ B (then the epilogue, per block). Returns false (doing nothing) for an unsupported
/// dtype. Uses host_isa(): Avx512 or Avx2 micro-kernels, or a portable C++ path for Scalar.
bool gemm(const GemmArgs& args);

}  // namespace framejit::jit::x86
