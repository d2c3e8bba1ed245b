// fusion.h — FusionPlan, how a graph runs: fused kernels, reductions, GEMMs, folded views and calls.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "jit/ir/graph.h"
#include "jit/lower/loop_ir.h"
#include "jit/lower/lowering.h"
#include "jit/lower/views.h"

namespace framejit::jit {

/// Pointwise nodes computed by one kernel in one pass over memory.
struct FusionGroup {
  std::vector<int> nodes;    // members, in graph order
  std::vector<int> inputs;   // tensor values read (kernel input i is inputs[i])
  std::vector<int> params;   // scalar values read (kernel parameter i)
  std::vector<int> outputs;  // members whose values are needed after the kernel (kernel output j)
  int position = -1;         // the kernel runs when the graph reaches this node (its last member)
  /// When >= 0, the kernel is the epilogue of that GEMM (FusionPlan::gemms): it runs on each
  /// finished block of the product, in place, and its single output is the product's array
  /// (Note [GEMM epilogues] in fuse_gemm_epilogues.cpp).
  int gemm = -1;
  PointwiseKernelIR ir;
};

/// A reduction, with the pointwise nodes that produce its operand folded in as a prologue
/// (recomputed from their inputs, so the reduced array is never materialized).
///
/// numpy.var/std become two of them: the mean (keepdims, into a plan temporary), then the mean of
/// (x - mean)^2, whose prologue is x's prologue plus the deviation reading the temporary
/// broadcast, with var's ddof and std's sqrt. This is NumPy's own two-pass algorithm.
struct ReductionGroup {
  int node = -1;             // the graph node computed; -1 for a temporary
  int output = -1;           // the value written: `node`, or a temporary's value index
  int temp_producer = -1;    // the reduction computing the temporary this one reads, or -1
  int operand = -1;          // the graph value reduced (computed by the prologue)
  int value_output = -1;     // `operand` when the kernel also stores it (ir.store_value), else -1
  std::vector<int> inputs;   // values the prologue reads (graph values or temporaries)
  std::vector<int> params;   // scalar values the prologue reads
  std::vector<bool> reduced;  // per dim of the iteration space (the operand's shape)
  bool keepdims = false;
  bool scalar_object = false;  // hand back a NumPy scalar, not a 0-d array
  ReductionKernelIR ir;
};

/// A lowered write (index_put, copy_into): a pointwise kernel whose one output is stored through
/// the region's strided view of the base's memory, or of a copy of it (Note [Lowered writes] in
/// program.cpp). The kernel computes the value, converted to the base's dtype: a load of it, or
/// its pointwise producers recomputed from their inputs (`kernel.nodes`), as a reduction's
/// prologue is.
struct StoreGroup {
  int node = -1;  // the index_put / copy_into node; its value is the written array
  IndexPutNode write;
  FusionGroup kernel;  // inputs, params and ir; outputs is {node}
};

/// How a graph executes: fused kernels, and every other call node as itself ("extern").
struct FusionPlan {
  std::vector<FusionGroup> groups;
  std::vector<ReductionGroup> reductions;
  /// Per node: the pointwise group computing it, kNotFused (-1: it runs as a call, or is a
  /// reduction kernel) or kNotComputed (only fused reductions use it; they recompute it).
  std::vector<int> group_of;
  static constexpr int kNotFused = -1;
  static constexpr int kNotComputed = -2;
  std::vector<int> reduction_of;  // per node: the reduction computing it, or -1
  /// Values the plan adds past the graph's nodes (var's mean): value index nodes().size() + t.
  int num_temps = 0;
  std::vector<StoreGroup> stores;
  std::vector<int> store_of;      // per node: its entry in stores (a lowered write), or -1
  std::vector<int> gemm_of;       // per node: its entry in gemms (a GEMM call), or -1
  std::vector<MatmulNode> gemms;
  std::vector<int> gemm_epilogue;  // per gemm: the group fused as its epilogue, or -1
  /// Views read only by kernels, reductions, GEMMs and other such views: their consumers read the
  /// source through the remap and the view is never made (Note [Folded views]).
  std::vector<ViewOp> views;
  std::vector<int> view_of;  // per node: its entry in views, or -1
  int extern_calls = 0;       // call nodes left to run one by one (the counted last resort)
  std::string to_string(const Graph& graph) const;
};

/// Builds the plan by running the passes of fusion_passes.h in order (the list is in
/// jit/pipeline.cpp, beside the other steps), each logged under
/// FRAMEJIT_LOGS=passes. Fusion is greedy, in graph order: a pointwise node joins an open group of
/// its iteration shape (dtypes may differ); a node that is not pointwise closes a group only if it
/// reads one of its members. Intermediates read only inside a group are never materialized.
/// `accept` decides whether code generation supports a candidate kernel (so a group the backend
/// cannot compile runs as calls instead).
/// `accept_reduction` does the same for reduction kernels. A reduction whose operand comes from
/// the open pointwise group takes the operand's computation as its prologue. `store_operands`:
/// whether reductions store expensive operands for their groups (Backend::stores_reduction_operands).
/// `half_products`: products of float16/bfloat16 run as GEMM steps (a device's; Note [Half types]).
/// `vector_products`: so do products of a matrix and a vector (the host's; lower_matmul).
FusionPlan plan_fusion(const Graph& graph, const std::function<bool(const PointwiseKernelIR&)>& accept,
                       const std::function<bool(const ReductionKernelIR&)>& accept_reduction = nullptr,
                       bool store_operands = true, bool half_products = false, bool vector_products = false);

}  // namespace framejit::jit
