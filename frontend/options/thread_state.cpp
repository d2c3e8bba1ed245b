// thread_state.cpp — the per-thread state of thread_state.h.
#include "frontend/options/thread_state.h"

namespace framejit::frontend {

constinit thread_local ThreadState g_thread __attribute__((tls_model("initial-exec")));

}  // namespace framejit::frontend
