// program.cpp — schedule_program: graph + plan + kernels → rt::Program (see program.h).
#include "jit/schedule/program.h"

#include <algorithm>
#include <limits>

namespace framejit::jit {

namespace {

// Note [Scalar steps]
// NumPy hands back its own scalars (numpy.float64...), not 0-d arrays, from integer indexing
// (x[i, j]), full reductions and 1-d dot products (x.sum(), a @ b) and arithmetic on such scalars.
// Python loops over array elements, unrolled, are made of these: NPBench's lu is thousands of
// `A[i, j] -= A[i, :j] @ A[:j, j]`. They run as kernel steps like any other value:
//   - an element read is a folded view (its readers read the element where it lies). NumPy's is a
//     copy, a view is not: it stays right because writes are functional in the graph, and the
//     buffer plan writes no memory in place while a later step still reads it through a view
//     (Note [Lowered writes]);
//   - arithmetic on scalars is a 0-d kernel, fused with the other 0-d work of its group and into
//     the store that writes the result (A[i, j] = A[i, j] - dot as one store kernel);
//   - a 1-d dot is a reduction (Note [Vector products] in frontend/ops/numpy/vector_products.cpp).
// Inside the program these values are 0-d arrays. Only one that leaves the program's own steps
// (a graph output, or an argument of a library call) becomes the library's scalar, when it is
// made (RunHost::to_scalar): making a Python object per scalar step would cost more than the step.

// Values some reader needs as the library's own object: the graph's outputs and the arguments of
// the calls the program makes (a library call, a SymSize step reads only an array's size).
std::vector<bool> escaping_values(const Graph& graph, const FusionPlan* plan) {
  const int n = static_cast<int>(graph.nodes().size());
  std::vector<bool> out(n, plan == nullptr);
  if (!plan) return out;
  for (int i = 0; i < n; ++i) {
    const Node& node = graph.node(i);
    const bool call = node.kind == NodeKind::Call && node.op != OpKind::SymSize && node.op != OpKind::Loop &&
                      plan->group_of[i] == FusionPlan::kNotFused && plan->reduction_of[i] < 0 &&
                      plan->gemm_of[i] < 0 && plan->store_of[i] < 0 && plan->view_of[i] < 0;
    if (!call && node.kind != NodeKind::Output) continue;
    auto mark = [&](int v) { out[v] = true; };
    for (const Arg& a : node.args) a.for_each_node(mark);
    for (const auto& kw : node.kwargs) kw.second.for_each_node(mark);
  }
  return out;
}

rt::KernelStep kernel_step_of(const Graph& graph, const FusionGroup& g, const KernelArtifact& kernel,
                              const std::vector<bool>& escaping) {
  rt::KernelStep k;
  for (int v : g.outputs)
    if (graph.node(v).meta.scalar_object && escaping[v]) k.scalar_outputs.push_back(v);
  k.kernel = kernel;
  k.inputs = g.inputs;
  k.params = g.params;
  k.param_dtypes = g.ir.param_dtypes;
  k.outputs = g.outputs;
  k.output_dtypes = g.ir.output_dtypes;
  return k;
}

rt::ReduceKind reduce_kind(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return rt::ReduceKind::Sum;
    case ReduceOp::Prod: return rt::ReduceKind::Prod;
    case ReduceOp::Max: return rt::ReduceKind::Max;
    case ReduceOp::Min: return rt::ReduceKind::Min;
    case ReduceOp::ArgMax: return rt::ReduceKind::ArgMax;
    case ReduceOp::ArgMin: return rt::ReduceKind::ArgMin;
  }
  return rt::ReduceKind::Sum;
}

rt::ReductionStep reduction_step_of(const ReductionGroup& r, const ReductionArtifact& kernels,
                                   const std::vector<bool>& escaping) {
  rt::ReductionStep s;
  s.row = kernels.row;
  s.column = kernels.column;
  s.inputs = r.inputs;
  s.params = r.params;
  s.param_dtypes = r.ir.prologue.param_dtypes;
  s.output = r.output;
  s.value_dtype = r.ir.dtype();
  s.output_dtype = r.ir.result_dtype();
  s.reduced = r.reduced;
  s.keepdims = r.keepdims;
  s.scalar_result = r.scalar_object && r.node >= 0 && escaping[r.node];
  s.empty_is_identity = (r.ir.op == ReduceOp::Sum || r.ir.op == ReduceOp::Prod) && !r.ir.mean;
  s.kind = reduce_kind(r.ir.op);
  s.ddof = r.ir.ddof;
  s.value_output = r.value_output;
  return s;
}

// Merges each run of consecutive kernel and reduction steps into chain steps of at most
// kMaxChainParts parts, so that they can run block by block over rows (rt::ChainStep). Values
// released inside a chain are released after the whole chain.
void chain_consecutive_kernels(std::vector<rt::Step>& steps) {
  using K = rt::Step::Kind;
  auto chainable = [](const rt::Step& s) { return s.kind == K::Kernel || s.kind == K::Reduction; };
  std::vector<rt::Step> out;
  for (size_t i = 0; i < steps.size();) {
    size_t j = i;
    while (j < steps.size() && chainable(steps[j]) && j - i < rt::kMaxChainParts) ++j;
    if (j - i < 2) {
      out.push_back(std::move(steps[i]));
      ++i;
      continue;
    }
    rt::Step c;
    c.kind = K::Chain;
    for (size_t k = i; k < j; ++k) {
      rt::ChainStep::Part part;
      part.reduction = steps[k].kind == K::Reduction;
      if (part.reduction) part.red = std::move(steps[k].reduction());
      else part.kernel = std::move(steps[k].kernel());
      c.chain().parts.push_back(std::move(part));
      c.release.insert(c.release.end(), steps[k].release.begin(), steps[k].release.end());
    }
    out.push_back(std::move(c));
    i = j;
  }
  steps = std::move(out);
}

// Note [Lowered writes]
// index_put(base, key, value) is functional in the graph (Note [Writes into arrays] in
// frontend/trace/writes.cpp); a store step runs it as a pointwise kernel writing the value through
// the strided view the key selects. Which memory it writes is the buffer plan's decision:
//   - the base's own memory when nothing reads the base's old contents afterwards: the step is the
//     last to read the base or anything that may share its memory (a view of it, made or folded,
//     an extern call's result, a write into it), and the base is no program output. Where the
//     base is the run's own array, RunHost::is_private also confirms at run time that nothing
//     outside the run holds it (Memory::IfPrivate);
//   - a graph input that is written back (copy_into at the end) is memory the caller sees, but its
//     old contents are dead too once the last reader of it is past: the caller reads it only after
//     the run, other inputs are guarded not to share its memory, and it is writeable (guarded).
//     Its first write then goes into it directly, and so does every later write of the chain
//     (Memory::Always, since the caller's reference makes it never private); copy_into finds the
//     final value already in place and writes nothing. This is Inductor's mutation handling: the
//     copy back disappears when the chain of writes can run in place;
//   - otherwise a C-ordered copy of the base, written once.
// The run time adds one check the graph cannot make: a value that overlaps the base's memory other
// than element for element sends the store to a copy (Note [Stores through a view] in
// runtime/program.cpp).

// Decides each store step's memory (Note [Lowered writes]). `contents_read` is extended to the
// last read of anything that may share a value's memory; writes then run in graph order, so a chain
// of in-place writes into a written-back input is recognized link by link.
void plan_store_memory(const Graph& graph, rt::Program& p, const std::vector<int>& store_nodes,
                       const std::vector<int>& loop_steps, std::vector<int> contents_read,
                       const std::vector<bool>& is_output, const std::vector<bool>& written_back);

// The step of Loop node `i` (Note [Element loops] in frontend/trace/element_loops.cpp); marks the
// getitem nodes that select its results in `by_loop`.
rt::Step loop_step(const Graph& graph, int i, const PlanKernels* compiled, const std::vector<bool>& escaping,
                   std::vector<bool>& by_loop) {
  const Node& node = graph.node(i);
  std::shared_ptr<const ElementLoop> loop = node.attrs.element_loop;
  rt::Step s;
  s.kind = rt::Step::Kind::Loop;
  s.node = i;
  rt::LoopStep& L = s.loop();
  if (compiled && compiled->loops && static_cast<size_t>(i) < compiled->loops->size()) L.kernel = (*compiled->loops)[i];
  L.interpret = [loop](rt::ElementLoopCall* call) { return static_cast<int32_t>(run_element_loop(*loop, call)); };
  const size_t na = loop->arrays.size();
  int outputs = 0;
  for (size_t k = 0; k < node.args.size(); ++k) {
    const int v = static_cast<int>(node.args[k].i);
    if (k < na) {
      L.arrays.push_back(v);
      L.dtypes.push_back(loop->arrays[k].dtype);
      L.written.push_back(loop->arrays[k].written);
      L.memory.push_back(rt::StoreStep::Memory::Copy);
      outputs += loop->arrays[k].written;
    } else {
      // Folding may have made a number a constant.
      const Arg& a = node.args[k];
      const bool is_int = loop->vars[loop->params[k - na]] == EType::Int;
      rt::ParamValue c{};
      if (a.kind == Arg::Kind::Int || a.kind == Arg::Kind::Bool) {
        if (is_int) c.i = a.i;
        else c.f = static_cast<double>(a.i);
      } else if (a.kind == Arg::Kind::Float) {
        c.f = a.f;
      }
      L.params.push_back(a.is_node() ? v : -1);
      L.param_consts.push_back(c);
      L.param_is_int.push_back(is_int);
    }
  }
  const int written = outputs;
  outputs += static_cast<int>(loop->results.size());
  L.outputs.assign(outputs, -1);
  for (int j = i + 1; j < static_cast<int>(graph.nodes().size()); ++j) {
    const Node& g = graph.node(j);
    if (g.kind != NodeKind::Call || g.op != OpKind::Extern || g.args.size() != 2 || !g.args[0].is_node() ||
        g.args[0].i != i)
      continue;
    const int k = static_cast<int>(g.args[1].i);
    if (k < 0 || k >= static_cast<int>(L.outputs.size())) continue;  // verify() rejects such a getitem
    if (L.outputs[k] < 0) L.outputs[k] = j;
    else L.aliases.push_back({j, L.outputs[k]});  // CSE merged two equal loops: one runs
    by_loop[j] = true;
  }
  for (size_t r = 0; r < loop->results.size(); ++r) {
    const int id = L.outputs[written + r];
    const TensorMeta m = id >= 0 ? graph.node(id).meta : TensorMeta{};
    L.result_is_int.push_back(loop->vars[loop->results[r]] == EType::Int);
    L.result_dtypes.push_back(m.dtype);
    L.result_array.push_back(id >= 0 && m.kind == ValueKind::Tensor);
    L.result_scalar.push_back(id >= 0 && m.kind == ValueKind::Tensor && m.scalar_object && escaping[id]);
    L.result_tag.push_back(r < loop->tag_of.size() ? loop->tag_of[r] : -1);
  }
  return s;
}

// Graph values whose memory a node's result may share: a view's source; an extern call's array
// arguments (np.asarray, a method returning self...). Not a write's base: a write made in place
// shares the base's memory, but what reads the write's result reads the new contents.
template <typename Fn>
void for_each_memory_source(const Graph& graph, int v, Fn&& fn) {
  const Node& node = graph.node(v);
  if (node.kind != NodeKind::Call) return;
  auto array = [&](const Arg& a) {
    a.for_each_node([&](int u) {
      if (graph.node(u).meta.kind == ValueKind::Tensor) fn(u);
    });
  };
  if (is_view(node.op)) {
    if (!node.args.empty()) array(node.args[0]);
  } else if (node.op == OpKind::Extern || node.op == OpKind::Mutate) {
    for (const Arg& a : node.args) array(a);
    for (const auto& kw : node.kwargs) array(kw.second);
  }
}

// A device step's copy into C order of an array of `dtype` (a GEMM operand's pack, a store's
// base), compiled on first use. `backend` outlives it: device backends live as long as the process.
std::shared_ptr<const rt::LazyKernel> lazy_copy_kernel(Backend& backend, DType dtype) {
  return std::make_shared<rt::LazyKernel>([&backend, dtype]() -> rt::KernelPtr {
    auto k = backend.compile(copy_kernel(dtype));
    return k ? *k : nullptr;
  });
}

}  // namespace

Expected<rt::Program> schedule_program(const Graph& graph, const PlanKernels* compiled) {
  rt::Program p;
  const auto& nodes = graph.nodes();
  const int n = static_cast<int>(nodes.size());
  const FusionPlan* plan = compiled ? &compiled->plan : nullptr;
  p.num_values = n + (plan ? plan->num_temps : 0);
  if (plan) {
    p.view_of = plan->view_of;
    p.views = plan->views;
  }
  const std::vector<bool> escaping = escaping_values(graph, plan);
  std::vector<int> last_use(p.num_values, -1);
  // The last step reading each value's contents: last_use, less copy_into's reads of the input it
  // writes and of what it is ordered after (Note [Lowered writes]).
  std::vector<int> last_read(p.num_values, -1);
  bool reading = true;
  // Reading a folded view reads what it is made from: its source and run-time sizes stay alive.
  auto use = [&](auto& self, int v, int at) -> void {
    last_use[v] = at;
    if (reading) last_read[v] = at;
    if (p.is_folded(v))
      for (const Arg& a : nodes[v].args) a.for_each_node([&](int u) { self(self, u, at); });
  };
  std::vector<int> store_steps;                 // nodes computed by store steps
  std::vector<int> loop_steps;                  // indices of loop steps
  std::vector<bool> by_loop(n, false);          // getitems of a Loop node: its step sets them
  std::vector<bool> written_back(n, false);     // graph inputs a lowered copy_into writes
  auto uses = [&](const std::vector<int>& values, int at) {
    for (int v : values) use(use, v, at);
  };
  auto here = [&] { return static_cast<int>(p.steps.size()); };

  for (int i = 0; i < n; ++i) {
    const Node& node = nodes[i];
    if (node.kind == NodeKind::Placeholder) {
      p.inputs.push_back(i);
      continue;
    }
    if (node.kind == NodeKind::Output) continue;
    const int group = plan ? plan->group_of[i] : FusionPlan::kNotFused;
    if (group == FusionPlan::kNotComputed) continue;  // only fused reductions read it
    if (const int red = plan ? plan->reduction_of[i] : -1; red >= 0) {
      // var/std: the mean into a temporary first (see ReductionGroup).
      const ReductionGroup& r = plan->reductions[red];
      for (int k : {r.temp_producer, red}) {
        if (k < 0) continue;
        rt::Step s;
        s.kind = rt::Step::Kind::Reduction;
        s.reduction() = reduction_step_of(plan->reductions[k], compiled->reductions[k], escaping);
        uses(plan->reductions[k].inputs, here());
        uses(plan->reductions[k].params, here());
        p.steps.push_back(std::move(s));
      }
      continue;
    }
    if (const int gemm = plan ? plan->gemm_of[i] : -1; gemm >= 0) {
      const MatmulNode& mm = plan->gemms[gemm];
      rt::Step s;
      s.kind = rt::Step::Kind::Gemm;
      s.gemm().a = mm.a;
      s.gemm().b = mm.b;
      s.gemm().output = i;
      s.gemm().dtype = mm.dtype;
      s.gemm().a_vector = mm.a_vector;
      s.gemm().b_vector = mm.b_vector;
      s.gemm().device = compiled->backend.device();
      if (s.gemm().device.type == rt::DeviceType::CPU) {
        s.gemm().gemm = compiled->backend.gemm(mm.dtype);
        if (!s.gemm().gemm)
          return Status::unsupported("matrix products on " + std::string(compiled->backend.name()) + " are not compiled yet");
      } else {
        FJ_PROPAGATE(compiled->backend.device_gemm(mm.dtype));
        Backend& backend = compiled->backend;  // NB: device backends live as long as the process
        s.gemm().pack = lazy_copy_kernel(backend, mm.dtype);
        GemmKernelIR small;
        small.dtype = mm.dtype;
        if (const int e = plan->gemm_epilogue[gemm]; e >= 0) {
          const FusionGroup& g = plan->groups[e];
          small.epilogue = g.ir;
          small.c_input = static_cast<int>(std::find(g.inputs.begin(), g.inputs.end(), i) - g.inputs.begin());
        }
        s.gemm().small = std::make_shared<rt::LazyKernel>([&backend, small = std::move(small)]() -> rt::KernelPtr {
          auto k = backend.compile(small);
          return k ? *k : nullptr;
        });
      }
      use(use, mm.a, here());
      use(use, mm.b, here());
      if (const int e = plan->gemm_epilogue[gemm]; e >= 0) {
        const FusionGroup& g = plan->groups[e];
        s.gemm().epilogue = kernel_step_of(graph, g, compiled->kernels[e], escaping);
        uses(g.inputs, here());
        uses(g.params, here());
      }
      p.steps.push_back(std::move(s));
      continue;
    }
    if (group >= 0) {
      const FusionGroup& g = plan->groups[group];
      // Computed by the kernel step at its last member, or inside its GEMM.
      if (g.position != i || g.gemm >= 0) continue;
      rt::Step s;
      s.kind = rt::Step::Kind::Kernel;
      s.kernel() = kernel_step_of(graph, g, compiled->kernels[group], escaping);
      uses(g.inputs, here());
      uses(g.params, here());
      p.steps.push_back(std::move(s));
      continue;
    }
    if (const int sid = plan ? plan->store_of[i] : -1; sid >= 0) {
      const StoreGroup& st = plan->stores[sid];
      rt::Step s;
      s.kind = rt::Step::Kind::Store;
      s.node = i;
      s.output = i;
      s.store().base = st.write.base;
      s.store().output = i;
      s.store().region = st.write.region;
      s.store().into_base = st.write.into_base;
      s.store().kernel = kernel_step_of(graph, st.kernel, compiled->stores[sid], escaping);
      if (compiled->backend.device().type != rt::DeviceType::CPU)
        s.store().copy = lazy_copy_kernel(compiled->backend, graph.node(i).meta.dtype);
      // What the kernel reads, and what the library's call would (the step falls back to it).
      uses(st.kernel.inputs, here());
      uses(st.kernel.params, here());
      if (st.write.into_base) {
        written_back[st.write.base] = true;
        reading = false;
      }
      for (const Arg& a : node.args) a.for_each_node([&](int v) { use(use, v, here()); });
      for (const auto& kw : node.kwargs) kw.second.for_each_node([&](int v) { use(use, v, here()); });
      reading = true;
      if (st.write.into_base) uses(st.kernel.inputs, here());
      store_steps.push_back(i);
      p.steps.push_back(std::move(s));
      continue;
    }
    if (node.op == OpKind::Loop && node.attrs.element_loop) {
      p.steps.push_back(loop_step(graph, i, compiled, escaping, by_loop));
      for (const Arg& a : node.args) a.for_each_node([&](int v) { use(use, v, here() - 1); });
      loop_steps.push_back(here() - 1);
      continue;
    }
    if (by_loop[i]) continue;  // set by its loop's step
    // A folded view is made only when a reader cannot apply its remap (by the host, on demand).
    if (p.is_folded(i)) continue;
    rt::Step s;
    s.output = i;
    if (node.op == OpKind::SymSize) {
      s.kind = rt::Step::Kind::Size;
      s.node = static_cast<int>(node.args.at(0).i);
      s.dim = static_cast<int>(node.args.at(1).i);
    } else {
      s.kind = rt::Step::Kind::Extern;
      s.node = i;
      ++p.extern_steps;
    }
    for (const Arg& a : node.args) a.for_each_node([&](int v) { use(use, v, here()); });
    for (const auto& kw : node.kwargs) kw.second.for_each_node([&](int v) { use(use, v, here()); });
    p.steps.push_back(std::move(s));
  }

  // Values die after their last use, as they would in eager Python (outputs are kept).
  std::vector<bool> is_output(p.num_values, false);
  for (const Arg& a : graph.outputs())
    a.for_each_node([&](int v) {
      if (!is_output[v]) p.outputs.push_back(v);
      is_output[v] = true;
    });
  for (int v = 0; v < p.num_values; ++v)
    if (last_use[v] >= 0 && !is_output[v]) p.steps[last_use[v]].release.push_back(v);
  plan_store_memory(graph, p, store_steps, loop_steps, last_read, is_output, written_back);
  // A kernel input dying at the kernel may take an output in place (never a graph input's memory).
  for (rt::Step& s : p.steps) {
    if (s.kind != rt::Step::Kind::Kernel) continue;
    for (int v : s.release)
      if ((v >= n || nodes[v].kind != NodeKind::Placeholder) &&
          std::find(s.kernel().inputs.begin(), s.kernel().inputs.end(), v) != s.kernel().inputs.end())
        s.kernel().dying.push_back(v);
  }
  chain_consecutive_kernels(p.steps);
  return p;
}

namespace {

void plan_store_memory(const Graph& graph, rt::Program& p, const std::vector<int>& store_nodes,
                       const std::vector<int>& loop_steps, std::vector<int> contents_read,
                       const std::vector<bool>& is_output, const std::vector<bool>& written_back) {
  if (store_nodes.empty() && loop_steps.empty()) return;
  const int n = static_cast<int>(graph.nodes().size());
  constexpr int kForever = std::numeric_limits<int>::max();
  // A returned value is read after the run; a written-back input returned is the input object,
  // read after its write-back, which is not a read of its old contents.
  for (int v = 0; v < n; ++v)
    if (is_output[v] && !(graph.node(v).kind == NodeKind::Placeholder && written_back[v])) contents_read[v] = kForever;
  for (int v = n - 1; v >= 0; --v)
    for_each_memory_source(graph, v, [&](int u) { contents_read[u] = std::max(contents_read[u], contents_read[v]); });
  std::vector<int> step_of(n, -1);
  for (int k = 0; k < static_cast<int>(p.steps.size()); ++k)
    if (p.steps[k].kind == rt::Step::Kind::Store || p.steps[k].kind == rt::Step::Kind::Loop)
      step_of[p.steps[k].node] = k;
  // Values whose memory is a written-back input's (or a private copy made on the way): writing
  // them needs no run-time check, and no check could see it (the caller holds the input).
  std::vector<bool> chain(n, false);
  for (int v = 0; v < n; ++v) chain[v] = graph.node(v).kind == NodeKind::Placeholder && written_back[v];
  // Stores and loops in program order: a chain of writes runs through both.
  std::vector<int> writers;
  for (int node : store_nodes) writers.push_back(step_of[node]);
  for (int k : loop_steps) writers.push_back(k);
  std::sort(writers.begin(), writers.end());
  using M = rt::StoreStep::Memory;
  auto decide = [&](int base, int at) {
    const bool dies_here = base < n && contents_read[base] == at && !p.is_folded(base);
    if (!dies_here) return M::Copy;
    if (chain[base]) return M::Always;
    if (graph.node(base).kind == NodeKind::Placeholder) return M::Copy;
    return M::IfPrivate;
  };
  for (int at : writers) {
    rt::Step& step = p.steps[at];
    if (step.kind == rt::Step::Kind::Store) {
      rt::StoreStep& st = step.store();
      if (st.into_base) continue;
      st.memory = decide(st.base, at);
      chain[step.node] = st.memory == M::Always;
      continue;
    }
    rt::LoopStep& L = step.loop();
    int out = 0;
    for (size_t k = 0; k < L.arrays.size(); ++k) {
      if (!L.written[k]) continue;
      // Another operand of the loop with the same memory would see the writes.
      bool shared = false;
      for (size_t j = 0; j < L.arrays.size(); ++j) shared |= j != k && L.arrays[j] == L.arrays[k];
      L.memory[k] = shared ? M::Copy : decide(L.arrays[k], at);
      const int result = L.outputs[out++];
      if (result >= 0) chain[result] = L.memory[k] == M::Always;
    }
  }
}

}  // namespace

}  // namespace framejit::jit
