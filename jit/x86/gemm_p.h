// gemm_p.h — GEMM internals shared by gemm.cpp, gemm_kernels.cpp and gemm_pack.cpp (private).
#pragma once

#include <cstdint>

#include "framejit/status.h"
#include "jit/x86/isa.h"
#include "runtime/dtype.h"

namespace framejit::jit::x86 {

/// Arguments of one micro-kernel call; generated code reads them with offsetof.
///
/// A kernel computes a rows x NR tile:  C (=|+=) Ap * B  over k steps, where
///   Ap  a packed A panel: k groups of MR elements (group p holds A[0..MR)[p]); the kernel for
///       `rows` rows reads the first `rows` of each group,
///   B   k rows of NR elements: a packed micro-panel (rows NR * itemsize apart) for the plain
///       kernels; for the stream kernels B in place, rows `ldb` bytes apart, which they also copy
///       packed to `b_pack` (for the next row tiles) while prefetching the rows at `pf`,
///   C   rows rows of NR contiguous elements, `ldc` bytes apart.
/// `k` may be 0 (C = 0, or C unchanged when accumulating).
struct GemmUkrArgs {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  int64_t k = 0;
  int64_t ldc = 0;         // bytes, any sign
  int64_t accumulate = 0;  // 0: C = Ap*B; otherwise C += Ap*B
  // Stream kernels only (Note [GEMM streamed B] in gemm.cpp):
  int64_t ldb = 0;           // bytes, any sign; also the prefetch stream's
  void* b_pack = nullptr;    // k * NR elements
  const void* pf = nullptr;  // step p prefetches the NR * itemsize bytes at pf + p * ldb
};
using GemmUkrFn = void (*)(const GemmUkrArgs* args);

constexpr int kGemmMaxMr = 16;

/// The micro-kernels of one (ISA, dtype), all NR columns wide, indexed by their row count 1..mr.
struct GemmKernelSet {
  Isa isa = Isa::Scalar;
  rt::DType dtype = rt::DType::Float32;
  int mr = 0;                          // MR: rows of a full tile, and elements per packed A group
  int nr = 0;                          // NR: columns of every tile
  int k_unroll = 1;                    // of the generated k loop (informational)
  GemmUkrFn ukr[kGemmMaxMr + 1] = {};  // B packed
  GemmUkrFn ukr_stream[kGemmMaxMr + 1] = {};  // B in place, copied packed on the way
};

/// The kernel set for (isa, dtype), generated on first use and kept for the process's lifetime
/// (thread-safe). Generating does not need the ISA on the host: an Avx512 set can be built, just
/// not called, on an AVX2 machine. Returns null when generation failed (or dtype is not a float).
const GemmKernelSet* gemm_kernel_set(Isa isa, rt::DType dtype);

/// Why gemm_kernel_set(isa, dtype) is null, "" when it is not (for tests and logs).
const Status& gemm_kernel_status(Isa isa, rt::DType dtype);

/// Packs `lines` lines of kc steps (element (r, p) at src[r*ls + p*ss]; strides in elements, any
/// sign) into ceil(lines / W) panels of kc groups of W elements, zero past the last line. Lines
/// are A's rows (W = MR) or B's columns (W = NR). See Note [GEMM packing] in gemm_pack.cpp.
template <typename T>
using GemmPackFn = void (*)(const T* src, int64_t ls, int64_t ss, int64_t lines, int64_t kc,
                            T* dst);

/// The packer for panels of width w (one of the kernel sets' MR or NR) with the best code the
/// ISA allows (AVX2 for Avx2 and Avx512); null for a width no kernel set uses.
template <typename T>
GemmPackFn<T> gemm_pack_fn(Isa isa, int w);
extern template GemmPackFn<float> gemm_pack_fn<float>(Isa isa, int w);
extern template GemmPackFn<double> gemm_pack_fn<double>(Isa isa, int w);

}  // namespace framejit::jit::x86
