// select_gemms.cpp — pass: matrix products left outside kernels run on framejit's GEMM; every
// other such call is counted as an extern call.
#include "jit/schedule/fusion_passes.h"

namespace framejit::jit {

void select_gemms(FusionState& state) {
  FusionPlan& plan = state.plan;
  const auto& nodes = state.graph.nodes();
  for (int i = 0; i < state.size(); ++i) {
    if (nodes[i].kind != NodeKind::Call || plan.group_of[i] != FusionPlan::kNotFused || plan.reduction_of[i] >= 0 ||
        plan.store_of[i] >= 0)
      continue;
    if (const auto& mm = state.nodes[i].matmul) {
      plan.gemm_of[i] = static_cast<int>(plan.gemms.size());
      plan.gemms.push_back(*mm);
      continue;
    }
    ++plan.extern_calls;
  }
}

}  // namespace framejit::jit
