// select_gemms.cpp — pass: matrix products left outside kernels run on framejit's GEMM; every
// other such call but a compiled loop and the getitems that take its results is counted as an
// extern call.
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
    if (nodes[i].op == OpKind::Loop) continue;  // compiled (Note [Element loops])
    if (nodes[i].op == OpKind::Extern && !nodes[i].args.empty() && nodes[i].args[0].is_node() &&
        nodes[nodes[i].args[0].i].op == OpKind::Loop)
      continue;  // set by the loop's step
    ++plan.extern_calls;
  }
}

}  // namespace framejit::jit
