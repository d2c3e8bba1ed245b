// graph_break.h — a graph break as data: what stopped the trace (its kind, the exception CPython
// raises there), where (root instruction, file:line), and the root frame's stack and locals.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "frontend/cpython/pyref.h"
#include "frontend/variables/variables.h"

namespace framejit::frontend {

class OutputGraph;

/// Why the trace stopped. Code decides on the kind (hasattr, Tensor ops without NumPy, resume
/// functions); the reason text is for people and never parsed.
enum class BreakKind : uint8_t {
  Unsupported,       // an opcode, op, value or call the tracer does not capture (the default)
  EagerError,        // the code raises here when run by CPython: GraphBreak::exc_type says what
  MissingAttribute,  // obj.name does not exist on a value the tracer sees whole (AttributeError)
  DataDependent,     // control flow or a Python value depends on an array's data
  SideEffect,        // a write the graph cannot hold: an attribute, a global, a received
                     // container, an enclosing function's variable, an array's memory
  Limit,             // the instruction budget, the inline depth or an iteration bound ran out
  Internal,          // one of the tracer's own invariants failed
};

/// "unsupported", "eager_error", ... (explain() and logs).
const char* break_kind_name(BreakKind k);

/// A break site's way of saying "CPython raises `type` here": BREAK_IF(c, Raises{PyExc_ValueError},
/// "..."). The break is an EagerError carrying that type.
struct Raises {
  PyObject* type;  // borrowed: a builtin exception type (static, lives as long as the interpreter)
};

/// One bound slot of the root frame at the break.
struct LiveLocal {
  int slot;      // index into co_localsplus (locals, then cells, then free variables)
  VarPtr value;  // null: an argument the trace never read (the frame's slot holds it as passed)
};

/// The root frame at the START of the breaking instruction: what a resume function must rebuild
/// before it runs that instruction in CPython. See Note [Break snapshot].
struct FrameSnapshot {
  std::vector<VarPtr> stack;      // bottom first
  std::vector<LiveLocal> locals;  // every bound slot, in slot order
  VarPtr kw_names;                // 3.11, 3.12: the names a preceding KW_NAMES gave this CALL
};

/// Thrown inside the tracer (BREAK_IF, graph_break) and returned by Tracer::run.
struct GraphBreak {
  BreakKind kind = BreakKind::Unsupported;
  std::string reason;  // what happened, without the location
  std::string where;   // "file.py:12 in fn" of the innermost frame's instruction; empty if the
                       // break happened outside any frame (building the graph's outputs)
  OwnedRef exc_type;   // EagerError, MissingAttribute: the exception type CPython raises there
  int offset = -1;     // byte offset (as `dis` counts) in the root code object of the instruction
                       // at which the trace stopped; inside an inlined call, the root's CALL
  OwnedRef filename;   // str: the innermost frame's co_filename; null until located
  int lineno = -1;     // the innermost instruction's line
  bool in_callee = false;  // it happened inside a call the trace inlined (Note [Breaks inside loops])
  int grad_stop = -1;      // inside a grad-mode block the root frame entered: the byte offset of
                           // the instruction that made its manager (Note [Grad-mode blocks])
  std::shared_ptr<FrameSnapshot> snapshot;  // null once the break outlives its trace

  /// The reason with " (file:line in fn)" appended when located: the text messages, logs and
  /// explain() show (unchanged from when a break was only a string).
  std::string message() const { return where.empty() ? reason : reason + " (" + where + ")"; }
  /// The same break without its trace values (they hold the frame's objects; see the Note).
  GraphBreak without_snapshot() const;
};

[[noreturn]] void graph_break(std::string reason);
[[noreturn]] void graph_break(BreakKind kind, std::string reason);
[[noreturn]] void graph_break(Raises raises, std::string reason);
/// Breaks on the Python exception that is set, and clears it: CPython raises the same when it
/// runs that code, so the break is an EagerError of the exception's type. Message: `before` +
/// "Type: text" + `after`.
[[noreturn]] void python_error_break(const std::string& before = "", const std::string& after = "");

/// BREAK_IF(cond, "reason"), or with a kind first: BREAK_IF(cond, BreakKind::Limit, "reason"),
/// BREAK_IF(cond, Raises{PyExc_ValueError}, "reason").
#define BREAK_IF(cond, ...)                                  \
  do {                                                       \
    if (cond) ::framejit::frontend::graph_break(__VA_ARGS__); \
  } while (0)

/// What a trace value is, for explain(): "tensor float32[s0, 3]", "const 2", "list[3]".
std::string describe_var(const VarPtr& v, const OutputGraph& og);

}  // namespace framejit::frontend
