// code_state.h — per-code-object state stored on co_extra: the cache entries (most recently hit first),
// the skip flag and what was already reported.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontend/program/program.h"
#include "frontend/guards/guards.h"
#include "frontend/output_graph/output_graph.h"
#include "frontend/trace/graph_break.h"

namespace framejit::frontend {

struct CompileConfig;

/// One compiled version of a code object, valid while its guards pass.
struct CacheEntry {
  GuardSet guards;
  std::unique_ptr<Program> program;  // null: the trace broke; the frame runs in CPython
  OutputSpec output;
  std::vector<int> input_slots;      // guard slot of each graph input
  const void* backend_key = nullptr;  // the backend object that compiled it (borrowed identity)
  OwnedRef backend_ref;              // keeps backend_key's object alive
  std::string break_reason;          // why there is no program: the break's message, or a skip
  std::optional<GraphBreak> broke;  // the trace broke: kind, location, exception type (no snapshot)
};

/// Everything framejit keeps for one code object (owned by the code object's co_extra slot).
struct CodeState {
  std::vector<std::unique_ptr<CacheEntry>> entries;
  bool skip_known = false;
  bool skip = false;          // library code: never traced (cached)
  bool failed = false;        // an internal error: never traced again until reset()
  bool no_arrays = false;     // its trace touched no arrays: runs in CPython until reset()
  bool limit_reported = false;
  /// skip || failed || no_arrays, kept in one flag for the hook's first test.
  bool never = false;
  /// Recomputes `never` and mirrors failed/no_arrays into the co_extra pointer's low bit (see
  /// Note [Tagged co_extra]).
  void update_never();
  PyCodeObject* code = nullptr;  // borrowed: the code object owns this state
  std::string name;           // "fn (file.py:12)"
};

// Note [Tagged co_extra]
// Under install() most frames belong to code framejit has given up on (no arrays, or an internal
// failure). The hook must send those to CPython at the cost of as few loads as possible, so bit 0
// of the co_extra pointer says "never trace, whatever the config": the hook tests it without
// touching the CodeState or any thread-local state. Library code (`skip`) is not tagged, because
// a framejit.compile of a library function still traces that one function.
constexpr uintptr_t kNeverTag = 1;
inline CodeState* untag(void* p) { return reinterpret_cast<CodeState*>(reinterpret_cast<uintptr_t>(p) & ~kNeverTag); }

/// The state of `code`, created on first use; nullptr if co_extra is unavailable.
CodeState* code_state(PyCodeObject* code);
/// framejit's co_extra slot (the hook reads it directly on the hot path).
Py_ssize_t code_extra_index();
/// Drops every cache entry and flag of every live code object.
void reset_all_code_states();
/// Number of live cache entries (for tests and stats).
long long count_cache_entries();


}  // namespace framejit::frontend
