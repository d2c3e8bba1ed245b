// build_pointwise_kernels.cpp — pass: the loop IR of one kernel per tentative group, computing
// only what leaves the group.
#include <utility>

#include "jit/schedule/fusion_passes.h"

namespace framejit::jit {

void build_pointwise_kernels(FusionState& state, const AcceptPointwise& accept) {
  FusionPlan& plan = state.plan;
  for (size_t gid = 0; gid < state.groups.size(); ++gid) {
    const int group = static_cast<int>(gid);
    const std::vector<int>& members = state.groups[gid];
    std::vector<int> outs;
    for (int m : members)
      if (state.nodes[m].needed_outside && state.nodes[m].stored_by < 0) outs.push_back(m);
    // Members that feed no output (e.g. d * d of a variance whose reduction recomputes it) are
    // left out of the kernel, and so are stored values and what only they needed.
    std::vector<bool> live(state.nodes.size(), false);
    for (int o : outs)
      for (int m : state.producers(o, group, /*skip_stored=*/true)) live[m] = true;
    if (outs.empty()) {
      // Nothing leaves the group (its values only feed fused reductions): no kernel at all.
      for (int m : members) plan.group_of[m] = FusionPlan::kNotComputed;
      continue;
    }
    std::vector<int> kept;
    for (int m : members)
      if (live[m]) kept.push_back(m);
    FusionGroup g;
    g.ir = state.pointwise_ir(kept, outs, g.inputs, g.params);
    g.nodes = kept;
    g.position = kept.back();
    g.outputs = outs;
    if (!accept(g.ir)) {
      // Not generated: the members run as calls, so any reduction fused on them must read them.
      for (int m : members) {
        plan.group_of[m] = FusionPlan::kNotFused;
        int& stored_by = state.nodes[m].stored_by;
        if (stored_by >= 0) {
          plan.reductions[stored_by].ir.store_value = false;
          plan.reductions[stored_by].value_output = -1;
          stored_by = -1;
        }
      }
      continue;
    }
    const int id = static_cast<int>(plan.groups.size());
    for (int m : members) plan.group_of[m] = live[m] ? id : FusionPlan::kNotComputed;
    plan.groups.push_back(std::move(g));
  }
}

}  // namespace framejit::jit
