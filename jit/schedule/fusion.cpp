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

// Builds the kernel IR of a group from its members' pointwise forms.
void build_ir(const Graph& graph, FusionGroup& g, const std::vector<std::optional<PointwiseNode>>& pw,
              const std::vector<bool>& needed_outside) {
  std::unordered_map<int, int> value_expr;  // node -> body index
  PointwiseKernelIR& ir = g.ir;
  auto load = [&](const PointwiseOperand& o, DType dtype) -> int {
    switch (o.kind) {
      case PointwiseOperand::Kind::Const:
        ir.body.push_back({ScalarOp::Const, dtype, -1, -1, -1, o.value});
        return static_cast<int>(ir.body.size()) - 1;
      case PointwiseOperand::Kind::Scalar: {
        auto it = value_expr.find(o.node);
        if (it != value_expr.end()) return it->second;
        int idx = static_cast<int>(std::find(g.params.begin(), g.params.end(), o.node) - g.params.begin());
        if (idx == static_cast<int>(g.params.size())) {
          g.params.push_back(o.node);
          ir.param_dtypes.push_back(graph.node(o.node).meta.dtype == DType::Float64 ? DType::Float64 : DType::Int64);
        }
        // A Python number meets the array in the array's type (NumPy casts it first).
        ir.body.push_back({ScalarOp::Param, dtype, -1, -1, idx, 0});
        return value_expr[o.node] = static_cast<int>(ir.body.size()) - 1;
      }
      case PointwiseOperand::Kind::Tensor: {
        auto it = value_expr.find(o.node);
        if (it != value_expr.end()) return it->second;
        int idx = static_cast<int>(g.inputs.size());
        g.inputs.push_back(o.node);
        ir.input_dtypes.push_back(graph.node(o.node).meta.dtype);
        ir.body.push_back({ScalarOp::Load, dtype, -1, -1, idx, 0});
        return value_expr[o.node] = static_cast<int>(ir.body.size()) - 1;
      }
    }
    return -1;
  };
  for (int n : g.nodes) {
    const PointwiseNode& p = *pw[n];
    int a = load(p.operands[0], p.dtype);
    int b = p.operands.size() > 1 ? load(p.operands[1], p.dtype) : -1;
    ir.body.push_back({p.op, p.dtype, a, b, -1, 0});
    value_expr[n] = static_cast<int>(ir.body.size()) - 1;
    if (needed_outside[n]) {
      g.outputs.push_back(n);
      ir.outputs.push_back(value_expr[n]);
      ir.output_dtypes.push_back(p.dtype);
    }
  }
}

}  // namespace

FusionPlan plan_fusion(const Graph& graph, const std::function<bool(const PointwiseKernelIR&)>& accept) {
  const auto& nodes = graph.nodes();
  const int n = static_cast<int>(nodes.size());
  FusionPlan plan;
  plan.group_of.assign(n, -1);
  std::vector<std::optional<PointwiseNode>> pw(n);
  for (int i = 0; i < n; ++i) pw[i] = lower_pointwise(graph, nodes[i]);

  // Tentative groups: member lists only.
  std::vector<std::vector<int>> groups;
  std::vector<int> tentative(n, -1);
  int open = -1;
  for (int i = 0; i < n; ++i) {
    const Node& node = nodes[i];
    if (node.kind != NodeKind::Call) continue;
    if (pw[i]) {
      bool joins = open >= 0;
      if (joins) {
        const Node& first = nodes[groups[open].front()];
        joins = first.meta.dtype == node.meta.dtype && same_shape(first.meta, node.meta);
      }
      if (!joins) {
        open = static_cast<int>(groups.size());
        groups.emplace_back();
      }
      groups[open].push_back(i);
      tentative[i] = open;
      continue;
    }
    bool reads_open = false;
    auto check = [&](int v) { reads_open |= open >= 0 && tentative[v] == open; };
    for (const Arg& a : node.args) a.for_each_node(check);
    for (const auto& kw : node.kwargs) kw.second.for_each_node(check);
    if (reads_open) open = -1;
  }

  // Values needed outside their group: read by a node outside it, or returned.
  std::vector<bool> needed_outside(n, false);
  for (int i = 0; i < n; ++i) {
    auto mark = [&](int v) {
      if (tentative[v] >= 0 && tentative[v] != tentative[i]) needed_outside[v] = true;
    };
    if (nodes[i].kind == NodeKind::Output) {
      for (const Arg& a : nodes[i].args) a.for_each_node([&](int v) { needed_outside[v] = true; });
      continue;
    }
    for (const Arg& a : nodes[i].args) a.for_each_node(mark);
    for (const auto& kw : nodes[i].kwargs) kw.second.for_each_node(mark);
  }

  for (auto& members : groups) {
    FusionGroup g;
    g.nodes = members;
    g.position = members.back();
    build_ir(graph, g, pw, needed_outside);
    if (g.outputs.empty() || !accept(g.ir)) continue;  // dead (DCE ran) or not supported: calls
    int id = static_cast<int>(plan.groups.size());
    for (int m : members) plan.group_of[m] = id;
    plan.groups.push_back(std::move(g));
  }
  for (int i = 0; i < n; ++i)
    if (nodes[i].kind == NodeKind::Call && plan.group_of[i] < 0) ++plan.extern_calls;
  return plan;
}

std::string FusionPlan::to_string(const Graph& graph) const {
  std::string s;
  for (size_t k = 0; k < groups.size(); ++k) {
    const FusionGroup& g = groups[k];
    s += "kernel " + std::to_string(k) + " computes";
    for (int m : g.nodes) s += " " + graph.node(m).name;
    s += "\n" + g.ir.to_string();
  }
  s += std::to_string(extern_calls) + " call(s) run one by one\n";
  return s;
}

}  // namespace framejit::jit
