// pipeline.h — the one place that lists every step from a captured Graph to something runnable.
#pragma once

#include <vector>

#include "framejit/status.h"
#include "jit/ir/graph.h"
#include "jit/schedule/fusion.h"
#include "jit/backend.h"
#include "jit/schedule/program.h"
#include "runtime/program.h"

namespace framejit::jit {

/// Statistics of one run of the graph passes.
struct PassReport {
  int sizes_rewritten = 0;
  int folded = 0;
  int cse_merged = 0;
  int dce_removed = 0;
};

/// Verifies the graph, then rewrites shapes with the sizes proved equal, runs constant folding, CSE
/// and DCE (in that order: folding exposes equal expressions, merging exposes dead ones) and
/// verifies again. Logs the graph after each step under FRAMEJIT_LOGS=passes.
Expected<PassReport> run_graph_passes(Graph& graph);

/// The compiled form of a graph: the fusion plan, the kernels the backend generated for it, and
/// the rt::Program that runs them (every other call an extern step).
struct CompiledGraph {
  FusionPlan plan;
  std::vector<KernelArtifact> kernels;            // kernels[i] computes plan.groups[i]
  std::vector<ReductionArtifact> reduction_kernels;  // reduction_kernels[i] computes plan.reductions[i]
  std::vector<KernelArtifact> store_kernels;      // store_kernels[i] computes plan.stores[i]
  std::vector<KernelArtifact> loop_kernels;       // per graph node: its compiled Loop, or null
  rt::Program program;
  double codegen_ms = 0;
};

/// Lowers and fuses the graph for `backend`, generates each kernel (from the shared kernel cache
/// when already built) and schedules the program. Logs the plan with each kernel's loop IR under
/// FRAMEJIT_LOGS=kernels and the code under FRAMEJIT_LOGS=asm.
Expected<CompiledGraph> compile_graph(const Graph& graph, Backend& backend);

/// The reference program: every call an extern step, run one by one (the eager backend).
Expected<rt::Program> interpret_graph(const Graph& graph);

}  // namespace framejit::jit
