// program.h — the last schedule step: a graph plus its fusion plan and compiled kernels become an
// rt::Program (steps over value ids, when each value dies, which outputs may reuse which inputs).
#pragma once

#include <vector>

#include "framejit/status.h"
#include "jit/backend.h"
#include "jit/ir/graph.h"
#include "jit/schedule/fusion.h"
#include "runtime/program.h"

namespace framejit::jit {

/// What code generation produced for a plan.
struct PlanKernels {
  const FusionPlan& plan;
  const std::vector<KernelArtifact>& kernels;        // kernels[i] computes plan.groups[i]
  const std::vector<ReductionArtifact>& reductions;  // reductions[i] computes plan.reductions[i]
  const std::vector<KernelArtifact>& stores;         // stores[i] computes plan.stores[i]
  // GEMM entry points, and a device's pack kernels (made while the program runs: backends live as
  // long as the process).
  Backend& backend;
  const std::vector<KernelArtifact>* loops = nullptr;  // per graph node: its compiled Loop, or null
};

/// The program for `graph`: with `compiled`, fused groups, reductions, GEMMs and folded views as
/// planned and every other call an extern step; without it, every call an extern step (the
/// eager backend, the reference interpreter). Values die after their last use, as they would in
/// eager Python (outputs are kept); consecutive kernels and reductions form chains. Each lowered
/// write is told whose memory it may write (Note [Lowered writes]).
Expected<rt::Program> schedule_program(const Graph& graph, const PlanKernels* compiled);

/// Gives each chain step one kernel for the whole chain where `backend` makes one (Note [Row
/// chains on a device] in fuse_row_chains.cpp); the others run as they are.
Status fuse_row_chains(rt::Program& program, const PlanKernels& compiled, Backend& backend);

}  // namespace framejit::jit
