// element_loop_codegen.h — x86-64 code for element loops (jit/ir/element_loop.h): asmjit's register-
// allocating Compiler over the loop's control-flow graph, scalar SSE2 (some inner loops AVX2 / AVX-512).
#pragma once

#include "framejit/status.h"
#include "jit/ir/element_loop.h"
#include "jit/x86/isa.h"
#include "runtime/kernel_cache.h"

namespace framejit::jit::x86 {

/// Machine code for `loop` (cached by its text), an rt::ElementLoopFn in Kernel::entry. It computes
/// exactly what run_element_loop does; the code is generated from optimize_element_loop's copy of
/// `loop` (Note [Element loop code]). InvalidArgument when loop.verify() fails; Unsupported for
/// float16 and bfloat16 arrays.
Expected<rt::KernelPtr> compile_element_loop(const ElementLoop& loop);

/// The same code for `isa`, not cached (tests compare the ISAs; Note [Vectorized inner loops]),
/// with its listing when `want_listing`.
Expected<rt::KernelPtr> generate_element_loop(const ElementLoop& loop, Isa isa, bool want_listing);

}  // namespace framejit::jit::x86
