// loops.h — where a `for` loop that encloses an instruction starts, for a graph break that must
// leave the whole loop to CPython (Note [Breaks inside loops]).
#pragma once

#include <Python.h>

#include "framejit/status.h"

namespace framejit::frontend::bytecode {

// Note [Breaks inside loops]
// A break inside a loop's body cannot keep its graph there. Inside a `for`, the trace made the
// loop's iterator (range(n), iter(list)) and cannot hand it to CPython half consumed. Inside a
// `while`, it could, but each iteration would break again and call the next resume function from
// inside the last one: the stack grows by a frame per iteration until RecursionError. The break
// moves one step out instead: to the statement that starts the outermost enclosing loop (where a
// `for`'s iterable is about to be evaluated, or a `while`'s body begins), where the stack holds
// what it held before the loop and no iterator exists yet. compile_frame traces the frame again
// with that statement as a stop (TraceConfig::stop_at): the graph before the loop runs compiled,
// the loop and the rest of the frame run in a resume function, traced when it runs, which keeps
// what it can. The loop itself runs in CPython, as it did before partial graphs, and so does the
// code after it: a resume function that starts at the loop stops at its first instruction.
//
// A break inside an inlined call stops the root frame at its CALL, which CPython then runs whole:
// the graph must not hold what the callee did before its break, or a write into an array (or a
// logged side effect) would happen twice. That frame is traced again the same way, with the CALL
// as the stop.

/// The byte offset where the outermost loop of `code` (borrowed) whose body contains the
/// instruction at byte offset `offset` starts (a `for` statement's first instruction, a `while`
/// body's head), or -1 when no loop contains it or that place is not a clean one to stop (the
/// iterable's evaluation branches, the stack there holds an exception's lasti, ...).
Expected<int> outer_loop_start(PyObject* code, int offset);

}  // namespace framejit::frontend::bytecode
