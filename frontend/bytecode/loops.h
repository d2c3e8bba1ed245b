// loops.h — where a `for` loop that encloses an instruction starts, for a graph break that must
// leave the whole loop to CPython (Note [Breaks inside loops]).
#pragma once

#include <Python.h>

#include "framejit/status.h"

namespace framejit::frontend::bytecode {

// Note [Breaks inside loops]
// A break inside a `for` loop's body finds the loop's iterator live on the stack. The trace made
// that iterator (range(n), iter(list)) and cannot hand it to CPython half consumed, so the break
// cannot keep its graph there. It can one step out: at the statement that starts the outermost
// enclosing loop (where its iterable is about to be evaluated) the stack holds what it held
// before the loop, the loop's locals are what the trace already computed, and nothing about the
// iterator exists yet. compile_frame traces the frame again with that statement as a stop
// (TraceConfig::stop_at): the graph before the loop runs compiled, the loop and the rest of the
// frame run in a resume function, which is traced when it runs and keeps what it can. The loop
// itself runs in CPython, as it did before partial graphs, and so does the code after it: a
// resume function that starts at the loop stops at its first instruction.

/// The byte offset of the first instruction of the statement that begins the outermost `for`
/// loop of `code` (borrowed) whose body contains the instruction at byte offset `offset`, or -1
/// when no loop contains it or that statement is not a clean place to stop (the iterable's
/// evaluation branches, the stack there holds an exception's lasti, ...).
Expected<int> outer_loop_start(PyObject* code, int offset);

}  // namespace framejit::frontend::bytecode
