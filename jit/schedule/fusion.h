// fusion.h — groups pointwise nodes into fused kernels and plans what runs as a plain call.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "jit/ir/graph.h"
#include "jit/lower/loop_ir.h"

namespace framejit::jit {

/// Pointwise nodes computed by one kernel in one pass over memory.
struct FusionGroup {
  std::vector<int> nodes;    // members, in graph order
  std::vector<int> inputs;   // tensor values read (kernel input i is inputs[i])
  std::vector<int> params;   // scalar values read (kernel parameter i)
  std::vector<int> outputs;  // members whose values are needed after the kernel (kernel output j)
  int position = -1;         // the kernel runs when the graph reaches this node (its last member)
  PointwiseKernelIR ir;
};

/// How a graph executes: fused kernels, and every other call node as itself ("extern").
struct FusionPlan {
  std::vector<FusionGroup> groups;
  std::vector<int> group_of;  // per node: the group computing it, or -1
  int extern_calls = 0;       // call nodes left to run one by one (the counted last resort)
  std::string to_string(const Graph& graph) const;
};

/// Greedy fusion in graph order: a pointwise node joins the open group when it has the same
/// iteration shape and dtype; a node that is not pointwise closes the open group only if it reads
/// one of its members. Intermediates read only inside a group are never materialized.
/// `accept` decides whether code generation supports a candidate kernel (so a group the backend
/// cannot compile runs as calls instead).
FusionPlan plan_fusion(const Graph& graph, const std::function<bool(const PointwiseKernelIR&)>& accept);

}  // namespace framejit::jit
