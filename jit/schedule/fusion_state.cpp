// fusion_state.cpp — the helpers the fusion passes share: a group's producers of a value, and the
// loop IR of a set of pointwise members.
#include "jit/schedule/fusion_state.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <utility>

#include "runtime/log.h"

namespace framejit::jit {

bool same_shape(const TensorMeta& a, const TensorMeta& b) {
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i)
    if (!a.shape[i].same_as(b.shape[i])) return false;
  return true;
}

FusionState::FusionState(const Graph& g) : graph(g), users(g), nodes(g.nodes().size()) {
  const int n = size();
  plan.group_of.assign(n, FusionPlan::kNotFused);
  plan.reduction_of.assign(n, -1);
  plan.gemm_of.assign(n, -1);
  plan.store_of.assign(n, -1);
}

std::vector<int> FusionState::producers(int value, int group, bool skip_stored) const {
  std::vector<bool> need(nodes.size(), false);
  std::vector<int> stack{value};
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (v < 0 || nodes[v].tentative != group || need[v] || (skip_stored && nodes[v].stored_by >= 0)) continue;
    need[v] = true;
    for (const Arg& a : graph.node(v).args) a.for_each_node([&](int u) { stack.push_back(u); });
  }
  std::vector<int> out;
  for (int m : groups[group])
    if (need[m]) out.push_back(m);
  return out;
}

PointwiseKernelIR FusionState::pointwise_ir(const std::vector<int>& members, const std::vector<int>& outputs,
                                            std::vector<int>& inputs, std::vector<int>& params) const {
  std::unordered_map<int, int> value_expr;         // node -> body index of its value, in its own dtype
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
    const PointwiseNode& p = *nodes[n].pointwise;
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
    // Note [Half types]: an operation of a half type computed in float32; its value is rounded.
    const DType stored = graph.node(n).meta.dtype;
    if (ir.body[value_expr[n]].dtype != stored && rt::dtype_is_half(stored))
      value_expr[n] = push({ScalarOp::Cast, stored, value_expr[n], -1, -1, 0});
  }
  for (int n : outputs) {
    auto it = value_expr.find(n);
    // An output that is an input itself: a reduction of a plain array.
    int v = it != value_expr.end() ? it->second : node_value(n);
    ir.outputs.push_back(v);
    ir.output_dtypes.push_back(graph.node(n).meta.dtype);
  }
  fuse_sigmoid(ir);
  return ir;
}

std::string FusionState::summary() const {
  int pointwise = 0, reductions = 0, matmuls = 0, views = 0, stored = 0;
  for (const NodeRecord& r : nodes) {
    pointwise += r.pointwise.has_value();
    reductions += r.reduction.has_value();
    matmuls += r.matmul.has_value();
    views += r.view.has_value();
    stored += r.stored_by >= 0;
  }
  return "nodes " + std::to_string(size()) + " (pointwise " + std::to_string(pointwise) + ", reduction " +
         std::to_string(reductions) + ", matmul " + std::to_string(matmuls) + ", view " + std::to_string(views) +
         "); tentative groups " + std::to_string(groups.size()) + "; stored operands " + std::to_string(stored) +
         "; plan: " + std::to_string(plan.groups.size()) + " kernel(s), " + std::to_string(plan.reductions.size()) +
         " reduction(s), " + std::to_string(plan.gemms.size()) + " gemm(s), " + std::to_string(plan.views.size()) +
         " folded view(s), " + std::to_string(plan.extern_calls) + " extern call(s)";
}

void log_fusion_pass(const char* pass, const FusionState& state) {
  if (!rt::log_enabled(rt::LogTopic::Passes)) return;
  rt::log_write(rt::LogTopic::Passes, std::string("after ") + pass + ": " + state.summary());
}

}  // namespace framejit::jit
