// pipeline.cpp — every step from a captured Graph to something runnable, in order, one line each.
#include "jit/pipeline.h"

#include "jit/passes/passes.h"
#include "runtime/log.h"

namespace framejit::jit {
namespace {

void log_graph(const char* step, const Graph& graph) {
  if (!rt::log_enabled(rt::LogTopic::Passes)) return;
  rt::log_write(rt::LogTopic::Passes, std::string("after ") + step + ":\n" + graph.to_string());
}

}  // namespace

Expected<PassReport> run_graph_passes(Graph& graph) {
  PassReport report;
  FJ_PROPAGATE(graph.verify());
  log_graph("capture", graph);

  // Folding first: it turns static sizes and constant scalar math into literal args, which makes
  // calls that differed only by how a constant was computed equal for CSE.
  report.folded = constant_fold(graph);
  log_graph("constant_fold", graph);

  // CSE before DCE: every merged call leaves its duplicate's inputs possibly unused.
  report.cse_merged = common_subexpression_elimination(graph);
  log_graph("cse", graph);

  report.dce_removed = dead_code_elimination(graph);
  log_graph("dce", graph);

  Status after = graph.verify();
  if (!after) return Status::internal("graph passes broke the graph: " + after.message());
  return report;
}

}  // namespace framejit::jit
