// fusion_passes.h — the passes that turn a lowered graph into a FusionPlan, in the order
// plan_fusion runs them. Each lives in the file named after it and works on a FusionState.
#pragma once

#include <functional>

#include "jit/schedule/fusion_state.h"

namespace framejit::jit {

using AcceptPointwise = std::function<bool(const PointwiseKernelIR&)>;
using AcceptReduction = std::function<bool(const ReductionKernelIR&)>;

/// Classifies every call node once, through jit/lower's public entry points: pointwise, reduction
/// (only when `reductions`: the backend generates reduction kernels), matmul or view (fills
/// NodeRecord::pointwise / reduction / matmul / view); products of half types only with
/// `half_products`, of a matrix and a vector only with `vector_products` (lower_matmul).
void lower_nodes(FusionState& state, bool reductions, bool half_products = false, bool vector_products = false);

/// Turns each reduction into the kernels that compute it (NodeRecord::steps): one for sum, max,
/// mean..., two for var and std (the mean into a plan temporary, then the mean of the squared
/// deviations from it: NumPy's own two-pass algorithm).
void decompose_reductions(FusionState& state);

/// Greedy fusion in graph order: groups pointwise nodes into tentative groups by iteration shape,
/// gives each reduction the computation of its operand from an open group as its prologue
/// (adding it to plan.reductions when `accept` takes every one of its kernels), and marks the
/// members needed outside their group. Lowered writes become store kernels (plan.stores, when
/// `accept_pointwise` takes them), recomputing a value read only by the write from its group.
void fuse_pointwise(FusionState& state, const AcceptReduction& accept,
                    const AcceptPointwise& accept_pointwise = nullptr);

/// Lets a reduction store an expensive operand for its group to read back instead of recomputing
/// it (Note [Stored reduction operands]).
void store_reduction_operands(FusionState& state);

/// One pointwise kernel per tentative group with values that leave it, computing only what those
/// values need (plan.groups, plan.group_of). A group `accept` rejects runs as calls.
void build_pointwise_kernels(FusionState& state, const AcceptPointwise& accept);

/// Every call left outside kernels that framejit's GEMM runs becomes a plan.gemms entry; the rest
/// are counted in plan.extern_calls.
void select_gemms(FusionState& state);

/// Runs a pointwise kernel reading a GEMM's product inside the GEMM (Note [GEMM epilogues]).
void fuse_gemm_epilogues(FusionState& state);

/// Folds views that only layout-binding readers read into those readers (Note [Folded views]).
void fold_views(FusionState& state);

}  // namespace framejit::jit
