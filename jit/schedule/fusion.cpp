// fusion.cpp — greedy pointwise fusion and kernel-IR construction for each group.
#include "jit/schedule/fusion.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "jit/lower/lowering.h"

namespace framejit::jit {

namespace {

bool same_shape(const TensorMeta& a, const TensorMeta& b) {
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i)
    if (!a.shape[i].same_as(b.shape[i])) return false;
  return true;
}

// Builds a pointwise kernel computing `members` (graph order) whose values in `outputs` leave the
// kernel. Fills `inputs`/`params` with the external values read.
PointwiseKernelIR build_ir(const Graph& graph, const std::vector<int>& members, const std::vector<int>& outputs,
                           const std::vector<std::optional<PointwiseNode>>& pw, std::vector<int>& inputs,
                           std::vector<int>& params) {
  std::unordered_map<int, int> value_expr;  // node -> body index
  PointwiseKernelIR ir;
  auto load = [&](const PointwiseOperand& o, DType dtype) -> int {
    switch (o.kind) {
      case PointwiseOperand::Kind::Const:
        ir.body.push_back({ScalarOp::Const, dtype, -1, -1, -1, o.value});
        return static_cast<int>(ir.body.size()) - 1;
      case PointwiseOperand::Kind::Scalar: {
        auto it = value_expr.find(o.node);
        if (it != value_expr.end()) return it->second;
        int idx = static_cast<int>(std::find(params.begin(), params.end(), o.node) - params.begin());
        if (idx == static_cast<int>(params.size())) {
          params.push_back(o.node);
          ir.param_dtypes.push_back(graph.node(o.node).meta.dtype == DType::Float64 ? DType::Float64 : DType::Int64);
        }
        // A Python number meets the array in the array's type (NumPy casts it first).
        ir.body.push_back({ScalarOp::Param, dtype, -1, -1, idx, 0});
        return value_expr[o.node] = static_cast<int>(ir.body.size()) - 1;
      }
      case PointwiseOperand::Kind::Tensor: {
        auto it = value_expr.find(o.node);
        if (it != value_expr.end()) return it->second;
        int idx = static_cast<int>(inputs.size());
        inputs.push_back(o.node);
        ir.input_dtypes.push_back(graph.node(o.node).meta.dtype);
        ir.body.push_back({ScalarOp::Load, dtype, -1, -1, idx, 0});
        return value_expr[o.node] = static_cast<int>(ir.body.size()) - 1;
      }
    }
    return -1;
  };
  for (int n : members) {
    const PointwiseNode& p = *pw[n];
    int a = load(p.operands[0], p.dtype);
    int b = p.operands.size() > 1 ? load(p.operands[1], p.dtype) : -1;
    ir.body.push_back({p.op, p.dtype, a, b, -1, 0});
    value_expr[n] = static_cast<int>(ir.body.size()) - 1;
  }
  for (int n : outputs) {
    auto it = value_expr.find(n);
    if (it == value_expr.end()) {  // an output that is an input itself (a reduction of a plain array)
      it = value_expr.emplace(n, load({PointwiseOperand::Kind::Tensor, n, 0}, graph.node(n).meta.dtype)).first;
    }
    ir.outputs.push_back(it->second);
    ir.output_dtypes.push_back(graph.node(n).meta.dtype);
  }
  return ir;
}

// The members of `group` that `value` depends on, in graph order (the prologue of a reduction).
std::vector<int> producers_of(const Graph& graph, int value, const std::vector<int>& group,
                              const std::vector<int>& tentative, int group_id) {
  std::vector<bool> need(graph.nodes().size(), false);
  std::vector<int> stack{value};
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    if (v < 0 || tentative[v] != group_id || need[v]) continue;
    need[v] = true;
    for (const Arg& a : graph.node(v).args) a.for_each_node([&](int u) { stack.push_back(u); });
  }
  std::vector<int> out;
  for (int m : group)
    if (need[m]) out.push_back(m);
  return out;
}

}  // namespace

FusionPlan plan_fusion(const Graph& graph, const std::function<bool(const PointwiseKernelIR&)>& accept,
                       const std::function<bool(const ReductionKernelIR&)>& accept_reduction) {
  const auto& nodes = graph.nodes();
  const int n = static_cast<int>(nodes.size());
  FusionPlan plan;
  plan.group_of.assign(n, -1);
  plan.reduction_of.assign(n, -1);
  plan.gemm_of.assign(n, -1);
  std::vector<std::optional<PointwiseNode>> pw(n);
  std::vector<std::optional<ReductionNode>> red(n);
  for (int i = 0; i < n; ++i) {
    pw[i] = lower_pointwise(graph, nodes[i]);
    if (!pw[i] && accept_reduction) red[i] = lower_reduction(graph, nodes[i]);
  }

  // Tentative groups: member lists only. Several groups may be open at once, one per iteration
  // shape; a group closes when something reads one of its members as a materialized array (a
  // non-fused consumer, or a pointwise node joining another group), so every kernel can run at
  // its last member's position with all its inputs already computed.
  std::vector<std::vector<int>> groups;
  std::vector<int> tentative(n, -1);
  std::vector<bool> is_open;
  auto close_readers_of = [&](int v, int except) {
    int g = tentative[v];
    if (g >= 0 && g != except) is_open[g] = false;
  };
  for (int i = 0; i < n; ++i) {
    const Node& node = nodes[i];
    if (node.kind != NodeKind::Call) continue;
    if (pw[i]) {
      int join = -1;
      for (size_t g = 0; g < groups.size() && join < 0; ++g) {
        const Node& first = nodes[groups[g].front()];
        if (is_open[g] && first.meta.dtype == node.meta.dtype && same_shape(first.meta, node.meta))
          join = static_cast<int>(g);
      }
      for (const Arg& a : node.args) a.for_each_node([&](int v) { close_readers_of(v, join); });
      if (join < 0) {
        join = static_cast<int>(groups.size());
        groups.emplace_back();
        is_open.push_back(true);
      }
      groups[join].push_back(i);
      tentative[i] = join;
      continue;
    }
    if (red[i]) {
      // A reduction whose operand comes from an open group recomputes it as its prologue.
      const ReductionNode& rn = *red[i];
      int input = rn.input;
      int pg = tentative[input] >= 0 && is_open[tentative[input]] ? tentative[input] : -1;
      ReductionGroup r;
      r.node = r.output = i;
      r.reduced = rn.reduced;
      r.keepdims = rn.keepdims;
      r.numpy_scalar = rn.numpy_scalar;
      std::vector<int> members;
      if (pg >= 0) members = producers_of(graph, input, groups[pg], tentative, pg);
      r.ir.prologue = build_ir(graph, members, {input}, pw, r.inputs, r.params);
      r.ir.op = rn.op;
      r.ir.mean = rn.mean;
      r.ir.ddof = rn.ddof;
      r.ir.sqrt = rn.sqrt;
      std::optional<ReductionGroup> mean;
      if (rn.var) {
        // The mean into a temporary, then the squared deviations from it (see ReductionGroup).
        mean = r;
        mean->node = -1;
        mean->output = n + plan.num_temps;
        mean->keepdims = true;
        mean->numpy_scalar = false;
        mean->ir.ddof = 0;
        mean->ir.sqrt = false;
        PointwiseKernelIR& p = r.ir.prologue;
        const DType dt = rn.dtype;
        int x = p.outputs[0];
        int in = static_cast<int>(p.input_dtypes.size());
        r.inputs.push_back(mean->output);
        p.input_dtypes.push_back(dt);
        p.body.push_back({ScalarOp::Load, dt, -1, -1, in, 0});
        int t = static_cast<int>(p.body.size()) - 1;
        p.body.push_back({ScalarOp::Sub, dt, x, t, -1, 0});
        int d = static_cast<int>(p.body.size()) - 1;
        p.body.push_back({ScalarOp::Mul, dt, d, d, -1, 0});  // NumPy: multiply(x, x), not power
        p.outputs[0] = static_cast<int>(p.body.size()) - 1;
      }
      if (accept_reduction(r.ir) && (!mean || accept_reduction(mean->ir))) {
        for (int v : r.inputs)
          if (v < n) close_readers_of(v, -1);  // read as arrays
        if (mean) {
          r.temp_producer = static_cast<int>(plan.reductions.size());
          plan.reductions.push_back(std::move(*mean));
          ++plan.num_temps;
        }
        plan.reduction_of[i] = static_cast<int>(plan.reductions.size());
        plan.reductions.push_back(std::move(r));
        continue;
      }
    }
    for (const Arg& a : node.args) a.for_each_node([&](int v) { close_readers_of(v, -1); });
    for (const auto& kw : node.kwargs) kw.second.for_each_node([&](int v) { close_readers_of(v, -1); });
  }

  // Values needed outside their group: read by a node outside it (other than a reduction that
  // recomputes it), or returned.
  std::vector<bool> needed_outside(n, false);
  for (int i = 0; i < n; ++i) {
    if (nodes[i].kind == NodeKind::Output) {
      for (const Arg& a : nodes[i].args) a.for_each_node([&](int v) { needed_outside[v] = true; });
      continue;
    }
    if (plan.reduction_of[i] >= 0) {
      for (int v : plan.reductions[plan.reduction_of[i]].inputs)
        if (v < n) needed_outside[v] = needed_outside[v] || tentative[v] >= 0;
      continue;
    }
    auto mark = [&](int v) {
      if (tentative[v] >= 0 && tentative[v] != tentative[i]) needed_outside[v] = true;
    };
    for (const Arg& a : nodes[i].args) a.for_each_node(mark);
    for (const auto& kw : nodes[i].kwargs) kw.second.for_each_node(mark);
  }

  for (auto& members : groups) {
    FusionGroup g;
    g.nodes = members;
    g.position = members.back();
    std::vector<int> outs;
    for (int m : members)
      if (needed_outside[m]) outs.push_back(m);
    if (outs.empty()) {
      // Nothing leaves the group (its values only feed fused reductions): no kernel at all.
      for (int m : members) plan.group_of[m] = FusionPlan::kNotComputed;
      continue;
    }
    // Members that feed no output (e.g. d * d of a variance whose reduction recomputes it) are
    // left out of the kernel.
    std::vector<bool> live(n, false);
    for (int o : outs)
      for (int m : producers_of(graph, o, members, tentative, tentative[o])) live[m] = true;
    std::vector<int> kept;
    for (int m : members)
      if (live[m]) kept.push_back(m);
    g.ir = build_ir(graph, kept, outs, pw, g.inputs, g.params);
    g.nodes = kept;
    g.position = kept.back();
    g.outputs = outs;
    if (!accept(g.ir)) {
      // Not generated: the members run as calls, so any reduction fused on them must read them.
      for (int m : members) plan.group_of[m] = -1;
      continue;
    }
    int id = static_cast<int>(plan.groups.size());
    for (int m : members) plan.group_of[m] = live[m] ? id : FusionPlan::kNotComputed;
    plan.groups.push_back(std::move(g));
  }
  for (int i = 0; i < n; ++i) {
    if (nodes[i].kind != NodeKind::Call || plan.group_of[i] != -1 || plan.reduction_of[i] >= 0) continue;
    if (auto mm = lower_matmul(graph, nodes[i])) {
      plan.gemm_of[i] = static_cast<int>(plan.gemms.size());
      plan.gemms.push_back(*mm);
      continue;
    }
    ++plan.extern_calls;
  }
  return plan;
}

std::string FusionPlan::to_string(const Graph& graph) const {
  std::string s;
  for (const ReductionGroup& r : reductions)
    s += "reduction kernel for " + (r.node >= 0 ? graph.node(r.node).name : "temporary " + std::to_string(r.output)) +
         ": " + r.ir.to_string();
  for (size_t k = 0; k < groups.size(); ++k) {
    const FusionGroup& g = groups[k];
    s += "kernel " + std::to_string(k) + " computes";
    for (int m : g.nodes) s += " " + graph.node(m).name;
    s += "\n" + g.ir.to_string();
  }
  for (const MatmulNode& g : gemms)
    s += "gemm " + graph.node(g.a).name + " @ " + graph.node(g.b).name + "\n";
  s += std::to_string(extern_calls) + " call(s) run one by one\n";
  return s;
}

}  // namespace framejit::jit
