// eval_frame.cpp — the PEP 523 frame evaluator (CPython 3.11, 3.12 and 3.13 frame layouts), the
// cache lookup on the hot path, and the wrapper types that switch it on for a call.
#include "frontend/hook/eval_frame.h"

#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

#include "frontend/cache/code_extra.h"
#include "frontend/cache/code_state.h"
#include "frontend/cache/run_hit.h"
#include "frontend/compile/compile_frame.h"
#include "frontend/cpython/python_env.h"
#include "frontend/options/thread_state.h"
#include "runtime/log.h"

namespace framejit::frontend {

namespace {

std::shared_ptr<CompileConfig> g_installed;
CompileConfig* g_installed_raw = nullptr;  // g_installed.get(), read on every frame
int g_hook_users = 0;  // wrappers in flight + install(); guarded by the GIL

// ---- CPython's interpreter frame, per version ------------------------------------------------
// Every use of _PyInterpreterFrame's layout is in this section.

#if PY_VERSION_HEX >= 0x030D0000
// 3.13: f_executable is the code object for function frames (None only for C-stack shim frames,
// which never reach an evaluator).
inline PyCodeObject* frame_code(_PyInterpreterFrame* f) { return reinterpret_cast<PyCodeObject*>(f->f_executable); }
inline PyFunctionObject* frame_function(_PyInterpreterFrame* f) {
  return reinterpret_cast<PyFunctionObject*>(f->f_funcobj);
}
#elif PY_VERSION_HEX >= 0x030C0000
inline PyCodeObject* frame_code(_PyInterpreterFrame* f) { return f->f_code; }
inline PyFunctionObject* frame_function(_PyInterpreterFrame* f) {
  return reinterpret_cast<PyFunctionObject*>(f->f_funcobj);
}
#else
inline PyCodeObject* frame_code(_PyInterpreterFrame* f) { return f->f_code; }
inline PyFunctionObject* frame_function(_PyInterpreterFrame* f) { return f->f_func; }
#endif

// Note [Answering without running the frame]
// A cache hit (or a fullgraph error) answers the call without evaluating the frame CPython pushed
// for it, so somebody must clear the frame (drop its references) and pop it off the thread's data
// stack. 3.11: _PyEval_Vector does that after any evaluator returns. 3.12 and 3.13: the
// evaluation loop does it when the frame returns or unwinds, so an evaluator that never runs the
// loop must do it itself. 3.13 exports the loop's own routine; 3.12 does not, and its steps
// (_PyFrame_ClearExceptCode + _PyThreadState_PopFrame for a frame that never ran and so has no
// frame object) are spelled out below from the 3.12 layout.
#if PY_VERSION_HEX >= 0x030D0000
extern "C" void _PyEval_FrameClearAndPop(PyThreadState* ts, _PyInterpreterFrame* frame);
void dispose_unrun_frame(PyThreadState* ts, _PyInterpreterFrame* frame) { _PyEval_FrameClearAndPop(ts, frame); }
#elif PY_VERSION_HEX >= 0x030C0000
void dispose_unrun_frame(PyThreadState* ts, _PyInterpreterFrame* frame) {
  // Clear: the frame owns (strong) its locals, f_locals, the function and the code object.
  for (int i = 0; i < frame->stacktop; ++i) Py_XDECREF(frame->localsplus[i]);
  Py_XDECREF(frame->f_locals);
  Py_DECREF(frame->f_funcobj);
  Py_DECREF(frame->f_code);
  // Pop: the frame is the top of the data stack; if it opened a chunk, free the chunk.
  PyObject** base = reinterpret_cast<PyObject**>(frame);
  _PyStackChunk* chunk = ts->datastack_chunk;
  if (base == &chunk->data[0]) {
    _PyStackChunk* previous = chunk->previous;  // never null: the root chunk is never popped
    ts->datastack_top = &previous->data[previous->top];
    ts->datastack_chunk = previous;
    ts->datastack_limit = reinterpret_cast<PyObject**>(reinterpret_cast<char*>(previous) + previous->size);
    PyObjectArenaAllocator arena;
    PyObject_GetArenaAllocator(&arena);
    arena.free(arena.ctx, chunk, chunk->size);
  } else {
    ts->datastack_top = base;
  }
}
#else
void dispose_unrun_frame(PyThreadState*, _PyInterpreterFrame*) {}
#endif

/// Whether framejit may answer for this frame: a fresh function frame on the thread's stack. A
/// frame that already has a frame object (someone looked at it) is left to CPython, since
/// disposing of it would need the frame object's ownership hand-off (Note [Answering without
/// running the frame]).
inline bool frame_is_fresh_function(_PyInterpreterFrame* f) {
  return f->owner == FRAME_OWNED_BY_THREAD && f->frame_obj == nullptr;
}

constexpr int kUntraceable = CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE;

// The hook's two exits: CPython runs the frame, or framejit answered for it.
PyObject* eval_default(PyThreadState* ts, _PyInterpreterFrame* frame, int throwflag) {
  return _PyEval_EvalFrameDefault(ts, frame, throwflag);
}

/// Leaves with `result` (new ref, or null with an exception set) for a frame that never ran.
PyObject* eval_answered(PyThreadState* ts, _PyInterpreterFrame* frame, PyObject* result) {
  dispose_unrun_frame(ts, frame);
  return result;
}

// How the hook leaves a frame past its first tests (Note [Exits of the hook]).
struct Exit {
  bool answered = false;       // false: CPython evaluates the frame
  PyObject* result = nullptr;  // answered: new ref, or null with an exception set
};
Exit run_default() { return {}; }
Exit answered(PyObject* result) { return {true, result}; }
Exit from_hit(const HitResult& r) { return r.kind == HitKind::Answered ? answered(r.value) : run_default(); }

void report_limit(CodeState& cs) {
  if (cs.limit_reported) return;
  cs.limit_reported = true;
  std::string msg = "framejit: " + cs.name + " hit config.recompile_limit (" +
                    std::to_string(settings().recompile_limit) + "); it runs in CPython from now on";
  if (rt::log_enabled(rt::LogTopic::Recompiles)) rt::log_write(rt::LogTopic::Recompiles, msg);
  // A warning only for code framejit compiled something of: a function none of whose captures
  // held a graph (a library's helper a graph break handed to CPython, called with new arguments
  // each time) loses nothing, and a warning about it is noise.
  const bool compiled_some =
      std::any_of(cs.entries.begin(), cs.entries.end(), [](const auto& e) { return e->program != nullptr; });
  if (compiled_some && PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 1) < 0) PyErr_Clear();
}

void give_up(CodeState& cs, const std::string& reason) {
  cs.give_up(reason);
  if (rt::log_enabled(rt::LogTopic::Breaks))
    rt::log_write(rt::LogTopic::Breaks, cs.name + ": given up on, it runs in CPython from now on: " + reason);
}

std::string describe_code(PyCodeObject* code) {
  const char* name = PyUnicode_AsUTF8(code->co_qualname);
  const char* file = PyUnicode_AsUTF8(code->co_filename);
  if (!name || !file) PyErr_Clear();
  return std::string(name ? name : "?") + " (" + (file ? file : "?") + ":" + std::to_string(code->co_firstlineno) + ")";
}

Exit compile_and_run(CompileConfig* cfg, CodeState* cs, PyFunctionObject* fn, const FrameView& view) {
  std::unique_ptr<CacheEntry> entry;
  {
    HookBusyScope busy;
    entry = compile_frame(*cfg, fn, view, *cs);
  }
  if (!entry) {
    if (PyErr_Occurred()) return answered(nullptr);  // fullgraph=True: framejit.Unsupported
    cs->failed = true;                                // an internal error: never again for this code
    cs->update_never();
    return run_default();
  }
  HitFrame hit;
  bool usable = fits_hit_path(*entry);
  if (usable && !entry->guards.check(view, hit.slots, hit.symbols)) {
    // The guards must hold for the very frame they were made from; if not, framejit is wrong.
    std::string msg = "framejit: guards of " + cs->name + " fail on the frame that made them: " +
                      entry->guards.check_verbose(view) + "; running it in CPython";
    if (PyErr_WarnEx(PyExc_RuntimeWarning, msg.c_str(), 1) < 0) PyErr_Clear();
    usable = false;
  }
  if (!usable) {
    cs->failed = true;
    cs->update_never();
    return run_default();
  }
  ModeScope mode(cfg->reduce_overhead);
  if (cfg->explain || cs->no_arrays) {
    // explain(): run once, keep nothing. No arrays: nothing worth keeping.
    return from_hit(run_entry(*entry, view, hit));
  }
  cs->entries.insert(cs->entries.begin(), std::move(entry));
  return from_hit(run_entry(*cs->entries.front(), view, hit));
}

Py_ssize_t g_extra_index = -1;  // framejit's co_extra slot, set when the hook is first enabled

// The pointer may carry kNeverTag (Note [Tagged co_extra]).
inline void* raw_code_state(PyCodeObject* code) { return read_code_extra(code, g_extra_index); }
inline CodeState* fast_code_state(PyCodeObject* code) { return untag(raw_code_state(code)); }

PyObject* callback_slow(PyThreadState* ts, _PyInterpreterFrame* frame, CompileConfig* cfg, CodeState* cs);

PyObject* callback(PyThreadState* ts, _PyInterpreterFrame* frame, int throwflag) {
  PyCodeObject* code = frame_code(frame);
  void* raw = raw_code_state(code);
  if (reinterpret_cast<uintptr_t>(raw) & kNeverTag) return eval_default(ts, frame, throwflag);
  ThreadState& t = g_thread;
  CompileConfig* cfg = t.config ? t.config : g_installed_raw;
  if (!cfg || t.busy || throwflag) return eval_default(ts, frame, throwflag);
  CodeState* cs = static_cast<CodeState*>(raw);
  // The common case under install(): code framejit has already decided to leave alone.
  if (cs && cs->never && reinterpret_cast<PyObject*>(code) != cfg->root_code) return eval_default(ts, frame, 0);
  // Module bodies, class bodies (not CO_OPTIMIZED), generators and coroutines run in CPython.
  if (!frame_is_fresh_function(frame) || (code->co_flags & kUntraceable) || !(code->co_flags & CO_OPTIMIZED))
    return eval_default(ts, frame, 0);
  return callback_slow(ts, frame, cfg, cs);
}

// Note [Exits of the hook]
// Past its first tests the hook decides, in frame_exit(), between two exits: CPython evaluates the
// frame (eval_default), or framejit answered the call (eval_answered disposes of the unrun frame).
// The decision runs C++ that can throw (tracing and compiling allocate); nothing may unwind
// through CPython's frames, so callback_slow() catches everything at this one boundary and an
// internal failure there becomes default evaluation (the frame has not run yet) with the code
// object marked failed. The exits themselves run outside the try: a frame is never evaluated twice.
Exit frame_exit(PyCodeObject* code, _PyInterpreterFrame* frame, CompileConfig* cfg, CodeState* cs) {
  if (!cs->skip_known) {
    HookBusyScope busy;
    cs->skip = is_library_code(code);
    cs->name = describe_code(code);
    cs->skip_known = true;
    cs->update_never();
  }
  if (cs->failed || cs->no_arrays || cs->gave_up || (cs->skip && reinterpret_cast<PyObject*>(code) != cfg->root_code))
    return run_default();

  ++stats().frames;
  PyFunctionObject* fn = frame_function(frame);
  FrameView view{frame->localsplus, frame->f_globals, frame->f_builtins, fn->func_closure};
  if (!cfg->explain) {
    HitFrame hit;
    int same_backend = 0;
    HitRequest request;
    request.backend_key = cfg->backend.get();
    request.reduce_overhead = cfg->reduce_overhead;
    HitResult r = run_hit(*cs, view, request, hit, &same_backend);
    if (r.kind != HitKind::Miss) {
      ++stats().cache_hits;
      if (cs->misses_past_limit) cs->misses_past_limit = 0;
      return from_hit(r);
    }
    ++stats().cache_misses;
    if (same_backend >= settings().recompile_limit) {
      ++stats().unsupported_frames;
      report_limit(*cs);
      // Note [Remembered failures]: entries that keep missing are not worth their guards.
      if (++cs->misses_past_limit >= kGiveUpMisses)
        give_up(*cs, std::to_string(kGiveUpMisses) + " calls in a row missed every cache entry past config.recompile_limit");
      return run_default();
    }
  }
  return compile_and_run(cfg, cs, fn, view);
}

// Everything past the first tests: kept out of line so the fast exit above has no stack frame.
__attribute__((noinline)) PyObject* callback_slow(PyThreadState* ts, _PyInterpreterFrame* frame, CompileConfig* cfg,
                                                  CodeState* cs) {
  PyCodeObject* code = frame_code(frame);
  if (!cs) cs = code_state(code);
  if (!cs) return eval_default(ts, frame, 0);
  Exit exit;
  try {
    exit = frame_exit(code, frame, cfg, cs);
  } catch (...) {
    // An internal failure (bad_alloc while tracing, ...): CPython runs this code from now on.
    PyErr_Clear();
    cs->failed = true;
    cs->update_never();
    exit = run_default();
  }
  return exit.answered ? eval_answered(ts, frame, exit.result) : eval_default(ts, frame, 0);
}

void hook_acquire() {
  if (g_extra_index < 0) g_extra_index = code_extra_index();
  if (g_hook_users++ == 0) _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), callback);
}

void hook_release() {
  // Without a custom evaluator CPython inlines Python-to-Python calls; give that back as soon
  // as nothing needs the hook.
  if (--g_hook_users == 0) _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), _PyEval_EvalFrameDefault);
}

// ---- framejit.compile wrapper ---------------------------------------------------------------

// Note [Cache hits without a frame]
// When the wrapped function is called with exactly its positional parameters (no keywords,
// defaults, *args or cells), the arguments array already is what the frame's fast locals would
// start as. The guards then run on it directly and a hit returns without CPython ever pushing a
// frame. Anything else — a miss, a graph-break entry, another call shape — takes the normal path.
bool try_without_frame(PyObject* fn, CompileConfig* cfg, PyObject* const* args, size_t nargsf, PyObject* kwnames,
                       PyObject** result) {
  if (kwnames || !PyFunction_Check(fn)) return false;
  auto* func = reinterpret_cast<PyFunctionObject*>(fn);
  auto* code = reinterpret_cast<PyCodeObject*>(func->func_code);
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs != code->co_argcount || code->co_kwonlyargcount || code->co_ncellvars || code->co_nfreevars ||
      (code->co_flags & (CO_VARARGS | CO_VARKEYWORDS | kUntraceable)))
    return false;
  CodeState* cs = fast_code_state(code);
  if (!cs || cs->failed || cs->no_arrays || cs->gave_up || cs->entries.empty()) return false;
  FrameView view{const_cast<PyObject**>(args), func->func_globals, func->func_builtins, func->func_closure};
  HitFrame hit;
  HitRequest request;
  request.backend_key = cfg->backend.get();
  request.locals_available = static_cast<int>(nargs);  // the guards may read only the arguments
  request.frameless = true;
  request.reduce_overhead = cfg->reduce_overhead;
  HitResult r = run_hit(*cs, view, request, hit);
  if (r.kind != HitKind::Answered) return false;  // a miss, or CPython must run it: the normal path
  ++stats().frames;
  ++stats().cache_hits;
  *result = r.value;
  return true;
}

struct CompiledFunction {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* fn;     // strong
  PyObject* dict;   // strong, may be null: __name__, __wrapped__ ... from functools.update_wrapper
  std::shared_ptr<CompileConfig>* cfg;  // owned
  bool disabled;    // a @framejit.disable wrapper instead
};

PyObject* compiled_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  auto* cf = reinterpret_cast<CompiledFunction*>(self);
  if (cf->disabled) {
    bool saved = g_thread.busy;
    g_thread.busy = true;
    PyObject* r = PyObject_Vectorcall(cf->fn, args, nargsf, kwnames);
    g_thread.busy = saved;
    return r;
  }
  CompileConfig* cfg = cf->cfg->get();
  if (PyObject* r = nullptr; !g_thread.busy && try_without_frame(cf->fn, cfg, args, nargsf, kwnames, &r)) return r;
  CompileConfig* saved = g_thread.config;
  g_thread.config = cfg;
  hook_acquire();
  PyObject* r = PyObject_Vectorcall(cf->fn, args, nargsf, kwnames);
  hook_release();
  g_thread.config = saved;
  return r;
}

void compiled_dealloc(PyObject* self) {
  auto* cf = reinterpret_cast<CompiledFunction*>(self);
  PyObject_GC_UnTrack(self);
  Py_CLEAR(cf->fn);
  Py_CLEAR(cf->dict);
  delete cf->cfg;
  cf->cfg = nullptr;
  Py_TYPE(self)->tp_free(self);
}

int compiled_traverse(PyObject* self, visitproc visit, void* arg) {
  auto* cf = reinterpret_cast<CompiledFunction*>(self);
  Py_VISIT(cf->fn);
  Py_VISIT(cf->dict);
  if (cf->cfg && *cf->cfg) Py_VISIT((*cf->cfg)->backend.get());
  return 0;
}

int compiled_clear(PyObject* self) {
  auto* cf = reinterpret_cast<CompiledFunction*>(self);
  Py_CLEAR(cf->fn);
  Py_CLEAR(cf->dict);
  return 0;
}

PyObject* compiled_descr_get(PyObject* self, PyObject* obj, PyObject*) {
  // Used as a method decorator: bind like a function does.
  if (!obj || obj == Py_None) {
    Py_INCREF(self);
    return self;
  }
  return PyMethod_New(self, obj);
}

PyObject* compiled_repr(PyObject* self) {
  auto* cf = reinterpret_cast<CompiledFunction*>(self);
  return PyUnicode_FromFormat(cf->disabled ? "<framejit.disable of %R>" : "<framejit.compile of %R>", cf->fn);
}

PyObject* compiled_get_fn(PyObject* self, void*) {
  PyObject* fn = reinterpret_cast<CompiledFunction*>(self)->fn;
  Py_INCREF(fn);
  return fn;
}

PyGetSetDef compiled_getset[] = {
    {"_framejit_fn", compiled_get_fn, nullptr, "the wrapped callable", nullptr},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyTypeObject CompiledFunctionType = [] {
  // Zeroed, then the header and the slots we use (a braced initializer would name every slot).
  PyTypeObject t;
  std::memset(&t, 0, sizeof t);
  t.ob_base = PyVarObject{PyObject_HEAD_INIT(nullptr) 0};
  t.tp_name = "framejit.CompiledFunction";
  t.tp_basicsize = sizeof(CompiledFunction);
  t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR;
  t.tp_vectorcall_offset = offsetof(CompiledFunction, vectorcall);
  t.tp_call = PyVectorcall_Call;
  t.tp_dealloc = compiled_dealloc;
  t.tp_traverse = compiled_traverse;
  t.tp_clear = compiled_clear;
  t.tp_descr_get = compiled_descr_get;
  t.tp_repr = compiled_repr;
  t.tp_getset = compiled_getset;
  t.tp_dictoffset = offsetof(CompiledFunction, dict);
  t.tp_doc = "A function compiled by framejit.compile (or exempted by framejit.disable).";
  return t;
}();

PyObject* make_wrapper(PyObject* fn, std::shared_ptr<CompileConfig> cfg, bool disabled) {
  auto* cf = PyObject_GC_New(CompiledFunction, &CompiledFunctionType);
  if (!cf) return nullptr;
  cf->vectorcall = compiled_vectorcall;
  Py_INCREF(fn);
  cf->fn = fn;
  cf->dict = nullptr;
  cf->cfg = new std::shared_ptr<CompileConfig>(std::move(cfg));
  cf->disabled = disabled;
  PyObject_GC_Track(cf);
  return reinterpret_cast<PyObject*>(cf);
}

}  // namespace

PyObject* make_compiled_function(PyObject* fn, std::shared_ptr<CompileConfig> cfg) {
  if (PyFunction_Check(fn)) cfg->root_code = PyFunction_GET_CODE(fn);
  return make_wrapper(fn, std::move(cfg), false);
}

PyObject* make_disabled_function(PyObject* fn) {
  if (PyFunction_Check(fn)) {
    if (CodeState* cs = code_state(reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn)))) {
      cs->skip = true;  // also when reached directly, not through the wrapper
      cs->skip_known = true;
      cs->update_never();
    }
  }
  return make_wrapper(fn, nullptr, true);
}

bool is_disabled_function(PyObject* obj) {
  return Py_TYPE(obj) == &CompiledFunctionType && reinterpret_cast<CompiledFunction*>(obj)->disabled;
}

PyObject* compiled_function_target(PyObject* obj) {
  if (Py_TYPE(obj) != &CompiledFunctionType) return nullptr;
  auto* cf = reinterpret_cast<CompiledFunction*>(obj);
  return !cf->disabled && PyFunction_Check(cf->fn) ? cf->fn : nullptr;
}

PyObject* compiled_function_backend(PyObject* obj) {
  if (Py_TYPE(obj) != &CompiledFunctionType) return nullptr;
  auto* cf = reinterpret_cast<CompiledFunction*>(obj);
  return !cf->disabled && cf->cfg && *cf->cfg ? (*cf->cfg)->backend.get() : nullptr;
}

void install(std::shared_ptr<CompileConfig> cfg) {
  bool was = static_cast<bool>(g_installed);
  g_installed = std::move(cfg);
  g_installed_raw = g_installed.get();
  if (!was) hook_acquire();
}

void uninstall() {
  if (!g_installed) return;
  g_installed.reset();
  g_installed_raw = nullptr;
  hook_release();
}

bool installed() { return static_cast<bool>(g_installed); }

namespace {
PyObject* bare_evaluator(PyThreadState* ts, _PyInterpreterFrame* frame, int throwflag) {
  return _PyEval_EvalFrameDefault(ts, frame, throwflag);
}
}  // namespace

bool set_bare_evaluator(bool on) {
  if (g_hook_users) return false;  // framejit's own evaluator is in use
  _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), on ? bare_evaluator : _PyEval_EvalFrameDefault);
  return true;
}

PyObject* call_with_config(PyObject* fn, PyObject* args, PyObject* kwargs, CompileConfig* cfg) {
  CompileConfig* saved = g_thread.config;
  g_thread.config = cfg;
  hook_acquire();
  PyObject* r = PyObject_Call(fn, args, kwargs);
  hook_release();
  g_thread.config = saved;
  return r;
}

bool init_hook_types(PyObject* module) {
  if (PyType_Ready(&CompiledFunctionType) < 0) return false;
  Py_INCREF(&CompiledFunctionType);
  return PyModule_AddObject(module, "CompiledFunction", reinterpret_cast<PyObject*>(&CompiledFunctionType)) == 0;
}

}  // namespace framejit::frontend
