// lower_nodes.cpp — pass: classify each call node once as pointwise, reduction, matmul, view or
// lowered write.
#include "jit/schedule/fusion_passes.h"

namespace framejit::jit {

void lower_nodes(FusionState& state, bool reductions, bool half_products, bool vector_products) {
  const auto& nodes = state.graph.nodes();
  for (int i = 0; i < state.size(); ++i) {
    const Node& node = nodes[i];
    NodeRecord& r = state.nodes[i];
    if (node.kind != NodeKind::Call) continue;
    // NB: the five kinds are exclusive (no target is, say, both pointwise and a view), so asking
    // in this order, and stopping at the first yes, classifies and does the least work.
    if ((r.pointwise = lower_pointwise(state.graph, node))) continue;
    if (reductions && (r.reduction = lower_reduction(state.graph, node))) continue;
    if ((r.matmul = lower_matmul(state.graph, node, half_products, vector_products))) continue;
    if ((r.view = lower_view(state.graph, node))) continue;
    r.index_put = lower_index_put(state.graph, node);
  }
}

}  // namespace framejit::jit
