// pipeline.h — the one place that lists every step from a captured Graph to something runnable.
#pragma once

#include "framejit/status.h"
#include "jit/ir/graph.h"

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

}  // namespace framejit::jit
