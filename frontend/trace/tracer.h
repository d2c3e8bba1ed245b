// tracer.h — the symbolic bytecode interpreter (InstructionTranslator): state of a trace, the frame
// being interpreted, and the helpers the op registry and the builder use.
#pragma once

#include <Python.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "framejit/status.h"
#include "frontend/bytecode/break_code.h"
#include "frontend/bytecode/tables.h"
#include "frontend/output_graph/output_graph.h"
#include "frontend/output_graph/side_effects.h"
#include "frontend/trace/graph_break.h"
#include "frontend/variables/variables.h"

namespace framejit::frontend {

class OpTable;  // trace/op_table.h

/// The higher-order operators the tracer captures (trace/control_flow.cpp).
enum class HigherOrderOp : uint8_t { None, Cond, WhileLoop, ForiLoop, Scan, Map, AssociativeScan };
/// Which one `fn` (borrowed) is.
HigherOrderOp higher_order_op(PyObject* fn);
/// The operator whose body the trace is in ("framejit.cond", ...), for messages.
const char* body_ops_name();

struct TraceConfig {
  bool dynamic = true;        // sizes other than 0/1 become symbols (False: every size is static)
  int max_inline_depth = 24;  // nested user-function calls inlined before giving up
  int max_instructions = 200000;  // an unrolled loop that runs away is a graph break, not a hang
  /// A byte offset in the root code where the trace stops with `stop_as` (its kind, reason and
  /// location) as soon as it gets there: a break moved out of a loop (Note [Breaks inside loops]).
  int stop_at = -1;
  std::shared_ptr<const GraphBreak> stop_as;
  /// The sizes seen of arrays read from globals, attributes and closures, by source (Note [Held
  /// array sizes]); the code's own, kept across its traces. Null: every such size is static.
  std::unordered_map<std::string, std::vector<int64_t>>* held_sizes = nullptr;
  /// Listing breaks for fullgraph=True (Note [Listing every break]): the root instructions at these
  /// byte offsets are not run; their results are unknown values, and so are the results of
  /// anything computed from an unknown value.
  bool discover = false;
  std::vector<int> unknown_at;
  /// Whether `code`'s own loop ran earlier traces out of instructions (Note [Remembered failures]):
  /// a call to it breaks instead of being inlined. Null: none is known.
  bool (*gave_up_loop)(PyCodeObject* code) = nullptr;
  /// `for` loops over a range are offered to the element-loop compiler first (Note [Element
  /// loops]): only for a backend that compiles its nodes (the jit backend).
  bool element_loops = false;
};

using KwArgs = std::vector<std::pair<std::string, VarPtr>>;

/// How the code that replaces the root frame at a break rebuilds it (Note [Break entries]).
struct BreakState {
  OutputSpec values;                          // a Tuple: what the graph hands the rewritten code
  std::vector<bytecode::Recipe> stack;        // the value stack at the break, bottom first
  std::vector<bytecode::LocalStore> stores;   // the locals the trace changed
  std::vector<int> live_locals;               // every bound slot, in slot order
};

/// One code object being interpreted: the root frame or an inlined call.
struct TraceFrame {
  PyCodeObject* code = nullptr;  // borrowed: kept alive by the function or the frame
  OwnedRef code_bytes;           // co_code without quickening (PyCode_GetCode)
  const uint16_t* instrs = nullptr;
  int num_instrs = 0;
  std::vector<VarPtr> locals;  // co_nlocalsplus slots: locals, cells, free vars
  std::vector<VarPtr> stack;
  OwnedRef globals;
  OwnedRef builtins;
  SourcePtr globals_base;  // see FunctionVar::globals_base
  std::vector<bool> lazy_args;  // root only: argument slots not yet wrapped (wrapped on first read)
  bool is_root = false;
  VarPtr kw_names;     // KW_NAMES' tuple for the next CALL (3.11, 3.12; 3.13 has CALL_KW)
  int ip = 0;          // index of the next code unit
  int cur_offset = 0;  // code unit index of the instruction being run
  VarPtr result;       // set by RETURN_VALUE
  TraceFrame* parent = nullptr;
  int own_instructions = 0;  // instructions run in this frame itself (not in its callees)
  std::vector<bytecode::ExceptionEntry> handlers;  // co_exceptiontable (Note [Raising under a handler])
  // Root only, Note [Break snapshot]: the stack depth when the instruction being run started, and
  // the values of that stack it has popped so far, in pop order (the top first).
  size_t entry_depth = 0;
  std::vector<VarPtr> entry_popped;
  // Grad-mode blocks entered in this frame and not yet left, innermost last (Note [Grad-mode
  // blocks]): each one's exception handler and the mode to restore on leaving it.
  struct GradBlock {
    int handler;  // code unit index of the block's handler
    int with_at;  // code unit index of its BEFORE_WITH: what covers it covers the block
    bool outer_enabled;
    int made_at;  // GradModeVar::made_at of its manager
  };
  std::vector<GradBlock> grad_blocks;
};

// Note [Break snapshot]
// A resume function (the next step for graph breaks) rebuilds the root frame as it was when the
// breaking instruction started: its value stack and its bound locals. Copying the stack before
// every instruction would cost a vector copy per instruction of a long trace, so the root frame
// records only the depth at the start of each instruction and keeps alive the values that the
// instruction pops from below that depth (a handful at most). At a break the stack as it was is
// then the part still below the low-water mark plus the saved values, in reverse. Nothing else
// rewrites the stack below the mark within one instruction (SWAP exchanges two slots but cannot
// break after that). Locals change within an instruction only after its last possible break
// (STORE_FAST pops, then stores), so they are read as they are at the break.
// The snapshot holds the trace's values, and they hold the frame's objects: it lives as long as
// the compile of that frame, and a cache entry keeps the break without it.

class Tracer {
public:
  Tracer(OutputGraph& out, const FrameView& view, PyFunctionObject* fn, TraceConfig cfg);

  /// Traces the root frame to its RETURN_VALUE. nullopt: the whole frame is captured; otherwise
  /// the graph break that stopped the trace, located and with the root frame's snapshot.
  [[nodiscard]] std::optional<GraphBreak> run();

  /// The values the root frame holds at `snap` as graph outputs and recipes; sets the graph's
  /// outputs. Throws a GraphBreak when a value cannot be rebuilt outside the trace.
  BreakState break_state(const FrameSnapshot& snap);

  OutputGraph& out() { return out_; }
  /// The op table of this graph's arrays (Note [Op tables]).
  OpTable& array_ops();
  const TraceConfig& config() const { return cfg_; }
  /// TraceConfig::discover: the trace stopped where an unknown value decides the path.
  bool discovery_stopped() const { return discovery_stopped_; }
  const FrameView& view() const { return view_; }

  // -- builder (frontend/builder/builder.cpp) --
  /// Wraps a real value read from `src`, installing the guards it needs.
  VarPtr wrap(PyObject* value, const SourcePtr& src);  // value borrowed
  /// Wraps a constant that the traced code made (LOAD_CONST, results on constants). No guards.
  VarPtr wrap_const(PyObject* value);                   // borrowed
  /// A real Python function reached without a source (a staticmethod's __func__, guarded by the
  /// identity of its holder): inlined with constant defaults only.
  VarPtr wrap_function_unsourced(PyObject* fn);        // borrowed
  void add_identity_guard(const SourcePtr& src, PyObject* obj) {
    if (src) out_.guards.add_identity(src, obj);
  }

  // -- calls (frontend/trace/calls.cpp) --
  VarPtr call(const VarPtr& fn, std::vector<VarPtr> args, KwArgs kwargs);
  VarPtr call_builtin(const VarPtr& fn, std::vector<VarPtr> args, KwArgs kwargs);
  VarPtr inline_function(const VarPtr& fn, std::vector<VarPtr> args, KwArgs kwargs);
  /// A @numba.jit dispatcher's Python source, its py_func (Note [Numba dispatchers]); null when
  /// `fn` is not one.
  VarPtr numba_source(const VarPtr& fn);
  VarPtr load_attr(const VarPtr& obj, PyObject* name);  // name borrowed
  /// super(cls, self).name: a bound method of self (Python functions only).
  VarPtr super_attr(const VarPtr& cls, const VarPtr& self, PyObject* name);  // name borrowed
  /// super() without arguments in the frame being traced: its __class__ cell and first argument.
  VarPtr zero_arg_super();
  VarPtr get_item(const VarPtr& obj, const VarPtr& index);

  // -- Python-level values --
  /// The trace-time Python value of a Const or Scalar (specializing a Scalar with a guard).
  OwnedRef python_value(const VarPtr& v, const std::string& why);
  int64_t to_int(const VarPtr& v, const std::string& why);
  bool truth(const VarPtr& v, const std::string& why);
  /// Unpacks anything iterable at trace time into its items (tuple, list, dict keys, range ...).
  std::vector<VarPtr> unpack(const VarPtr& v, const std::string& why);

  // -- writes (Note [Writes into arrays]) --
  /// The array `t` now holds the value of node `value` (same shape and dtype): `what` wrote it.
  /// A view writes into its base; the live views of what was written are made again from it.
  void assign_array(const VarPtr& t, int value, const std::string& what);
  /// Breaks when `what` may not write `t` (checked before anything changes).
  void check_assignable(const VarPtr& t, const std::string& what);
  /// Breaks when `t`, an input, may not be written (not a NumPy array, read-only).
  void check_input_write(const VarPtr& t, const std::string& what);
  /// `t`, an input array, is about to be written by `what`: checks that it may be and records it.
  void note_input_write(const VarPtr& t, const std::string& what);
  /// For an output: a view whose base chain ends at a written input, made from the input itself
  /// (so it shares the caller's memory, which holds the final value after the copy back); -1 when
  /// `v` is not such a view.
  int view_of_written_input(const TensorVar& v);
  /// Whether view_of_written_input(v) would make it (without adding nodes): its input's placeholder.
  int written_input_root(const TensorVar& v) const;
  int written_input_root_of(const Var* written) const;  // a written input's placeholder, or -1
  bool is_view_of_written_input(const TensorVar& v) const;
  /// Whether `v` is an input array the trace wrote into.
  bool is_written_input(const Var* v) const;
  /// Appends the copies of the written inputs' final values into their memory, ordered after
  /// every value in `outs` and every final value.
  void add_copy_backs(const std::vector<jit::Arg>& outs);

  // -- graph helpers (used by the op registry) --
  const jit::TensorMeta& meta(const VarPtr& v) const;
  /// The graph node of a Tensor or Scalar value, in the graph it was made in.
  const jit::Node& node_of(const VarPtr& v) const;

  // -- control flow (frontend/trace/control_flow.cpp, Note [Tracing bodies]) --
  /// A value of an enclosing scope read in a body, and its placeholder there.
  struct Lifted {
    VarPtr outer;
    int placeholder;
  };
  /// The values lifted so far into the body being traced (innermost).
  std::vector<std::vector<Lifted>>& lifted_stack() { return lifted_; }
  /// Drops what the trace remembers of nodes in scopes deeper than the current one (a body that
  /// is done: its graph left the trace).
  void forget_deeper_scopes() {
    std::erase_if(sym_nodes_, [&](const SymNode& m) { return m.scope > out_.scope(); });
  }
  /// framejit.cond(pred, true_fn, false_fn, operands) called in the trace.
  VarPtr call_cond(std::vector<VarPtr> args, KwArgs kwargs);
  /// framejit.while_loop(cond_fn, body_fn, carried_inputs), framejit.fori_loop(lower, upper,
  /// body_fn, init_val) called in the trace.
  VarPtr call_while_loop(std::vector<VarPtr> args, KwArgs kwargs);
  VarPtr call_fori_loop(std::vector<VarPtr> args, KwArgs kwargs);
  /// framejit.scan(combine_fn, init, xs, dim=0, reverse=False), framejit.map(fn, xs, *args).
  VarPtr call_scan(std::vector<VarPtr> args, KwArgs kwargs);
  VarPtr call_map(std::vector<VarPtr> args, KwArgs kwargs);
  /// framejit.associative_scan(combine_fn, xs, dim, reverse=False) (Note [Parallel scans]).
  VarPtr call_associative_scan(std::vector<VarPtr> args, KwArgs kwargs);
  /// A Scan node over `xs` along `dim` carrying `init`: `run(carry, x)` traces the body and
  /// returns (next carry, y). Its value: a Tuple of the final carry values, then ys.
  VarPtr build_scan(const char* op, const std::vector<VarPtr>& init, const VarPtr& xs, int64_t dim, bool reverse,
                    const std::function<std::pair<std::vector<VarPtr>, VarPtr>(std::vector<VarPtr>, VarPtr)>& run);
  /// A WhileLoop node over `init` whose condition and body `cond_body` and `step_body` trace;
  /// its results as `shape` (Tuple or List; Tensor: the first alone).
  VarPtr build_while(const char* op, const std::vector<VarPtr>& init,
                     const std::function<VarPtr(std::vector<VarPtr>)>& cond_body,
                     const std::function<std::vector<VarPtr>(std::vector<VarPtr>)>& step_body, VarKind shape);
  /// Breaks when a body of a control-flow operator is being traced: `what` would be a side effect.
  void refuse_in_body(const std::string& what);
  bool in_body() const { return out_.scope() > 0; }
  jit::Arg to_arg(const VarPtr& v);
  VarPtr add_tensor(const std::string& target, std::vector<jit::Arg> args, jit::TensorMeta meta,
                    std::vector<std::pair<std::string, jit::Arg>> kwargs = {});
  /// A scalar graph value; `sym` is set for integer expressions over sizes.
  VarPtr add_scalar(const std::string& target, std::vector<jit::Arg> args, PyObject* hint,
                    std::optional<jit::SymInt> sym, std::vector<std::shared_ptr<ScalarVar>> deps);
  /// A SymInt as a trace value: a constant, or a scalar computed in the graph from input sizes.
  VarPtr sym_value(const jit::SymInt& e);
  /// The SymInt a value stands for (constants and size-derived scalars), if any.
  std::optional<jit::SymInt> as_sym(const VarPtr& v);

  // -- element loops (frontend/trace/element_loops.cpp, Note [Element loops]) --
  /// How the loop compiler reads the frame's locals and globals (the interpreter's own readers).
  struct LoopAccess {
    std::function<VarPtr(int)> load_fast;
    std::function<VarPtr(PyObject*)> load_global;  // name borrowed
  };
  /// range(...) just called with run-time bounds and about to be iterated: the range object made
  /// from the bounds' trace-time values, without guards, and the bounds themselves.
  struct PendingRange {
    OwnedRef range;
    std::vector<VarPtr> bounds;
  };
  std::optional<PendingRange>& pending_range() { return pending_range_; }
  /// range(*args) about to be iterated, kept pending (see PendingRange) when its bounds are
  /// run-time numbers or it is long; null to make the range as usual.
  VarPtr pending_range_for(const std::vector<VarPtr>& args);
  /// Compiles the `for` loop whose GET_ITER is at code unit `get_iter_at` of `f`, over range(*bounds),
  /// into one Loop node and binds what it sets; returns the code unit after the loop. -1 with `why`
  /// set when it cannot (nothing has changed then). With `while_cond`, the `while` loop whose first
  /// test is the jump at `get_iter_at` (Note [While loops]), the test's value popped.
  int compile_element_loop(TraceFrame& f, int get_iter_at, const std::vector<VarPtr>& bounds,
                           const LoopAccess& access, std::string* why, const VarPtr& over_array = nullptr,
                           const VarPtr& while_cond = nullptr);
  /// Whether `for x in v` is offered to the loop compiler whole (over_array): a NumPy array of
  /// rank >= 1 on the CPU whose length is a run-time value or above the unroll limit.
  bool offers_array_loop(const VarPtr& v);
  /// Whether the conditional jump `f` is at is a `while` statement's first test, and the loop is
  /// offered to the loop compiler whole (Note [While loops]).
  bool offers_while_loop(const TraceFrame& f);

  // -- side effects (frontend/trace/side_effects.cpp, Note [Side effects]) --
  /// obj.name = value on an object that existed before the call (logged, not done).
  void store_attr(const VarPtr& obj, PyObject* name, const VarPtr& value);  // name borrowed
  /// What the trace stored in obj.name, or null.
  VarPtr attr_written(const VarPtr& obj, PyObject* name);  // name borrowed
  /// globals[name] = value (STORE_GLOBAL in a frame whose globals are `globals`; `root_globals`:
  /// the frame's are the root frame's own, read from the frame at run time).
  void store_global(PyObject* globals, bool root_globals, PyObject* name, const VarPtr& value);  // borrowed
  VarPtr global_written(PyObject* globals, PyObject* name) const;  // borrowed
  /// STORE_DEREF into a cell that came from outside the trace.
  void store_outside_cell(CellVar& cell, const VarPtr& value);
  /// What the trace stored in the outside cell behind `cell`, or null.
  VarPtr outside_cell_written(const CellVar& cell);
  /// container[key] = value, container.append(value) on a list or dict that came from a source:
  /// `key` null for an append. The trace's own view of the container is changed by the caller.
  void log_container_store(const VarPtr& container, PyObject* key, const VarPtr& value);  // borrowed
  /// The logged stores as replays over the graph's outputs `outs` (Note [Side effects]); `shared`
  /// holds the lists and dicts the outputs already rebuild.
  void build_replays(std::vector<jit::Arg>& outs, std::unordered_set<const Var*>& shared);
  /// The replays of the finished trace (moved out).
  Replays take_replays() { return std::move(replays_); }
  /// The code whose own loop used most of the instruction budget when the trace ran out of it.
  PyCodeObject* budget_spent_in() const { return budget_spent_in_; }

  /// "file.py:12 in fn" for the instruction being traced.
  std::string location() const;
  /// Breaks when graph node `node` could raise at run time while an exception handler (a `try`,
  /// a `with` body) covers the instruction being traced, in its frame or a caller's
  /// (Note [Raising under a handler]).
  void check_raise_under_handler(int node);
  void check_raise_after_write(int node);
  /// Records the user's frames on node `node` when it may raise at run time (its exception's
  /// traceback, Note [Tracebacks of run-time errors] in frontend/program/run_program.cpp).
  void note_where(int node);
  /// Whether a handler that does something with an exception covers the instruction being traced,
  /// in its frame or a caller's.
  bool under_handler() const;

  // -- grad mode (frontend/trace/grad_mode.cpp, Note [Grad-mode blocks]) --
  /// torch's grad mode where the trace is: the caller's, as changed by the blocks it entered.
  bool grad_enabled() const { return grad_enabled_; }
  /// cls(args) when cls is torch.no_grad, enable_grad or inference_mode: the manager; else null.
  VarPtr grad_mode_manager(PyObject* cls, const std::vector<VarPtr>& args, const KwArgs& kwargs);  // borrowed
  /// BEFORE_WITH on `manager` in frame `f`: the block's __exit__ when it is a grad-mode manager
  /// the trace enters itself (the caller pushes it and None); null otherwise.
  VarPtr enter_grad_block(TraceFrame& f, const VarPtr& manager);
  /// A grad-mode block's __exit__(None, None, None): leaves the innermost block.
  VarPtr exit_grad_block(const std::vector<VarPtr>& args);
  /// Breaks when node `node` reads a tensor that requires grad while grad mode is on.
  void check_grad_use(int node);

private:
  friend struct Interpreter;
  VarPtr run_frame(TraceFrame& f);
  /// The node of `v` (made in trace scope `scope`) as the current graph sees it (Note [Tracing
  /// bodies]).
  int lift(const VarPtr& v, int scope);
  /// Fills in where `b` happened in the root frame and what that frame held.
  /// See Note [Break snapshot].
  void locate_in_root(GraphBreak& b, const TraceFrame& root) const;
  void build_output(const VarPtr& ret);
  OutputSpec output_spec(const VarPtr& v, std::vector<jit::Arg>& outs);

  OutputGraph& out_;
  FrameView view_;
  PyFunctionObject* fn_;  // borrowed: the frame holds it
  TraceConfig cfg_;
  TraceFrame* current_ = nullptr;
  int depth_ = 0;
  int instructions_run_ = 0;
  bool discovery_stopped_ = false;
  bool grad_enabled_ = false;  // Note [Grad-mode blocks]: the traced mode; the caller's at the start
  struct SymNode {
    jit::SymInt e;
    int node;
    int scope;  // the graph the node is in (a body's entries go when the body is done)
  };
  std::vector<SymNode> sym_nodes_;  // memo: SymInt already in a graph of the trace
  // Note [Tracing bodies]: per body being traced (innermost last), the values of enclosing scopes
  // it reads, each with the placeholder lifted for it in the body's graph.
  std::vector<std::vector<Lifted>> lifted_;
  std::unordered_map<std::string, VarPtr> wrapped_;     // by source text: one Var per source
  // Note [Side effects]: the log, where the root instruction being traced started it, and what
  // later reads see: by the real object (attributes, cells) or (globals dict, name).
  std::vector<LoggedEffect> effects_;
  size_t effects_mark_ = 0;
  struct WrittenAttr {
    VarPtr owner;  // the Var the store went through (an alias through another path breaks)
    VarPtr value;
  };
  std::unordered_map<PyObject*, std::unordered_map<std::string, WrittenAttr>> written_attrs_;
  std::unordered_map<PyObject*, std::unordered_map<std::string, VarPtr>> written_globals_;
  std::unordered_map<PyObject*, VarPtr> written_cells_;
  std::vector<OwnedRef> effect_refs_;  // keeps the objects keyed above alive during the trace
  Replays replays_;
  // output_spec's memo of the graph output of each value, and whether to reuse it.
  std::unordered_map<const Var*, int> value_outputs_;
  bool reuse_value_outputs_ = false;
  PyCodeObject* budget_spent_in_ = nullptr;  // borrowed
  std::optional<PendingRange> pending_range_;
};

}  // namespace framejit::frontend
