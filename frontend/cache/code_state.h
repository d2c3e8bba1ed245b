// code_state.h — per-code-object state stored on co_extra: the cache entries (most recently hit first),
// the skip flag and what was already reported.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/program/program.h"
#include "frontend/guards/guards.h"
#include "frontend/output_graph/output_graph.h"
#include "frontend/output_graph/side_effects.h"
#include "frontend/trace/graph_break.h"

namespace framejit::frontend {

struct CompileConfig;

// Note [Break entries]
// A trace that breaks at instruction I of the root frame still keeps what it captured. The entry
// holds the graph of everything before I (its outputs: every value on the stack at I and every
// local the trace changed, as one tuple) and a break code object (frontend/bytecode, Note [Break
// code]) with the frame's arguments as its first parameters, all positional, and that tuple as
// the last. A hit runs the graph, builds the tuple (OutputSpec, so inputs passed through come back
// as the very same objects and constants as themselves), and calls a function made from the break
// code with the frame's own argument slots: it stores the locals, rebuilds the stack, runs I in
// CPython and returns what a resume function for the rest of the frame returns. Resume functions
// are ordinary frames to the hook: traced when they run, each with its own cache. The break code
// itself is never traced (its CodeState is `skip`).
// Values that cannot be rebuilt outside the trace (an object or function it made, an iterator, a
// list held in two places) or an instruction the break code cannot continue from leave the entry
// without break code: the whole frame runs in CPython, as before partial graphs.

/// One compiled version of a code object, valid while its guards pass.
struct CacheEntry {
  GuardSet guards;
  std::unique_ptr<Program> program;  // null: no graph to run (a break with nothing before it, or
                                     // a frame left to CPython)
  OwnedRef break_code;               // a partial graph's break code, Note [Break entries]; null: none
  int break_nargs = 0;               // its parameters before the outputs tuple
  OutputSpec output;                 // the return value; for break code, its outputs tuple
  Replays replays;                   // stores to replay after the program (Note [Side effects])
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
  bool gave_up = false;       // captures of it keep failing: runs in CPython until reset()
                              // (Note [Remembered failures]); gave_up_reason says why
  bool limit_reported = false;
  /// skip || failed || no_arrays || gave_up, kept in one flag for the hook's first test.
  bool never = false;
  /// Recomputes `never` and mirrors failed/no_arrays/gave_up into the co_extra pointer's low bit
  /// (see Note [Tagged co_extra]).
  void update_never();
  /// Sizes seen of arrays the code reads from globals and attributes, by source (Note [Held array
  /// sizes]); a dim that changed is -1.
  std::unordered_map<std::string, std::vector<int64_t>> held_sizes;
  // Note [Remembered failures]: what failed before, so it is not paid for again.
  int budget_failures = 0;         // traces that ran out of instructions in this code's own loop
  std::string last_failure;        // "offset: reason" of the last trace that kept nothing
  int misses_past_limit = 0;       // misses in a row since the recompile limit was reached
  std::string gave_up_reason;
  /// Marks the code as given up on (runs in CPython from now on) for `reason`.
  void give_up(std::string reason);
  PyCodeObject* code = nullptr;  // borrowed: the code object owns this state
  std::string name;           // "fn (file.py:12)"
};

// Note [Remembered failures]
// A capture that failed is not paid for again. Three failures are remembered per code object:
//  - the trace budget ran out in this code's own loop (a loop whose trip count is a value the
//    trace specialized, so every new count is a new trace that fails the same way): the second
//    time, the code is given up on, and a trace of a caller that reaches it breaks at the call
//    (trace/calls.cpp) instead of spending the budget again;
//  - a trace kept nothing (no graph, no partial graph) and broke at the same instruction for the
//    same reason as the one before (an unsupported call that every new shape meets again): given
//    up on. An error the code raises itself is not counted: it depends on the values;
//  - past the recompile limit, kGiveUpMisses misses in a row: its entries do not cover the calls
//    it gets, and checking their guards on every call is the cost of CPython plus that.
// Given up on means CPython runs it at CPython's cost: the co_extra tag (below) sends it to the
// default evaluator before anything else is looked at. reset() forgets all of it.
constexpr int kGiveUpMisses = 16;

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
