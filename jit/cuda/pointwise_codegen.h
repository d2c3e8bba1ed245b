// pointwise_codegen.h — PTX for fused pointwise kernels (the loop IR's PointwiseKernelIR), against
// Note [CUDA pointwise kernel ABI] in runtime/cuda/launch.h.
#pragma once

#include <string>

#include "framejit/status.h"
#include "jit/lower/loop_ir.h"

namespace framejit::jit::cuda {

/// Whether the PTX generator computes this kernel exactly as the library does: bool, uint8,
/// int32, int64, float32 and float64 values, every ScalarOp but sin/cos/tan (whose reduction of
/// huge arguments is not written in PTX yet).
bool pointwise_supported(const PointwiseKernelIR& ir);

/// The text of a PTX module with one kernel, `name`, computing `ir`. Float math uses the same
/// routines as the x86 backend (Note [One math library]). `flat`: the form for one-dim launches
/// only (Note [Flat pointwise kernels] in pointwise_codegen.cpp).
Expected<std::string> pointwise_ptx(const PointwiseKernelIR& ir, const std::string& name, bool flat = false);

}  // namespace framejit::jit::cuda
