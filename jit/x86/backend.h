// backend.h — the x86-64 jit::Backend: asmjit pointwise and reduction kernels at the host's ISA
// (AVX-512, AVX2 or SSE) and framejit's Xbyak GEMM.
#pragma once

#include "jit/backend.h"

namespace framejit::jit::x86 {

/// The process's x86 backend (stateless apart from the shared kernel cache).
Backend& backend();

}  // namespace framejit::jit::x86
