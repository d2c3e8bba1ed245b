// translator.cpp — the bytecode loop of the symbolic interpreter (CPython 3.11-3.13 opcodes, decoded
// through the per-version tables of opcodes.h).
#include <Python.h>

#include <algorithm>

#include "frontend/bytecode/opcode_facts.h"
#include "frontend/trace/opcodes.h"
#include "frontend/trace/python_ops.h"
#include "frontend/trace/op_table.h"
#include "frontend/interop/torch_array.h"
#include "frontend/trace/tracer.h"
#include "jit/passes/passes.h"
#include "runtime/log.h"

namespace framejit::frontend {

namespace {

std::string str_of(PyObject* o) {  // borrowed
  const char* s = PyUnicode_Check(o) ? PyUnicode_AsUTF8(o) : nullptr;
  if (!s) {
    PyErr_Clear();
    return "?";
  }
  return s;
}

std::string local_name(PyCodeObject* code, int i) {
  PyObject* names = code->co_localsplusnames;  // borrowed
  return str_of(PyTuple_GET_ITEM(names, i));
}

}  // namespace

Tracer::Tracer(OutputGraph& out, const FrameView& view, PyFunctionObject* fn, TraceConfig cfg)
    : out_(out), view_(view), fn_(fn), cfg_(cfg), grad_enabled_(torch_handles() && torch_grad_enabled()) {}

std::string Tracer::location() const {
  if (!current_) return "<unknown>";
  PyCodeObject* code = current_->code;
  int line = PyCode_Addr2Line(code, current_->cur_offset * 2);
  return str_of(code->co_filename) + ":" + std::to_string(line) + " in " + str_of(code->co_name);
}

// Note [With blocks]
// A `with` statement, for any context manager, is one break on entry. BEFORE_WITH breaks: the break code runs the graph before it, then BEFORE_WITH itself in CPython
// (__enter__), and calls the resume function at the next instruction with __exit__ and the
// entered value on its stack — below the body, as in the original frame, so the resume code's
// copy of the block's exception-table entry finds them when the body raises. That resume
// function is traced like any other: the body is captured, __exit__ is a bound method (its self
// and function read through it by the builder), inlined at the block's normal end or a break
// there. A break inside the body copies its instruction under the block's handler
// (Note [Break code]), so an exception from it reaches __exit__, and the rest of the body and
// the code after the block are captured again. No context manager is entered twice or skipped.
// Exceptions the graph itself could raise: Note [Raising under a
// handler].
//
// Note [Raising under a handler]
// A graph runs as one call at the start of the code that replaces the frame (Note [Break code]):
// whatever it raises comes from that call, outside every `try` and `with` of the original code.
// So an op that can raise at run time, traced while a handler covers the instruction (in the
// frame being traced or in a caller it was inlined from), is a break: the instruction runs in
// CPython under its handlers, and the graph before it holds only ops that cannot raise. Which ops
// can raise: library calls (extern steps, in-place library calls, calls with attributes the
// program does not describe), reductions without an identity over sizes that may be 0, indexing
// with run-time integers or index arrays, and reshapes to run-time shapes. Their failures depend
// on values, so no guard could rule them out. A handler that only restores locals and re-raises
// (3.12's inlined comprehensions) catches nothing the caller could see: it does not count.
namespace {

bool may_raise_at_run_time(const jit::Graph& g, const jit::Node& n) {
  using jit::OpKind;
  if (n.op == OpKind::Extern || n.op == OpKind::Mutate || !n.attrs.described) return true;
  if (jit::reduction_needs_elements(n.op)) {
    if (n.args.empty() || !n.args[0].is_node()) return true;
    for (const jit::SymInt& d : g.node(static_cast<int>(n.args[0].i)).meta.shape)
      if (!d.is_const() || d.const_value() == 0) return true;
    return false;
  }
  bool runtime_part = false;
  n.attrs.for_each_arg([&](const jit::Arg& a) { runtime_part |= a.is_node(); });
  switch (n.op) {
    case OpKind::GetItem:
    case OpKind::IndexPut: {
      if (runtime_part) return true;
      bool index_array = false;  // an array beyond the base (and an IndexPut's value) is an index
      const size_t last = n.op == OpKind::IndexPut ? n.args.size() - 1 : n.args.size();
      for (size_t i = 1; i < last; ++i)
        n.args[i].for_each_node([&](int k) { index_array |= g.node(k).meta.kind == jit::ValueKind::Tensor; });
      return index_array;
    }
    case OpKind::Reshape:
    case OpKind::BroadcastTo: return runtime_part;
    default: return false;
  }
}

}  // namespace

// Whether instruction `at` (code units) of `f` is covered by a handler that does something with an
// exception: 3.12's inlined comprehensions cover their body with one that only restores the
// comprehension's variables and re-raises, which changes nothing the caller sees; its RERAISE is
// covered in turn by whatever encloses the comprehension.
static bool covered_by_handler(const TraceFrame& f, int at, int depth = 0) {
  if (depth > 8) return true;  // nested further than any compiler writes: assume it matters
  for (const bytecode::ExceptionEntry& e : f.handlers) {
    if (!(e.start <= at && at < e.end)) continue;
    // A grad-mode block the trace entered: its handler changes nothing the caller sees
    // (Note [Grad-mode blocks]); what covers the with statement decides.
    for (const TraceFrame::GradBlock& b : f.grad_blocks)
      if (b.handler == e.target) return covered_by_handler(f, b.with_at, depth + 1);
    // Walk the handler: stack shuffles and local restores, then RERAISE, is transparent.
    int i = e.target;
    while (i < f.num_instrs) {
      const int op = f.instrs[i] & 0xff;
      if (op == RERAISE) return covered_by_handler(f, i, depth + 1);
      const bool restore = op == SWAP || op == POP_TOP || op == STORE_FAST || op == NOP
#if PY_VERSION_HEX >= 0x030D0000
                           || op == STORE_FAST_STORE_FAST || op == STORE_FAST_LOAD_FAST
#endif
          ;
      if (!restore) return true;
      i += 1 + bytecode::cache_entries(op);
    }
    return true;
  }
  return false;
}

bool Tracer::under_handler() const {
  for (const TraceFrame* f = current_; f; f = f->parent)
    if (covered_by_handler(*f, f->cur_offset)) return true;
  return false;
}

void Tracer::note_where(int node) {
  jit::Node& n = out_.graph.nodes()[node];
  if (!current_ || !may_raise_at_run_time(out_.graph, n)) return;
  auto frames = std::make_shared<std::vector<jit::SourceFrame>>();
  for (const TraceFrame* f = current_; f; f = f->parent)
    frames->push_back({str_of(f->code->co_name), str_of(f->code->co_filename),
                       PyCode_Addr2Line(f->code, f->cur_offset * 2)});
  std::reverse(frames->begin(), frames->end());
  n.where = std::move(frames);
}

void Tracer::check_raise_under_handler(int node) {
  bool covered = false;
  for (const TraceFrame* f = current_; f && !covered; f = f->parent) covered = covered_by_handler(*f, f->cur_offset);
  if (!covered) return;
  const jit::Node& n = out_.graph.node(node);
  if (!may_raise_at_run_time(out_.graph, n)) return;
  const std::string what = n.op == jit::OpKind::GetItem    ? "indexing with an index array or a run-time index"
                           : n.op == jit::OpKind::IndexPut ? "a write through an index array or a run-time index"
                                                            : n.target;
  graph_break(what + " may raise inside a try or with block: it runs in CPython under the block's handler");
}

// Note [Raising after a write]
// Copy-backs into written input arrays run after the whole graph (Note [Writes into arrays]). An
// integer power with an array exponent raises on its values (a negative exponent), and an index
// that is a run-time int (Note [Run-time indices] in ops/numpy/views.cpp) raises when out of
// range: traced after a write into an input, either breaks the graph before it, so the write is
// in the caller's array when CPython raises there. (Reductions and reshapes of what may be empty,
// and compiled loops that raise, still run before the copy-backs: the write is lost when they
// raise. Not fixed yet.)
void Tracer::check_raise_after_write(int node) {
  if (out_.input_writes.empty()) return;
  const jit::Node& n = out_.graph.node(node);
  std::string what;
  if (n.op == jit::OpKind::Pow || n.op == jit::OpKind::ScalarPow) {
    if (!jit::may_raise_on_values(out_.graph, n)) return;
    what = "an integer power with an array exponent";
  } else if (n.op == jit::OpKind::GetItem || n.op == jit::OpKind::IndexPut) {
    bool run_time_int = false;  // (run-time slice bounds clamp: they never raise)
    for (const jit::IndexSpecItem& it : n.attrs.index)
      run_time_int |= it.kind == jit::IndexSpecItem::Kind::Int && !it.parts.empty() && it.parts[0].is_node() &&
                      out_.graph.node(static_cast<int>(it.parts[0].i)).meta.kind == jit::ValueKind::Scalar;
    if (!run_time_int) return;
    what = "an index that is a run-time int";
  } else {
    return;
  }
  // Out of the graph before the break: a node that may raise is never dead code, and the graph
  // before the break would run it.
  if (node + 1 == static_cast<int>(out_.graph.nodes().size())) out_.graph.nodes().pop_back();
  graph_break(what + " may raise after a write into an input array: it runs in CPython, after the write");
}

std::optional<GraphBreak> Tracer::run() {
  TraceFrame root;
  root.code = reinterpret_cast<PyCodeObject*>(fn_->func_code);
  root.is_root = true;
  root.globals = OwnedRef::borrow(fn_->func_globals);
  root.builtins = OwnedRef::borrow(fn_->func_builtins);
  int nlocals = root.code->co_nlocalsplus;
  root.locals.resize(nlocals);
  root.lazy_args.assign(nlocals, false);
  // Arguments are wrapped on first read, so an argument the code never touches adds no guard.
  for (int i = 0; i < nlocals; ++i)
    if (view_.localsplus[i]) root.lazy_args[i] = true;
  try {
    VarPtr ret = run_frame(root);
    build_output(ret);
  } catch (GraphBreak& b) {
    if (PyErr_Occurred()) PyErr_Clear();
    locate_in_root(b, root);
    if (!root.grad_blocks.empty()) b.grad_stop = root.grad_blocks.front().made_at;  // Note [Grad-mode blocks]
    return std::move(b);
  }
  return std::nullopt;
}

void Tracer::locate_in_root(GraphBreak& b, const TraceFrame& root) const {
  // A break in an inlined call stops the root frame at that call's instruction; a break while
  // building the outputs, at the RETURN that ended the trace.
  b.offset = root.cur_offset * static_cast<int>(sizeof(uint16_t));
  if (!b.filename) {  // not located by an inner frame: the break is the root's own
    b.filename = OwnedRef::borrow(root.code->co_filename);
    b.lineno = PyCode_Addr2Line(root.code, b.offset);
  }
  auto snap = std::make_shared<FrameSnapshot>();
  // Below `low` the instruction has not touched the stack.
  size_t low = root.entry_depth - root.entry_popped.size();
  snap->stack.assign(root.stack.begin(), root.stack.begin() + std::min(low, root.stack.size()));
  snap->stack.insert(snap->stack.end(), root.entry_popped.rbegin(), root.entry_popped.rend());
  for (int i = 0; i < static_cast<int>(root.locals.size()); ++i) {
    if (root.lazy_args[i]) snap->locals.push_back({i, nullptr});
    else if (root.locals[i]) snap->locals.push_back({i, root.locals[i]});
  }
  snap->kw_names = root.kw_names;
  b.snapshot = std::move(snap);
}

/// One opcode handler per case; each states its stack effect CPython-style. Control leaves the
/// loop only at RETURN_VALUE or through a GraphBreak.
struct Interpreter {
  Tracer& tx;
  TraceFrame& f;

  VarPtr pop() {
    BREAK_IF(f.stack.empty(), BreakKind::Internal, "internal: stack underflow");
    VarPtr v = std::move(f.stack.back());
    f.stack.pop_back();
    if (f.is_root && f.stack.size() < f.entry_depth - f.entry_popped.size())
      f.entry_popped.push_back(v);
    return v;
  }
  void push(VarPtr v) { f.stack.push_back(std::move(v)); }
  VarPtr& peek(int n) { return f.stack[f.stack.size() - n]; }  // peek(1) is TOS
  std::vector<VarPtr> pop_n(int n) {
    BREAK_IF(static_cast<int>(f.stack.size()) < n, BreakKind::Internal,
             "internal: stack underflow");
    if (f.is_root) {  // Note [Break snapshot]: keep what is popped from below the low-water mark
      size_t low = f.entry_depth - f.entry_popped.size();
      for (size_t i = std::min(low, f.stack.size()); i > f.stack.size() - n; --i)
        f.entry_popped.push_back(f.stack[i - 1]);
    }
    std::vector<VarPtr> xs(f.stack.end() - n, f.stack.end());
    f.stack.resize(f.stack.size() - n);
    return xs;
  }
  PyObject* co_const(int i) { return PyTuple_GET_ITEM(f.code->co_consts, i); }  // borrowed
  PyObject* co_name(int i) { return PyTuple_GET_ITEM(f.code->co_names, i); }    // borrowed

  SourcePtr global_src(PyObject* name) {
    return f.globals_base ? child_source(SourceKind::FuncGlobal, f.globals_base, name)
                          : global_source(name);
  }

  VarPtr load_global(PyObject* name) {
    if (VarPtr w = tx.global_written(f.globals.get(), name)) return w;  // Note [Side effects]
    PyObject* v = PyDict_GetItemWithError(f.globals.get(), name);  // borrowed
    if (!v && !PyErr_Occurred()) v = PyDict_GetItemWithError(f.builtins.get(), name);
    if (PyErr_Occurred()) PyErr_Clear();
    BREAK_IF(!v, Raises{PyExc_NameError}, "name '" + str_of(name) + "' is not defined");
    return tx.wrap(v, global_src(name));
  }

  VarPtr load_fast(int i) {
    if (f.is_root && f.lazy_args[i]) {
      // Still lazy if wrapping breaks: the break's snapshot reports the slot as the frame's own.
      f.locals[i] = tx.wrap(tx.view().localsplus[i], local_source(i, local_name(f.code, i)));
      f.lazy_args[i] = false;
    }
    BREAK_IF(!f.locals[i], Raises{PyExc_UnboundLocalError},
             "local variable '" + local_name(f.code, i) + "' is unbound");
    return f.locals[i];
  }

  CellVar* cell_at(int i) {
    if (f.is_root && f.lazy_args[i]) load_fast(i);
    BREAK_IF(!f.locals[i] || f.locals[i]->kind != VarKind::Cell, BreakKind::Internal,
             "internal: not a cell");
    return as<CellVar>(f.locals[i]);
  }

  void jump_to(int target) { f.ip = target; }

  void branch(bool jump_if, int target, const VarPtr& cond) {
    if (target > f.ip && tx.offers_while_loop(f)) {  // Note [While loops]
      if (const int after = whole_loop({}, nullptr, cond); after >= 0) return jump_to(after);
    }
    if (tx.truth(cond, "branch condition") == jump_if) jump_to(target);
  }

  // Note [Element loops]: the loop at this instruction as one node (over a range, over an array's
  // elements, or a `while` after its first test); the code unit after it, or -1 (logged why) to
  // trace it as before.
  int whole_loop(const std::vector<VarPtr>& bounds, const VarPtr& over, const VarPtr& while_cond = nullptr) {
    std::string why;
    Tracer::LoopAccess access{[this](int i) { return load_fast(i); }, [this](PyObject* n) { return load_global(n); }};
    const int after = tx.compile_element_loop(f, f.cur_offset, bounds, access, &why, over, while_cond);
    if (after < 0 && rt::log_enabled(rt::LogTopic::Graph))
      rt::log_write(rt::LogTopic::Graph, "loop at " + tx.location() + " not compiled as a loop: " + why);
    return after;
  }

  void store_fast(int i, VarPtr v) {
    // NULL comes back from LOAD_FAST_AND_CLEAR (3.12+ inlined comprehensions): unbound again.
    f.locals[i] = v->kind == VarKind::Null ? nullptr : std::move(v);
    if (f.is_root) f.lazy_args[i] = false;
  }

  /// Pushes a callable with the NULL that CALL pairs with it (kNullAboveCallable).
  void push_with_null(VarPtr callable) {
    if (!kNullAboveCallable) push(std::make_shared<NullVar>());
    push(std::move(callable));
    if (kNullAboveCallable) push(std::make_shared<NullVar>());
  }

  /// Pops what CALL and CALL_FUNCTION_EX find under their arguments: a callable and a NULL, in
  /// either order (kNullAboveCallable), or a method and its self (lower, upper) in every version.
  /// Returns the callable; `self` is set for the method pair.
  VarPtr pop_callable(VarPtr* self) {
    VarPtr upper = pop();
    VarPtr lower = pop();
    if (lower->kind == VarKind::Null) return upper;
    if (upper->kind != VarKind::Null) *self = std::move(upper);
    return lower;
  }

  // CALL (callable and null/self, args[argc] -- result); `kw_names` (tuple of str, or null) names
  // the last arguments.
  void call(int argc, PyObject* kw_names) {  // kw_names borrowed
    std::vector<VarPtr> args = pop_n(argc);
    VarPtr self;
    VarPtr fn = pop_callable(&self);
    if (self) args.insert(args.begin(), std::move(self));
    KwArgs kwargs;
    if (kw_names) {
      Py_ssize_t nk = PyTuple_GET_SIZE(kw_names);
      size_t base = args.size() - nk;
      for (Py_ssize_t k = 0; k < nk; ++k)
        kwargs.emplace_back(str_of(PyTuple_GET_ITEM(kw_names, k)), args[base + k]);
      args.resize(base);
    }
    push(tx.call(fn, std::move(args), std::move(kwargs)));
  }

  /// A slice from BUILD_SLICE's or BINARY_SLICE's parts (start, stop[, step]).
  VarPtr make_slice(std::vector<VarPtr> parts) {
    bool has_step = parts.size() == 3;
    if (!has_step) parts.push_back(tx.wrap_const(Py_None));
    bool symbolic = false;
    for (auto& p : parts)
      symbolic |= p->kind == VarKind::Scalar && as<ScalarVar>(p)->sym && !as<ScalarVar>(p)->sym->is_const();
    if (symbolic && !(parts[2]->kind == VarKind::Scalar)) {
      // Bounds computed from sizes stay symbolic: a new batch size reuses the graph.
      return std::make_shared<SliceVar>(parts[0], parts[1], parts[2]);
    }
    OwnedRef start = tx.python_value(parts[0], "slice bound");
    OwnedRef stop = tx.python_value(parts[1], "slice bound");
    OwnedRef step = has_step ? tx.python_value(parts[2], "slice step") : OwnedRef::borrow(Py_None);
    return make_const_steal(PySlice_New(start.get(), stop.get(), step.get()));
  }

  /// f-string pieces: format(value, spec) after an optional !s/!r/!a conversion (kConvert*, 0 for
  /// none). Only builtin values, whose formatting runs no user code.
  VarPtr format_value(const VarPtr& value, int conversion, const VarPtr& spec) {
    OwnedRef s = spec ? tx.python_value(spec, "format spec") : OwnedRef();
    OwnedRef v = tx.python_value(value, "f-string value");
    BREAK_IF(!PyLong_CheckExact(v.get()) && !PyFloat_CheckExact(v.get()) && !PyUnicode_CheckExact(v.get()) &&
                 v.get() != Py_None && !PyBool_Check(v.get()),
             "formatting a non-builtin value");
    OwnedRef converted = conversion == kConvertStr     ? OwnedRef::steal(PyObject_Str(v.get()))
                         : conversion == kConvertRepr  ? OwnedRef::steal(PyObject_Repr(v.get()))
                         : conversion == kConvertAscii ? OwnedRef::steal(PyObject_ASCII(v.get()))
                                                       : v;
    if (!converted) python_error_break("formatting failed: ");
    OwnedRef r = OwnedRef::steal(PyObject_Format(converted.get(), s.get()));
    if (!r) python_error_break("formatting failed: ");
    return make_const(std::move(r));
  }

  void set_add(const VarPtr& set, const VarPtr& item) {
    OwnedRef v = tx.python_value(item, "set item");
    if (PySet_Add(as<SetVar>(set)->set.get(), v.get()) < 0) python_error_break("set.add: ");
  }

  // Note [Listing every break]
  // fullgraph=True must name every break, not only the first, without running the function. The
  // frame is traced again with each break found so far skipped: the instruction does not run and
  // its results are unknown values (a constant no code can see). An instruction that takes an
  // unknown value is skipped the same way without being reported, since it only follows from the
  // first. Plain moves (loads, stores, POP_TOP) carry unknown values like any other. A branch or
  // loop decided by an unknown value ends the listing there: which way it goes is not known.
  static PyObject* unknown_value() {
    static PyObject* v = PyObject_CallNoArgs(reinterpret_cast<PyObject*>(&PyBaseObject_Type));  // NB: immortal
    return v;
  }
  static bool is_unknown(const VarPtr& v) {
    return v && v->kind == VarKind::Const && const_value(v) == unknown_value();
  }

  // Whether the instruction was skipped as unknown (the stack already holds its results).
  bool pass_unknown(int op, int arg) {
    const int offset = f.cur_offset * static_cast<int>(sizeof(uint16_t));
    const auto& at = tx.cfg_.unknown_at;
    const bool listed = std::find(at.begin(), at.end(), offset) != at.end();
    const int n_in = bytecode::break_inputs(op, arg);
    bool tainted = false;
    for (int i = 1; i <= n_in && i <= static_cast<int>(f.stack.size()); ++i)
      tainted |= is_unknown(f.stack[f.stack.size() - static_cast<size_t>(i)]);
    if (!listed && !tainted) return false;
    int effect = 0;
    const bool branch = bytecode::jump_kind(op) != bytecode::JumpKind::None && !bytecode::is_terminator(op);
    if (n_in < 0 || branch || n_in > static_cast<int>(f.stack.size()) ||
        !bytecode::stack_effect(op, arg, false, &effect) || n_in + effect < 0) {
      tx.discovery_stopped_ = tainted;
      graph_break(BreakKind::DataDependent, "the path past here depends on a value framejit could not compute");
    }
    f.stack.resize(f.stack.size() - static_cast<size_t>(n_in));
    for (int i = 0; i < n_in + effect; ++i) f.stack.push_back(tx.wrap_const(unknown_value()));
    f.kw_names.reset();
    return true;
  }

  VarPtr run() {
    while (true) {
      // The instruction starts here, so a break from the two checks below is at this instruction.
      f.cur_offset = f.ip;
      if (f.is_root) {  // Note [Break snapshot]
        f.entry_depth = f.stack.size();
        f.entry_popped.clear();
        tx.effects_mark_ = tx.effects_.size();  // Note [Side effects]: kept if this one breaks
        if (f.cur_offset * static_cast<int>(sizeof(uint16_t)) == tx.cfg_.stop_at && tx.cfg_.stop_as) {
          GraphBreak b = tx.cfg_.stop_as->without_snapshot();
          b.offset = -1;
          b.in_callee = false;
          throw b;
        }
      }
      ++f.own_instructions;
      if (++tx.instructions_run_ > tx.cfg_.max_instructions) {
        // Whose loop ran long: the frame on the call chain that ran the most instructions itself
        // (a loop calling a small helper many times is the loop's, not the helper's). A failed
        // capture is remembered on that code (Note [Remembered failures]).
        const TraceFrame* most = &f;
        for (const TraceFrame* p = f.parent; p; p = p->parent)
          if (p->own_instructions > most->own_instructions) most = p;
        tx.budget_spent_in_ = most->code;
        graph_break(BreakKind::Limit, "trace ran past " + std::to_string(tx.cfg_.max_instructions) + " instructions");
      }
      BREAK_IF(f.ip >= f.num_instrs, BreakKind::Internal, "internal: ran off the end of the code");
      int raw = f.instrs[f.ip] & 0xff;
      int arg = f.instrs[f.ip] >> 8;
      ++f.ip;
      while (raw == EXTENDED_ARG) {
        raw = f.instrs[f.ip] & 0xff;
        arg = (arg << 8) | (f.instrs[f.ip] >> 8);
        ++f.ip;
      }
      const OpInfo info = kOpTable[raw];
      f.ip += info.cache_entries;
      const int next = f.ip;  // relative jumps count from the end of the instruction's caches
      if (f.is_root && tx.cfg_.discover && pass_unknown(raw, arg)) continue;

      switch (info.op) {
        case Op::Nop:
        case Op::Resume:
        case Op::Cache:
        case Op::Precall:  // (--) 3.11 splits calls; CALL does the work
          break;

        // -- stack manipulation --
        case Op::PopTop: pop(); break;  // (value --)
        case Op::PushNull: push(std::make_shared<NullVar>()); break;  // (-- null)
        case Op::Copy: push(peek(arg)); break;  // (x ... -- x ... x)
        case Op::Swap: std::swap(peek(1), peek(arg)); break;

        // -- loads and stores --
        case Op::LoadConst: push(tx.wrap_const(co_const(arg))); break;  // (-- value)
        case Op::LoadFast:                                                // (-- value)
        case Op::LoadFastCheck:
        case Op::LoadClosure: push(load_fast(arg)); break;  // a cell slot holds its CellVar
        case Op::LoadFastAndClear: {  // (-- value or null) and the slot becomes unbound
          if (f.is_root && f.lazy_args[arg]) load_fast(arg);
          VarPtr v = f.locals[arg];
          push(v ? v : std::make_shared<NullVar>());
          f.locals[arg].reset();
          break;
        }
        case Op::LoadFastLoadFast:  // (-- value1, value2)
          push(load_fast(arg >> 4));
          push(load_fast(arg & 15));
          break;
        case Op::StoreFast: store_fast(arg, pop()); break;  // (value --)
        case Op::StoreFastStoreFast: {  // (value2, value1 --)
          store_fast(arg >> 4, pop());
          store_fast(arg & 15, pop());
          break;
        }
        case Op::StoreFastLoadFast:  // (value -- value2)
          store_fast(arg >> 4, pop());
          push(load_fast(arg & 15));
          break;
        case Op::DeleteFast:
          f.locals[arg].reset();
          if (f.is_root) f.lazy_args[arg] = false;
          break;
        case Op::LoadGlobal: {  // (-- value, with a null if arg & 1)
          VarPtr v = load_global(co_name(arg >> 1));
          if (arg & 1)
            push_with_null(std::move(v));
          else
            push(std::move(v));
          break;
        }
        case Op::StoreGlobal:  // (value --) logged, Note [Side effects]
          tx.store_global(f.globals.get(), !f.globals_base && f.globals.get() == tx.view().globals,
                          co_name(arg), peek(1));
          pop();
          break;
        case Op::DeleteGlobal:
          graph_break(BreakKind::SideEffect, "deleting a global variable (a side effect)");
        case Op::MakeCell: {  // (--) wraps the slot's current value in a new cell
          auto cell = std::make_shared<CellVar>();
          if (f.is_root && f.lazy_args[arg]) load_fast(arg);
          cell->contents = f.locals[arg];
          f.locals[arg] = cell;
          break;
        }
        case Op::CopyFreeVars: {  // (--) the function's closure cells become the last slots
          int first = f.code->co_nlocalsplus - arg;
          if (f.is_root) {
            for (int i = 0; i < arg; ++i) {
              auto cell = std::make_shared<CellVar>();
              cell->source = closure_source(i, local_name(f.code, first + i));
              f.locals[first + i] = cell;
              f.lazy_args[first + i] = false;
            }
          }
          // Inlined frames got their closure cells when the call was set up.
          break;
        }
        case Op::LoadDeref: push(deref(arg)); break;  // (-- value)
        case Op::StoreDeref: {                        // (value --)
          CellVar* cell = cell_at(arg);
          if (cell->scope < tx.out().scope()) tx.refuse_in_body("assigning to a variable of the enclosing code");
          if (cell->source) {  // an enclosing function's variable: logged, Note [Side effects]
            tx.store_outside_cell(*cell, peek(1));
            pop();
            break;
          }
          cell->contents = pop();
          break;
        }
        case Op::LoadAttr: {  // (owner -- attr), or with the method bit (owner -- attr, null)
          VarPtr owner = pop();
          bool method = kLoadAttrHasMethodBit && (arg & 1);
          VarPtr attr = tx.load_attr(owner, co_name(kLoadAttrHasMethodBit ? arg >> 1 : arg));
          if (method)
            push_with_null(std::move(attr));
          else
            push(std::move(attr));
          break;
        }
        case Op::LoadMethod: {  // (owner -- null, bound) 3.11
          VarPtr owner = pop();
          push_with_null(tx.load_attr(owner, co_name(arg)));
          break;
        }
        case Op::LoadSuperAttr: {  // (super, class, self -- attr[, null]) 3.12+
          VarPtr self = pop();
          VarPtr cls = pop();
          VarPtr global_super = pop();
          BREAK_IF(!is_const(global_super) || const_value(global_super) != reinterpret_cast<PyObject*>(&PySuper_Type),
                   "super is not the builtin super");
          VarPtr attr = tx.super_attr(cls, self, co_name(arg >> kLoadSuperAttrNameShift));
          if (arg & 1)
            push_with_null(std::move(attr));
          else
            push(std::move(attr));
          break;
        }
        case Op::StoreAttr: {  // (value, owner --) logged, Note [Side effects]
          tx.store_attr(peek(1), co_name(arg), peek(2));
          pop_n(2);
          break;
        }
        case Op::DeleteAttr:
          graph_break(BreakKind::SideEffect, "deleting an attribute (a side effect)");
        case Op::BinarySubscr: {  // (container, index -- value)
          VarPtr index = pop();
          VarPtr container = pop();
          push(tx.get_item(container, index));
          break;
        }
        case Op::BinarySlice: {  // (container, start, stop -- value) 3.12+
          std::vector<VarPtr> bounds = pop_n(2);
          VarPtr container = pop();
          push(tx.get_item(container, make_slice(std::move(bounds))));
          break;
        }
        case Op::StoreSubscr: {  // (value, container, index --)
          VarPtr index = pop();
          VarPtr container = pop();
          VarPtr value = pop();
          store_subscr(container, index, value);
          break;
        }
        case Op::StoreSlice: {  // (value, container, start, stop --) 3.12+
          std::vector<VarPtr> bounds = pop_n(2);
          VarPtr container = pop();
          VarPtr value = pop();
          store_subscr(container, make_slice(std::move(bounds)), value);
          break;
        }
        case Op::DeleteSubscr:
          graph_break(BreakKind::SideEffect, "del container[index] (a side effect)");

        // -- operators --
        case Op::BinaryOp: {  // (lhs, rhs -- result)
          VarPtr rhs = pop();
          VarPtr lhs = pop();
          push(binary_op(tx, arg, lhs, rhs));
          break;
        }
        case Op::CompareOp: {  // (lhs, rhs -- result)
          VarPtr rhs = pop();
          VarPtr lhs = pop();
          push(compare_op(tx, arg >> kCompareOpShift, lhs, rhs));
          break;
        }
        case Op::IsOp: {  // (lhs, rhs -- bool)
          VarPtr rhs = pop();
          VarPtr lhs = pop();
          push(is_op(tx, lhs, rhs, arg != 0));
          break;
        }
        case Op::ContainsOp: {  // (item, container -- bool)
          VarPtr container = pop();
          VarPtr item = pop();
          push(contains_op(tx, item, container, arg != 0));
          break;
        }
        case Op::UnaryPositive: push(unary_op(tx, UnaryOp::Positive, pop())); break;
        case Op::UnaryNegative: push(unary_op(tx, UnaryOp::Negative, pop())); break;
        case Op::UnaryInvert: push(unary_op(tx, UnaryOp::Invert, pop())); break;
        case Op::UnaryNot: push(unary_op(tx, UnaryOp::Not, pop())); break;
        case Op::ToBool:  // (value -- bool) 3.13
          push(tx.wrap_const(tx.truth(pop(), "truth value") ? Py_True : Py_False));
          break;
        case Op::CallIntrinsic1: {  // (value -- result) 3.12+
          VarPtr v = pop();
          if (arg == kIntrinsicUnaryPositive) {
            push(unary_op(tx, UnaryOp::Positive, v));
          } else if (arg == kIntrinsicListToTuple) {
            push(std::make_shared<SeqVar>(VarKind::Tuple, as<SeqVar>(v)->items));
          } else {
            graph_break("CALL_INTRINSIC_1 " + std::to_string(arg));
          }
          break;
        }

        // -- building containers --
        case Op::BuildTuple: push(std::make_shared<SeqVar>(VarKind::Tuple, pop_n(arg))); break;
        case Op::BuildList: push(std::make_shared<SeqVar>(VarKind::List, pop_n(arg))); break;
        case Op::ListToTuple: {
          VarPtr l = pop();
          push(std::make_shared<SeqVar>(VarKind::Tuple, as<SeqVar>(l)->items));
          break;
        }
        case Op::ListAppend: {  // (list, ..., value -- list, ...)
          VarPtr v = pop();
          VarPtr list = peek(arg);
          as<SeqVar>(list)->items.push_back(v);
          break;
        }
        case Op::ListExtend: {
          VarPtr v = pop();
          VarPtr list = peek(arg);
          std::vector<VarPtr> xs = tx.unpack(v, "list.extend");
          auto& items = as<SeqVar>(list)->items;
          items.insert(items.end(), xs.begin(), xs.end());
          break;
        }
        case Op::BuildSet: {  // (items[arg] -- set)
          std::vector<VarPtr> items = pop_n(arg);
          auto set = std::make_shared<SetVar>(OwnedRef::steal(PySet_New(nullptr)));
          for (auto& x : items) set_add(set, x);
          push(set);
          break;
        }
        case Op::SetAdd: {  // (set, ..., value -- set, ...)
          VarPtr v = pop();
          BREAK_IF(peek(arg)->kind != VarKind::Set, "internal: SET_ADD on a non-set");
          set_add(peek(arg), v);
          break;
        }
        case Op::SetUpdate: {  // (set, ..., iterable -- set, ...)
          VarPtr v = pop();
          BREAK_IF(peek(arg)->kind != VarKind::Set, "internal: SET_UPDATE on a non-set");
          VarPtr set = peek(arg);
          for (auto& x : tx.unpack(v, "set.update")) set_add(set, x);
          break;
        }
        case Op::BuildMap: {  // (k1, v1, ... -- dict)
          std::vector<VarPtr> kv = pop_n(2 * arg);
          auto d = std::make_shared<DictVar>();
          for (int i = 0; i < arg; ++i) dict_set(*d, kv[2 * i], kv[2 * i + 1]);
          push(d);
          break;
        }
        case Op::BuildConstKeyMap: {  // (v1, ..., keys -- dict)
          VarPtr keys = pop();
          std::vector<VarPtr> vals = pop_n(arg);
          auto d = std::make_shared<DictVar>();
          PyObject* kt = const_value(keys);
          for (int i = 0; i < arg; ++i) dict_set(*d, tx.wrap_const(PyTuple_GET_ITEM(kt, i)), vals[i]);
          push(d);
          break;
        }
        case Op::MapAdd: {  // (dict, ..., key, value -- dict, ...)
          VarPtr v = pop();
          VarPtr k = pop();
          dict_set(*as<DictVar>(peek(arg)), k, v);
          break;
        }
        case Op::DictUpdate:
        case Op::DictMerge: {
          VarPtr other = pop();
          BREAK_IF(other->kind != VarKind::Dict, "dict update from a non-dict");
          DictVar* target = as<DictVar>(peek(arg));
          for (auto& [k, v] : as<DictVar>(other)->items) dict_set(*target, tx.wrap_const(k.get()), v);
          break;
        }
        case Op::BuildSlice: push(make_slice(pop_n(arg))); break;  // (start, stop[, step] -- slice)
        case Op::BuildString: {
          std::vector<VarPtr> parts = pop_n(arg);
          OwnedRef empty = OwnedRef::steal(PyUnicode_FromString(""));
          OwnedRef list = OwnedRef::steal(PyList_New(0));
          for (auto& p : parts) PyList_Append(list.get(), tx.python_value(p, "f-string").get());
          push(make_const_steal(PyUnicode_Join(empty.get(), list.get())));
          break;
        }
        case Op::FormatValue: {  // (value[, spec] -- str) 3.11, 3.12: conversion in the low bits
          VarPtr spec = (arg & FVS_HAVE_SPEC) ? pop() : nullptr;
          push(format_value(pop(), arg & FVC_MASK, spec));
          break;
        }
        case Op::ConvertValue: push(format_value(pop(), arg, nullptr)); break;  // (value -- str) 3.13
        case Op::FormatSimple: {  // (value -- str) 3.13
          VarPtr v = pop();
          push(is_const(v) && PyUnicode_CheckExact(const_value(v)) ? v : format_value(v, 0, nullptr));
          break;
        }
        case Op::FormatWithSpec: {  // (value, spec -- str) 3.13
          VarPtr spec = pop();
          push(format_value(pop(), 0, spec));
          break;
        }
        case Op::UnpackSequence: {  // (seq -- items[n] reversed)
          std::vector<VarPtr> items = tx.unpack(pop(), "unpacking");
          BREAK_IF(static_cast<int>(items.size()) != arg, Raises{PyExc_ValueError},
                   "unpacking the wrong number of values");
          for (auto it = items.rbegin(); it != items.rend(); ++it) push(*it);
          break;
        }
        case Op::UnpackEx: {  // (seq -- after..., rest list, before... )
          int before = arg & 0xff, after = arg >> 8;
          std::vector<VarPtr> items = tx.unpack(pop(), "unpacking");
          int n = static_cast<int>(items.size());
          BREAK_IF(n < before + after, Raises{PyExc_ValueError}, "not enough values to unpack");
          for (int i = n - 1; i >= n - after; --i) push(items[i]);
          push(std::make_shared<SeqVar>(
              VarKind::List, std::vector<VarPtr>(items.begin() + before, items.end() - after)));
          for (int i = before - 1; i >= 0; --i) push(items[i]);
          break;
        }

        // -- calls --
        case Op::KwNames: f.kw_names = tx.wrap_const(co_const(arg)); break;  // 3.11, 3.12
        case Op::Call: {
          // KW_NAMES' tuple stays set until the call returns: a break inside the call belongs to
          // this CALL, and its snapshot needs the names (Note [Break snapshot]).
          call(arg, f.kw_names ? const_value(f.kw_names) : nullptr);
          f.kw_names.reset();
          break;
        }
        case Op::CallKw: {  // (callable, self_or_null, args[arg], kw_names -- result) 3.13
          VarPtr names = pop();
          call(arg, const_value(names));
          break;
        }
        case Op::CallFunctionEx: {  // (callable and null, args[, kwargs] -- result)
          KwArgs kwargs;
          if (arg & 1) {
            VarPtr kw = pop();
            BREAK_IF(kw->kind != VarKind::Dict, "**kwargs from a non-dict");
            for (auto& [k, v] : as<DictVar>(kw)->items) kwargs.emplace_back(str_of(k.get()), v);
          }
          std::vector<VarPtr> args = tx.unpack(pop(), "*args");
          VarPtr self;
          VarPtr fn = pop_callable(&self);
          if (self) args.insert(args.begin(), std::move(self));
          push(tx.call(fn, std::move(args), std::move(kwargs)));
          break;
        }
        case Op::MakeFunction: push(make_function(kMakeFunctionHasFlags ? arg : 0)); break;
        case Op::SetFunctionAttribute: {  // (attr, func -- func) 3.13
          VarPtr fn = pop();
          VarPtr attr = pop();
          set_function_attribute(*as<FunctionVar>(fn), arg, attr);
          push(fn);
          break;
        }
        case Op::ReturnValue: return pop();  // (value --)
        case Op::ReturnConst: return tx.wrap_const(co_const(arg));  // (--) 3.12+

        // -- control flow --
        case Op::JumpForward: jump_to(next + arg); break;
        case Op::JumpBackward:
        case Op::JumpBackwardNoInterrupt: jump_to(next - arg); break;
        case Op::PopJumpForwardIfFalse:  // 3.11
        case Op::PopJumpIfFalse: branch(false, next + arg, pop()); break;
        case Op::PopJumpForwardIfTrue:  // 3.11
        case Op::PopJumpIfTrue: branch(true, next + arg, pop()); break;
        case Op::PopJumpBackwardIfFalse: branch(false, next - arg, pop()); break;
        case Op::PopJumpBackwardIfTrue: branch(true, next - arg, pop()); break;
        case Op::PopJumpForwardIfNone:  // 3.11
        case Op::PopJumpIfNone:
          if (is_none(tx, pop())) jump_to(next + arg);
          break;
        case Op::PopJumpForwardIfNotNone:  // 3.11
        case Op::PopJumpIfNotNone:
          if (!is_none(tx, pop())) jump_to(next + arg);
          break;
        case Op::PopJumpBackwardIfNone:
          if (is_none(tx, pop())) jump_to(next - arg);
          break;
        case Op::PopJumpBackwardIfNotNone:
          if (!is_none(tx, pop())) jump_to(next - arg);
          break;
        case Op::JumpIfFalseOrPop:
        case Op::JumpIfTrueOrPop: {  // (cond -- cond if jumping) 3.11
          bool t = tx.truth(peek(1), "and/or condition");
          if (t == (info.op == Op::JumpIfTrueOrPop))
            jump_to(next + arg);
          else
            pop();
          break;
        }
        case Op::GetIter: {  // (iterable -- iterator)
          int after = -1;
          if (auto& pr = tx.pending_range(); pr && f.stack.back()->kind == VarKind::Const &&
                                             const_value(f.stack.back()) == pr->range.get()) {
            Tracer::PendingRange r = std::move(*pr);
            pr.reset();
            after = whole_loop(r.bounds, nullptr);
            // Else unrolled over the bounds' values (pinned now).
            if (after < 0)
              for (const VarPtr& b : r.bounds) tx.python_value(b, "range() bound");
          } else if (tx.offers_array_loop(f.stack.back())) {
            after = whole_loop({}, f.stack.back());
          }
          if (after >= 0) {
            pop();
            jump_to(after);
            break;
          }
          VarPtr v = pop();
          push(v->kind == VarKind::Iterator ? v
                                            : std::make_shared<IteratorVar>(tx.unpack(v, "iteration")));
          break;
        }
        case Op::ForIter: {  // (iter -- iter, next) or (iter --) and jump when exhausted
          BREAK_IF(peek(1)->kind != VarKind::Iterator, "internal: FOR_ITER on a non-iterator");
          auto* it = as<IteratorVar>(peek(1));
          if (it->pos < it->items.size()) {
            push(it->items[it->pos++]);
          } else {
            pop();
            jump_to(next + arg + kForIterExitSkip);  // past END_FOR (3.12+), see opcodes.h
          }
          break;
        }

        // -- exceptions: the handlers of try blocks that do not raise are never reached --
        case Op::PushExcInfo:
        case Op::PopExcept:
        case Op::CheckExcMatch:
        case Op::Reraise:
        case Op::WithExceptStart:
        case Op::PrepReraiseStar:
        case Op::CheckEgMatch: graph_break("an exception handler was reached while tracing");
        case Op::RaiseVarargs: graph_break("raise statement reached while tracing");
        case Op::LoadAssertionError:
          graph_break(Raises{PyExc_AssertionError}, "a failing assert was reached while tracing");
        case Op::ReturnGenerator:
        case Op::YieldValue:
        case Op::Send:
        case Op::GetAwaitable: graph_break("generators and coroutines run in CPython");
        case Op::BeforeWith:
          // (manager -- exit entered)
          if (VarPtr exit = tx.enter_grad_block(f, f.stack.back())) {  // Note [Grad-mode blocks]
            pop();
            push(exit);
            push(tx.wrap_const(Py_None));
            break;
          }
          // Note [With blocks]
          graph_break("entering a with block: __enter__ runs in CPython (" + with_manager_name() + ")");
        case Op::ImportName:
        case Op::ImportFrom: graph_break("import inside a traced function");
        case Op::ExtendedArg:  // consumed above
        case Op::Unknown: graph_break("unsupported opcode " + opcode_name(raw));
      }
    }
  }

  /// The context manager a BEFORE_WITH would enter, for its break's message.
  std::string with_manager_name() const {
    return f.stack.empty() ? "?" : describe_var(f.stack.back(), tx.out_);
  }

  /// CPython's name of an opcode, for messages (Lib/opcode.py knows every version's names).
  static std::string opcode_name(int raw) {
    OwnedRef mod = OwnedRef::steal(PyImport_ImportModule("opcode"));
    OwnedRef names = mod ? OwnedRef::steal(PyObject_GetAttrString(mod.get(), "opname")) : OwnedRef();
    OwnedRef name = names ? OwnedRef::steal(PySequence_GetItem(names.get(), raw)) : OwnedRef();
    if (!name) {
      PyErr_Clear();
      return std::to_string(raw);
    }
    return str_of(name.get());
  }

  VarPtr deref(int i) {
    CellVar* cell = cell_at(i);
    if (!cell->contents && cell->source) {
      if (VarPtr w = tx.outside_cell_written(*cell)) return w;  // Note [Side effects]
      PyObject* v = fetch_source(*cell->source, tx.view());  // borrowed
      BREAK_IF(!v, Raises{PyExc_NameError},
               "free variable '" + local_name(f.code, i) + "' is unbound");
      cell->contents = tx.wrap(v, cell->source);
    }
    BREAK_IF(!cell->contents, Raises{PyExc_NameError},
             "free variable '" + local_name(f.code, i) + "' is unbound");
    return cell->contents;
  }

  void dict_set(DictVar& d, const VarPtr& key, const VarPtr& value) {
    OwnedRef k = tx.python_value(key, "dict key");
    BREAK_IF(PyObject_Hash(k.get()) == -1, Raises{PyExc_TypeError}, "unhashable dict key");
    for (auto& [kk, vv] : d.items) {
      int eq = PyObject_RichCompareBool(kk.get(), k.get(), Py_EQ);
      if (eq == 1) {
        vv = value;
        return;
      }
      if (eq < 0) PyErr_Clear();
    }
    d.items.emplace_back(std::move(k), value);
  }

  void store_subscr(const VarPtr& container, const VarPtr& index, const VarPtr& value) {
    if (container->kind == VarKind::Tensor) {
      tx.array_ops().setitem(tx, container, index, value);
      return;
    }
    // A list or dict the function received is changed in the trace's view of it and the store
    // logged (Note [Side effects]); one the trace made is only changed.
    const bool outside = container->source != nullptr;
    if (container->scope < tx.out().scope())
      tx.refuse_in_body(std::string("changing ") + var_kind_name(container->kind) + " made outside it");
    BREAK_IF(outside && container->kind != VarKind::Dict && container->kind != VarKind::List,
             BreakKind::SideEffect, "mutating a container the function received (a side effect)");
    if (container->kind == VarKind::Dict) {
      if (outside) {
        OwnedRef k = tx.python_value(index, "dict key");
        BREAK_IF(!PyUnicode_CheckExact(k.get()) && !PyLong_CheckExact(k.get()), BreakKind::SideEffect,
                 "storing into a dict the function received with a key other than str/int");
        tx.log_container_store(container, k.get(), value);
      }
      dict_set(*as<DictVar>(container), index, value);
      return;
    }
    if (container->kind == VarKind::List) {
      auto& items = as<SeqVar>(container)->items;
      int64_t i = tx.to_int(index, "list index");
      int64_t n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      BREAK_IF(i < 0 || i >= n, Raises{PyExc_IndexError}, "list assignment index out of range");
      if (outside) {
        OwnedRef k = OwnedRef::steal(PyLong_FromLongLong(i));
        BREAK_IF(!k, BreakKind::Internal, "internal: out of memory");
        tx.log_container_store(container, k.get(), value);
      }
      items[i] = value;
      return;
    }
    graph_break(std::string("item assignment on ") + var_kind_name(container->kind));
  }

  VarPtr make_function(int flags) {
    // MAKE_FUNCTION (defaults?, kwdefaults?, annotations?, closure?, code -- function); 3.13 has
    // no flags and sets each part with SET_FUNCTION_ATTRIBUTE.
    auto fn = std::make_shared<FunctionVar>();
    VarPtr code = pop();
    fn->code = OwnedRef::borrow(const_value(code));
    for (int part : {kFunctionClosure, kFunctionAnnotations, kFunctionKwDefaults, kFunctionDefaults})
      if (flags & part) set_function_attribute(*fn, part, pop());
    fn->globals = f.globals;
    fn->globals_base = f.globals_base;
    fn->qualname = OwnedRef::borrow(reinterpret_cast<PyCodeObject*>(fn->code.get())->co_qualname);
    return fn;
  }

  void set_function_attribute(FunctionVar& fn, int part, const VarPtr& value) {
    switch (part) {
      case kFunctionClosure:
        for (auto& c : as<SeqVar>(value)->items) {
          BREAK_IF(c->kind != VarKind::Cell, BreakKind::Internal,
                   "internal: closure item is not a cell");
          fn.closure.push_back(std::static_pointer_cast<CellVar>(c));
        }
        break;
      case kFunctionAnnotations: break;  // annotations do not change what the function computes
      case kFunctionKwDefaults:
        for (auto& [k, v] : as<DictVar>(value)->items) fn.kwdefaults.emplace_back(k, v);
        break;
      case kFunctionDefaults: fn.defaults = tx.unpack(value, "defaults"); break;
      default: graph_break(BreakKind::Internal, "function attribute " + std::to_string(part));
    }
  }
};

VarPtr Tracer::zero_arg_super() {
  // What CPython's super() does without arguments: the __class__ cell of the method being run and
  // its first argument (read through its cell if a closure captured it).
  BREAK_IF(!current_, BreakKind::Internal, "internal: super() outside a frame");
  TraceFrame& f = *current_;
  PyCodeObject* code = f.code;
  BREAK_IF(code->co_argcount == 0, Raises{PyExc_RuntimeError}, "super(): no arguments");
  Interpreter interp{*this, f};
  int nfree = code->co_nfreevars;
  for (int i = code->co_nlocalsplus - nfree; i < code->co_nlocalsplus; ++i) {
    if (local_name(code, i) != "__class__") continue;
    VarPtr self = interp.load_fast(0);
    if (self->kind == VarKind::Cell) self = as<CellVar>(self)->contents;
    BREAK_IF(!self, Raises{PyExc_RuntimeError}, "super(): first argument is unbound");
    return std::make_shared<SuperVar>(interp.deref(i), self);
  }
  graph_break(Raises{PyExc_RuntimeError}, "super(): no __class__ cell");
}

VarPtr Tracer::run_frame(TraceFrame& f) {
  OwnedRef bytes = OwnedRef::steal(PyCode_GetCode(f.code));  // new ref: co_code, unquickened
  BREAK_IF(!bytes, BreakKind::Internal, "cannot read the code object");
  f.code_bytes = bytes;
  f.instrs = reinterpret_cast<const uint16_t*>(PyBytes_AS_STRING(bytes.get()));
  f.num_instrs = static_cast<int>(PyBytes_GET_SIZE(bytes.get()) / 2);
  if (PyObject* table = f.code->co_exceptiontable; table && PyBytes_GET_SIZE(table) > 0) {  // borrowed
    auto entries = bytecode::decode_exception_table(reinterpret_cast<const uint8_t*>(PyBytes_AS_STRING(table)),
                                                    static_cast<size_t>(PyBytes_GET_SIZE(table)), f.num_instrs);
    BREAK_IF(!entries, BreakKind::Internal, "cannot read the exception table");
    f.handlers = std::move(*entries);
  }
  f.parent = current_;
  TraceFrame* saved = current_;
  current_ = &f;
  Interpreter interp{*this, f};
  try {
    VarPtr result = interp.run();
    current_ = saved;
    return result;
  } catch (GraphBreak& b) {
    if (!f.is_root) b.in_callee = true;
    if (!b.filename) {  // while the innermost frame is still alive to name its line
      b.where = location();
      b.filename = OwnedRef::borrow(f.code->co_filename);
      b.lineno = PyCode_Addr2Line(f.code, f.cur_offset * static_cast<int>(sizeof(uint16_t)));
    }
    current_ = saved;
    throw;
  }
}

}  // namespace framejit::frontend
