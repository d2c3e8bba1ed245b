// fusion_state.h — what the passes that build a FusionPlan share: one record per graph node, the
// graph's Users, and the plan being filled in.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "jit/ir/graph.h"
#include "jit/lower/loop_ir.h"
#include "jit/lower/lowering.h"
#include "jit/lower/views.h"
#include "jit/schedule/fusion.h"

namespace framejit::jit {

/// One reduction kernel that a reduction node becomes (decompose_reductions). Fusion gives it
/// its prologue: the operand's computation, then `centered`'s deviation if set.
struct ReductionStep {
  /// Everything but the prologue and what it reads: node/output (-1 and -1 for a temporary,
  /// whose value index fuse_pointwise assigns when the kernel is accepted), reduced, keepdims,
  /// scalar_object, and ir's op, mean, ddof and sqrt.
  ReductionGroup kernel;
  /// Reduce (operand - the previous step's result)^2 instead of the operand: var and std.
  bool centered = false;
};

/// Appends the deviation from a mean to a centered step's prologue: it reads `mean_value` (the
/// previous step's keepdims result, broadcast) as one more input and reduces (x - mean)^2 in
/// `dtype` (float64 for integers, as NumPy's var computes). Defined in decompose_reductions.cpp;
/// fuse_pointwise applies it once the prologue computing x is known.
void center_prologue(ReductionGroup& r, int mean_value, DType dtype);

/// What the fusion passes know about one graph node. Each field says which pass fills it; a pass
/// only reads fields filled by passes before it.
struct NodeRecord {
  // lower_nodes: what the node is, at most one of the five (a call node that is none of them
  // runs as itself, an "extern" call).
  std::optional<PointwiseNode> pointwise;
  std::optional<ReductionNode> reduction;
  std::optional<MatmulNode> matmul;
  std::optional<ViewOp> view;
  std::optional<IndexPutNode> index_put;  // index_put and copy_into
  // decompose_reductions: the kernels a reduction becomes, in the order they run.
  std::vector<ReductionStep> steps;
  // fuse_pointwise: the tentative group of a pointwise node, or -1.
  int tentative = -1;
  // fuse_pointwise: a tentative member whose value is read outside its group (by a node of
  // another group, a call, a fused reduction's prologue) or returned.
  bool needed_outside = false;
  // store_reduction_operands: the reduction (index in plan.reductions) that stores this value
  // as it reduces it, so its group reads it instead of recomputing it; or -1.
  int stored_by = -1;
};

/// The state threaded through the passes of plan_fusion, in the order it lists them.
struct FusionState {
  explicit FusionState(const Graph& graph);

  const Graph& graph;
  const Users users;              // built once: every pass asks it who reads a value
  std::vector<NodeRecord> nodes;  // nodes[i] describes graph.node(i)
  /// fuse_pointwise: members of each tentative group, in graph order. A group becomes a
  /// FusionGroup of plan.groups (build_pointwise_kernels) or disappears (nothing leaves it, or
  /// the backend rejects it).
  std::vector<std::vector<int>> groups;
  FusionPlan plan;  // the result: each pass fills its part

  int size() const { return static_cast<int>(nodes.size()); }

  /// The members of tentative group `group` that `value` depends on, in graph order: what a
  /// kernel computing `value` from the group's inputs must evaluate. With `skip_stored`, values
  /// a reduction stores (stored_by >= 0) count as inputs, not as members to recompute.
  std::vector<int> producers(int value, int group, bool skip_stored = false) const;

  /// A pointwise kernel evaluating `members` (graph order) whose values in `outputs` leave it.
  /// Appends the tensor values it loads to `inputs` and the scalars it reads to `params`.
  PointwiseKernelIR pointwise_ir(const std::vector<int>& members, const std::vector<int>& outputs,
                                 std::vector<int>& inputs, std::vector<int>& params) const;

  /// One line for FRAMEJIT_LOGS=passes: what the passes so far decided.
  std::string summary() const;
};

/// Whether two values have the same shape (equal sizes or the same symbols).
bool same_shape(const TensorMeta& a, const TensorMeta& b);

/// Under FRAMEJIT_LOGS=passes, one line saying what the passes up to `pass` decided.
void log_fusion_pass(const char* pass, const FusionState& state);

}  // namespace framejit::jit
