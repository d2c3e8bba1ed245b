// pipeline.cpp — every step from a captured Graph to something runnable, in order, one line each.
#include "jit/pipeline.h"

#include <atomic>
#include <chrono>
#include <string>

#include "jit/passes/passes.h"
#include "jit/schedule/fusion_passes.h"
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

  // Sizes proved equal spelled one way first: folding then sees the static ones.
  report.sizes_rewritten = equal_sizes(graph);
  log_graph("equal_sizes", graph);

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

// The schedule passes, in order (each in jit/schedule/<name>.cpp).
FusionPlan plan_fusion(const Graph& graph, const std::function<bool(const PointwiseKernelIR&)>& accept,
                       const std::function<bool(const ReductionKernelIR&)>& accept_reduction, bool store_operands,
                       bool half_products, bool vector_products) {
  FusionState state(graph);
  // Which nodes are what, once. Reductions only when the backend generates reduction kernels:
  // without one they run as calls.
  lower_nodes(state, accept_reduction != nullptr, half_products, vector_products);
  log_fusion_pass("lower_nodes", state);
  decompose_reductions(state);
  log_fusion_pass("decompose_reductions", state);
  fuse_pointwise(state, accept_reduction, accept);
  log_fusion_pass("fuse_pointwise", state);
  // Before the kernels are built: a stored operand is an input of its group's kernel, not a member.
  if (store_operands) store_reduction_operands(state);
  log_fusion_pass("store_reduction_operands", state);
  build_pointwise_kernels(state, accept);
  log_fusion_pass("build_pointwise_kernels", state);
  // After the kernels: what no kernel computes (a rejected group's members among it) runs as a
  // GEMM or as a call.
  select_gemms(state);
  log_fusion_pass("select_gemms", state);
  fuse_gemm_epilogues(state);
  log_fusion_pass("fuse_gemm_epilogues", state);
  // Last: whether a view folds depends on how every one of its readers runs.
  fold_views(state);
  log_fusion_pass("fold_views", state);
  return std::move(state.plan);
}

namespace {

// The kernels `program` launches whatever its inputs' sizes and layouts: a fused chain's parts run
// only when a layout does not fit the chain's kernel, and which of a device product's kernels runs
// depends on its rows (each is made and loaded when first needed).
std::vector<rt::KernelPtr> launched_kernels(const rt::Program& program) {
  std::vector<rt::KernelPtr> out;
  for (const rt::Step& s : program.steps) {
    switch (s.kind) {
      case rt::Step::Kind::Kernel: out.push_back(s.kernel().kernel); break;
      case rt::Step::Kind::Reduction:
        out.push_back(s.reduction().row);
        out.push_back(s.reduction().column);
        break;
      case rt::Step::Kind::Gemm:
        // On a device the epilogue kernel runs only after cuBLAS's products (more than 32 rows).
        if (s.gemm().device.type == rt::DeviceType::CPU) out.push_back(s.gemm().epilogue.kernel);
        break;
      case rt::Step::Kind::Store: out.push_back(s.store().kernel.kernel); break;
      case rt::Step::Kind::Loop: out.push_back(s.loop().kernel); break;
      case rt::Step::Kind::Chain:
        if (s.chain().fused) {
          out.push_back(s.chain().fused);
          break;
        }
        for (const rt::ChainStep::Part& p : s.chain().parts) {
          out.push_back(p.reduction ? p.red.row : p.kernel.kernel);
          if (p.reduction) out.push_back(p.red.column);
        }
        break;
      case rt::Step::Kind::Extern:
      case rt::Step::Kind::Size: break;
    }
  }
  return out;
}

}  // namespace

Expected<CompiledGraph> compile_graph(const Graph& graph, Backend& backend) {
  if (rt::fault_active(rt::Fault::Codegen))
    return Status::internal("code generation failed on purpose (FRAMEJIT_FAULTS=codegen)");
  auto t0 = std::chrono::steady_clock::now();
  CompiledGraph out;

  // Lowering + fusion: the backend's own capability test decides which groups become kernels
  // (the rest run as extern steps).
  out.plan = plan_fusion(
      graph, [&](const PointwiseKernelIR& ir) { return backend.supports(ir); },
      [&](const ReductionKernelIR& ir) { return backend.supports(ir); }, backend.stores_reduction_operands(),
      static_cast<bool>(backend.device_gemm(DType::BFloat16)), backend.device().type == rt::DeviceType::CPU);
  if (rt::log_enabled(rt::LogTopic::Kernels) || !rt::dump_dir().empty()) {
    std::string text = "plan (" + std::string(backend.name()) + "):\n" + out.plan.to_string(graph);
    if (rt::log_enabled(rt::LogTopic::Kernels)) rt::log_write(rt::LogTopic::Kernels, text);
    // One file per compiled graph, numbered in compile order: the graph and how it runs.
    static std::atomic<int> graphs{0};
    rt::dump_write("graph-" + std::to_string(++graphs) + ".txt", graph.to_string() + "\n" + text);
  }

  // Code generation, one artifact per group and reduction, shared through the kernel cache.
  for (const FusionGroup& g : out.plan.groups) {
    auto k = backend.compile(g.ir);
    if (!k) return k.error();
    out.kernels.push_back(*k);
  }
  for (const ReductionGroup& r : out.plan.reductions) {
    auto k = backend.compile(r.ir);
    if (!k) return k.error();
    out.reduction_kernels.push_back(*k);
  }

  for (const StoreGroup& st : out.plan.stores) {
    auto k = backend.compile(st.kernel.ir);
    if (!k) return k.error();
    out.store_kernels.push_back(*k);
  }

  // Python loops over array elements, each one function (Note [Element loops]).
  out.loop_kernels.resize(graph.nodes().size());
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& n = graph.node(static_cast<int>(i));
    if (n.op != OpKind::Loop || !n.attrs.element_loop) continue;
    auto k = backend.compile(*n.attrs.element_loop);
    if (k) out.loop_kernels[i] = *k;
    else if (k.error().code() != StatusCode::Unsupported) return k.error();  // else interpreted
  }
  // Buffer plan and steps: when each value dies, which outputs may reuse which inputs, chains.
  PlanKernels compiled{out.plan, out.kernels, out.reduction_kernels, out.store_kernels, backend, &out.loop_kernels};
  auto program = schedule_program(graph, &compiled);
  if (!program) return program.error();
  out.program = std::move(*program);
  // A device runs a chain of row-wise steps as one kernel (softmax, layer norm).
  FJ_PROPAGATE(fuse_row_chains(out.program, compiled, backend));
  // What the program surely launches is made ready now (Note [Device modules load when needed]).
  FJ_PROPAGATE(backend.prepare(launched_kernels(out.program)));
  out.codegen_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

Expected<rt::Program> interpret_graph(const Graph& graph) { return schedule_program(graph, nullptr); }

}  // namespace framejit::jit
