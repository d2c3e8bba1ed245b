// reduction_codegen.h — x86-64 code for reductions (asmjit): sum, prod, mean, max, min, argmax,
// argmin (and var/std as two of them) over any dims, with the producing pointwise chain fused in
// as a prologue. Each reduction has a row kernel and, except argmax/argmin, a column kernel; the
// executor picks one per call from the layout (runtime/reduction_executor.cpp).
#pragma once

#include "framejit/status.h"
#include "jit/lower/loop_ir.h"
#include "jit/x86/isa.h"
#include "runtime/kernel_cache.h"

namespace framejit::jit::x86 {

/// The kernels of one reduction: `column` is null for argmax/argmin.
struct ReductionKernels {
  rt::KernelPtr row;
  rt::KernelPtr column;
};

/// Whether the generators handle `ir`: float32/float64 reductions, and those of bool, int32,
/// int64 and uint8 values as Note [Integer reductions] lists them.
bool reduction_supported(const ReductionKernelIR& ir, Isa isa);
/// The row-form kernel (for argmax/argmin, the arg kernel).
Expected<rt::KernelPtr> generate_reduction(const ReductionKernelIR& ir, Isa isa, bool want_listing);
/// Whether `ir` has a column-form kernel: not when it stores its values; argmax/argmin for float
/// and 32/64-bit integer values only (Note [Column arg-reductions]).
bool has_column_kernel(const ReductionKernelIR& ir);
/// The column-form kernel, where has_column_kernel says there is one.
Expected<rt::KernelPtr> generate_column_reduction(const ReductionKernelIR& ir, Isa isa, bool want_listing);
/// The kernels for `ir` at the host ISA, from the kernel cache.
Expected<ReductionKernels> reduction_kernels(const ReductionKernelIR& ir);

}  // namespace framejit::jit::x86
