// fusion.cpp — the fusion plan's text (plan_fusion, the list of the passes, is in jit/pipeline.cpp).
#include "jit/schedule/fusion.h"

namespace framejit::jit {

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
  for (const StoreGroup& st : stores) {
    s += "store " + graph.node(st.node).name + " into " + graph.node(st.write.base).name + st.write.region.to_string();
    if (!st.kernel.nodes.empty()) s += " computing";
    for (int m : st.kernel.nodes) s += " " + graph.node(m).name;
    s += "\n" + st.kernel.ir.to_string();
  }
  for (size_t v = 0; v < view_of.size(); ++v)
    if (view_of[v] >= 0)
      s += "view " + graph.node(static_cast<int>(v)).name + " = " + views[view_of[v]].to_string() + " of " +
           graph.node(views[view_of[v]].source).name + ", folded into its readers\n";
  s += std::to_string(extern_calls) + " call(s) run one by one\n";
  return s;
}

}  // namespace framejit::jit
