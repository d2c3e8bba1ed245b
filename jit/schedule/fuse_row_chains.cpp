// fuse_row_chains.cpp — schedule step: a chain of kernels and last-axis reductions becomes one
// row-chain kernel where the backend makes one (device backends).
#include <algorithm>
#include <unordered_map>

#include "jit/schedule/program.h"
#include "runtime/log.h"

namespace framejit::jit {

// Note [Row chains on a device]
// A GPU cannot block rows of separate launches the way the x86 runtime does (rt::run_row_blocked):
// each launch of softmax's max, sum and division would read the whole array from memory. So a
// device backend compiles the chain step as one kernel (RowChainIR) in which a group of threads
// runs every part over its row before moving on: the row comes from memory once and from cache
// after that, and a reduction's result reaches the parts that read it in registers, as does a row
// constant computed from such results. Which inputs are such values is decided here by value id
// (an input that is an earlier reduction's or row constant's output); the launcher checks that they are broadcast along the row and otherwise the chain runs
// part by part, as it does when the backend declines it.
Status fuse_row_chains(rt::Program& program, const PlanKernels& compiled, Backend& backend) {
  if (!backend.fuses_row_chains()) return Status::ok();
  const bool log = rt::log_enabled(rt::LogTopic::Kernels);
  // Each compiled kernel's loop IR, by artifact (equal artifacts compute equal IR).
  std::unordered_map<const rt::Kernel*, const PointwiseKernelIR*> kernel_ir;
  std::unordered_map<const rt::Kernel*, const ReductionKernelIR*> reduction_ir;
  for (size_t i = 0; i < compiled.kernels.size(); ++i) kernel_ir[compiled.kernels[i].get()] = &compiled.plan.groups[i].ir;
  for (size_t i = 0; i < compiled.reductions.size(); ++i)
    reduction_ir[compiled.reductions[i].row.get()] = &compiled.plan.reductions[i].ir;

  for (rt::Step& s : program.steps) {
    if (s.kind != rt::Step::Kind::Chain) continue;
    rt::ChainStep& chain = s.chain();
    RowChainIR ir;
    bool fits = true;
    for (size_t j = 0; j < chain.parts.size() && fits; ++j) {
      const rt::ChainStep::Part& p = chain.parts[j];
      RowChainIR::Part part;
      part.reduction = p.reduction;
      const std::vector<int>& inputs = p.reduction ? p.red.inputs : p.kernel.inputs;
      if (p.reduction) {
        const rt::ReductionStep& r = p.red;
        const bool last_axis_only = !r.reduced.empty() && r.reduced.back() &&
                                    std::count(r.reduced.begin(), r.reduced.end(), true) == 1;
        auto found = reduction_ir.find(r.row.get());
        fits = last_axis_only && !r.arg() && !r.scalar_result && found != reduction_ir.end();
        if (fits) part.red = *found->second;
      } else {
        auto found = kernel_ir.find(p.kernel.kernel.get());
        fits = p.kernel.scalar_outputs.empty() && found != kernel_ir.end();
        if (fits) part.kernel = *found->second;
      }
      for (int v : inputs) {
        int from = -1;
        for (size_t k = 0; k < j; ++k) {
          const rt::ChainStep::Part& o = chain.parts[k];
          // A reduction's result, or a row constant: a kernel of one output over forwarded
          // values only (layer norm's 1 / sqrt(var + eps)), which the row-chain kernel also
          // keeps in registers.
          const bool row_constant = !o.reduction && o.kernel.outputs.size() == 1 && !o.kernel.inputs.empty() &&
                                    std::all_of(ir.parts[k].forwarded.begin(), ir.parts[k].forwarded.end(),
                                                [](int f) { return f >= 0; });
          if ((o.reduction && o.red.output == v) || (row_constant && o.kernel.outputs[0] == v)) from = static_cast<int>(k);
        }
        part.forwarded.push_back(from);
      }
      ir.parts.push_back(std::move(part));
    }
    // Arrays of 2, 4 or 8 bytes an element that several parts read from memory get a row cache —
    // not ones a part of the chain writes: caches are filled when a row starts.
    std::vector<int> cache_value;  // per cache: the value id
    std::vector<int> written;
    for (const rt::ChainStep::Part& p : chain.parts) {
      if (!p.reduction) written.insert(written.end(), p.kernel.outputs.begin(), p.kernel.outputs.end());
      else written.insert(written.end(), {p.red.output, p.red.value_output});
    }
    for (size_t j = 0; j < chain.parts.size() && fits; ++j) {
      const rt::ChainStep::Part& p = chain.parts[j];
      const std::vector<int>& inputs = p.reduction ? p.red.inputs : p.kernel.inputs;
      const PointwiseKernelIR& pir = p.reduction ? ir.parts[j].red.prologue : ir.parts[j].kernel;
      RowChainIR::Part& part = ir.parts[j];
      for (size_t k = 0; k < inputs.size(); ++k) {
        const int v = inputs[k];
        int q = -1;
        const int size = rt::dtype_itemsize(pir.input_dtypes[k]);
        // (A folded view's memory is its source's, which the chain may write.)
        const bool chain_writes = program.is_folded(v) || std::find(written.begin(), written.end(), v) != written.end();
        if (part.forwarded[k] < 0 && !chain_writes && (size == 2 || size == 4 || size == 8)) {
          for (size_t c = 0; c < cache_value.size(); ++c)
            if (cache_value[c] == v) q = static_cast<int>(c);
          int readers = 0;
          for (size_t i = 0; q < 0 && i < chain.parts.size(); ++i) {
            const rt::ChainStep::Part& o = chain.parts[i];
            const std::vector<int>& in = o.reduction ? o.red.inputs : o.kernel.inputs;
            readers += std::count(in.begin(), in.end(), v) > 0;
          }
          if (q < 0 && readers >= 2 && static_cast<int>(cache_value.size()) < RowChainIR::kMaxRowCaches) {
            q = static_cast<int>(cache_value.size());
            cache_value.push_back(v);
          }
        }
        part.cached.push_back(q);
      }
    }
    ir.caches = static_cast<int>(cache_value.size());
    const std::string what = "chain of " + std::to_string(chain.parts.size()) + " parts";
    if (!fits) {
      if (log) rt::log_write(rt::LogTopic::Kernels, what + ": runs part by part (a part is not row-wise)");
      continue;
    }
    auto fused = backend.compile(ir);
    if (!fused && fused.error().code() != StatusCode::Unsupported) return fused.error();
    if (log)
      rt::log_write(rt::LogTopic::Kernels,
                    what + (fused ? ": one row-chain kernel" : ": runs part by part (" + fused.error().message() + ")"));
    if (!fused) continue;
    chain.fused = *fused;
    for (const RowChainIR::Part& part : ir.parts) {
      chain.forwarded.push_back(part.forwarded);
      chain.cached.push_back(part.cached);
    }
  }
  return Status::ok();
}

}  // namespace framejit::jit
