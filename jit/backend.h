// backend.h — jit::Backend: what a code generator supports and how it turns lowered kernels into
// artifacts the runtime launches. x86 implements it (jit/x86/backend.h); adding a backend means
// implementing this interface and nothing above it.
#pragma once

#include <string_view>
#include <vector>

#include "framejit/status.h"
#include "jit/ir/element_loop.h"
#include "jit/lower/loop_ir.h"
#include "runtime/executor.h"
#include "runtime/kernel_cache.h"

namespace framejit::jit {

/// A compiled kernel: a host entry point today (rt::Kernel::entry, with what keeps its code
/// alive); a device function and launch shape for device backends.
using KernelArtifact = rt::KernelPtr;

/// The kernels of one reduction: the row form, and the column form (null for argmax/argmin).
struct ReductionArtifact {
  KernelArtifact row;
  KernelArtifact column;
};

class Backend {
public:
  virtual ~Backend() = default;
  /// For logs and the fusion plan's text ("x86-avx512").
  virtual std::string_view name() const = 0;
  /// Whether the generator handles this kernel; a group it refuses runs its nodes as extern steps.
  virtual bool supports(const PointwiseKernelIR& ir) const = 0;
  virtual bool supports(const ReductionKernelIR& ir) const = 0;
  /// The GEMM entry point for products of `dtype`, or null (the product runs as an extern step).
  virtual rt::GemmFn gemm(DType dtype) const = 0;
  /// Where its code runs: the host, or a CUDA device.
  virtual rt::Device device() const { return {}; }
  /// A device backend: ok when products of `dtype` run on the device (rt::GemmStep::device), else
  /// why not.
  virtual Status device_gemm(DType) const { return Status::unsupported("no device products"); }
  /// A device's own product kernel with its epilogue (Note [Small device products]), or
  /// unsupported.
  virtual Expected<KernelArtifact> compile(const GemmKernelIR&) { return Status::unsupported("no product kernels"); }
  /// Code for one fused pointwise kernel / one reduction (shared through the kernel cache).
  virtual Expected<KernelArtifact> compile(const PointwiseKernelIR& ir) = 0;
  virtual Expected<ReductionArtifact> compile(const ReductionKernelIR& ir) = 0;
  /// One kernel for a chain of parts over the same rows (RowChainIR), or unsupported: the chain
  /// then runs part by part. Device backends fuse chains this way; the x86 backend blocks the
  /// rows of separate kernels instead (rt::run_row_blocked).
  virtual bool fuses_row_chains() const { return false; }
  virtual Expected<KernelArtifact> compile(const RowChainIR&) { return Status::unsupported("no row-chain kernels"); }
  /// One function for a Python loop over array elements (Note [Element loops] in
  /// frontend/trace/element_loops.cpp), or unsupported: the loop then runs in jit's interpreter of
  /// its IR, run_element_loop.
  virtual Expected<KernelArtifact> compile(const ElementLoop&) { return Status::unsupported("no element loops"); }
  /// Makes `kernels` ready to launch now (a device backend's modules load when first needed, Note
  /// [Device modules load when needed] in jit/cuda/backend.cpp): a failure is the graph's
  /// compile error, not a run's. Host kernels are ready as made.
  virtual Status prepare(const std::vector<rt::KernelPtr>&) { return Status::ok(); }
  /// Whether a reduction should store an expensive operand for its group to read back instead of
  /// the group recomputing it (Note [Stored reduction operands]): on a GPU, memory traffic costs
  /// more than recomputing an exp.
  virtual bool stores_reduction_operands() const { return true; }
};

}  // namespace framejit::jit
