// break_code.cpp — the rewritten body of a frame at a graph break (see
// break_code.h, Note [Break code]).
#include "frontend/bytecode/break_code.h"

#include <opcode.h>

#include <algorithm>
#include <string>
#include <unordered_set>
#include <utility>

#include "frontend/bytecode/assemble.h"
#include "frontend/bytecode/disassemble.h"
#include "frontend/bytecode/instruction.h"
#include "frontend/bytecode/locals.h"
#include "frontend/bytecode/opcode_facts.h"
#include "frontend/bytecode/resume.h"

namespace framejit::frontend::bytecode {

namespace {

Recipe recipe(Recipe::Kind kind, int index, PyObject* obj, const Recipe* base) {  // obj borrowed
  Recipe r;
  r.kind = kind;
  r.index = index;
  if (obj) r.obj = OwnedRef::borrow(obj);
  if (base) r.base = std::make_shared<const Recipe>(*base);
  return r;
}

}  // namespace

Recipe Recipe::graph_output(int k) { return recipe(Kind::GraphOutput, k, nullptr, nullptr); }
Recipe Recipe::constant(PyObject* value) { return recipe(Kind::Const, -1, value, nullptr); }
Recipe Recipe::local(int index) { return recipe(Kind::Local, index, nullptr, nullptr); }
Recipe Recipe::global(PyObject* name) { return recipe(Kind::Global, -1, name, nullptr); }
Recipe Recipe::null() { return Recipe{}; }
Recipe Recipe::attr_of(Recipe base, PyObject* name) { return recipe(Kind::AttrOf, -1, name, &base); }
Recipe Recipe::item_of(Recipe base, PyObject* key) { return recipe(Kind::ItemOf, -1, key, &base); }

namespace {

constexpr int kGeneratorLike = 0x0020 | 0x0080 | 0x0100 | 0x0200;  // gen, coro, iter coro, agen

bool is_return(int op) {
#if PY_VERSION_HEX >= 0x030C0000
  if (op == RETURN_CONST)
    return true;
#endif
  return op == RETURN_VALUE;
}

// The copy of a method load or of LOAD_GLOBAL's NULL bit loads the plain value;
// `nulls` says where the original had its (maybe-)NULL slot among the
// instruction's outputs.
struct CopyRewrite {
  int opcode;
  int oparg;
  std::vector<bool> nulls;  // empty: every output is a value
};

CopyRewrite rewrite_copy(int op, int oparg) {
#if PY_VERSION_HEX >= 0x030D0000
  const std::vector<bool> layout{false, true};  // (value, NULL)
#else
  const std::vector<bool> layout{true, false};  // (NULL, value)
#endif
  if (op == LOAD_GLOBAL && (oparg & 1))
    return {op, oparg & ~1, layout};
#if PY_VERSION_HEX >= 0x030C0000
  if (op == LOAD_ATTR && (oparg & 1))
    return {op, oparg & ~1, layout};
#else
  if (op == LOAD_METHOD)
    return {LOAD_ATTR, oparg, layout};
#endif
  return {op, oparg, {}};
}

// The code's localsplus kinds: varnames, then cells that are not also varnames,
// then free vars.
struct Slots {
  size_t nvar = 0;
  size_t nargs = 0;        // the arguments, *args and **kwargs included: the first nargs varnames
  std::vector<bool> cell;  // cell or free: read with LOAD_DEREF
  std::vector<int> free;   // localsplus indices of the free variables, in co_freevars order
  std::vector<std::string> names;
};

Expected<Slots> slots_of(PyObject* code) {  // borrowed
  Slots s;
  auto names = local_names(code, "break code");
  if (!names)
    return names.error();
  const std::vector<std::string>* var = &names->var;
  const std::vector<std::string>* cells = &names->cell;
  const std::vector<std::string>* frees = &names->free;
  s.nvar = var->size();
  const auto* co = reinterpret_cast<PyCodeObject*>(code);
  s.nargs = static_cast<size_t>(co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
                                ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0));
  s.names = *var;
  s.cell.assign(var->size(), false);
  for (const std::string& c : *cells) {
    auto it = std::find(var->begin(), var->end(), c);
    if (it != var->end()) {
      s.cell[static_cast<size_t>(it - var->begin())] = true;
    } else {
      s.names.push_back(c);
      s.cell.push_back(true);
    }
  }
  for (const std::string& f : *frees) {
    s.free.push_back(static_cast<int>(s.names.size()));
    s.names.push_back(f);
    s.cell.push_back(true);
  }
  return s;
}

Status check_recipe(const Recipe& r, const BreakSpec& spec, const Slots& slots, bool stack_slot,
                    const std::string& where) {
  switch (r.kind) {
    case Recipe::Kind::GraphOutput:
      if (!spec.graph && !spec.out_param)
        return Status::invalid(where + ": a graph output without a graph");
      if (r.index < 0)
        return Status::invalid(where + ": negative graph output index");
      return Status::ok();
    case Recipe::Kind::Const:
      if (!r.obj)
        return Status::invalid(where + ": a constant without a value");
      return Status::ok();
    case Recipe::Kind::Local:
      if (r.index < 0 || static_cast<size_t>(r.index) >= slots.names.size())
        return Status::invalid(where + ": local " + std::to_string(r.index) + " out of range");
      return Status::ok();
    case Recipe::Kind::Global:
      if (!r.obj || !PyUnicode_Check(r.obj.get()))
        return Status::invalid(where + ": a global's name must be a str");
      return Status::ok();
    case Recipe::Kind::Null:
      if (!stack_slot)
        return Status::invalid(where + ": NULL is only a stack slot");
      return Status::ok();
    case Recipe::Kind::AttrOf:
    case Recipe::Kind::ItemOf:
      if (!r.base)
        return Status::invalid(where + ": no base");
      if (!r.obj)
        return Status::invalid(where + ": no attribute name or key");
      if (r.kind == Recipe::Kind::AttrOf && !PyUnicode_Check(r.obj.get()))
        return Status::invalid(where + ": an attribute name must be a str");
      return check_recipe(*r.base, spec, slots, false, where);
  }
  return Status::invalid(where + ": unknown recipe kind");
}

// One way out of the copied instruction.
struct Continuation {
  size_t resume_index = 0;          // where the original continues
  Label label = kNoLabel;           // the block in the new code (fall-through: none)
  int on_stack = 0;                 // values on the new code's stack at the block (outputs)
  bool for_iter_exhausted = false;  // the block starts with the END_FOR the interpreter skips
  bool exception = false;
  ResumeSpec spec;
  OwnedRef resume;  // its resume code
};

class Builder {
public:
  Builder(PyObject* code, const BreakSpec& spec) : code_(code), spec_(spec) {}  // borrowed

  Expected<BreakCode> build() {
    if (!code_ || !PyCode_Check(code_))
      return Status::invalid("break code: not a code object");
    if (reinterpret_cast<PyCodeObject*>(code_)->co_flags & kGeneratorLike)
      return Status::unsupported("break code: generators and coroutines are not supported");
    Expected<Slots> slots = slots_of(code_);
    if (!slots)
      return slots.error();
    slots_ = std::move(*slots);
    FJ_PROPAGATE(locate());
    FJ_PROPAGATE(check_spec());

    BreakCode out;
    std::string why = spec_.run_in_resume ? "the instruction starts a loop that runs in CPython" : plan_copy();
    if (why.empty()) {
      out.kind = BreakCode::Kind::Copied;
    } else {
      out.kind = BreakCode::Kind::InResume;
      out.why_in_resume = why;
      FJ_PROPAGATE(plan_in_resume());
    }
    Expected<OwnedRef> code = emit(out.kind == BreakCode::Kind::Copied);
    if (!code)
      return code.error();
    out.code = std::move(*code);
    for (const Continuation& c : conts_) {
      out.resume_offsets.push_back(c.spec.offset);
      if (c.exception)
        out.handler_resumes.push_back(c.resume);
    }
    return out;
  }

private:
  // Finds the breaking instruction (the whole group it belongs to) and the
  // stack depth there.
  Status locate() {
    Expected<Bytecode> bc = disassemble(code_);
    if (!bc)
      return bc.error();
    bc_ = std::move(*bc);
    Expected<std::vector<int>> depths = stack_depths(bc_);
    if (!depths)
      return depths.error();
    depths_ = std::move(*depths);
    const auto& ins = bc_.instructions;
    const std::string at = "break code: offset " + std::to_string(spec_.offset);
    first_ = ins.size();
    for (size_t i = 0; i < ins.size(); ++i)
      if (spec_.offset >= 0 && ins[i].offset * 2 == spec_.offset)
        first_ = i;
    if (first_ == ins.size())
      return Status::invalid(at + " is not the start of an instruction");
    resume_index_ = ins.size();
    for (size_t i = 0; i < ins.size(); ++i)
      if (ins[i].opcode == RESUME) {
        resume_index_ = i;
        break;
      }
    while (first_ > 0 && !can_insert_before(bc_, first_) && first_ > resume_index_)
      --first_;
    if (resume_index_ == ins.size() || first_ <= resume_index_)
      return Status::invalid(at + " is in the interpreter's prologue");
    last_ = first_;
    while (last_ + 1 < ins.size() && !can_insert_before(bc_, last_ + 1))
      ++last_;
    if (depths_[first_] < 0)
      return Status::invalid(at + " is unreachable");
    if (is_return(ins[last_].opcode))
      return Status::invalid(at + " is a return: not a break");
    depth_ = depths_[first_];
    return Status::ok();
  }

  Status check_spec() {
    if (static_cast<int>(spec_.stack.size()) != depth_)
      return Status::invalid("break code: the stack at offset " + std::to_string(spec_.offset) + " holds " +
                             std::to_string(depth_) + " values, " + std::to_string(spec_.stack.size()) +
                             " recipes given");
    if (spec_.graph && !PyCallable_Check(spec_.graph.get()))
      return Status::invalid("break code: the graph is not callable");
    if (spec_.graph && spec_.out_param)
      return Status::invalid("break code: a graph call and an outputs parameter");
    for (size_t i = 0; i < spec_.inputs.size(); ++i)
      FJ_PROPAGATE(check_recipe(spec_.inputs[i], spec_, slots_, false, "break code: graph input " + std::to_string(i)));
    if (!spec_.graph && !spec_.inputs.empty())
      return Status::invalid("break code: graph inputs without a graph");
    for (size_t i = 0; i < spec_.stack.size(); ++i)
      FJ_PROPAGATE(check_recipe(spec_.stack[i], spec_, slots_, true, "break code: stack slot " + std::to_string(i)));
    std::vector<bool> stored(slots_.names.size(), false);
    for (size_t i = 0; i < spec_.stores.size(); ++i) {
      const int l = spec_.stores[i].local;
      const std::string where = "break code: store " + std::to_string(i);
      if (l < 0 || static_cast<size_t>(l) >= slots_.names.size())
        return Status::invalid(where + ": local " + std::to_string(l) + " out of range");
      if (stored[static_cast<size_t>(l)])
        return Status::invalid(where + ": local " + slots_.names[static_cast<size_t>(l)] + " stored twice");
      stored[static_cast<size_t>(l)] = true;
      FJ_PROPAGATE(check_recipe(spec_.stores[i].value, spec_, slots_, false, where));
    }
    for (int l : spec_.live_locals)
      if (l < 0 || static_cast<size_t>(l) >= slots_.names.size())
        return Status::invalid("break code: live local " + std::to_string(l) + " out of range");
    return Status::ok();
  }

  // Plans the copied instruction and its continuations; "" on success, else why
  // it cannot be.
  std::string plan_copy() {
    const Instruction& main = bc_.instructions[last_];
    const int n_in = break_inputs(main.opcode, main.oparg);
    if (n_in < 0)
      return "opcode " + std::to_string(main.opcode) + " is not copied";
    if (n_in > depth_)
      return "the stack is shallower than the instruction's inputs";
    keep_ = depth_ - n_in;
    rewrite_ = rewrite_copy(main.opcode, main.oparg);
    conts_.clear();
    if (!is_terminator(main.opcode)) {
      Continuation c;
      c.resume_index = last_ + 1;
      if (std::string why = add_output_continuation(c); !why.empty())
        return why;
    }
    if (main.target != kNoLabel) {
      const int t = bc_.index_of(main.target);
      if (t < 0)
        return "the jump has no target";
      Continuation c;
      c.resume_index = static_cast<size_t>(t);
      c.label = bc_.new_label();
#if PY_VERSION_HEX >= 0x030C0000
      if (main.opcode == FOR_ITER) {
        // An exhausted FOR_ITER pops the iterator and skips the END_FOR (3.13:
        // END_FOR, POP_TOP) at its target by offset.
        c.for_iter_exhausted = true;
        c.resume_index += PY_VERSION_HEX >= 0x030D0000 ? 2 : 1;
      }
#endif
      if (std::string why = add_output_continuation(c); !why.empty())
        return why;
    }
    if (main.handler.active()) {
      if (main.handler.depth > keep_)
        return "the handler's stack reaches into the instruction's inputs";
      const int h = bc_.index_of(main.handler.target);
      if (h < 0)
        return "the handler has no entry";
      Continuation c;
      c.resume_index = static_cast<size_t>(h);
      c.label = bc_.new_label();
      c.exception = true;
      c.on_stack = 1;
      for (int i = 0; i < main.handler.depth; ++i)
        c.spec.stack_null.push_back(spec_.stack[static_cast<size_t>(i)].kind == Recipe::Kind::Null);
      if (main.handler.lasti) {  // a with body's or finally's handler: the resume code pushes it
        c.spec.lasti_slot = main.handler.depth;
        c.spec.stack_null.push_back(false);
      }
      c.spec.stack_null.push_back(false);
      if (std::string why = finish(c); !why.empty())
        return why;
    }
    return "";
  }

  // A continuation after the instruction ran normally: the kept slots, then its
  // outputs.
  std::string add_output_continuation(Continuation& c) {
    if (c.resume_index >= bc_.instructions.size())
      return "a continuation runs off the end of the code";
    const int dc = depths_[c.resume_index];
    if (dc < keep_)
      return "a continuation's stack is shallower than the kept slots";
    const int m = dc - keep_;
    for (int i = 0; i < keep_; ++i)
      c.spec.stack_null.push_back(spec_.stack[static_cast<size_t>(i)].kind == Recipe::Kind::Null);
    std::vector<bool> nulls(static_cast<size_t>(m), false);
    if (!rewrite_.nulls.empty() && rewrite_.nulls.size() == static_cast<size_t>(m))
      nulls = rewrite_.nulls;
    for (bool n : nulls) {
      c.spec.stack_null.push_back(n);
      c.on_stack += n ? 0 : 1;
    }
    return finish(c);
  }

  std::string finish(Continuation& c) {
    c.spec.offset = bc_.instructions[c.resume_index].offset * 2;
    c.spec.live_locals = spec_.live_locals;
    Expected<OwnedRef> r = make_resume_code(code_, c.spec);
    if (!r)
      return "no resume function at offset " + std::to_string(c.spec.offset) + ": " + r.error().message();
    c.resume = std::move(*r);
    conts_.push_back(std::move(c));
    return "";
  }

  Status plan_in_resume() {
    keep_ = depth_;
    conts_.clear();
    Continuation c;
    c.resume_index = first_;
    for (const Recipe& r : spec_.stack)
      c.spec.stack_null.push_back(r.kind == Recipe::Kind::Null);
    c.spec.offset = bc_.instructions[first_].offset * 2;
    c.spec.live_locals = spec_.live_locals;
    Expected<OwnedRef> r = make_resume_code(code_, c.spec);
    if (!r)
      return Status::invalid("break code: " + r.error().message());
    c.resume = std::move(*r);
    conts_.push_back(std::move(c));
    return Status::ok();
  }

  // --- emission
  // ---------------------------------------------------------------------------

  void op(int opcode, int oparg = 0) { out_.push_back(Instruction::make(opcode, oparg, pos_)); }

  // An original localsplus index in the new code: ___bc_out sits after the arguments when it is
  // a parameter, the other temporaries after the varnames.
  int mapped(int slot) const {
    if (static_cast<size_t>(slot) < slots_.nargs)
      return slot;
    if (static_cast<size_t>(slot) < slots_.nvar)
      return slot + (spec_.out_param ? 1 : 0);
    return slot + static_cast<int>(ntemps_);
  }

  void load_temp(int t) { op(LOAD_FAST, t); }

  Status emit_const(PyObject* v) {  // borrowed
    op(LOAD_CONST, bc_.add_const(v));
    return Status::ok();
  }

  Status emit_recipe(const Recipe& r) {
    switch (r.kind) {
      case Recipe::Kind::GraphOutput: {
        load_temp(out_temp_);
        OwnedRef k = OwnedRef::steal(PyLong_FromLong(r.index));  // new ref
        if (!k)
          return Status::internal(fetch_error_text());
        FJ_PROPAGATE(emit_const(k.get()));
        op(BINARY_SUBSCR);
        return Status::ok();
      }
      case Recipe::Kind::Const:
        return emit_const(r.obj.get());
      case Recipe::Kind::Local:
        if (slots_.cell[static_cast<size_t>(r.index)]) {
          op(LOAD_DEREF, mapped(r.index));
        } else {
#if PY_VERSION_HEX >= 0x030C0000
          op(LOAD_FAST_CHECK,
             mapped(r.index));  // the caller's word that it is bound is not proof
#else
          op(LOAD_FAST, mapped(r.index));  // 3.11's LOAD_FAST checks
#endif
        }
        return Status::ok();
      case Recipe::Kind::Global:
        op(LOAD_GLOBAL, bc_.add_name(r.obj.get()) << 1);
        return Status::ok();
      case Recipe::Kind::Null:
        op(PUSH_NULL);
        return Status::ok();
      case Recipe::Kind::AttrOf:
        FJ_PROPAGATE(emit_recipe(*r.base));
#if PY_VERSION_HEX >= 0x030C0000
        op(LOAD_ATTR, bc_.add_name(r.obj.get()) << 1);
#else
        op(LOAD_ATTR, bc_.add_name(r.obj.get()));
#endif
        return Status::ok();
      case Recipe::Kind::ItemOf:
        FJ_PROPAGATE(emit_recipe(*r.base));
        FJ_PROPAGATE(emit_const(r.obj.get()));
        op(BINARY_SUBSCR);
        return Status::ok();
    }
    return Status::internal("break code: unknown recipe kind");
  }

  // Pushes a callable and the NULL beside it in this version's call layout.
  template <typename F> Status emit_callee(F push_callable) {
#if PY_VERSION_HEX >= 0x030D0000
    FJ_PROPAGATE(push_callable());
    op(PUSH_NULL);
#else
    op(PUSH_NULL);
    FJ_PROPAGATE(push_callable());
#endif
    return Status::ok();
  }

  void emit_call(int n) {
#if PY_VERSION_HEX < 0x030C0000
    op(PRECALL, n);
#endif
    op(CALL, n);
  }

  void emit_load_cell(int slot) {  // slot already mapped
#if PY_VERSION_HEX >= 0x030D0000
    op(LOAD_FAST, slot);  // 3.13's LOAD_CLOSURE is a pseudo-instruction for this
#else
    op(LOAD_CLOSURE, slot);
#endif
  }

  // A function for `resume` (a code object) with this frame's globals and
  // closure cells.
  Status emit_make_resume(PyObject* resume) {  // borrowed
    const bool closure = !slots_.free.empty();
    if (closure) {
      for (int f : slots_.free)
        emit_load_cell(mapped(f));
      op(BUILD_TUPLE, static_cast<int>(slots_.free.size()));
    }
    FJ_PROPAGATE(emit_const(resume));
#if PY_VERSION_HEX >= 0x030D0000
    op(MAKE_FUNCTION, 0);
    if (closure)
      op(SET_FUNCTION_ATTRIBUTE, 0x08);
#else
    op(MAKE_FUNCTION, closure ? 0x08 : 0);
#endif
    return Status::ok();
  }

  // Stores the block's outputs, then `return resume(<non-NULL slots>, <live
  // locals>)`.
  Status emit_continuation(const Continuation& c) {
    if (c.label != kNoLabel) {
      if (c.for_iter_exhausted) {
#if PY_VERSION_HEX >= 0x030C0000
        op(END_FOR);  // skipped by FOR_ITER; it is what FOR_ITER expects at its
                      // target
        out_.back().label = c.label;
#if PY_VERSION_HEX >= 0x030D0000
        op(POP_TOP);
#endif
#endif
      } else {
        op(NOP);
        out_.back().label = c.label;
      }
    }
    for (int j = c.on_stack - 1; j >= 0; --j)
      op(STORE_FAST, out_temp0_ + j);
    FJ_PROPAGATE(emit_callee([&] { return emit_make_resume(c.resume.get()); }));
    int nargs = 0, j = 0;
    std::vector<int> used;
    for (size_t i = 0; i < c.spec.stack_null.size(); ++i) {
      if (c.spec.stack_null[i] || static_cast<int>(i) == c.spec.lasti_slot)
        continue;
      const int t = static_cast<int>(i) < keep_ && !(c.exception && i + 1 == c.spec.stack_null.size())
                        ? stack_temp0_ + static_cast<int>(i)
                        : out_temp0_ + j++;
      load_temp(t);
      used.push_back(t);
      ++nargs;
    }
    for (int l : spec_.live_locals) {
      if (slots_.cell[static_cast<size_t>(l)]) {
        emit_load_cell(mapped(l));  // the cell itself: closures made before the break share it
      } else {
#if PY_VERSION_HEX >= 0x030C0000
        op(LOAD_FAST_CHECK, mapped(l));
#else
        op(LOAD_FAST, mapped(l));
#endif
        used.push_back(mapped(l));
      }
      ++nargs;
    }
    // The resume function owns the values now: this frame must not keep arrays
    // alive while it runs.
    for (int t : used)
      op(DELETE_FAST, t);
    emit_call(nargs);
    op(RETURN_VALUE);
    return Status::ok();
  }

  Expected<OwnedRef> emit(bool copied) {
    // New locals at the end of co_varnames: ___bc_out, ___bc_s<i> per kept
    // stack slot,
    // ___bc_o<j> per value a continuation finds on the stack.
    int max_on_stack = 0;
    for (const Continuation& c : conts_)
      max_on_stack = std::max(max_on_stack, c.on_stack);
    std::unordered_set<std::string> taken(slots_.names.begin(), slots_.names.end());
    std::string prefix = "___bc_";
    auto clashes = [&] {
      for (const std::string& n : taken)
        if (n.compare(0, prefix.size(), prefix) == 0)
          return true;
      return false;
    };
    while (clashes())
      prefix = "_" + prefix;
    std::vector<std::string> temps{prefix + "out"};
    for (int i = 0; i < keep_; ++i)
      temps.push_back(prefix + "s" + std::to_string(i));
    for (int j = 0; j < max_on_stack; ++j)
      temps.push_back(prefix + "o" + std::to_string(j));
    for (size_t i = 0; i < temps.size(); ++i) {
      OwnedRef name = OwnedRef::steal(PyUnicode_FromString(temps[i].c_str()));  // new ref
      if (!name)
        return Status::internal(fetch_error_text());
      const size_t at = i == 0 && spec_.out_param ? slots_.nargs : bc_.varnames.size();
      Expected<int> done = insert_local(bc_, at, name.get());
      if (!done)
        return done.error();
    }
    ntemps_ = temps.size();
    out_temp_ = static_cast<int>(spec_.out_param ? slots_.nargs : slots_.nvar);
    stack_temp0_ = static_cast<int>(slots_.nvar) + 1;
    out_temp0_ = stack_temp0_ + keep_;
    if (spec_.out_param)
      FJ_PROPAGATE(flatten_signature());

    const Instruction main = bc_.instructions[last_];
    pos_ = main.pos;
    for (size_t i = 0; i <= resume_index_; ++i) {
      Instruction p = bc_.instructions[i];
      p.label = kNoLabel;
      out_.push_back(p);
    }

    if (spec_.graph) {
      FJ_PROPAGATE(emit_callee([&] { return emit_const(spec_.graph.get()); }));
      for (const Recipe& r : spec_.inputs)
        FJ_PROPAGATE(emit_recipe(r));
      emit_call(static_cast<int>(spec_.inputs.size()));
      op(STORE_FAST, out_temp_);
    }
    for (int i = 0; i < keep_; ++i) {
      const Recipe& r = spec_.stack[static_cast<size_t>(i)];
      if (r.kind == Recipe::Kind::Null)
        continue;
      FJ_PROPAGATE(emit_recipe(r));
      op(STORE_FAST, stack_temp0_ + i);
    }
    for (size_t i = static_cast<size_t>(keep_); i < spec_.stack.size(); ++i)
      FJ_PROPAGATE(emit_recipe(spec_.stack[i]));
    // Every value first, then the stores (last first): recipes read the entry
    // state.
    for (const LocalStore& s : spec_.stores)
      FJ_PROPAGATE(emit_recipe(s.value));
    for (auto it = spec_.stores.rbegin(); it != spec_.stores.rend(); ++it)
      op(slots_.cell[static_cast<size_t>(it->local)] ? STORE_DEREF : STORE_FAST, mapped(it->local));
    if (spec_.graph || spec_.out_param)
      op(DELETE_FAST, out_temp_);
    // TODO(side effects): replay BreakSpec's side-effect log here, after the
    // locals.

    if (!copied) {
      FJ_PROPAGATE(emit_continuation(conts_.front()));
      return finish_code();
    }

    ExceptHandler handler;
    for (const Continuation& c : conts_)
      if (c.exception)
        handler = ExceptHandler{c.label, 0, false};  // the kept slots live in temporaries
    if (handler.active()) {
      // NB: 3.13 looks up the handler of a Python callee's exception at the
      // code unit before the CALL (resume_with_error unwinds from instr_ptr -
      // 1); a NOP there under the same handler makes that lookup agree with the
      // copy's own entry.
      op(NOP);
      out_.back().handler = handler;
    }
#if PY_VERSION_HEX >= 0x030D0000
    if (main.opcode == POP_JUMP_IF_FALSE || main.opcode == POP_JUMP_IF_TRUE) {
      // 3.13's jumps read only exact bools (the compiler puts TO_BOOL before
      // them); a stack recipe may give any object.
      op(TO_BOOL);
      out_.back().handler = handler;
    }
#endif
    for (size_t i = first_; i <= last_; ++i) {
      Instruction c = bc_.instructions[i];
      c.label = kNoLabel;
      c.offset = -1;
      c.handler = handler;
      if (i == last_) {
        c.opcode = rewrite_.opcode;
        c.oparg = rewrite_.oparg;
        c.target = kNoLabel;
        for (const Continuation& k : conts_)
          if (!k.exception && k.label != kNoLabel)
            c.target = k.label;
      }
      out_.push_back(c);
    }
    // The fall-through continuation (if any) comes first: it is conts_[0] with
    // no label.
    for (const Continuation& c : conts_)
      FJ_PROPAGATE(emit_continuation(c));
    return finish_code();
  }

  // Every argument positional, then ___bc_out: the caller passes the frame's argument slots as
  // they are (a *args tuple and a **kwargs dict included) and the outputs.
  Status flatten_signature() {
    const int flags = reinterpret_cast<PyCodeObject*>(code_)->co_flags & ~(CO_VARARGS | CO_VARKEYWORDS);
    const std::pair<const char*, long> ints[] = {{"co_argcount", static_cast<long>(slots_.nargs) + 1},
                                                 {"co_posonlyargcount", 0},
                                                 {"co_kwonlyargcount", 0},
                                                 {"co_flags", flags}};
    for (const auto& [name, value] : ints) {
      OwnedRef v = OwnedRef::steal(PyLong_FromLong(value));  // new ref
      if (!v)
        return Status::internal(fetch_error_text());
      bc_.overrides.emplace_back(name, std::move(v));
    }
    return Status::ok();
  }

  Expected<OwnedRef> finish_code() {
    bc_.instructions = std::move(out_);
    return assemble(bc_);
  }

  PyObject* code_;  // borrowed
  const BreakSpec& spec_;
  Slots slots_;
  Bytecode bc_;
  std::vector<int> depths_;
  size_t first_ = 0, last_ = 0, resume_index_ = 0;
  int depth_ = 0;
  int keep_ = 0;
  CopyRewrite rewrite_{0, 0, {}};
  std::vector<Continuation> conts_;
  std::vector<Instruction> out_;
  Position pos_;
  size_t ntemps_ = 0;
  int out_temp_ = -1, stack_temp0_ = -1, out_temp0_ = -1;
};

}  // namespace

Expected<BreakCode> make_break_code(PyObject* code,
                                    const BreakSpec& spec) {  // borrowed
  return Builder(code, spec).build();
}

}  // namespace framejit::frontend::bytecode
