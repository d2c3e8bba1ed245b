// resume.h — resume functions: a new code object that continues a function at one of its
// instructions, given the value stack and the live locals it had there (Note [Resume functions]).
#pragma once

#include <Python.h>

#include <vector>

#include "framejit/status.h"
#include "frontend/bytecode/instruction.h"
#include "frontend/cpython/pyref.h"

namespace framejit::frontend::bytecode {

// Note [Resume functions]
// At a graph break the frame is abandoned at instruction `offset` with some values on its stack
// and some locals bound; the rest of the function must run as ordinary Python. The resume code is
// the original code with a prologue inserted right after the interpreter's own one
// (COPY_FREE_VARS, MAKE_CELL..., RESUME stay first):
//     LOAD_FAST ___live<j>; STORE_FAST <original slot>; DELETE_FAST ___live<j>   per live local
//     LOAD_FAST ___stack<i> | PUSH_NULL                                        per stack slot
//     DELETE_FAST ___stack<i>...                                               (no lifetimes grow)
//     JUMP_FORWARD <instruction at offset>
// Its positional arguments are the non-NULL stack slots, bottom first, then the live locals in
// the order given. Every original instruction keeps its source position and exception handler,
// so tracebacks name the original lines and a handler that encloses `offset` catches what is
// raised after it (the rebuilt stack has the depth the handler expects).
//
// Calling it: types.FunctionType(resume_code, fn.__globals__, fn.__name__, None,
// fn.__closure__) — the same closure, so free variables keep working. A live local that is a
// cell variable of the function is passed as the cell object itself (the one the frame and any
// closure made before the break share); with `cells_as_values` its contents are passed instead
// and go into a fresh cell (closures made before the break no longer see later writes).
//
// Not supported (an error): generators and coroutines; offsets in the interpreter's prologue or
// between instructions it runs as a pair (can_insert_before); offsets where the stack holds the
// `lasti` integer an exception-table entry pushes (exception cleanup, `with` exit on an
// exception, `finally` on the exceptional path): it is an offset into the original code. The
// one exception is a handler's entry itself, with ResumeSpec::lasti_slot.
// Caveat: resuming inside an `except` body does not restore sys.exc_info(); the stack slot
// PUSH_EXC_INFO left there is passed like any value and POP_EXCEPT restores it at the end.
//
// In 3.12+ the compiler emits unchecked LOAD_FAST where it proved a local bound on every path
// from the function's entry; from `offset` that proof no longer holds, so loads of locals not in
// the live set become LOAD_FAST_CHECK: a wrong live set raises UnboundLocalError, never crashes.

/// Where to resume and what the frame held there.
struct ResumeSpec {
  int offset = 0;               // byte offset into co_code of an instruction
  std::vector<bool> stack_null; // one per stack slot, bottom first: true = the slot is NULL
  std::vector<int> live_locals; // localsplus indices (co_varnames first, then cells) to restore
  bool cells_as_values = false; // see Note [Resume functions]
  /// A handler's entry whose stack holds an exception-table lasti in this slot (a `with` body's
  /// or a `finally`'s handler, entered from a break code's copy of an instruction it covers).
  /// The slot is not an argument: the prologue pushes the offset of the handler's entry. RERAISE
  /// reads a lasti only to set the frame's line for the traceback (handlers are looked up at the
  /// RERAISE itself), so any offset into the resume code is a correct one; -1: none.
  int lasti_slot = -1;
};

/// The resume code for `code` (a code object; borrowed) at `spec`, cached per (code, spec): the
/// same arguments return the same code object. The cache keeps `code` alive.
Expected<OwnedRef> make_resume_code(PyObject *code, const ResumeSpec &spec);

/// Uncached make_resume_code, on an already disassembled `bc` (consumed).
Expected<OwnedRef> build_resume_code(Bytecode bc, const ResumeSpec &spec);

/// A place a resume function may start from: byte offset and stack depth there.
struct ResumePoint {
  int offset = 0;
  int depth = 0;
};

/// Every offset make_resume_code accepts for `bc`, in code order.
Expected<std::vector<ResumePoint>> resume_points(const Bytecode &bc);

/// Number of entries in the resume cache; clear_resume_cache() empties it (tests, reset()).
size_t resume_cache_size();
void clear_resume_cache();

} // namespace framejit::frontend::bytecode
