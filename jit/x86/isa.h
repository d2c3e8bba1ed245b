// isa.h — which x86-64 vector ISA generated code targets: detected on the host at run time,
// and overridable (FRAMEJIT_ISA=scalar|avx2|avx512, or set_isa_override in tests).
#pragma once

#include <cstdint>
#include <optional>

namespace framejit::jit::x86 {

/// Scalar: SSE2 scalar instructions (ss/sd), one element per operation; every x86-64 CPU has it.
/// Avx2: AVX2 + FMA on 256-bit ymm registers. Avx512: AVX-512 F/DQ/BW/VL on 512-bit zmm registers.
enum class Isa : uint8_t { Scalar, Avx2, Avx512 };

/// The best ISA the host supports, capped by FRAMEJIT_ISA and by set_isa_override.
Isa host_isa();
/// What the CPU itself supports, ignoring overrides.
Isa cpu_isa();
/// Forces code generation to at most `isa` (nullopt restores detection). Kernels built before keep
/// their ISA; the kernel cache key includes the ISA.
void set_isa_override(std::optional<Isa> isa);

/// Bytes per vector register: 16 for Scalar (lane 0 used), 32 for Avx2, 64 for Avx512.
int vector_bytes(Isa isa);
const char* isa_name(Isa isa);

}  // namespace framejit::jit::x86
