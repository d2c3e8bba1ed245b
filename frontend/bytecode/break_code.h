// break_code.h — the code object that replaces a frame at a graph break: call
// the compiled graph, rebuild the stack and locals, run the breaking
// instruction, continue in a resume function (Note [Break code]).
#pragma once

#include <Python.h>

#include <memory>
#include <string>
#include <vector>

#include "framejit/status.h"
#include "frontend/cpython/pyref.h"

namespace framejit::frontend::bytecode {

// Note [Break code]
// A frame the tracer abandoned at instruction `offset` is replaced by a new
// body with the original's signature, cells and free variables:
//
//     COPY_FREE_VARS / MAKE_CELL... / RESUME     the original's prologue, as it
//     has them
//     ___out = graph(<input recipes>)            a tuple of outputs; graph is a
//     new constant <stack recipes>, <local-store recipes>     every recipe
//     evaluated here, before any store STORE_FAST/STORE_DEREF <live local>...
//     the locals the graph changed or created (side-effect replay goes here:
//     not done yet, see BreakSpec::side_effects) <the breaking instruction>
//     copied; it runs in CPython return resume_at_next(<stack after it>, <live
//     locals>)   one block per continuation
//
// Recipes read the frame as it was on entry (the tracer's Sources are rooted
// there), so all of them are evaluated before the first local is stored.
//
// The copied instruction sees only its own inputs on the value stack: the slots
// below them (a loop's iterator, a call in progress) are kept in temporaries
// and handed straight to the resume function, which lets NULL slots be passed
// as flags without ever popping a NULL. Continuations, each `return
// resume_fn(<non-NULL slots>, <live locals>)` (make_resume_code):
//   - fall-through: at the original's next instruction;
//   - a jump's target (POP_JUMP_IF_*, FOR_ITER's exhaustion, 3.11's
//   JUMP_IF_*_OR_POP): at the
//     original target, so a data-dependent branch gets one resume function per
//     side;
//   - an exception the instruction raises inside a `try`, a `with` body or a
//     `finally`'s body: the copy is covered by a handler that resumes at the
//     original handler's entry with the exception on the stack, where
//     PUSH_EXC_INFO and the `except` matching (or __exit__) run as in the
//     original; a handler that wants a lasti below the exception gets one from
//     the resume code (ResumeSpec::lasti_slot).
// The resume function object is made at run time by MAKE_FUNCTION from a
// constant code object with the running frame's closure cells, exactly as a
// nested `def` is: one code object can back many closures (a `def` in a loop),
// so no function built at compile time could be right for all of them. It costs
// one small allocation per break executed.
//
// Method loads and LOAD_GLOBAL's NULL bit push a NULL that depends on the
// attribute found; the copy loads the plain attribute (a bound method) and the
// resume function gets a NULL flag in the slot instead, which the CALL after it
// treats identically.
//
// Kind::InResume: when the instruction cannot be copied — an opcode outside the
// table in break_code.cpp, or a continuation make_resume_code refuses (the
// instruction is itself exception cleanup) — the body instead ends with
// `return resume_at(offset)(<stack>, <live locals>)`: the instruction runs
// first thing in the resume function, inside all of the original's handlers.
// Always correct; the cost is that tracing that resume function breaks at its
// first instruction.
//
// A RETURN at the break is not a break (an error). Generators and coroutines
// are refused.

/// How to produce one value in the rewritten code.
struct Recipe {
  enum class Kind : uint8_t {
    GraphOutput,  // out[index] of the graph's result tuple
    Const,        // obj
    Local,        // localsplus[index]: a plain local, or a cell's/free variable's
                  // contents
    Global,       // LOAD_GLOBAL obj (a str): globals, then builtins
    Null,         // a NULL stack slot (stack recipes only)
    AttrOf,       // getattr(base, obj), obj a str
    ItemOf,       // base[obj], obj a constant key (int, str, ...)
  };
  Kind kind = Kind::Null;
  int index = -1;
  OwnedRef obj;
  std::shared_ptr<const Recipe> base;

  static Recipe graph_output(int k);
  static Recipe constant(PyObject* value);  // borrowed
  static Recipe local(int index);
  static Recipe global(PyObject* name);  // borrowed
  static Recipe null();
  static Recipe attr_of(Recipe base, PyObject* name);  // borrowed
  static Recipe item_of(Recipe base, PyObject* key);   // borrowed
};

/// `local` (a localsplus index) gets `value` (STORE_DEREF into a cell or free
/// variable).
struct LocalStore {
  int local = -1;
  Recipe value;
};

/// What the tracer knows at the break.
struct BreakSpec {
  int offset = 0;              // byte offset of the breaking instruction (any instruction of
                               // a PRECALL|CALL / KW_NAMES|CALL group names the group)
  OwnedRef graph;              // the compiled graph's callable; null: no graph call
  std::vector<Recipe> inputs;  // its positional arguments
  std::vector<Recipe> stack;   // the value stack at `offset`, bottom first
  std::vector<LocalStore> stores;
  std::vector<int> live_locals;  // localsplus indices bound after the stores, passed on
  /// The outputs come in as a parameter instead of a graph call (Note [Break entries]): the new
  /// code takes the original's arguments all positionally (co_argcount, co_kwonlyargcount, *args
  /// and **kwargs in localsplus order), then the outputs tuple; `graph` must be null.
  bool out_param = false;
  /// The instruction runs first thing in the resume function (Kind::InResume) even when it could
  /// be copied: it starts a loop that must run in CPython whole (Note [Breaks inside loops]).
  bool run_in_resume = false;
  // Side effects are not emitted here: the hit path replays them before it
  // calls this code (Note [Side effects], output_graph/side_effects.h).
};

/// The rewritten code and how it continues.
struct BreakCode {
  enum class Kind : uint8_t { Copied, InResume };
  OwnedRef code;
  Kind kind = Kind::Copied;
  std::string why_in_resume;        // Kind::InResume: why the instruction was not copied
  std::vector<int> resume_offsets;  // where each continuation resumes, in the order emitted
  std::vector<OwnedRef> handler_resumes;  // the resume codes entered only with an exception
};

/// The body that replaces `code` (a code object; borrowed) at a break described
/// by `spec`. Bad recipes, offsets and stack sizes are InvalidArgument; nothing
/// is cached.
Expected<BreakCode> make_break_code(PyObject* code, const BreakSpec& spec);

}  // namespace framejit::frontend::bytecode
