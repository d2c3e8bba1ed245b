// reduction_codegen.h — PTX for reductions with their fused prologues (the loop IR's
// ReductionKernelIR), against Note [CUDA reduction kernel ABI] in runtime/cuda/reduction.h.
#pragma once

#include <string>

#include "framejit/status.h"
#include "jit/lower/loop_ir.h"

namespace framejit::jit::cuda {

/// Whether the generator computes this reduction as the library does: the x86 backend's rules
/// (Note [Integer reductions] in jit/x86/reduction_codegen.cpp) over a prologue the pointwise
/// generator takes.
bool reduction_supported(const ReductionKernelIR& r);

/// The text of a PTX module with two entries: `name` (the reduction) and `name`_combine (its
/// partial results' combination).
Expected<std::string> reduction_ptx(const ReductionKernelIR& r, const std::string& name);

}  // namespace framejit::jit::cuda
