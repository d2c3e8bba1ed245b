// fuse_gemm_epilogues.cpp — pass: a pointwise kernel reading a GEMM's product runs inside the
// GEMM, on each block of the product.
#include "jit/schedule/fusion_passes.h"

namespace framejit::jit {
namespace {

// How many times the plan reads `value` as an array: once per reference by a node that runs
// (not one only fused reductions recompute), plus `prologue_reads`, its reads as a prologue input
// of fused reductions (which read those instead of their own arguments).
int plan_reads(const FusionState& state, int value, int prologue_reads) {
  const FusionPlan& plan = state.plan;
  int reads = prologue_reads;
  for (int u : state.users.of(value))
    reads += plan.group_of[u] != FusionPlan::kNotComputed && plan.reduction_of[u] < 0;
  // A store's kernel computes the value it writes from its own inputs (the fuzzer found
  // `x[...] = c * 2` reading C after an epilogue had written exp(C) over it).
  for (const StoreGroup& st : plan.stores)
    for (int v : st.kernel.inputs) reads += v == value;
  return reads;
}

}  // namespace

// Note [GEMM epilogues]
// A pointwise group that reads a GEMM product as one of its inputs runs inside the GEMM, on each
// block of C while it is still in cache, writing its output over C in place: bias adds and
// activations after `x @ w` cost no extra pass over memory. Legal when the group has exactly one
// output with C's shape and dtype, nothing else reads C, and every other input of the group
// exists before the GEMM runs.
void fuse_gemm_epilogues(FusionState& state) {
  FusionPlan& plan = state.plan;
  plan.gemm_epilogue.assign(plan.gemms.size(), -1);
  if (plan.gemms.empty()) return;
  const Graph& graph = state.graph;
  std::vector<int> prologue_reads(state.size(), 0);
  for (const ReductionGroup& r : plan.reductions)
    if (r.node >= 0)  // var's mean reads what the variance after it reads
      for (int v : r.inputs)
        if (v < state.size()) ++prologue_reads[v];  // not the temporary
  for (size_t gi = 0; gi < plan.groups.size(); ++gi) {
    FusionGroup& g = plan.groups[gi];
    if (g.outputs.size() != 1) continue;
    const TensorMeta& out = graph.node(g.outputs[0]).meta;
    for (int c : g.inputs) {
      const int gemm = plan.gemm_of[c];
      if (gemm < 0 || plan.gemm_epilogue[gemm] >= 0) continue;
      if (plan.gemms[gemm].a_vector || plan.gemms[gemm].b_vector) continue;  // C is not a matrix
      const TensorMeta& cm = graph.node(c).meta;
      if (cm.dtype != out.dtype || !same_shape(cm, out)) continue;
      // Nothing but this group's members may read C. NB: members read through args only
      // (lower_pointwise takes no node in a keyword), so their uses of C are all in Users.
      int member_reads = 0;
      for (int u : state.users.of(c)) member_reads += plan.group_of[u] == static_cast<int>(gi);
      if (member_reads != plan_reads(state, c, prologue_reads[c])) continue;
      // Every other input must be computed before the GEMM runs (at node c).
      auto computed_at = [&](int v) { return plan.group_of[v] >= 0 ? plan.groups[plan.group_of[v]].position : v; };
      bool ready = true;
      for (int v : g.inputs) ready = ready && (v == c || computed_at(v) < c);
      for (int v : g.params) ready = ready && computed_at(v) < c;
      if (!ready) continue;
      g.gemm = gemm;
      plan.gemm_epilogue[gemm] = static_cast<int>(gi);
      break;
    }
  }
}

}  // namespace framejit::jit
