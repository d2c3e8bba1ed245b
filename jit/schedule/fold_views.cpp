// fold_views.cpp — pass: views read only by kernels, reductions, GEMMs and other such views are
// folded into their readers and never made.
#include "jit/schedule/fusion_passes.h"

namespace framejit::jit {

// Note [Folded views]
// A view (transpose, slice, expand_dims, reshape, ...) whose every reader binds arrays by their
// layout (a kernel, a reduction, a GEMM, or another such view) never needs to exist as an object:
// the reader applies the view's index remap to its source's layout at run time. When a remap
// cannot be applied (an index out of range, a reshape NumPy would copy), the program makes the
// view the eager way instead, so errors and copies are NumPy's own.
void fold_views(FusionState& state) {
  FusionPlan& plan = state.plan;
  const auto& nodes = state.graph.nodes();
  const int n = state.size();
  plan.view_of.assign(n, -1);
  std::vector<bool> folded(n, false);
  for (int v = n - 1; v >= 0; --v) {  // readers come later: their status is known
    const std::optional<ViewOp>& op = state.nodes[v].view;
    if (!op || plan.group_of[v] != FusionPlan::kNotFused || plan.reduction_of[v] >= 0 || plan.gemm_of[v] >= 0 ||
        state.users.count(v) == 0)
      continue;
    bool all_bind_layouts = true;
    for (int r : state.users.of(v)) {
      const bool binds = nodes[r].kind == NodeKind::Call &&
                         (plan.group_of[r] >= 0 || plan.group_of[r] == FusionPlan::kNotComputed ||
                          plan.reduction_of[r] >= 0 || plan.gemm_of[r] >= 0 || plan.store_of[r] >= 0 || folded[r]);
      // A view's argument other than its source (a run-time size) is read as a value.
      const bool as_source = !folded[r] || state.nodes[r].view->source == v;
      all_bind_layouts = all_bind_layouts && binds && as_source;
    }
    folded[v] = all_bind_layouts;
  }
  for (int v = 0; v < n; ++v) {
    if (!folded[v]) continue;
    plan.view_of[v] = static_cast<int>(plan.views.size());
    plan.views.push_back(*state.nodes[v].view);
    --plan.extern_calls;
  }
}

}  // namespace framejit::jit
