// fuse_pointwise.cpp — pass: greedy grouping of pointwise nodes, and reductions that take the
// computation of their operand from an open group as their prologue.
#include <algorithm>
#include <utility>

#include "jit/schedule/fusion_passes.h"
#include "runtime/executor.h"

namespace framejit::jit {
namespace {

// Whether store `u` (if it is one) recomputes `v` from its inputs rather than reading it.
bool recomputed_by_store(const FusionPlan& plan, int u, int v) {
  if (plan.store_of[u] < 0) return false;
  const StoreGroup& st = plan.stores[plan.store_of[u]];
  // The base is read as an array whatever the kernel recomputes (x[...] = x + 1 with x a member).
  if (st.write.base == v) return false;
  return std::find(st.kernel.nodes.begin(), st.kernel.nodes.end(), v) != st.kernel.nodes.end();
}

// Marks the tentative members read outside their group (NodeRecord::needed_outside): by a node
// of another group or none (the output among them), or by a fused reduction's prologue. A fused
// reduction reads its prologue's inputs, not its own arguments (those it recomputes).
void mark_needed_outside(FusionState& state) {
  const FusionPlan& plan = state.plan;
  for (int v = 0; v < state.size(); ++v) {
    NodeRecord& rec = state.nodes[v];
    if (rec.tentative < 0) continue;
    for (int u : state.users.of(v))
      if (plan.reduction_of[u] < 0 && state.nodes[u].tentative != rec.tentative && !recomputed_by_store(plan, u, v))
        rec.needed_outside = true;
  }
  // A store that recomputes its value reads its producers' inputs instead.
  for (const StoreGroup& st : plan.stores)
    for (int v : st.kernel.inputs)
      if (state.nodes[v].tentative >= 0) state.nodes[v].needed_outside = true;
  for (const ReductionGroup& r : plan.reductions) {
    if (r.node < 0) continue;  // var's mean: its inputs are those of the variance after it
    for (int v : r.inputs)
      if (v < state.size() && state.nodes[v].tentative >= 0) state.nodes[v].needed_outside = true;
  }
}

// Write `node` as a store kernel (plan.stores) when the backend takes it. The kernel computes
// the value converted to the base's dtype: when the value is a pointwise member of an open group
// read by nothing else, its producers are recomputed from their inputs inside the store (the value
// is never materialized, as a reduction's prologue); otherwise it loads the value.
bool fuse_store(FusionState& state, int node, const std::vector<bool>& is_open, const AcceptPointwise& accept) {
  const IndexPutNode& w = *state.nodes[node].index_put;
  StoreGroup st;
  st.node = node;
  st.write = w;
  FusionGroup& k = st.kernel;
  PointwiseKernelIR& ir = k.ir;
  int value = -1;  // body index of the value, in its own dtype
  switch (w.value.kind) {
    case StoredValue::Kind::Array: {
      const int v = w.value.node;
      const int g = state.nodes[v].tentative;
      std::vector<int> members;
      if (g >= 0 && is_open[g] && state.users.count(v) == 1) members = state.producers(v, g);
      ir = state.pointwise_ir(members, {v}, k.inputs, k.params);
      k.nodes = members;
      value = ir.outputs[0];
      ir.outputs.clear();
      ir.output_dtypes.clear();
      break;
    }
    case StoredValue::Kind::Number:
      k.params.push_back(w.value.node);
      ir.param_dtypes.push_back(w.value.dtype);
      ir.body.push_back({ScalarOp::Param, w.value.dtype, -1, -1, 0, 0});
      value = 0;
      break;
    case StoredValue::Kind::Const:
      ir.body.push_back({ScalarOp::Const, w.value.dtype, -1, -1, -1, w.value.value});
      value = 0;
      break;
  }
  if (ir.body[value].dtype != w.dtype) {
    // NumPy's __setitem__ converts the value to the array's dtype (unsafely, Note [Casts]).
    ir.body.push_back({ScalarOp::Cast, w.dtype, value, -1, -1, 0});
    value = static_cast<int>(ir.body.size()) - 1;
  }
  ir.outputs = {value};
  ir.output_dtypes = {w.dtype};
  k.outputs = {node};
  k.position = node;
  if (!accept(ir)) return false;
  state.plan.store_of[node] = static_cast<int>(state.plan.stores.size());
  state.plan.stores.push_back(std::move(st));
  return true;
}

// The graph node whose accepted reduction computes what `mean` (a variance's temporary mean step)
// would: the keepdims mean, in `dtype`, of the same operand over the same dims with the same
// prologue. -1 when there is none.
int same_mean(const FusionState& state, const FusionPlan& plan, const ReductionGroup& mean,
              const PointwiseKernelIR& prologue, DType dtype) {
  const std::string key = prologue.key();
  for (const ReductionGroup& r : plan.reductions) {
    if (r.node < 0 || r.operand != mean.operand || r.reduced != mean.reduced || !r.keepdims || r.scalar_object) continue;
    if (r.ir.op != ReduceOp::Sum || !r.ir.mean || r.ir.ddof != 0 || r.ir.sqrt || r.ir.store_value) continue;
    if (state.graph.node(r.node).meta.dtype != dtype || r.ir.prologue.key() != key) continue;
    return r.node;
  }
  return -1;
}

}  // namespace

void fuse_pointwise(FusionState& state, const AcceptReduction& accept, const AcceptPointwise& accept_pointwise) {
  const auto& nodes = state.graph.nodes();
  const int n = state.size();
  FusionPlan& plan = state.plan;
  auto& groups = state.groups;
  // Several groups may be open at once, one per iteration shape; a group closes when something
  // reads one of its members as a materialized array (a non-fused consumer, or a pointwise node
  // joining another group), so every kernel can run at its last member's position with all its
  // inputs already computed.
  std::vector<bool> is_open;
  // Per group, the values its kernel loads and the scalars it reads so far. A group takes no
  // member that would bring them past a budget below the backend's limits (outputs come on top
  // of the loads): a long chain of 0-d steps reading one element each (an unrolled loop summing
  // x[i, i]) becomes several kernels, where one over the limit would be refused and leave every
  // member to run as a call.
  constexpr size_t kLoadBudget = rt::kMaxKernelOperands - 4;
  constexpr size_t kParamBudget = rt::kMaxKernelParams;
  std::vector<std::vector<int>> loads, reads;
  auto fits = [&](size_t g, const PointwiseNode& p, bool commit) {
    size_t nl = loads[g].size(), nr = reads[g].size();
    for (const PointwiseOperand& o : p.operands) {
      if (o.kind == PointwiseOperand::Kind::Const) continue;
      std::vector<int>& seen = o.kind == PointwiseOperand::Kind::Tensor ? loads[g] : reads[g];
      if (state.nodes[o.node].tentative == static_cast<int>(g) ||
          std::find(seen.begin(), seen.end(), o.node) != seen.end())
        continue;
      if (commit) seen.push_back(o.node);
      else ++(o.kind == PointwiseOperand::Kind::Tensor ? nl : nr);
    }
    return nl <= kLoadBudget && nr <= kParamBudget;
  };
  auto close_group_of = [&](int v, int except) {
    const int g = state.nodes[v].tentative;
    if (g >= 0 && g != except) is_open[g] = false;
  };
  for (int i = 0; i < n; ++i) {
    const Node& node = nodes[i];
    NodeRecord& rec = state.nodes[i];
    if (node.kind != NodeKind::Call) continue;
    if (rec.pointwise) {
      int join = -1;
      for (size_t g = 0; g < groups.size() && join < 0; ++g) {
        const Node& first = nodes[groups[g].front()];
        // Dtypes may differ: every expression of a kernel carries its own.
        if (is_open[g] && same_shape(first.meta, node.meta) && fits(g, *rec.pointwise, false))
          join = static_cast<int>(g);
      }
      for (const Arg& a : node.args) a.for_each_node([&](int v) { close_group_of(v, join); });
      if (join < 0) {
        join = static_cast<int>(groups.size());
        groups.emplace_back();
        is_open.push_back(true);
        loads.emplace_back();
        reads.emplace_back();
      }
      fits(join, *rec.pointwise, true);
      groups[join].push_back(i);
      rec.tentative = join;
      continue;
    }
    if (!rec.steps.empty()) {
      // The operand's computation, from its open group if it has one, as the common prologue of
      // the node's kernels.
      const ReductionNode& rn = *rec.reduction;
      const int input = rn.input;
      const int pg = state.nodes[input].tentative;
      std::vector<int> members;
      if (pg >= 0 && is_open[pg]) members = state.producers(input, pg);
      std::vector<int> inputs, params;
      PointwiseKernelIR prologue = state.pointwise_ir(members, {input}, inputs, params);
      if (rn.value_dtype != rn.dtype) {
        // NumPy converts each element to the type it combines in (an int32 sum adds int64s, an
        // integer mean float64s): the prologue's last step.
        prologue.body.push_back({ScalarOp::Cast, rn.value_dtype, prologue.outputs[0], -1, -1, 0});
        prologue.outputs[0] = static_cast<int>(prologue.body.size()) - 1;
        prologue.output_dtypes[0] = rn.value_dtype;
      }
      // A variance whose mean the graph already computes (layer norm's x - mean beside
      // var(x)) centers on that node instead of a temporary computing it again.
      const int have_mean = rec.steps.size() == 2 && rec.steps[1].centered
                                ? same_mean(state, plan, rec.steps[0].kernel, prologue, rn.value_dtype)
                                : -1;
      std::vector<ReductionGroup> kernels;
      bool accepted = true;
      int temps = 0;
      for (const ReductionStep& step : rec.steps) {
        ReductionGroup r = step.kernel;
        if (have_mean >= 0 && r.node < 0) continue;
        r.inputs = inputs;
        r.params = params;
        r.ir.prologue = prologue;
        // A temporary's value index: the next one past the graph's nodes.
        if (r.node < 0) r.output = n + plan.num_temps + temps++;
        if (step.centered) center_prologue(r, have_mean >= 0 ? have_mean : kernels.back().output, rn.value_dtype);
        accepted = accepted && accept(r.ir);
        kernels.push_back(std::move(r));
      }
      if (accepted) {
        for (const ReductionGroup& r : kernels)
          for (int v : r.inputs)
            if (v < n) close_group_of(v, -1);  // read as arrays
        const size_t skipped = rec.steps.size() - kernels.size();  // the mean a graph node gave
        for (size_t k = 0; k < kernels.size(); ++k) {
          ReductionGroup& r = kernels[k];
          const int index = static_cast<int>(plan.reductions.size());
          if (r.node >= 0) plan.reduction_of[r.node] = index;
          else ++plan.num_temps;
          if (rec.steps[k + skipped].centered && have_mean < 0) r.temp_producer = index - 1;  // the kernel just before it
          plan.reductions.push_back(std::move(r));
        }
        continue;
      }
    }
    if (rec.index_put && accept_pointwise && fuse_store(state, i, is_open, accept_pointwise)) {
      // Read as arrays: the base, and what the store kernel loads.
      close_group_of(rec.index_put->base, -1);
      for (int v : plan.stores.back().kernel.inputs) close_group_of(v, -1);
      continue;
    }
    for (const Arg& a : node.args) a.for_each_node([&](int v) { close_group_of(v, -1); });
    for (const auto& kw : node.kwargs) kw.second.for_each_node([&](int v) { close_group_of(v, -1); });
  }
  mark_needed_outside(state);
}

}  // namespace framejit::jit
