// run_hit.h — the one cache-hit path: find the entry whose guards pass, run its program, build the
// return value. The frame hook, the frameless wrapper path and framejit.Tensor ops all use it.
#pragma once

#include <Python.h>

#include <climits>
#include <cstdint>

#include "frontend/cache/code_state.h"
#include "frontend/guards/source.h"

namespace framejit::frontend {

// Note [One hit path]
// A hit is the same steps wherever the call came from: the first cache entry (most recent first)
// whose guards pass on the frame's values, then the test that its program can answer this call
// (a graph-break entry has none; a program that cannot honour NumPy's current error state says
// so), inputs bound from the guard slots, the program run with framejit's own Python untraced, and
// the return value built from the outputs. The callers differ only in what they do when the hit
// path does not answer: the hook evaluates the frame in CPython, the frameless wrapper takes the
// normal call path, a Tensor op runs on NumPy. The hit path's arrays have fixed sizes (below); an
// entry that needs more is never cached (fits_hit_path()), so a cached entry never needs a test.

/// The hit path's fixed-size arrays, in one place.
constexpr int kMaxHitSlots = 256;    // guard slots (values the guards hand to the program)
constexpr int kMaxHitSymbols = 256;  // symbolic sizes bound by the guards
constexpr int kMaxHitIO = 64;        // program inputs, and program outputs

/// Scratch the guards fill: the values of the slots (borrowed from the frame) and the symbols.
struct HitFrame {
  PyObject* slots[kMaxHitSlots];
  int64_t symbols[kMaxHitSymbols];
};

enum class HitKind : uint8_t {
  Miss,          // no entry's guards pass
  RunInCPython,  // an entry passed but cannot answer this call: evaluate it the default way
  Answered,      // HitResult::value is the call's result
};

struct HitResult {
  HitKind kind = HitKind::Miss;
  PyObject* value = nullptr;  // Answered: new ref, or null with a Python exception set
};

/// Which entries a caller may use.
struct HitRequest {
  const void* backend_key = nullptr;  // only entries compiled by this backend; null: any entry
  /// Entries whose guards read a fast local at or past this index are skipped (the frameless
  /// path has only the arguments, not the whole fast-locals array).
  int locals_available = INT_MAX;
  /// The caller has no frame and no hook switched on: a break entry, whose resume function must
  /// be seen by the hook, is left to the caller's normal path.
  bool frameless = false;
  /// A Tensor op's code object, marked as running on this thread while its program runs (see
  /// op_running()); null for frames.
  PyObject* running_code = nullptr;
  /// The calling config's mode="reduce-overhead" (ModeScope).
  bool reduce_overhead = false;
};

/// Whether `e` fits the hit path's arrays. Checked once, before an entry is run or cached.
bool fits_hit_path(const CacheEntry& e) noexcept;

/// Looks `view` up in `cs` and answers the call if an entry can. `same_backend` (may be null)
/// receives the number of entries of the request's backend looked at: the recompile limit's count.
/// Never throws: a C++ exception in the program becomes a Python MemoryError or RuntimeError.
HitResult run_hit(CodeState& cs, const FrameView& view, const HitRequest& request, HitFrame& frame,
                  int* same_backend = nullptr) noexcept;

/// Runs `e`, whose guards just passed on `view` and filled `frame` (a fresh entry's first call).
HitResult run_entry(CacheEntry& e, const FrameView& view, const HitFrame& frame,
                    PyObject* running_code = nullptr) noexcept;

/// Whether the Tensor op of `code` is running on this thread: a program step that re-enters its
/// own op (Note [Tensor ops outside compiled code]).
bool op_running(PyObject* code) noexcept;

}  // namespace framejit::frontend
