// pipeline.h — the one place that lists every step from a captured Graph to something runnable.
#pragma once

#include <vector>

#include "framejit/status.h"
#include "jit/ir/graph.h"
#include "jit/schedule/fusion.h"
#include "jit/x86/reduction_codegen.h"
#include "runtime/kernel_cache.h"

namespace framejit::jit {

/// Statistics of one run of the graph passes.
struct PassReport {
  int folded = 0;
  int cse_merged = 0;
  int dce_removed = 0;
};

/// Verifies the graph, then runs constant folding, CSE and DCE (in that order: folding exposes
/// equal expressions, merging exposes dead ones) and verifies again. Logs the graph after each
/// step under FRAMEJIT_LOGS=passes.
Expected<PassReport> run_graph_passes(Graph& graph);

/// The compiled form of a graph for the "jit" backend: fused kernels (kernels[i] computes
/// plan.groups[i]) and the calls left to run one by one.
struct CompiledGraph {
  FusionPlan plan;
  std::vector<rt::KernelPtr> kernels;            // kernels[i] computes plan.groups[i]
  std::vector<x86::ReductionKernels> reduction_kernels;  // reduction_kernels[i] computes plan.reductions[i]
  double codegen_ms = 0;
};

/// Lowers the graph's pointwise nodes, fuses them, and generates machine code for each fused
/// kernel for the host CPU (kernels come from the shared kernel cache when already built). Logs
/// each kernel's loop IR under FRAMEJIT_LOGS=kernels and its code under FRAMEJIT_LOGS=asm.
Expected<CompiledGraph> compile_graph(const Graph& graph);

}  // namespace framejit::jit
