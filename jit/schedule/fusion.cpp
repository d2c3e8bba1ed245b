// fusion.cpp — greedy pointwise fusion and kernel-IR construction for each group.
#include "jit/schedule/fusion.h"

#include <algorithm>
#include <map>
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
  std::unordered_map<int, int> value_expr;  // node -> body index of its value, in its own dtype
  std::map<std::pair<int, DType>, int> converted;  // (node, dtype) -> body index
  PointwiseKernelIR ir;
  auto push = [&](ScalarExpr e) {
    ir.body.push_back(e);
    return static_cast<int>(ir.body.size()) - 1;
  };
  // The value of a node in its own dtype: a member's expression, or a load of an input.
  auto node_value = [&](int node) {
    auto it = value_expr.find(node);
    if (it != value_expr.end()) return it->second;
    int idx = static_cast<int>(inputs.size());
    inputs.push_back(node);
    DType t = graph.node(node).meta.dtype;
    ir.input_dtypes.push_back(t);
    return value_expr[node] = push({ScalarOp::Load, t, -1, -1, idx, 0});
  };
  // An operand converted to the operation's loop type (NumPy converts before the ufunc loop).
  auto load = [&](const PointwiseOperand& o, DType dtype) -> int {
    switch (o.kind) {
      case PointwiseOperand::Kind::Const: return push({ScalarOp::Const, dtype, -1, -1, -1, o.value});
      case PointwiseOperand::Kind::Scalar: {
        auto key = std::make_pair(o.node, dtype);
        auto it = converted.find(key);
        if (it != converted.end()) return it->second;
        int idx = static_cast<int>(std::find(params.begin(), params.end(), o.node) - params.begin());
        if (idx == static_cast<int>(params.size())) {
          params.push_back(o.node);
          ir.param_dtypes.push_back(graph.node(o.node).meta.dtype == DType::Float64 ? DType::Float64 : DType::Int64);
        }
        // A Python number meets the array in the loop's type (NumPy casts it first).
        return converted[key] = push({ScalarOp::Param, dtype, -1, -1, idx, 0});
      }
      case PointwiseOperand::Kind::Tensor: {
        int v = node_value(o.node);
        if (ir.body[v].dtype == dtype) return v;
        auto key = std::make_pair(o.node, dtype);
        auto it = converted.find(key);
        if (it != converted.end()) return it->second;
        return converted[key] = push({ScalarOp::Cast, dtype, v, -1, -1, 0});
      }
    }
    return -1;
  };
  for (int n : members) {
    const PointwiseNode& p = *pw[n];
    std::vector<int> ops;
    for (size_t k = 0; k < p.operands.size(); ++k) ops.push_back(load(p.operands[k], p.operand_dtypes[k]));
    if (p.op == ScalarOp::Cast) {
      // The conversion of the operand is the whole operation (or nothing: astype to its own type).
      value_expr[n] = load(p.operands[0], p.dtype);
    } else if (p.op == ScalarOp::Where) {
      ScalarExpr e{ScalarOp::Where, p.dtype, ops[1], ops[2], -1, 0};
      e.c = ops[0];
      value_expr[n] = push(e);
    } else {
      value_expr[n] = push({p.op, p.dtype, ops[0], ops.size() > 1 ? ops[1] : -1, -1, 0});
    }
  }
  for (int n : outputs) {
    auto it = value_expr.find(n);
    // An output that is an input itself: a reduction of a plain array.
    int v = it != value_expr.end() ? it->second : node_value(n);
    ir.outputs.push_back(v);
    ir.output_dtypes.push_back(graph.node(n).meta.dtype);
  }
  return ir;
}

// The members of `group` that `value` depends on, in graph order (the prologue of a reduction).
// With `stored`, values a reduction stores (stored[v] >= 0) are read from memory, not recomputed.
std::vector<int> producers_of(const Graph& graph, int value, const std::vector<int>& group,
                              const std::vector<int>& tentative, int group_id,
                              const std::vector<int>* stored = nullptr) {
  std::vector<bool> need(graph.nodes().size(), false);
  std::vector<int> stack{value};
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    if (v < 0 || tentative[v] != group_id || need[v] || (stored && (*stored)[v] >= 0)) continue;
    need[v] = true;
    for (const Arg& a : graph.node(v).args) a.for_each_node([&](int u) { stack.push_back(u); });
  }
  std::vector<int> out;
  for (int m : group)
    if (need[m]) out.push_back(m);
  return out;
}

// Whether computing the kernel's values costs more than reading them back from memory: any
// transcendental function does.
bool expensive(const PointwiseKernelIR& ir) {
  for (const ScalarExpr& e : ir.body)
    if (scalar_op_is_math(e.op)) return true;
  return false;
}

// Note [Stored reduction operands]
// A reduction whose operand comes from an open group recomputes the operand in its prologue, and
// the group computes it again for its other readers: softmax's exp(x - max) is evaluated once for
// the sum and once for the division. When that operand is expensive, the reduction stores it as
// it goes (store_value) and the group reads the stored array instead. This is only possible when
// every group member that reads the operand comes after the reduction in graph order (the group's
// kernel runs at its last member, so then after the reduction). Readers outside the group read
// the stored array as the value itself.
void choose_stored_values(const Graph& graph, FusionPlan& plan, const std::vector<int>& members,
                          const std::vector<int>& tentative, int group_id, const std::vector<bool>& needed_outside,
                          std::vector<int>& stored_by) {
  for (size_t ri = 0; ri < plan.reductions.size(); ++ri) {
    ReductionGroup& r = plan.reductions[ri];
    const int v = r.operand;
    if (tentative[v] != group_id || stored_by[v] >= 0 || r.ir.prologue.body.size() <= 1 || !expensive(r.ir.prologue))
      continue;
    // The stored array is the operand itself: only when the reduction combines the operand's own
    // values (no conversion to an accumulation type, Note [Integer reductions]).
    if (r.ir.dtype() != graph.node(v).meta.dtype) continue;
    // Only a reduction of the last axis into an array stores its values: its kernel then runs row
    // by row (rt::run_row_blocked), the form that writes them.
    const bool last_axis_only = r.reduced.size() >= 2 && r.reduced.back() &&
                                std::count(r.reduced.begin(), r.reduced.end(), true) == 1;
    if (r.node < 0 || r.temp_producer >= 0 || r.numpy_scalar || !last_axis_only || is_arg_reduce(r.ir.op)) continue;
    bool read_in_group = false, readers_after = true;
    for (int m : members) {
      bool reads = false;
      for (const Arg& a : graph.node(m).args) a.for_each_node([&](int u) { reads = reads || u == v; });
      if (!reads) continue;
      read_in_group = true;
      readers_after = readers_after && m > r.node;
    }
    if (!readers_after || !(read_in_group || needed_outside[v])) continue;
    r.ir.store_value = true;
    r.value_output = v;
    stored_by[v] = static_cast<int>(ri);
  }
}

// See Note [GEMM epilogues].
void fuse_gemm_epilogues(const Graph& graph, FusionPlan& plan) {
  plan.gemm_epilogue.assign(plan.gemms.size(), -1);
  if (plan.gemms.empty()) return;
  const auto& nodes = graph.nodes();
  // Readers of each value, as graph nodes (a reduction's prologue inputs count as read by it).
  std::vector<int> reader_count(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (plan.group_of[i] == FusionPlan::kNotComputed) continue;  // recomputed by reductions
    if (plan.reduction_of[i] >= 0) {
      for (int v : plan.reductions[plan.reduction_of[i]].inputs)
        if (v < static_cast<int>(nodes.size())) ++reader_count[v];  // not var's temporary mean
      continue;
    }
    for (const Arg& a : nodes[i].args) a.for_each_node([&](int v) { ++reader_count[v]; });
    for (const auto& kw : nodes[i].kwargs) kw.second.for_each_node([&](int v) { ++reader_count[v]; });
  }
  for (size_t gi = 0; gi < plan.groups.size(); ++gi) {
    FusionGroup& g = plan.groups[gi];
    if (g.outputs.size() != 1) continue;
    const TensorMeta& out = graph.node(g.outputs[0]).meta;
    for (int c : g.inputs) {
      const int gemm = plan.gemm_of[c];
      if (gemm < 0 || plan.gemm_epilogue[gemm] >= 0) continue;
      const TensorMeta& cm = graph.node(c).meta;
      if (cm.dtype != out.dtype || !same_shape(cm, out)) continue;
      // Nothing but this group's members may read C.
      int member_reads = 0;
      for (int m : g.nodes)
        for (const Arg& a : nodes[m].args) a.for_each_node([&](int v) { member_reads += v == c; });
      if (member_reads != reader_count[c]) continue;
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

// Note [Folded views]
// A view (transpose, slice, expand_dims, reshape, ...) whose every reader binds arrays by their
// layout (a kernel, a reduction, a GEMM, or another such view) never needs to exist as an object:
// the reader applies the view's index remap to its source's layout at run time. When a remap
// cannot be applied (an index out of range, a reshape NumPy would copy), the program makes the
// view the eager way instead, so errors and copies are NumPy's own.
void fold_views(const Graph& graph, FusionPlan& plan) {
  const auto& nodes = graph.nodes();
  const int n = static_cast<int>(nodes.size());
  plan.view_of.assign(n, -1);
  std::vector<std::vector<int>> readers(n);
  for (int i = 0; i < n; ++i) {
    for (const Arg& a : nodes[i].args) a.for_each_node([&](int v) { readers[v].push_back(i); });
    for (const auto& kw : nodes[i].kwargs) kw.second.for_each_node([&](int v) { readers[v].push_back(i); });
  }
  std::vector<std::optional<ViewOp>> folded(n);
  for (int v = n - 1; v >= 0; --v) {  // readers come later: their status is known
    if (nodes[v].kind != NodeKind::Call || plan.group_of[v] != FusionPlan::kNotFused || plan.reduction_of[v] >= 0 ||
        plan.gemm_of[v] >= 0 || readers[v].empty())
      continue;
    auto op = lower_view(graph, nodes[v]);
    if (!op) continue;
    bool all_bind_layouts = true;
    for (int r : readers[v]) {
      const bool binds = nodes[r].kind == NodeKind::Call &&
                         (plan.group_of[r] >= 0 || plan.group_of[r] == FusionPlan::kNotComputed ||
                          plan.reduction_of[r] >= 0 || plan.gemm_of[r] >= 0 || folded[r]);
      // A view's argument other than its source (a run-time size) is read as a value.
      const bool as_source = !folded[r] || folded[r]->source == v;
      all_bind_layouts = all_bind_layouts && binds && as_source;
    }
    if (all_bind_layouts) folded[v] = std::move(op);
  }
  for (int v = 0; v < n; ++v) {
    if (!folded[v]) continue;
    plan.view_of[v] = static_cast<int>(plan.views.size());
    plan.views.push_back(std::move(*folded[v]));
    --plan.extern_calls;
  }
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
        // Dtypes may differ: every expression of a kernel carries its own.
        if (is_open[g] && same_shape(first.meta, node.meta))
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
      r.operand = input;
      r.reduced = rn.reduced;
      r.keepdims = rn.keepdims;
      r.numpy_scalar = rn.numpy_scalar;
      std::vector<int> members;
      if (pg >= 0) members = producers_of(graph, input, groups[pg], tentative, pg);
      r.ir.prologue = build_ir(graph, members, {input}, pw, r.inputs, r.params);
      if (rn.value_dtype != rn.dtype) {
        // NumPy converts each element to the type it combines in (an int32 sum adds int64s, an
        // integer mean float64s): the prologue's last step.
        PointwiseKernelIR& p = r.ir.prologue;
        p.body.push_back({ScalarOp::Cast, rn.value_dtype, p.outputs[0], -1, -1, 0});
        p.outputs[0] = static_cast<int>(p.body.size()) - 1;
        p.output_dtypes[0] = rn.value_dtype;
      }
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
        const DType dt = rn.value_dtype;  // float64 for integers, as NumPy's var computes
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

  // Reductions that store their operand for the group instead of the group recomputing it (see
  // choose_stored_values): the value's node -> the reduction.
  std::vector<int> stored_by(n, -1);
  for (size_t gid = 0; gid < groups.size(); ++gid) {
    const std::vector<int>& members = groups[gid];
    choose_stored_values(graph, plan, members, tentative, static_cast<int>(gid), needed_outside, stored_by);
    FusionGroup g;
    std::vector<int> outs;
    for (int m : members)
      if (needed_outside[m] && stored_by[m] < 0) outs.push_back(m);
    // Members that feed no output (e.g. d * d of a variance whose reduction recomputes it) are
    // left out of the kernel, and so are stored values and what only they needed.
    std::vector<bool> live(n, false);
    for (int o : outs)
      for (int m : producers_of(graph, o, members, tentative, static_cast<int>(gid), &stored_by)) live[m] = true;
    std::vector<int> kept;
    for (int m : members)
      if (live[m]) kept.push_back(m);
    auto not_computed = [&] {
      for (int m : members) plan.group_of[m] = live[m] ? plan.group_of[m] : FusionPlan::kNotComputed;
    };
    if (outs.empty()) {
      // Nothing leaves the group (its values only feed fused reductions): no kernel at all.
      not_computed();
      continue;
    }
    g.ir = build_ir(graph, kept, outs, pw, g.inputs, g.params);
    g.nodes = kept;
    g.position = kept.back();
    g.outputs = outs;
    if (!accept(g.ir)) {
      // Not generated: the members run as calls, so any reduction fused on them must read them.
      for (int m : members) {
        plan.group_of[m] = -1;
        if (stored_by[m] >= 0) {
          plan.reductions[stored_by[m]].ir.store_value = false;
          plan.reductions[stored_by[m]].value_output = -1;
          stored_by[m] = -1;
        }
      }
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
  fuse_gemm_epilogues(graph, plan);
  fold_views(graph, plan);
  return plan;
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
