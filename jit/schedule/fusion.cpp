// fusion.cpp — plan_fusion, the sequence of the passes that build a FusionPlan, and the plan's text.
#include "jit/schedule/fusion.h"

#include <utility>

#include "jit/schedule/fusion_passes.h"

namespace framejit::jit {

FusionPlan plan_fusion(const Graph& graph, const std::function<bool(const PointwiseKernelIR&)>& accept,
                       const std::function<bool(const ReductionKernelIR&)>& accept_reduction) {
  FusionState state(graph);
  // Which nodes are what, once. Reductions only when the backend generates reduction kernels:
  // without one they run as calls.
  lower_nodes(state, accept_reduction != nullptr);
  log_fusion_pass("lower_nodes", state);
  decompose_reductions(state);
  log_fusion_pass("decompose_reductions", state);
  fuse_pointwise(state, accept_reduction);
  log_fusion_pass("fuse_pointwise", state);
  // Before the kernels are built: a stored operand is an input of its group's kernel, not a member.
  store_reduction_operands(state);
  log_fusion_pass("store_reduction_operands", state);
  build_pointwise_kernels(state, accept);
  log_fusion_pass("build_pointwise_kernels", state);
  // After the kernels: what no kernel computes (a rejected group's members among it) runs as a
  // GEMM or as a call.
  select_gemms(state);
  log_fusion_pass("select_gemms", state);
  fuse_gemm_epilogues(state);
  log_fusion_pass("fuse_gemm_epilogues", state);
  // Last: whether a view folds depends on how every one of its readers runs.
  fold_views(state);
  log_fusion_pass("fold_views", state);
  return std::move(state.plan);
}

std::string FusionPlan::to_string(const Graph& graph) const {
  std::string s;
  for (const ReductionGroup& r : reductions)
    s += "reduction kernel for " + (r.node >= 0 ? graph.node(r.node).name : "temporary " + std::to_string(r.output)) +
         (r.value_output >= 0 ? " (stores " + graph.node(r.value_output).name + ")" : "") + ": " + r.ir.to_string();
  for (size_t k = 0; k < groups.size(); ++k) {
    const FusionGroup& g = groups[k];
    s += "kernel " + std::to_string(k) + " computes";
    for (int m : g.nodes) s += " " + graph.node(m).name;
    s += "\n" + g.ir.to_string();
  }
  for (size_t k = 0; k < gemms.size(); ++k) {
    s += "gemm " + graph.node(gemms[k].a).name + " @ " + graph.node(gemms[k].b).name;
    if (k < gemm_epilogue.size() && gemm_epilogue[k] >= 0) s += " with kernel " + std::to_string(gemm_epilogue[k]) + " as its epilogue";
    s += "\n";
  }
  for (size_t v = 0; v < view_of.size(); ++v)
    if (view_of[v] >= 0)
      s += "view " + graph.node(static_cast<int>(v)).name + " = " + views[view_of[v]].to_string() + " of " +
           graph.node(views[view_of[v]].source).name + ", folded into its readers\n";
  s += std::to_string(extern_calls) + " call(s) run one by one\n";
  return s;
}

}  // namespace framejit::jit
