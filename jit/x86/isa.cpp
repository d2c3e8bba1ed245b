// isa.cpp — host ISA detection (asmjit's CpuInfo) and the FRAMEJIT_ISA / test override.
#include "jit/x86/isa.h"

#include <asmjit/core.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace framejit::jit::x86 {

namespace {
std::atomic<int> g_override{-1};

int env_cap() {
  static const int cap = [] {
    const char* e = std::getenv("FRAMEJIT_ISA");
    if (!e) return 2;
    if (std::strcmp(e, "scalar") == 0) return 0;
    if (std::strcmp(e, "avx2") == 0) return 1;
    return 2;
  }();
  return cap;
}
}  // namespace

Isa cpu_isa() {
  static const Isa isa = [] {
    // NB: every AVX-512 server CPU since Skylake-X has F, BW, DQ and VL; the kernels use all four
    // (vpmullq and int64<->float are DQ, byte ops and k-masked byte moves BW). asmjit reports a
    // feature only when XCR0 says the OS saves its state (opmask and zmm for AVX-512).
    const asmjit::CpuFeatures::X86& f = asmjit::CpuInfo::host().features().x86();
    using F = asmjit::CpuFeatures::X86;
    if (f.has(F::kAVX512_F) && f.has(F::kAVX512_BW) && f.has(F::kAVX512_DQ) && f.has(F::kAVX512_VL) &&
        f.has(F::kFMA))
      return Isa::Avx512;
    if (f.has(F::kAVX2) && f.has(F::kFMA)) return Isa::Avx2;
    return Isa::Scalar;
  }();
  return isa;
}

Isa host_isa() {
  int level = static_cast<int>(cpu_isa());
  if (env_cap() < level) level = env_cap();
  int o = g_override.load(std::memory_order_relaxed);
  if (o >= 0 && o < level) level = o;
  return static_cast<Isa>(level);
}

void set_isa_override(std::optional<Isa> isa) { g_override.store(isa ? static_cast<int>(*isa) : -1); }

int vector_bytes(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return 16;
    case Isa::Avx2: return 32;
    case Isa::Avx512: return 64;
  }
  return 16;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

}  // namespace framejit::jit::x86
