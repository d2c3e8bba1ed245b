// pointwise_codegen.h — x86-64 code for fused pointwise kernels (asmjit): a vector main loop
// (AVX-512 or AVX2), a scalar tail, and a strided scalar loop, in one function per kernel.
#pragma once

#include <string>

#include "framejit/status.h"
#include "jit/lower/loop_ir.h"
#include "jit/x86/isa.h"
#include "runtime/kernel_cache.h"

namespace framejit::jit::x86 {

/// Whether this backend can generate `ir` at `isa` (operations, dtypes, operand counts).
bool pointwise_supported(const PointwiseKernelIR& ir, Isa isa);

/// Generates the kernel (an rt::PointwiseFn). The listing is filled when `want_listing`.
Expected<rt::KernelPtr> generate_pointwise(const PointwiseKernelIR& ir, Isa isa, bool want_listing);

/// The kernel for `ir` at the host ISA, from the kernel cache (generated on first use).
Expected<rt::KernelPtr> pointwise_kernel(const PointwiseKernelIR& ir);

}  // namespace framejit::jit::x86
