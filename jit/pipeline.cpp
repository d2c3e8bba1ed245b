// pipeline.cpp — every step from a captured Graph to something runnable, in order, one line each.
#include "jit/pipeline.h"

#include <atomic>
#include <chrono>
#include <string>

#include "jit/passes/passes.h"
#include "jit/x86/isa.h"
#include "jit/x86/pointwise_codegen.h"
#include "jit/x86/reduction_codegen.h"
#include "runtime/faults.h"
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

Expected<CompiledGraph> compile_graph(const Graph& graph) {
  if (rt::fault_active(rt::Fault::Codegen))
    return Status::internal("code generation failed on purpose (FRAMEJIT_FAULTS=codegen)");
  auto t0 = std::chrono::steady_clock::now();
  CompiledGraph out;
  const x86::Isa isa = x86::host_isa();

  // Lowering + fusion: pointwise nodes become loop-IR kernels; the generator's own capability test
  // decides which groups become kernels (the rest run as calls).
  out.plan = plan_fusion(
      graph, [&](const PointwiseKernelIR& ir) { return x86::pointwise_supported(ir, isa); },
      [&](const ReductionKernelIR& ir) { return x86::reduction_supported(ir, isa); });
  if (rt::log_enabled(rt::LogTopic::Kernels) || !rt::dump_dir().empty()) {
    std::string text = std::string("plan (") + x86::isa_name(isa) + "):\n" + out.plan.to_string(graph);
    if (rt::log_enabled(rt::LogTopic::Kernels)) rt::log_write(rt::LogTopic::Kernels, text);
    // One file per compiled graph, numbered in compile order: the graph and how it runs.
    static std::atomic<int> graphs{0};
    rt::dump_write("graph-" + std::to_string(++graphs) + ".txt", graph.to_string() + "\n" + text);
  }

  // Code generation, one kernel per group, shared through the kernel cache.
  for (const FusionGroup& g : out.plan.groups) {
    auto k = x86::pointwise_kernel(g.ir);
    if (!k) return k.error();
    out.kernels.push_back(*k);
  }
  for (const ReductionGroup& r : out.plan.reductions) {
    auto k = x86::reduction_kernels(r.ir);
    if (!k) return k.error();
    out.reduction_kernels.push_back(*k);
  }
  out.codegen_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace framejit::jit
