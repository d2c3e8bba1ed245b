// reduction_codegen.h — x86-64 code for row reductions (asmjit): sum, mean, max and min over the
// innermost dimension, with the producing pointwise chain fused in as a prologue.
#pragma once

#include "framejit/status.h"
#include "jit/lower/loop_ir.h"
#include "jit/x86/isa.h"
#include "runtime/kernel_cache.h"

namespace framejit::jit::x86 {

bool reduction_supported(const ReductionKernelIR& ir, Isa isa);
Expected<rt::KernelPtr> generate_reduction(const ReductionKernelIR& ir, Isa isa, bool want_listing);
/// The kernel for `ir` at the host ISA, from the kernel cache.
Expected<rt::KernelPtr> reduction_kernel(const ReductionKernelIR& ir);

}  // namespace framejit::jit::x86
