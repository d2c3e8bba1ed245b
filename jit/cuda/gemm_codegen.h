// gemm_codegen.h — PTX for framejit's own small matrix products with their fused epilogues (the
// loop IR's GemmKernelIR), against Note [Small device products] in runtime/cuda/gemm.h.
#pragma once

#include <string>

#include "framejit/status.h"
#include "jit/lower/loop_ir.h"

namespace framejit::jit::cuda {

/// Whether the generator takes the product: float32 or float64, and an epilogue (if any) the
/// pointwise generator takes, with one output of the product's dtype.
bool small_gemm_supported(const GemmKernelIR& g);

/// The text of a PTX module with one entry, `name`.
Expected<std::string> small_gemm_ptx(const GemmKernelIR& g, const std::string& name);

}  // namespace framejit::jit::cuda
