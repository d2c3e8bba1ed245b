// store_reduction_operands.cpp — pass: a reduction stores an expensive operand for its group
// instead of the group recomputing it.
#include <algorithm>

#include "jit/schedule/fusion_passes.h"

namespace framejit::jit {
namespace {

// Whether computing the kernel's values costs more than reading them back from memory: any
// transcendental function does.
bool expensive(const PointwiseKernelIR& ir) {
  for (const ScalarExpr& e : ir.body)
    if (scalar_op_is_math(e.op)) return true;
  return false;
}

}  // namespace

// Note [Stored reduction operands]
// A reduction whose operand comes from an open group recomputes the operand in its prologue, and
// the group computes it again for its other readers: softmax's exp(x - max) is evaluated once for
// the sum and once for the division. When that operand is expensive, the reduction stores it as
// it goes (store_value) and the group reads the stored array instead. This is only possible when
// every group member that reads the operand comes after the reduction in graph order (the group's
// kernel runs at its last member, so then after the reduction). Readers outside the group read
// the stored array as the value itself.
void store_reduction_operands(FusionState& state) {
  FusionPlan& plan = state.plan;
  for (size_t ri = 0; ri < plan.reductions.size(); ++ri) {
    ReductionGroup& r = plan.reductions[ri];
    const int v = r.operand;
    NodeRecord& operand = state.nodes[v];
    const int group = operand.tentative;
    if (group < 0 || operand.stored_by >= 0 || r.ir.prologue.body.size() <= 1 || !expensive(r.ir.prologue))
      continue;
    // The stored array is the operand itself: only when the reduction combines the operand's own
    // values (no conversion to an accumulation type, Note [Integer reductions]).
    if (r.ir.dtype() != state.graph.node(v).meta.dtype) continue;
    // Only a reduction of the last axis into an array stores its values: its kernel then runs row
    // by row (rt::run_row_blocked), the form that writes them.
    const bool last_axis_only =
        r.reduced.size() >= 2 && r.reduced.back() && std::count(r.reduced.begin(), r.reduced.end(), true) == 1;
    if (r.node < 0 || r.temp_producer >= 0 || r.scalar_object || !last_axis_only || is_arg_reduce(r.ir.op)) continue;
    // NB: members read their operands through args only (lower_pointwise takes no node in a
    // keyword), so the users of v in its group are exactly the members reading it.
    bool read_in_group = false, readers_after = true;
    for (int u : state.users.of(v)) {
      if (state.nodes[u].tentative != group) continue;
      read_in_group = true;
      readers_after = readers_after && u > r.node;
    }
    if (!readers_after || !(read_in_group || operand.needed_outside)) continue;
    r.ir.store_value = true;
    r.value_output = v;
    operand.stored_by = static_cast<int>(ri);
  }
}

}  // namespace framejit::jit
