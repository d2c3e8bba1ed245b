// backend.h — the CUDA jit::Backend: PTX kernels generated from the loop IR, loaded with the
// driver's JIT (runtime/cuda) and shared through the kernel cache by their PTX.
#pragma once

#include "jit/backend.h"

namespace framejit::jit::cuda {

/// The backend for CUDA device `ordinal` (one per device, made on first use).
Backend& backend(int ordinal);

}  // namespace framejit::jit::cuda
