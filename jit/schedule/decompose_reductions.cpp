// decompose_reductions.cpp — pass: each reduction node becomes the reduction kernels computing it
// (var and std: a mean into a temporary, then the mean of squared deviations from it).
#include "jit/schedule/fusion_passes.h"

namespace framejit::jit {

void decompose_reductions(FusionState& state) {
  for (int i = 0; i < state.size(); ++i) {
    NodeRecord& rec = state.nodes[i];
    if (!rec.reduction) continue;
    const ReductionNode& rn = *rec.reduction;
    ReductionStep step;
    ReductionGroup& r = step.kernel;
    r.node = r.output = i;
    r.operand = rn.input;
    r.reduced = rn.reduced;
    r.keepdims = rn.keepdims;
    r.scalar_object = rn.scalar_object;
    r.ir.op = rn.op;
    r.ir.mean = rn.mean;
    r.ir.ddof = rn.ddof;
    r.ir.sqrt = rn.sqrt;
    if (rn.var) {
      // The mean first, kept with the reduced dims (keepdims) so that the next kernel reads it
      // broadcast against the operand; ddof and sqrt belong to the variance, not to its mean.
      ReductionStep mean = step;
      mean.kernel.node = mean.kernel.output = -1;
      mean.kernel.keepdims = true;
      mean.kernel.scalar_object = false;
      mean.kernel.ir.ddof = 0;
      mean.kernel.ir.sqrt = false;
      rec.steps.push_back(std::move(mean));
      step.centered = true;
    }
    rec.steps.push_back(std::move(step));
  }
}

// The deviation is computed in the prologue, so (x - mean)^2 is never materialized either.
void center_prologue(ReductionGroup& r, int mean_value, DType dtype) {
  PointwiseKernelIR& p = r.ir.prologue;
  const int x = p.outputs[0];
  const int in = static_cast<int>(p.input_dtypes.size());
  r.inputs.push_back(mean_value);
  p.input_dtypes.push_back(dtype);
  p.body.push_back({ScalarOp::Load, dtype, -1, -1, in, 0});
  const int t = static_cast<int>(p.body.size()) - 1;
  p.body.push_back({ScalarOp::Sub, dtype, x, t, -1, 0});
  const int d = static_cast<int>(p.body.size()) - 1;
  p.body.push_back({ScalarOp::Mul, dtype, d, d, -1, 0});  // NumPy: multiply(x, x), not power
  p.outputs[0] = static_cast<int>(p.body.size()) - 1;
}

}  // namespace framejit::jit
