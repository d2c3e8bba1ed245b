// thread_state.h — what governs frames on this thread: the active config, and whether framejit
// itself is running Python.
#pragma once

#include "frontend/options/config.h"

namespace framejit::frontend {

// Which config governs frames on this thread: the innermost framejit.compile wrapper's, else
// install()'s. `busy` is set while framejit itself runs Python (tracing, probes, backends,
// compiled programs, @disable'd functions): those frames always run in CPython.
struct ThreadState {
  CompileConfig* config = nullptr;
  bool busy = false;
  bool reduce_overhead = false;  // programs run now replay CUDA graphs (the calling config's mode)
};

// NB: one thread_local struct, read once per frame: in a shared library every thread_local access
// is a __tls_get_addr call, which is most of what a frame that framejit ignores costs.
// initial-exec: the module is loaded at import, with static TLS room to spare; this turns each
// access into one %fs-relative load instead of a call. constinit: no dynamic initialization, so
// other files reach it without a TLS wrapper call.
extern constinit thread_local ThreadState g_thread __attribute__((tls_model("initial-exec")));

/// While alive, this thread runs framejit's own Python: no frame is traced (as while a compiled
/// program or a trace runs). For entry points that run programs outside the hook.
class HookBusyScope {
public:
  HookBusyScope() : saved_(g_thread.busy) { g_thread.busy = true; }
  ~HookBusyScope() { g_thread.busy = saved_; }
  HookBusyScope(const HookBusyScope&) = delete;
  HookBusyScope& operator=(const HookBusyScope&) = delete;

private:
  bool saved_;
};

/// While alive, programs run on this thread in the mode of the config that called them
/// (CompileConfig::reduce_overhead): cache entries are shared between configs, the mode is not.
class ModeScope {
public:
  explicit ModeScope(bool reduce_overhead) : saved_(g_thread.reduce_overhead) {
    g_thread.reduce_overhead = reduce_overhead;
  }
  ~ModeScope() { g_thread.reduce_overhead = saved_; }
  ModeScope(const ModeScope&) = delete;
  ModeScope& operator=(const ModeScope&) = delete;

private:
  bool saved_;
};

}  // namespace framejit::frontend
