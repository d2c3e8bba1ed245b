// compile_frame.cpp — the cold path of one frame: trace → graph passes → backend → cache entry.
#include "frontend/interop/torch_array.h"
#include "frontend/compile/compile_frame.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "frontend/bytecode/loops.h"
#include "frontend/interop/numpy_abi.h"
#include "frontend/trace/tracer.h"
#include "jit/passes/passes.h"
#include "jit/pipeline.h"
#include "runtime/log.h"

namespace framejit::frontend {

Settings& settings() {
  static Settings s;
  return s;
}

Stats& stats() {
  static Stats s;
  return s;
}

PyObject*& unsupported_error() {
  static PyObject* type = nullptr;
  return type;
}

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Placeholders are discovered while tracing (an attribute read after some arithmetic); the graph
// contract wants them first, so move them up and renumber.
void hoist_placeholders(OutputGraph& og) {
  const auto& nodes = og.graph.nodes();
  std::vector<int> order;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].kind == jit::NodeKind::Placeholder) order.push_back(static_cast<int>(i));
  bool already = true;
  for (size_t i = 0; i < order.size(); ++i) already &= order[i] == static_cast<int>(i);
  if (already) return;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].kind != jit::NodeKind::Placeholder) order.push_back(static_cast<int>(i));
  std::vector<int> remap(nodes.size(), -1);
  std::vector<jit::Node> reordered;
  for (size_t k = 0; k < order.size(); ++k) {
    remap[order[k]] = static_cast<int>(k);
    reordered.push_back(nodes[order[k]]);
  }
  for (GraphInput& in : og.inputs) in.node = remap[in.node];
  og.graph.rebuild(std::move(reordered), remap);
}

std::string text_lines(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += "  " + l + "\n";
  return s;
}

// explain()'s record of a break, with the snapshot's values described while the graph that gives
// their metas is alive.
ExplainBreak explain_break(const GraphBreak& b, const OutputGraph& og,
                           PyCodeObject* root) {  // root borrowed
  ExplainBreak e;
  e.kind = break_kind_name(b.kind);
  e.reason = b.message();
  e.exc_type = b.exc_type;
  e.filename = b.filename;
  e.lineno = b.lineno;
  e.offset = b.offset;
  if (b.snapshot) {
    for (const VarPtr& v : b.snapshot->stack) e.stack.push_back(describe_var(v, og));
    for (const LiveLocal& l : b.snapshot->locals) {
      PyObject* name = PyTuple_GET_ITEM(root->co_localsplusnames, l.slot);  // borrowed
      const char* s = PyUnicode_AsUTF8(name);
      if (!s) PyErr_Clear();
      e.locals.emplace_back(s ? s : "?", describe_var(l.value, og));
    }
  }
  return e;
}

// Whether the backend compiles element-loop nodes (Note [Element loops]): the jit backend does;
// the eager one and user callables replay library calls, and a loop node has none.
bool compiles_loops(const CompileConfig& cfg) {
  return !cfg.is_callable_backend() && PyUnicode_CompareWithASCIIString(cfg.backend.get(), "jit") == 0;
}

void warn(const std::string& msg) {
  if (PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 1) < 0) PyErr_Clear();
}

Expected<std::unique_ptr<Program>> run_backend(const CompileConfig& cfg, const OutputGraph& og,
                                               const FrameView& view) {
  if (cfg.is_callable_backend()) {
    std::vector<PyObject*> examples;
    for (const GraphInput& in : og.inputs) examples.push_back(fetch_source(*in.source, view));
    return build_callable_program(cfg.backend.get(), og.graph, examples);
  }
  if (PyUnicode_CompareWithASCIIString(cfg.backend.get(), "eager") == 0) return build_eager_program(og.graph);
  return build_jit_program(og.graph, og.device);
}

// The break code of a partial graph (Note [Break entries]) into `e`, whose program (if any) is
// already built. Unsupported: no break code fits this break; the frame runs in CPython.
Status make_break_entry(PyFunctionObject* fn, const GraphBreak& b, BreakState& st, bool loop_stop, CacheEntry& e) {
  bytecode::BreakSpec spec;
  spec.offset = b.offset;
  spec.run_in_resume = loop_stop;
  spec.stack = std::move(st.stack);
  spec.stores = std::move(st.stores);
  spec.live_locals = std::move(st.live_locals);
  spec.out_param = true;
  // A store that only moves an input from one slot to another is no work done: a resume
  // function's own prologue is all such moves.
  bool stores = false;
  for (const bytecode::LocalStore& s : spec.stores) {
    const bytecode::Recipe& r = s.value;
    const bool moved = r.kind == bytecode::Recipe::Kind::Local ||
                       (r.kind == bytecode::Recipe::Kind::GraphOutput && r.index >= 0 &&
                        static_cast<size_t>(r.index) < st.values.items.size() &&
                        st.values.items[static_cast<size_t>(r.index)].kind == OutputSpec::Kind::Slot);
    stores |= !moved;
  }
  // Stores into outside objects are replayed before the break code runs (Note [Side effects]).
  stores |= !e.replays.empty();
  auto made = bytecode::make_break_code(fn->func_code, spec);
  if (!made) {
    // The break code's own refusals (an offset in the prologue, a generator, a value stack it
    // cannot rebuild) are limits of the rewrite, not internal errors.
    return Status::unsupported(made.error().message());
  }
  // Nothing done before an instruction that runs first thing in the resume function: that
  // resume function would break where this one did, and so on without end.
  if (made->kind == bytecode::BreakCode::Kind::InResume && !e.program && !stores)
    return Status::unsupported("nothing before the break to keep, and " + made->why_in_resume);
  auto* code = reinterpret_cast<PyCodeObject*>(made->code.get());
  auto never_trace = [](PyObject* c) {
    CodeState* cs = code_state(reinterpret_cast<PyCodeObject*>(c));
    if (!cs) return false;
    cs->skip = true;
    cs->skip_known = true;
    cs->update_never();
    return true;
  };
  // The break code only hands over to CPython and a resume function. A resume function entered
  // with an exception starts in an `except` clause, which the tracer does not follow: tracing it
  // would only break again.
  if (!never_trace(made->code.get())) return Status::unsupported("no co_extra slot for the break code");
  for (const OwnedRef& h : made->handler_resumes) never_trace(h.get());
  e.break_nargs = code->co_argcount - 1;
  e.output = std::move(st.values);
  e.break_code = std::move(made->code);
  return Status::ok();
}

// fullgraph=True's list of every break after `first` (Note [Listing every break]): "" when there is
// no other, else one numbered line per break.
std::string list_breaks(PyFunctionObject* fn, const FrameView& view, const CompileConfig& cfg, const GraphBreak& first) {
  constexpr int kMaxBreaks = 16;  // each costs a trace; a frame with more has a bigger problem
  if (first.offset < 0) return "";
  std::vector<std::string> found{first.message()};
  std::string tail;
  TraceConfig tcfg;
  tcfg.dynamic = cfg.dynamic;
  tcfg.element_loops = compiles_loops(cfg);
  tcfg.discover = true;
  tcfg.unknown_at.push_back(first.offset);
  try {
    while (static_cast<int>(found.size()) < kMaxBreaks) {
      OutputGraph og;
      Tracer tracer(og, view, fn, tcfg);
      std::optional<GraphBreak> b = tracer.run();
      if (PyErr_Occurred()) PyErr_Clear();
      if (!b) break;
      const bool listed = std::find(tcfg.unknown_at.begin(), tcfg.unknown_at.end(), b->offset) != tcfg.unknown_at.end();
      if (tracer.discovery_stopped() || listed || b->offset < 0) {
        if (tracer.discovery_stopped())
          tail = "\n  (not looked for past line " + std::to_string(b->lineno) +
                 ": the path there depends on a value only CPython computes)";
        else if (b->kind == BreakKind::DataDependent)
          tail = "\n  (not looked for past line " + std::to_string(b->lineno) + ": " + b->reason + ")";
        break;
      }
      found.push_back(b->message());
      tcfg.unknown_at.push_back(b->offset);
    }
  } catch (const std::exception&) {
  }
  if (found.size() == 1 && tail.empty()) return "";
  std::string s = "\n" + std::to_string(found.size()) + " graph breaks:";
  for (size_t i = 0; i < found.size(); ++i) s += "\n  " + std::to_string(i + 1) + ". " + found[i];
  return s + tail;
}

// Note [Remembered failures]: what this trace's failure says about the next ones.
void remember_failure(CodeState& state, const std::optional<GraphBreak>& broke, PyCodeObject* spent,
                      const CacheEntry& entry) {
  auto give_up = [](CodeState& cs, const std::string& reason) {
    cs.give_up(reason);
    if (rt::log_enabled(rt::LogTopic::Breaks))
      rt::log_write(rt::LogTopic::Breaks, (cs.name.empty() ? std::string("a function") : cs.name) +
                                              ": given up on, it runs in CPython from now on: " + reason);
  };
  if (!broke) {
    state.last_failure.clear();
    return;
  }
  if (broke->kind == BreakKind::Limit && spent) {
    CodeState* cs = spent == state.code ? &state : code_state(spent);  // the loop's own code
    if (cs && ++cs->budget_failures >= 2)
      give_up(*cs, "its loop ran the trace out of instructions twice (" + broke->message() + ")");
    return;
  }
  const bool kept_nothing = !entry.program && !entry.break_code;
  if (!kept_nothing || broke->kind == BreakKind::EagerError || broke->kind == BreakKind::Limit) {
    state.last_failure.clear();
    return;
  }
  std::string key = std::to_string(broke->offset) + ": " + broke->message();
  if (key == state.last_failure)
    give_up(state, "two captures in a row kept nothing and broke the same way: " + broke->message());
  else
    state.last_failure = std::move(key);
}

}  // namespace

namespace {

// What FRAMEJIT_LOGS=breaks,recompiles reported, counted per (function, reason), for the summary
// `python -m framejit` and framejit-run print at exit. Recorded only while those topics are on.
struct EventLog {
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, int> breaks, recompiles;
};
EventLog& event_log() {
  static EventLog* log = new EventLog();  // NB: immortal: read at interpreter exit
  return *log;
}
void record(std::map<std::pair<std::string, std::string>, int> EventLog::*which, const std::string& fn,
            const std::string& reason) {
  EventLog& log = event_log();
  std::lock_guard<std::mutex> lock(log.mu);
  ++(log.*which)[{fn, reason}];
}

}  // namespace

std::string event_summary() {
  EventLog& log = event_log();
  std::lock_guard<std::mutex> lock(log.mu);
  std::string s;
  auto section = [&](const char* title, const std::map<std::pair<std::string, std::string>, int>& events,
                     bool enabled) {
    if (!enabled) return;
    int total = 0;
    for (const auto& [key, n] : events) total += n;
    s += std::string(title) + ": " + std::to_string(total) + "\n";
    for (const auto& [key, n] : events)
      s += "  " + std::to_string(n) + "x " + key.first + ": " + key.second + "\n";
  };
  section("graph breaks", log.breaks, rt::log_enabled(rt::LogTopic::Breaks));
  section("recompiles", log.recompiles, rt::log_enabled(rt::LogTopic::Recompiles));
  return s;
}

std::unique_ptr<CacheEntry> compile_frame(const CompileConfig& cfg, PyFunctionObject* fn,
                                          const FrameView& view, CodeState& state,
                                          GraphBreak* broke_out) {
  ArrayRunScope array_scope;  // the builder's reads of torch and CuPy arrays (Note [Torch arrays])
  auto t0 = Clock::now();
  bool had_entries = false;
  for (auto& e : state.entries) had_entries |= e->backend_key == cfg.backend.get();
  std::string recompile_reason;
  if (had_entries && rt::log_enabled(rt::LogTopic::Recompiles)) {
    for (auto& e : state.entries)
      if (e->backend_key == cfg.backend.get()) {
        recompile_reason = e->guards.check_verbose(view);
        break;
      }
  }

  auto entry = std::make_unique<CacheEntry>();
  entry->backend_key = cfg.backend.get();
  entry->backend_ref = cfg.backend;
  OutputGraph og;
  Status st;
  std::optional<GraphBreak> broke;
  std::optional<BreakState> partial;  // the break keeps the graph before it (Note [Break entries])
  std::string no_partial;             // why a break does not
  std::optional<ExplainBreak> explained;  // described while the trace's node numbers hold
  bool loop_stop = false;                 // the break moved out of a loop (Note [Breaks inside loops])
  PyCodeObject* budget_spent_in = nullptr;  // borrowed: whose loop ran the trace out of budget
  try {
    TraceConfig tcfg;
    tcfg.dynamic = cfg.dynamic;
    tcfg.element_loops = compiles_loops(cfg);
    tcfg.held_sizes = &state.held_sizes;
    tcfg.gave_up_loop = [](PyCodeObject* code) {
      CodeState* cs = code_state(code);
      return cs && cs->budget_failures >= 2;
    };
    Tracer tracer(og, view, fn, tcfg);
    broke = tracer.run();
    budget_spent_in = tracer.budget_spent_in();
    if (broke && cfg.explain) explained = explain_break(*broke, og, reinterpret_cast<PyCodeObject*>(fn->func_code));
    // NB: also before any array was seen: what comes after the break may compute on arrays (a
    // function whose first statement breaks still gets its resume function).
    // Note [Grad-mode blocks]: a break inside a block the trace entered keeps nothing from its
    // own snapshot; it stops before the block (below).
    const bool in_grad_block = broke && broke->grad_stop >= 0;
    if (broke && cfg.partial_graphs && !cfg.fullgraph && broke->snapshot && !in_grad_block) {
      try {
        partial = tracer.break_state(*broke->snapshot);
      } catch (GraphBreak& b) {
        no_partial = "the frame at the break cannot be rebuilt: " + b.reason;
      }
    }
    Replays replays = tracer.take_replays();  // of the trace whose graph is kept (Note [Side effects])
    if (broke && cfg.partial_graphs && !cfg.fullgraph && (og.saw_tensor || in_grad_block) && broke->snapshot &&
        broke->offset >= 0) {
      // Note [Breaks inside loops]: a break inside a loop keeps the graph before the loop; one
      // inside an inlined call keeps the graph before that call; one inside a grad-mode block,
      // the graph before the block's manager is made (Note [Grad-mode blocks]), or before the
      // loop when the loop holds the block.
      Expected<int> loop = bytecode::outer_loop_start(fn->func_code, broke->offset);
      if (!loop) PyErr_Clear();
      bool in_loop = loop && *loop >= 0;
      if (in_grad_block && in_loop && broke->grad_stop < *loop) in_loop = false;  // the block holds the loop
      const int stop_at = in_loop ? *loop : in_grad_block ? broke->grad_stop : broke->in_callee ? broke->offset : -1;
      if (stop_at >= 0) {
        partial.reset();  // what the break kept holds the loop's or the callee's work
        OutputGraph before;
        TraceConfig stop = tcfg;
        stop.stop_at = stop_at;
        auto as = std::make_shared<GraphBreak>(broke->without_snapshot());
        if (in_loop) as->reason += "; it is inside a loop, which runs in CPython";
        else if (in_grad_block) as->reason += "; it is inside a grad-mode block, which CPython enters";
        as->grad_stop = -1;
        stop.stop_as = as;
        Tracer again(before, view, fn, stop);
        std::optional<GraphBreak> at_stop = again.run();
        if (at_stop && at_stop->offset == stop_at && at_stop->snapshot) {
          try {
            partial = again.break_state(*at_stop->snapshot);
            replays = again.take_replays();
          } catch (GraphBreak& b) {
            no_partial = "the frame before the " + std::string(in_loop ? "loop" : "call") + " cannot be rebuilt: " + b.reason;
          }
        } else {
          no_partial = std::string("the trace did not reach the ") + (in_loop ? "loop" : "call") + " again";
        }
        // Before a loop, only work worth a break entry: a store of a constant alone would cost
        // every call a break code and a resume function that then runs everything in CPython.
        if (partial && in_loop && before.graph.num_calls() == 0 && before.input_writes.empty() && replays.empty()) {
          partial.reset();
          no_partial = "nothing before the loop to keep";
        }
        if (partial) {
          if (cfg.explain) explained = explain_break(*at_stop, before, reinterpret_cast<PyCodeObject*>(fn->func_code));
          before.saw_tensor = true;  // the frame computes on arrays, if not before the stop
          og = std::move(before);
          broke = std::move(at_stop);
          no_partial.clear();
          loop_stop = in_loop;
        }
      }
    }
    stats().trace_ms += ms_since(t0);
    if (broke && !partial) st = Status::unsupported(broke->message());
    // A partial graph whose outputs are all inputs and constants, that writes no input and holds
    // nothing with an effect or that may raise (a compiled loop whose index may be out of bounds:
    // CPython raises there before the break), has nothing to run.
    const bool must_run = std::any_of(og.graph.nodes().begin(), og.graph.nodes().end(), [&](const jit::Node& n) {
      return jit::has_side_effects(n) || jit::may_raise_on_values(og.graph, n);
    });
    const bool has_graph =
        !broke || (partial && (!og.graph.outputs().empty() || !og.input_writes.empty() || must_run));
    if (!broke || partial) entry->replays = std::move(replays);
    if (st.is_ok() && has_graph) {
      // Tensor graphs follow NEP 50 natively, and so does NumPy 2 (Note [Native promotion]).
      const NumPyHandles* np = numpy_handles();
      // CuPy 13 and later follow NEP 50 on either NumPy (Note [CuPy through NumPy's table]).
      og.graph.weak_scalars = og.array_kind == ArrayKind::Tensor || og.array_kind == ArrayKind::Torch ||
                              og.array_kind == ArrayKind::CuPy || !np || np->major >= 2;
      hoist_placeholders(og);
      auto report = jit::run_graph_passes(og.graph);
      if (!report) st = report.error();
    }
    if (st.is_ok() && has_graph) {
      auto program = run_backend(cfg, og, view);
      if (!program) {
        st = program.error();
      } else {
        entry->program = std::move(*program);
        entry->program->set_array_kind(og.array_kind == ArrayKind::None ? ArrayKind::NumPy : og.array_kind);
        entry->program->set_device(og.device);
        entry->program->set_grad_off(!og.requires_grad_inputs.empty());  // Note [Grad-mode blocks]
      }
    }
    if (partial && st.is_ok()) {
      Status made = make_break_entry(fn, *broke, *partial, loop_stop, *entry);
      if (!made.is_ok()) {
        no_partial = made.message();
        st = made.code() == StatusCode::Unsupported ? Status::unsupported(broke->message()) : made;
      }
    }
    if (partial && !st.is_ok()) {
      partial.reset();
      entry->program.reset();
      entry->break_code = OwnedRef();
    }
    if (!st.is_ok()) entry->replays = Replays{};  // the frame runs in CPython, stores and all
  } catch (const std::exception& ex) {
    st = Status::internal(std::string("C++ exception: ") + ex.what());
  } catch (GraphBreak& b) {  // from the tracer's helpers, called after the trace
    broke = std::move(b);
    st = Status::unsupported(broke->message());
  }
  if (PyErr_Occurred()) PyErr_Clear();

  if (!og.saw_tensor && !broke && !cfg.explain && !cfg.fullgraph) {
    // Plain Python (no arrays in or out, none made, traced to its end): nothing to compile. Stop
    // looking at it, so install() costs such code one co_extra lookup per call. (A trace that
    // broke before any array cannot tell: the rest of the frame may compute on arrays.)
    state.no_arrays = true;
    state.update_never();
    ++stats().skipped_codes;
    stats().compile_ms += ms_since(t0);
    entry->break_reason = "no array operations";
    entry->program.reset();  // run in CPython
    entry->break_code = OwnedRef();
    return entry;
  }
  if (st.code() == StatusCode::Internal || st.code() == StatusCode::InvalidArgument) {
    warn("framejit: internal error compiling " + state.name + ": " + st.message() +
         "; it runs in CPython from now on");
    stats().compile_ms += ms_since(t0);
    return nullptr;
  }
  entry->guards = std::move(og.guards);
  if (!cfg.explain) remember_failure(state, broke, budget_spent_in, *entry);
  if (st.code() == StatusCode::Unsupported && !broke) {
    // A graph pass or the backend declined the graph: no instruction to point at.
    broke.emplace();
    broke->reason = st.message();
  }
  if (broke) {
    ++stats().graph_breaks;
    std::string message = broke->message();
    if (!partial && !no_partial.empty()) message += "; the frame runs in CPython: " + no_partial;
    entry->break_reason = message;
    if (rt::log_enabled(rt::LogTopic::Breaks)) {
      rt::log_write(rt::LogTopic::Breaks, state.name + ": " + message);
      record(&EventLog::breaks, state.name, broke->message());
    }
    if (cfg.explain) {
      cfg.explain->break_reasons.push_back(broke->message());
      cfg.explain->breaks.push_back(explained ? *explained
                                              : explain_break(*broke, og, reinterpret_cast<PyCodeObject*>(fn->func_code)));
      cfg.explain->breaks.back().resumed = partial.has_value();
      cfg.explain->breaks.back().no_resume = no_partial;
    }
    // The snapshot's values hold the frame's objects: the entry keeps the break without them
    // (Note [Break snapshot]).
    entry->broke = broke->without_snapshot();
    if (broke_out) *broke_out = *entry->broke;
    if (cfg.fullgraph) {
      std::string all = list_breaks(fn, view, cfg, *broke);
      stats().compile_ms += ms_since(t0);
      PyErr_Format(unsupported_error() ? unsupported_error() : PyExc_RuntimeError,
                   "framejit could not capture %s in one graph (fullgraph=True): %s%s", state.name.c_str(),
                   broke->message().c_str(), all.c_str());
      return nullptr;
    }
  }
  if (st.is_ok()) {
    if (entry->program) {
      ++stats().captured;
      stats().ops += og.graph.num_calls();
    }
    if (!partial) entry->output = std::move(og.output);
    for (const GraphInput& in : og.inputs) entry->input_slots.push_back(in.slot);
    if (entry->program && rt::log_enabled(rt::LogTopic::Graph))
      rt::log_write(rt::LogTopic::Graph, state.name + "\n" + og.graph.to_string());
    if (entry->program && cfg.explain && og.graph.num_calls() > 0) {  // no empty graphs
      cfg.explain->graphs.push_back(og.graph.to_string());
      cfg.explain->op_count += og.graph.num_calls();
    }
  }
  std::vector<std::string> guard_lines = entry->guards.describe();
  for (size_t i = 0; i < og.symbol_names.size(); ++i)
    guard_lines.insert(guard_lines.begin() + i, "s" + std::to_string(i) + " = " + og.symbol_names[i]);
  if (rt::log_enabled(rt::LogTopic::Guards))
    rt::log_write(rt::LogTopic::Guards, state.name + "\n" + text_lines(guard_lines));
  if (cfg.explain)
    for (auto& g : guard_lines) cfg.explain->guards.push_back(g);
  if (had_entries && !cfg.explain) {
    ++stats().recompiles;
    if (rt::log_enabled(rt::LogTopic::Recompiles)) {
      rt::log_write(rt::LogTopic::Recompiles, "recompiling " + state.name + ": " + recompile_reason);
      record(&EventLog::recompiles, state.name, recompile_reason);
    }
  }
  stats().compile_ms += ms_since(t0);
  return entry;
}

}  // namespace framejit::frontend
