// run_hit.cpp — the one cache-hit path (Note [One hit path]).
#include "frontend/cache/run_hit.h"

#include <algorithm>
#include <exception>
#include <new>

#include "frontend/interop/torch_array.h"
#include "frontend/options/thread_state.h"

namespace framejit::frontend {

namespace {

// The Tensor ops' code objects whose programs run on this thread, innermost last. Bounded: past
// kMaxRunning nested ops the outer ones are no longer recorded (re-entry that deep is not a case).
constexpr int kMaxRunning = 8;
thread_local PyObject* t_running[kMaxRunning];  // borrowed identities
thread_local int t_depth = 0;

struct RunningScope {
  bool pushed;
  explicit RunningScope(PyObject* code) : pushed(code && t_depth < kMaxRunning) {
    if (pushed) t_running[t_depth++] = code;
  }
  ~RunningScope() {
    if (pushed) --t_depth;
  }
  RunningScope(const RunningScope&) = delete;
  RunningScope& operator=(const RunningScope&) = delete;
};

// The most recently used entry whose guards pass, moved to the front; null when none does.
CacheEntry* find_entry(CodeState& cs, const FrameView& view, const HitRequest& req, HitFrame& frame,
                       int* same_backend) noexcept {
  auto& entries = cs.entries;
  for (size_t i = 0; i < entries.size(); ++i) {
    CacheEntry* e = entries[i].get();
    if (req.backend_key && e->backend_key != req.backend_key) continue;
    if (same_backend) ++*same_backend;
    if (e->guards.max_local() >= req.locals_available) continue;
    if (!e->guards.check(view, frame.slots, frame.symbols)) continue;
    // NB: a rotation of unique_ptrs cannot throw.
    if (i) std::rotate(entries.begin(), entries.begin() + i, entries.begin() + i + 1);
    return e;
  }
  return nullptr;
}

}  // namespace

bool fits_hit_path(const CacheEntry& e) noexcept {
  return e.guards.num_slots() <= kMaxHitSlots && e.guards.num_symbols() <= kMaxHitSymbols &&
         e.input_slots.size() <= static_cast<size_t>(kMaxHitIO) && e.break_nargs <= kMaxHitIO &&
         (!e.program || e.program->num_outputs() <= kMaxHitIO);
}

bool op_running(PyObject* code) noexcept {
  return std::find(t_running, t_running + t_depth, code) != t_running + t_depth;
}

namespace {

// Runs e's program on the inputs its guards left in `frame`; false with a Python exception set,
// as eager code would raise it. `outputs` receives new references.
bool run_program(CacheEntry& e, const HitFrame& frame, PyObject* running_code, PyObject** outputs) noexcept {
  PyObject* inputs[kMaxHitIO];  // borrowed
  const int* input_slots = e.input_slots.data();
  const size_t nin = e.input_slots.size();
  for (size_t i = 0; i < nin; ++i) inputs[i] = frame.slots[input_slots[i]];
  try {
    RunningScope running(running_code);
    HookBusyScope busy;  // the program's own Python (extern steps) is not traced
    std::optional<TorchGradOff> grad_off;
    if (e.program->grad_off()) grad_off.emplace();  // Note [Grad-mode blocks]
    return e.program->run(inputs, outputs);
  } catch (const std::bad_alloc&) {
    // NB: nothing may unwind through CPython's frames. The outputs made before the throw are
    // lost (leaked), which is the price of not trusting a half-run program's output array.
    PyErr_NoMemory();
  } catch (const std::exception& ex) {
    PyErr_Format(PyExc_RuntimeError, "framejit: internal error while running a compiled program: %s", ex.what());
  } catch (...) {
    PyErr_SetString(PyExc_RuntimeError, "framejit: internal error while running a compiled program");
  }
  return false;
}

// The entry's logged stores (Note [Side effects]), right after its program; on failure the
// outputs are released and the store's exception is the call's.
bool replay(CacheEntry& e, PyObject** outputs, const HitFrame& frame, const FrameView& view) noexcept {
  if (e.replays.empty()) return true;
  if (replay_effects(e.replays, outputs, frame.slots, view)) return true;
  const int n = e.program ? e.program->num_outputs() : 0;
  for (int i = 0; i < n; ++i) Py_CLEAR(outputs[i]);
  return false;
}

// A partial graph (Note [Break entries]): the graph's values, then the break code in place of the
// frame, called with the frame's argument slots and those values.
HitResult run_break(CacheEntry& e, const FrameView& view, const HitFrame& frame, PyObject* running_code) noexcept {
  PyObject* outputs[kMaxHitIO];  // new refs once run() succeeds
  if (e.program && !run_program(e, frame, running_code, outputs)) return {HitKind::Answered, nullptr};
  // The stores made before the break are done before CPython runs the breaking instruction.
  if (!replay(e, outputs, frame, view)) return {HitKind::Answered, nullptr};
  PyObject* args[kMaxHitIO + 1];  // borrowed, but the last: a new ref
  args[e.break_nargs] = build_return(e.output, outputs, frame.slots);
  release_replay_outputs(e.replays, outputs);
  if (!args[e.break_nargs]) return {HitKind::Answered, nullptr};
  for (int i = 0; i < e.break_nargs; ++i) args[i] = view.localsplus[i];
  PyObject* result = nullptr;
  // The function is made per call: the frame's closure is the caller's, not the entry's.
  if (PyObject* fn = PyFunction_New(e.break_code.get(), view.globals)) {  // new ref
    if (!view.closure || PyFunction_SetClosure(fn, view.closure) == 0)
      result = PyObject_Vectorcall(fn, args, static_cast<size_t>(e.break_nargs) + 1, nullptr);
    Py_DECREF(fn);
  }
  Py_DECREF(args[e.break_nargs]);
  return {HitKind::Answered, result};
}

}  // namespace

HitResult run_entry(CacheEntry& e, const FrameView& view, const HitFrame& frame, PyObject* running_code) noexcept {
  if (e.break_code && (!e.program || e.program->can_run_now())) return run_break(e, view, frame, running_code);
  // A graph-break entry: CPython runs the frame (its callees still come through the hook). So
  // does a program that cannot honour the current NumPy error state.
  if (!e.program || !e.program->can_run_now()) return {HitKind::RunInCPython, nullptr};
  PyObject* outputs[kMaxHitIO];  // new refs once run() succeeds
  if (!run_program(e, frame, running_code, outputs)) return {HitKind::Answered, nullptr};
  if (!replay(e, outputs, frame, view)) return {HitKind::Answered, nullptr};
  PyObject* result = build_return(e.output, outputs, frame.slots);  // new ref
  release_replay_outputs(e.replays, outputs);
  return {HitKind::Answered, result};
}

HitResult run_hit(CodeState& cs, const FrameView& view, const HitRequest& request, HitFrame& frame,
                  int* same_backend) noexcept {
  ArrayRunScope array_scope;  // the guards' and the program's reads of torch and CuPy arrays, made once
  CacheEntry* e = find_entry(cs, view, request, frame, same_backend);
  if (!e) return {HitKind::Miss, nullptr};
  if (request.frameless && e->break_code) return {HitKind::RunInCPython, nullptr};
  ModeScope mode(request.reduce_overhead);
  return run_entry(*e, view, frame, request.running_code);
}

}  // namespace framejit::frontend
