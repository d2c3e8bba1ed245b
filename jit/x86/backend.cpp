// backend.cpp — the x86-64 jit::Backend over the pointwise, reduction and GEMM generators.
#include "jit/x86/backend.h"

#include "jit/x86/element_loop_codegen.h"
#include "jit/x86/gemm.h"
#include "jit/x86/isa.h"
#include "jit/x86/pointwise_codegen.h"
#include "jit/x86/reduction_codegen.h"

namespace framejit::jit::x86 {

namespace {

class X86Backend final : public Backend {
public:
  // The ISA is read per call: tests and FRAMEJIT_ISA may lower it at any time.
  std::string_view name() const override {
    switch (host_isa()) {
      case Isa::Avx512: return "x86-avx512";
      case Isa::Avx2: return "x86-avx2";
      case Isa::Scalar: break;
    }
    return "x86-scalar";
  }
  bool supports(const PointwiseKernelIR& ir) const override { return pointwise_supported(ir, host_isa()); }
  bool supports(const ReductionKernelIR& ir) const override { return reduction_supported(ir, host_isa()); }
  rt::GemmFn gemm(DType dtype) const override {
    return dtype == DType::Float32 || dtype == DType::Float64 ? &x86::gemm : nullptr;
  }
  Expected<KernelArtifact> compile(const PointwiseKernelIR& ir) override { return pointwise_kernel(ir); }
  Expected<ReductionArtifact> compile(const ReductionKernelIR& ir) override {
    auto k = reduction_kernels(ir);
    if (!k) return k.error();
    return ReductionArtifact{k->row, k->column};
  }
  Expected<KernelArtifact> compile(const ElementLoop& loop) override { return compile_element_loop(loop); }
};

}  // namespace

Backend& backend() {
  static X86Backend b;
  return b;
}

}  // namespace framejit::jit::x86
