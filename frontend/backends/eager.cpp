// eager.cpp — the "eager" backend: a reference interpreter over the Graph that calls, per node,
// the very Python callable the user's code called (so results match eager NumPy bit for bit).
#include <Python.h>

#include <algorithm>
#include <functional>
#include <unordered_map>

#include "frontend/backends/arrays.h"
#include "frontend/backends/kernel_step.h"
#include "frontend/backends/program.h"
#include "frontend/config.h"
#include "frontend/numpy_abi.h"
#include "jit/pipeline.h"

namespace framejit::frontend {

namespace {

PyObject* module_attr(const char* module, const std::string& name) {  // new ref or null
  OwnedRef mod = OwnedRef::steal(PyImport_ImportModule(module));
  if (!mod) return nullptr;
  return PyObject_GetAttrString(mod.get(), name.c_str());
}

// An argument as the interpreter materializes it: a graph value, a constant, or a container
// holding graph values (built per call).
struct ArgRef {
  enum class Kind : uint8_t { Value, Const, Tuple, List, Slice } kind = Kind::Const;
  int index = -1;
  OwnedRef constant;
  std::vector<ArgRef> items;
};

struct Instr {
  enum class Kind : uint8_t { Call, Method, SymSize, Kernel, Reduction, Gemm, Chain } kind = Kind::Call;
  OwnedRef callable;     // Call: the function; Method: the method name (str)
  std::vector<ArgRef> args;  // positional, then keyword values
  OwnedRef kwnames;      // tuple of str, or null
  int out = -1;          // value index written
  int dim = 0;           // SymSize
  KernelStep kernel;     // Kernel: a fused group of pointwise nodes
  ReductionStep reduction;  // Reduction: a row reduction with its fused prologue
  GemmStep gemm;            // Gemm: a matrix product by framejit's GEMM
  ChainStep chain;          // Chain: consecutive kernels and reductions run together
  std::vector<int> release;  // values whose last use is this instruction
};

bool has_value(const jit::Arg& a) {
  bool found = false;
  a.for_each_node([&](int) { found = true; });
  return found;
}

class EagerProgram final : public Program {
public:
  std::vector<int> input_values;  // value index of each placeholder
  std::vector<Instr> instrs;
  std::vector<ArgRef> outputs;
  int num_values = 0;
  // Folded views (jit backend): per value its remap in `views` or -1, and the view's own call,
  // run only when a remap cannot be applied (then NumPy copies or raises as in eager code).
  std::vector<int> view_of;
  std::vector<jit::ViewOp> views;
  std::unordered_map<int, Instr> view_calls;

  // The values of one run, as kernel steps read them.
  class Store final : public ValueStore {
  public:
    Store(const EagerProgram& p, PyObject** v) : ValueStore(v), p_(p) {}
    bool is_folded(int v) const override {
      return v < static_cast<int>(p_.view_of.size()) && p_.view_of[v] >= 0;  // temporaries lie past it
    }
    bool may_copy(int v) const override {
      for (; is_folded(v); v = p_.views[p_.view_of[v]].source)
        if (p_.views[p_.view_of[v]].kind == jit::ViewOp::Kind::Reshape) return true;
      return false;
    }

    bool layout(int v, jit::StridedLayout& out, int& itemsize) override {
      if (!vals[v] && is_folded(v)) {
        const jit::ViewOp& op = p_.views[p_.view_of[v]];
        jit::StridedLayout src;
        if (!layout(op.source, src, itemsize)) return false;
        auto value = [&](int node, int64_t& x) {
          int overflow = 0;
          x = vals[node] && PyLong_Check(vals[node]) ? PyLong_AsLongLongAndOverflow(vals[node], &overflow) : 0;
          return vals[node] && PyLong_Check(vals[node]) && !overflow;
        };
        if (jit::apply_view(op, src, itemsize, value, out)) return true;
        if (!make(v)) return false;  // the eager way: NumPy copies or raises
      }
      if (!vals[v]) {
        PyErr_Format(PyExc_RuntimeError, "framejit: internal error: value %d read before it was computed", v);
        return false;
      }
      ArrayFields a = array_fields(vals[v]);
      if (!a.ok) {
        PyErr_Format(PyExc_TypeError, "framejit: internal error: value %d is a %s, not an array", v,
                     Py_TYPE(vals[v])->tp_name);
        return false;
      }
      out = layout_of(a);
      itemsize = rt::dtype_itemsize(a.dtype);
      return true;
    }

  private:
    // Runs folded view v's own call (and first those of folded views it reads).
    bool make(int v) {
      const Instr& in = p_.view_calls.at(v);
      for (const ArgRef& a : in.args)
        if (a.kind == ArgRef::Kind::Value && !vals[a.index] && is_folded(a.index) && !make(a.index)) return false;
      PyObject* r = execute(in, vals);  // new ref
      if (!r) return false;
      vals[v] = r;
      return true;
    }
    const EagerProgram& p_;
  };

  // Set for jit programs: their kernels do not report floating-point events.
  bool needs_default_errstate = false;
  bool can_run_now() const override { return !needs_default_errstate || !numpy_errstate_raises(); }

  bool run(PyObject* const* inputs, PyObject** out) override {
    constexpr int kStack = 64;
    PyObject* stack_vals[kStack];
    std::vector<PyObject*> heap_vals;
    PyObject** vals = stack_vals;
    if (num_values > kStack) {
      heap_vals.resize(num_values);
      vals = heap_vals.data();
    }
    for (int i = 0; i < num_values; ++i) vals[i] = nullptr;
    for (size_t i = 0; i < input_values.size(); ++i) {
      Py_INCREF(inputs[i]);
      vals[input_values[i]] = inputs[i];  // new ref held by vals
    }
    bool ok = true;
    Store store(*this, vals);
    store.tensors = tensor_results_;
    for (const Instr& in : instrs) {
      if (in.kind != Instr::Kind::Call && in.kind != Instr::Kind::Method && in.kind != Instr::Kind::SymSize) {
        bool done = in.kind == Instr::Kind::Kernel      ? run_kernel_step(in.kernel, store)
                    : in.kind == Instr::Kind::Reduction ? run_reduction_step(in.reduction, store)
                    : in.kind == Instr::Kind::Chain     ? run_chain_step(in.chain, store)
                                                        : run_gemm_step(in.gemm, store);
        if (!done) {
          ok = false;
          break;
        }
      } else {
        PyObject* r = execute(in, vals);  // new ref
        if (!r) {
          ok = false;
          break;
        }
        vals[in.out] = r;
      }
      for (int v : in.release) Py_CLEAR(vals[v]);
    }
    if (ok) {
      for (size_t i = 0; i < outputs.size(); ++i) {
        PyObject* o = materialize(outputs[i], vals);  // new ref
        if (!o) {
          for (size_t j = 0; j < i; ++j) Py_CLEAR(out[j]);
          ok = false;
          break;
        }
        out[i] = o;
      }
    }
    for (int i = 0; i < num_values; ++i) Py_XDECREF(vals[i]);
    return ok;
  }

  static PyObject* materialize(const ArgRef& a, PyObject** vals) {  // new ref
    switch (a.kind) {
      case ArgRef::Kind::Value: Py_XINCREF(vals[a.index]); return vals[a.index];
      case ArgRef::Kind::Const: Py_INCREF(a.constant.get()); return a.constant.get();
      case ArgRef::Kind::Slice: {
        PyObject* parts[3];
        for (int i = 0; i < 3; ++i) parts[i] = materialize(a.items[i], vals);  // new refs (or null)
        PyObject* r = parts[0] && parts[1] && parts[2] ? PySlice_New(parts[0], parts[1], parts[2]) : nullptr;
        for (PyObject* p : parts) Py_XDECREF(p);
        return r;
      }
      case ArgRef::Kind::Tuple:
      case ArgRef::Kind::List: {
        bool tuple = a.kind == ArgRef::Kind::Tuple;
        PyObject* r = tuple ? PyTuple_New(a.items.size()) : PyList_New(a.items.size());
        if (!r) return nullptr;
        for (size_t i = 0; i < a.items.size(); ++i) {
          PyObject* x = materialize(a.items[i], vals);
          if (!x) {
            Py_DECREF(r);
            return nullptr;
          }
          if (tuple)
            PyTuple_SET_ITEM(r, i, x);  // steals x
          else
            PyList_SET_ITEM(r, i, x);  // steals x
        }
        return r;
      }
    }
    return nullptr;
  }

private:
  static PyObject* execute(const Instr& in, PyObject** vals) {  // new ref or null
    if (in.kind == Instr::Kind::SymSize) {
      ArrayFields x = array_fields(vals[in.args[0].index]);
      return PyLong_FromLongLong(x.dims[in.dim]);
    }
    constexpr int kMaxArgs = 16;
    // Slot 0 is scratch so calls may use PY_VECTORCALL_ARGUMENTS_OFFSET.
    PyObject* argv[kMaxArgs + 1];
    PyObject* owned[kMaxArgs];  // containers built for this call
    int nowned = 0;
    size_t n = in.args.size();
    for (size_t i = 0; i < n; ++i) {
      const ArgRef& a = in.args[i];
      if (a.kind == ArgRef::Kind::Value) {
        argv[i + 1] = vals[a.index];
      } else if (a.kind == ArgRef::Kind::Const) {
        argv[i + 1] = a.constant.get();
      } else {
        PyObject* c = materialize(a, vals);
        if (!c) {
          for (int k = 0; k < nowned; ++k) Py_DECREF(owned[k]);
          return nullptr;
        }
        owned[nowned++] = c;
        argv[i + 1] = c;
      }
    }
    size_t nkw = in.kwnames ? PyTuple_GET_SIZE(in.kwnames.get()) : 0;
    size_t npos = n - nkw;
    PyObject* r;
    if (in.kind == Instr::Kind::Method) {
      argv[0] = in.callable.get();  // PyObject_VectorcallMethod wants the name in args[-1] slot
      r = PyObject_VectorcallMethod(in.callable.get(), argv + 1, npos | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                    in.kwnames.get());
    } else {
      r = PyObject_Vectorcall(in.callable.get(), argv + 1, npos | PY_VECTORCALL_ARGUMENTS_OFFSET, in.kwnames.get());
    }
    for (int k = 0; k < nowned; ++k) Py_DECREF(owned[k]);
    return r;
  }
};

Status to_argref(const jit::Arg& a, ArgRef& out) {
  if (a.kind == jit::Arg::Kind::Node) {
    out.kind = ArgRef::Kind::Value;
    out.index = static_cast<int>(a.i);
    return Status::ok();
  }
  if ((a.kind == jit::Arg::Kind::Tuple || a.kind == jit::Arg::Kind::List) && has_value(a)) {
    out.kind = a.kind == jit::Arg::Kind::Tuple ? ArgRef::Kind::Tuple : ArgRef::Kind::List;
    for (const jit::Arg& x : a.items) {
      out.items.emplace_back();
      FJ_PROPAGATE(to_argref(x, out.items.back()));
    }
    return Status::ok();
  }
  if (a.kind == jit::Arg::Kind::Slice && has_value(a)) {
    out.kind = ArgRef::Kind::Slice;
    for (const jit::Arg& x : a.items) {
      out.items.emplace_back();
      FJ_PROPAGATE(to_argref(x, out.items.back()));
    }
    return Status::ok();
  }
  out.kind = ArgRef::Kind::Const;
  out.constant = const_arg_to_python(a);
  if (!out.constant) return Status::internal("cannot convert a constant argument: " + fetch_error_text());
  return Status::ok();
}

}  // namespace

OwnedRef const_arg_to_python(const jit::Arg& a) {
  using K = jit::Arg::Kind;
  switch (a.kind) {
    case K::None: return OwnedRef::borrow(Py_None);
    case K::Ellipsis: return OwnedRef::borrow(Py_Ellipsis);
    case K::Int: return OwnedRef::steal(PyLong_FromLongLong(a.i));
    case K::Float: return OwnedRef::steal(PyFloat_FromDouble(a.f));
    case K::Bool: return OwnedRef::borrow(a.i ? Py_True : Py_False);
    case K::Str: return OwnedRef::steal(PyUnicode_FromStringAndSize(a.s.data(), a.s.size()));
    case K::DType: {
      // A numpy.dtype where NumPy exists; its name otherwise (what framejit.Tensor.astype takes).
      const NumPyHandles* np = numpy_handles();
      if (np) return OwnedRef::borrow(np->dtypes[a.i]);
      return OwnedRef::steal(PyUnicode_FromString(rt::dtype_name(static_cast<rt::DType>(a.i)).data()));
    }
    case K::Tuple:
    case K::List: {
      OwnedRef r = OwnedRef::steal(a.kind == K::Tuple ? PyTuple_New(a.items.size()) : PyList_New(a.items.size()));
      for (size_t i = 0; i < a.items.size(); ++i) {
        OwnedRef x = const_arg_to_python(a.items[i]);
        if (!x) return {};
        if (a.kind == K::Tuple)
          PyTuple_SET_ITEM(r.get(), i, x.release());
        else
          PyList_SET_ITEM(r.get(), i, x.release());
      }
      return r;
    }
    case K::Slice: {
      OwnedRef s = const_arg_to_python(a.items[0]), e = const_arg_to_python(a.items[1]),
               st = const_arg_to_python(a.items[2]);
      if (!s || !e || !st) return {};
      return OwnedRef::steal(PySlice_New(s.get(), e.get(), st.get()));
    }
    case K::Node: break;
  }
  return {};
}

namespace {

KernelStep kernel_step_of(const jit::FusionGroup& g, const rt::KernelPtr& kernel) {
  KernelStep k;
  k.kernel = kernel;
  k.inputs = g.inputs;
  k.params = g.params;
  k.param_dtypes = g.ir.param_dtypes;
  k.outputs = g.outputs;
  k.output_dtypes = g.ir.output_dtypes;
  return k;
}

// Merges each run of consecutive kernel and reduction instructions into one Chain instruction, so
// that they can run block by block over rows (see ChainStep). Values released inside the run are
// released after the whole chain.
void chain_consecutive_kernels(std::vector<Instr>& instrs) {
  auto chainable = [](const Instr& in) { return in.kind == Instr::Kind::Kernel || in.kind == Instr::Kind::Reduction; };
  std::vector<Instr> out;
  for (size_t i = 0; i < instrs.size();) {
    size_t j = i;
    while (j < instrs.size() && chainable(instrs[j])) ++j;
    if (j - i < 2) {
      out.push_back(std::move(instrs[i]));
      ++i;
      continue;
    }
    Instr c;
    c.kind = Instr::Kind::Chain;
    for (size_t k = i; k < j; ++k) {
      ChainStep::Part part;
      part.reduction = instrs[k].kind == Instr::Kind::Reduction;
      if (part.reduction) part.red = std::move(instrs[k].reduction);
      else part.kernel = std::move(instrs[k].kernel);
      c.chain.parts.push_back(std::move(part));
      c.release.insert(c.release.end(), instrs[k].release.begin(), instrs[k].release.end());
    }
    out.push_back(std::move(c));
    i = j;
  }
  instrs = std::move(out);
}

const char* numpy_reduce_name(jit::ReduceOp op) {
  switch (op) {
    case jit::ReduceOp::Sum: return "add";
    case jit::ReduceOp::Prod: return "multiply";
    case jit::ReduceOp::Max: return "maximum";
    case jit::ReduceOp::Min: return "minimum";
    case jit::ReduceOp::ArgMax: return "argmax";
    case jit::ReduceOp::ArgMin: return "argmin";
  }
  return "?";
}

ReductionStep reduction_step(const jit::ReductionGroup& r, const jit::x86::ReductionKernels& kernels) {
  ReductionStep s;
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
  s.numpy_scalar = r.numpy_scalar;
  s.arg = jit::is_arg_reduce(r.ir.op);
  s.arg_max = r.ir.op == jit::ReduceOp::ArgMax;
  s.ddof = r.ir.ddof;
  s.numpy_name = numpy_reduce_name(r.ir.op);
  s.value_output = r.value_output;
  return s;
}

// Builds the interpreter over `graph`; with `compiled`, each fused group runs as one kernel
// instruction at its last member's position and its members are not interpreted.
Expected<std::unique_ptr<Program>> build_program(const jit::Graph& graph, const jit::CompiledGraph* compiled) {
  auto p = std::make_unique<EagerProgram>();
  const auto& nodes = graph.nodes();
  p->num_values = static_cast<int>(nodes.size()) + (compiled ? compiled->plan.num_temps : 0);
  std::vector<int> last_use(p->num_values, -1);
  if (compiled) {
    p->view_of = compiled->plan.view_of;
    p->views = compiled->plan.views;
  }
  // Values past the graph's nodes are var's temporaries, never views.
  auto folded = [&](int v) {
    return compiled && v < static_cast<int>(nodes.size()) && compiled->plan.view_of[v] >= 0;
  };
  // Reading a folded view reads what it is made from: its source and run-time sizes stay alive.
  std::function<void(int, int)> use = [&](int v, int at) {
    last_use[v] = at;
    if (folded(v))
      for (const jit::Arg& a : nodes[v].args) a.for_each_node([&](int u) { use(u, at); });
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const jit::Node& n = nodes[i];
    if (n.kind == jit::NodeKind::Placeholder) {
      p->input_values.push_back(static_cast<int>(i));
      continue;
    }
    if (n.kind == jit::NodeKind::Output) {
      for (const jit::Arg& a : n.args.empty() ? std::vector<jit::Arg>{} : n.args[0].items) {
        p->outputs.emplace_back();
        FJ_PROPAGATE(to_argref(a, p->outputs.back()));
      }
      continue;
    }
    Instr in;
    in.out = static_cast<int>(i);
    const std::string& t = n.target;
    int group = compiled ? compiled->plan.group_of[i] : -1;
    if (group == jit::FusionPlan::kNotComputed) continue;  // only fused reductions read it
    int reduction = compiled ? compiled->plan.reduction_of[i] : -1;
    if (reduction >= 0) {
      // var/std: the mean into a temporary first (see jit::ReductionGroup).
      const jit::ReductionGroup& r = compiled->plan.reductions[reduction];
      for (int k : {r.temp_producer, reduction}) {
        if (k < 0) continue;
        Instr step;
        step.kind = Instr::Kind::Reduction;
        step.out = compiled->plan.reductions[k].output;
        step.reduction = reduction_step(compiled->plan.reductions[k], compiled->reduction_kernels[k]);
        int instr_index = static_cast<int>(p->instrs.size());
        for (int v : compiled->plan.reductions[k].inputs) use(v, instr_index);
        for (int v : compiled->plan.reductions[k].params) use(v, instr_index);
        p->instrs.push_back(std::move(step));
      }
      continue;
    }
    int gemm = compiled ? compiled->plan.gemm_of[i] : -1;
    if (gemm >= 0) {
      const jit::MatmulNode& mm = compiled->plan.gemms[gemm];
      in.kind = Instr::Kind::Gemm;
      in.gemm.a = mm.a;
      in.gemm.b = mm.b;
      in.gemm.output = static_cast<int>(i);
      in.gemm.dtype = mm.dtype;
      size_t instr_index = p->instrs.size();
      use(mm.a, static_cast<int>(instr_index));
      use(mm.b, static_cast<int>(instr_index));
      if (int e = compiled->plan.gemm_epilogue[gemm]; e >= 0) {
        const jit::FusionGroup& g = compiled->plan.groups[e];
        in.gemm.epilogue = kernel_step_of(g, compiled->kernels[e]);
        for (int v : g.inputs) use(v, static_cast<int>(instr_index));
        for (int v : g.params) use(v, static_cast<int>(instr_index));
      }
      p->instrs.push_back(std::move(in));
      continue;
    }
    if (group >= 0) {
      const jit::FusionGroup& g = compiled->plan.groups[group];
      // Computed by the kernel instruction, or inside its GEMM.
      if (g.position != static_cast<int>(i) || g.gemm >= 0) continue;
      in.kind = Instr::Kind::Kernel;
      in.kernel = kernel_step_of(g, compiled->kernels[group]);
      size_t instr_index = p->instrs.size();
      for (int v : g.inputs) use(v, static_cast<int>(instr_index));
      for (int v : g.params) use(v, static_cast<int>(instr_index));
      p->instrs.push_back(std::move(in));
      continue;
    }
    if (t == "sym_size") {
      in.kind = Instr::Kind::SymSize;
      in.dim = static_cast<int>(n.args.at(1).i);
      in.args.emplace_back();
      FJ_PROPAGATE(to_argref(n.args.at(0), in.args.back()));
    } else {
      if (t.rfind("method.", 0) == 0) {
        in.kind = Instr::Kind::Method;
        in.callable = OwnedRef::steal(PyUnicode_FromString(t.c_str() + 7));
      } else if (t == "getitem") {
        in.callable = OwnedRef::steal(module_attr("operator", "getitem"));
      } else {
        size_t dot = t.rfind('.');
        if (dot == std::string::npos) return Status::internal("unknown target " + t);
        in.callable = OwnedRef::steal(module_attr(t.substr(0, dot).c_str(), t.substr(dot + 1)));
      }
      if (!in.callable) return Status::internal("cannot resolve target " + t + ": " + fetch_error_text());
      for (const jit::Arg& a : n.args) {
        in.args.emplace_back();
        FJ_PROPAGATE(to_argref(a, in.args.back()));
      }
      if (!n.kwargs.empty()) {
        in.kwnames = OwnedRef::steal(PyTuple_New(n.kwargs.size()));
        for (size_t k = 0; k < n.kwargs.size(); ++k) {
          PyTuple_SET_ITEM(in.kwnames.get(), k, PyUnicode_FromString(n.kwargs[k].first.c_str()));
          in.args.emplace_back();
          FJ_PROPAGATE(to_argref(n.kwargs[k].second, in.args.back()));
        }
      }
      if (in.args.size() > 16) return Status::unsupported("a call with more than 16 arguments");
    }
    size_t instr_index = p->instrs.size();
    if (folded(static_cast<int>(i))) {  // made only when a reader cannot apply its remap
      p->view_calls.emplace(static_cast<int>(i), std::move(in));
      continue;
    }
    for (const jit::Arg& a : n.args) a.for_each_node([&](int v) { use(v, static_cast<int>(instr_index)); });
    for (auto& kw : n.kwargs) kw.second.for_each_node([&](int v) { use(v, static_cast<int>(instr_index)); });
    p->instrs.push_back(std::move(in));
  }
  // Values die after their last use, as they would in eager Python (outputs are kept).
  std::vector<bool> is_output(p->num_values, false);
  for (const jit::Arg& a : graph.outputs()) a.for_each_node([&](int v) { is_output[v] = true; });
  for (size_t v = 0; v < last_use.size(); ++v)
    if (last_use[v] >= 0 && !is_output[v]) p->instrs[last_use[v]].release.push_back(static_cast<int>(v));
  for (Instr& in : p->instrs) {
    if (in.kind != Instr::Kind::Kernel) continue;
    for (int v : in.release)
      if ((v >= static_cast<int>(nodes.size()) || nodes[v].kind != jit::NodeKind::Placeholder) &&
          std::find(in.kernel.inputs.begin(), in.kernel.inputs.end(), v) != in.kernel.inputs.end())
        in.kernel.dying.push_back(v);
  }
  chain_consecutive_kernels(p->instrs);
  p->needs_default_errstate = compiled != nullptr;
  p->set_counts(static_cast<int>(p->input_values.size()), static_cast<int>(p->outputs.size()));
  return std::unique_ptr<Program>(std::move(p));
}

}  // namespace

Expected<std::unique_ptr<Program>> build_eager_program(const jit::Graph& graph) { return build_program(graph, nullptr); }

Expected<std::unique_ptr<Program>> build_jit_program(const jit::Graph& graph) {
  auto compiled = jit::compile_graph(graph);
  if (!compiled) return compiled.error();
  Stats& st = stats();
  st.kernels += static_cast<long long>(compiled->plan.groups.size());
  st.reductions += static_cast<long long>(compiled->plan.reductions.size());
  st.gemms += static_cast<long long>(compiled->plan.gemms.size());
  st.extern_calls += compiled->plan.extern_calls;
  return build_program(graph, &*compiled);
}

}  // namespace framejit::frontend
