// translator.cpp — the bytecode loop of the symbolic interpreter (CPython 3.11 opcodes).
#include <Python.h>

#include <algorithm>

#include "frontend/ops/registry.h"
#include "frontend/trace/opcodes.h"
#include "frontend/trace/python_ops.h"
#include "frontend/trace/tracer.h"

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
    : out_(out), view_(view), fn_(fn), cfg_(cfg) {}

std::string Tracer::location() const {
  if (!current_) return "<unknown>";
  PyCodeObject* code = current_->code;
  int line = PyCode_Addr2Line(code, current_->cur_offset * 2);
  return str_of(code->co_filename) + ":" + std::to_string(line) + " in " + str_of(code->co_name);
}

Status Tracer::run() {
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
  } catch (const GraphBreak& b) {
    if (PyErr_Occurred()) PyErr_Clear();
    return Status::unsupported(b.reason);
  }
  return Status::ok();
}

/// One opcode handler per case; each states its stack effect CPython-style. Control leaves the
/// loop only at RETURN_VALUE or through a GraphBreak.
struct Interpreter {
  Tracer& tx;
  TraceFrame& f;

  VarPtr pop() {
    BREAK_IF(f.stack.empty(), "internal: stack underflow");
    VarPtr v = std::move(f.stack.back());
    f.stack.pop_back();
    return v;
  }
  void push(VarPtr v) { f.stack.push_back(std::move(v)); }
  VarPtr& peek(int n) { return f.stack[f.stack.size() - n]; }  // peek(1) is TOS
  std::vector<VarPtr> pop_n(int n) {
    BREAK_IF(static_cast<int>(f.stack.size()) < n, "internal: stack underflow");
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
    PyObject* v = PyDict_GetItemWithError(f.globals.get(), name);  // borrowed
    if (!v && !PyErr_Occurred()) v = PyDict_GetItemWithError(f.builtins.get(), name);
    if (PyErr_Occurred()) PyErr_Clear();
    BREAK_IF(!v, "name '" + str_of(name) + "' is not defined");
    return tx.wrap(v, global_src(name));
  }

  VarPtr load_fast(int i) {
    if (f.is_root && f.lazy_args[i]) {
      f.lazy_args[i] = false;
      f.locals[i] = tx.wrap(tx.view().localsplus[i], local_source(i, local_name(f.code, i)));
    }
    BREAK_IF(!f.locals[i], "local variable '" + local_name(f.code, i) + "' is unbound");
    return f.locals[i];
  }

  CellVar* cell_at(int i) {
    if (f.is_root && f.lazy_args[i]) load_fast(i);
    BREAK_IF(!f.locals[i] || f.locals[i]->kind != VarKind::Cell, "internal: not a cell");
    return as<CellVar>(f.locals[i]);
  }

  void jump_to(int target) { f.ip = target; }

  void branch(bool jump_if, int target, const VarPtr& cond) {
    if (tx.truth(cond, "branch condition") == jump_if) jump_to(target);
  }

  void call(int argc) {
    // CALL (method_or_null, self_or_callable, args[argc] -- result)
    std::vector<VarPtr> args = pop_n(argc);
    VarPtr second = pop();
    VarPtr first = pop();
    VarPtr fn = second;
    if (first->kind != VarKind::Null) {
      fn = first;
      args.insert(args.begin(), second);
    }
    KwArgs kwargs;
    if (f.kw_names) {
      PyObject* names = const_value(f.kw_names);  // borrowed tuple of str
      Py_ssize_t nk = PyTuple_GET_SIZE(names);
      size_t base = args.size() - nk;
      for (Py_ssize_t k = 0; k < nk; ++k)
        kwargs.emplace_back(str_of(PyTuple_GET_ITEM(names, k)), args[base + k]);
      args.resize(base);
      f.kw_names.reset();
    }
    push(tx.call(fn, std::move(args), std::move(kwargs)));
  }

  VarPtr run() {
    while (true) {
      BREAK_IF(++tx.instructions_run_ > tx.cfg_.max_instructions,
               "trace ran past " + std::to_string(tx.cfg_.max_instructions) + " instructions");
      BREAK_IF(f.ip >= f.num_instrs, "internal: ran off the end of the code");
      f.cur_offset = f.ip;
      int op = f.instrs[f.ip] & 0xff;
      int arg = f.instrs[f.ip] >> 8;
      ++f.ip;
      while (op == EXTENDED_ARG) {
        op = f.instrs[f.ip] & 0xff;
        arg = (arg << 8) | (f.instrs[f.ip] >> 8);
        ++f.ip;
      }
      f.ip += inline_cache_entries(op);
      const int next = f.ip;  // relative jumps count from the end of the instruction's caches

      switch (op) {
        case NOP:
        case RESUME:
        case CACHE:
        case PRECALL:  // (--) 3.11 splits calls; CALL does the work
          break;

        // -- stack manipulation --
        case POP_TOP: pop(); break;  // (value --)
        case PUSH_NULL: push(std::make_shared<NullVar>()); break;  // (-- null)
        case COPY: push(peek(arg)); break;  // (x ... -- x ... x)
        case SWAP: std::swap(peek(1), peek(arg)); break;

        // -- loads and stores --
        case LOAD_CONST: push(tx.wrap_const(co_const(arg))); break;  // (-- value)
        case LOAD_FAST: push(load_fast(arg)); break;                  // (-- value)
        case STORE_FAST:  // (value --)
          f.locals[arg] = pop();
          if (f.is_root) f.lazy_args[arg] = false;
          break;
        case DELETE_FAST:
          f.locals[arg].reset();
          if (f.is_root) f.lazy_args[arg] = false;
          break;
        case LOAD_GLOBAL:  // (-- null?, value)
          if (arg & 1) push(std::make_shared<NullVar>());
          push(load_global(co_name(arg >> 1)));
          break;
        case STORE_GLOBAL:
        case DELETE_GLOBAL: graph_break("assigning a global variable (a side effect)");
        case MAKE_CELL: {  // (--) wraps the slot's current value in a new cell
          auto cell = std::make_shared<CellVar>();
          if (f.is_root && f.lazy_args[arg]) load_fast(arg);
          cell->contents = f.locals[arg];
          f.locals[arg] = cell;
          break;
        }
        case COPY_FREE_VARS: {  // (--) the function's closure cells become the last slots
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
        case LOAD_CLOSURE: push(f.locals[arg]); break;  // (-- cell)
        case LOAD_DEREF: {                              // (-- value)
          CellVar* cell = cell_at(arg);
          if (!cell->contents && cell->source) {
            PyObject* v = fetch_source(*cell->source, tx.view());  // borrowed
            BREAK_IF(!v, "free variable '" + local_name(f.code, arg) + "' is unbound");
            cell->contents = tx.wrap(v, cell->source);
          }
          BREAK_IF(!cell->contents, "free variable '" + local_name(f.code, arg) + "' is unbound");
          push(cell->contents);
          break;
        }
        case STORE_DEREF: {  // (value --)
          CellVar* cell = cell_at(arg);
          BREAK_IF(cell->source, "assigning to a variable of an enclosing function (a side effect)");
          cell->contents = pop();
          break;
        }
        case LOAD_ATTR: {  // (owner -- attr)
          VarPtr owner = pop();
          push(tx.load_attr(owner, co_name(arg)));
          break;
        }
        case LOAD_METHOD: {  // (owner -- null, bound)
          VarPtr owner = pop();
          VarPtr bound = tx.load_attr(owner, co_name(arg));
          push(std::make_shared<NullVar>());
          push(bound);
          break;
        }
        case STORE_ATTR:
        case DELETE_ATTR: graph_break("assigning an attribute (a side effect)");
        case BINARY_SUBSCR: {  // (container, index -- value)
          VarPtr index = pop();
          VarPtr container = pop();
          push(tx.get_item(container, index));
          break;
        }
        case STORE_SUBSCR: {  // (value, container, index --)
          VarPtr index = pop();
          VarPtr container = pop();
          VarPtr value = pop();
          store_subscr(container, index, value);
          break;
        }
        case DELETE_SUBSCR: graph_break("del container[index] (a side effect)");

        // -- operators --
        case BINARY_OP: {  // (lhs, rhs -- result)
          VarPtr rhs = pop();
          VarPtr lhs = pop();
          push(binary_op(tx, arg, lhs, rhs));
          break;
        }
        case COMPARE_OP: {  // (lhs, rhs -- result)
          VarPtr rhs = pop();
          VarPtr lhs = pop();
          push(compare_op(tx, arg, lhs, rhs));
          break;
        }
        case IS_OP: {  // (lhs, rhs -- bool)
          VarPtr rhs = pop();
          VarPtr lhs = pop();
          push(is_op(tx, lhs, rhs, arg != 0));
          break;
        }
        case CONTAINS_OP: {  // (item, container -- bool)
          VarPtr container = pop();
          VarPtr item = pop();
          push(contains_op(tx, item, container, arg != 0));
          break;
        }
        case UNARY_POSITIVE: push(unary_op(tx, UnaryOp::Positive, pop())); break;
        case UNARY_NEGATIVE: push(unary_op(tx, UnaryOp::Negative, pop())); break;
        case UNARY_INVERT: push(unary_op(tx, UnaryOp::Invert, pop())); break;
        case UNARY_NOT: push(unary_op(tx, UnaryOp::Not, pop())); break;

        // -- building containers --
        case BUILD_TUPLE: push(std::make_shared<SeqVar>(VarKind::Tuple, pop_n(arg))); break;
        case BUILD_LIST: push(std::make_shared<SeqVar>(VarKind::List, pop_n(arg))); break;
        case LIST_TO_TUPLE: {
          VarPtr l = pop();
          push(std::make_shared<SeqVar>(VarKind::Tuple, as<SeqVar>(l)->items));
          break;
        }
        case LIST_APPEND: {  // (list, ..., value -- list, ...)
          VarPtr v = pop();
          VarPtr list = peek(arg);
          as<SeqVar>(list)->items.push_back(v);
          break;
        }
        case LIST_EXTEND: {
          VarPtr v = pop();
          VarPtr list = peek(arg);
          std::vector<VarPtr> xs = tx.unpack(v, "list.extend");
          auto& items = as<SeqVar>(list)->items;
          items.insert(items.end(), xs.begin(), xs.end());
          break;
        }
        case BUILD_MAP: {  // (k1, v1, ... -- dict)
          std::vector<VarPtr> kv = pop_n(2 * arg);
          auto d = std::make_shared<DictVar>();
          for (int i = 0; i < arg; ++i) dict_set(*d, kv[2 * i], kv[2 * i + 1]);
          push(d);
          break;
        }
        case BUILD_CONST_KEY_MAP: {  // (v1, ..., keys -- dict)
          VarPtr keys = pop();
          std::vector<VarPtr> vals = pop_n(arg);
          auto d = std::make_shared<DictVar>();
          PyObject* kt = const_value(keys);
          for (int i = 0; i < arg; ++i) dict_set(*d, tx.wrap_const(PyTuple_GET_ITEM(kt, i)), vals[i]);
          push(d);
          break;
        }
        case MAP_ADD: {  // (dict, ..., key, value -- dict, ...)
          VarPtr v = pop();
          VarPtr k = pop();
          dict_set(*as<DictVar>(peek(arg)), k, v);
          break;
        }
        case DICT_UPDATE:
        case DICT_MERGE: {
          VarPtr other = pop();
          BREAK_IF(other->kind != VarKind::Dict, "dict update from a non-dict");
          DictVar* target = as<DictVar>(peek(arg));
          for (auto& [k, v] : as<DictVar>(other)->items) dict_set(*target, tx.wrap_const(k.get()), v);
          break;
        }
        case BUILD_SLICE: {  // (start, stop[, step] -- slice)
          std::vector<VarPtr> parts = pop_n(arg);
          if (arg == 2) parts.push_back(tx.wrap_const(Py_None));
          bool symbolic = false;
          for (auto& p : parts)
            symbolic |= p->kind == VarKind::Scalar && as<ScalarVar>(p)->sym && !as<ScalarVar>(p)->sym->is_const();
          if (symbolic && !(parts[2]->kind == VarKind::Scalar)) {
            // Bounds computed from sizes stay symbolic: a new batch size reuses the graph.
            push(std::make_shared<SliceVar>(parts[0], parts[1], parts[2]));
            break;
          }
          OwnedRef start = tx.python_value(parts[0], "slice bound");
          OwnedRef stop = tx.python_value(parts[1], "slice bound");
          OwnedRef step = arg == 3 ? tx.python_value(parts[2], "slice step") : OwnedRef::borrow(Py_None);
          push(make_const_steal(PySlice_New(start.get(), stop.get(), step.get())));
          break;
        }
        case BUILD_STRING: {
          std::vector<VarPtr> parts = pop_n(arg);
          OwnedRef empty = OwnedRef::steal(PyUnicode_FromString(""));
          OwnedRef list = OwnedRef::steal(PyList_New(0));
          for (auto& p : parts) PyList_Append(list.get(), tx.python_value(p, "f-string").get());
          push(make_const_steal(PyUnicode_Join(empty.get(), list.get())));
          break;
        }
        case FORMAT_VALUE: {  // (value[, spec] -- str)
          OwnedRef spec = (arg & 0x04) ? tx.python_value(pop(), "format spec") : OwnedRef();
          OwnedRef v = tx.python_value(pop(), "f-string value");
          BREAK_IF(!PyLong_CheckExact(v.get()) && !PyFloat_CheckExact(v.get()) &&
                       !PyUnicode_CheckExact(v.get()) && v.get() != Py_None && !PyBool_Check(v.get()),
                   "formatting a non-builtin value");
          int conv = arg & 0x03;
          OwnedRef conv_v = conv == 1   ? OwnedRef::steal(PyObject_Str(v.get()))
                            : conv == 2 ? OwnedRef::steal(PyObject_Repr(v.get()))
                            : conv == 3 ? OwnedRef::steal(PyObject_ASCII(v.get()))
                                        : v;
          push(make_const_steal(PyObject_Format(conv_v.get(), spec.get())));
          BREAK_IF(!const_value(f.stack.back()), "formatting failed");
          break;
        }
        case UNPACK_SEQUENCE: {  // (seq -- items[n] reversed)
          std::vector<VarPtr> items = tx.unpack(pop(), "unpacking");
          BREAK_IF(static_cast<int>(items.size()) != arg, "unpacking the wrong number of values");
          for (auto it = items.rbegin(); it != items.rend(); ++it) push(*it);
          break;
        }
        case UNPACK_EX: {  // (seq -- after..., rest list, before... )
          int before = arg & 0xff, after = arg >> 8;
          std::vector<VarPtr> items = tx.unpack(pop(), "unpacking");
          int n = static_cast<int>(items.size());
          BREAK_IF(n < before + after, "not enough values to unpack");
          for (int i = n - 1; i >= n - after; --i) push(items[i]);
          push(std::make_shared<SeqVar>(
              VarKind::List, std::vector<VarPtr>(items.begin() + before, items.end() - after)));
          for (int i = before - 1; i >= 0; --i) push(items[i]);
          break;
        }

        // -- calls --
        case KW_NAMES: f.kw_names = tx.wrap_const(co_const(arg)); break;
        case CALL: call(arg); break;
        case CALL_FUNCTION_EX: {  // (null, func, args[, kwargs] -- result)
          KwArgs kwargs;
          if (arg & 1) {
            VarPtr kw = pop();
            BREAK_IF(kw->kind != VarKind::Dict, "**kwargs from a non-dict");
            for (auto& [k, v] : as<DictVar>(kw)->items) kwargs.emplace_back(str_of(k.get()), v);
          }
          std::vector<VarPtr> args = tx.unpack(pop(), "*args");
          VarPtr fn = pop();
          VarPtr null = pop();
          if (null->kind != VarKind::Null) {
            args.insert(args.begin(), fn);
            fn = null;
          }
          push(tx.call(fn, std::move(args), std::move(kwargs)));
          break;
        }
        case MAKE_FUNCTION: push(make_function(arg)); break;
        case RETURN_VALUE: return pop();  // (value --)

        // -- control flow --
        case JUMP_FORWARD: jump_to(next + arg); break;
        case JUMP_BACKWARD:
        case JUMP_BACKWARD_NO_INTERRUPT: jump_to(next - arg); break;
        case POP_JUMP_FORWARD_IF_FALSE: branch(false, next + arg, pop()); break;
        case POP_JUMP_FORWARD_IF_TRUE: branch(true, next + arg, pop()); break;
        case POP_JUMP_BACKWARD_IF_FALSE: branch(false, next - arg, pop()); break;
        case POP_JUMP_BACKWARD_IF_TRUE: branch(true, next - arg, pop()); break;
        case POP_JUMP_FORWARD_IF_NONE:
        case POP_JUMP_FORWARD_IF_NOT_NONE:
        case POP_JUMP_BACKWARD_IF_NONE:
        case POP_JUMP_BACKWARD_IF_NOT_NONE: {
          VarPtr v = pop();
          bool none = is_none(tx, v);
          bool want_none = op == POP_JUMP_FORWARD_IF_NONE || op == POP_JUMP_BACKWARD_IF_NONE;
          bool forward = op == POP_JUMP_FORWARD_IF_NONE || op == POP_JUMP_FORWARD_IF_NOT_NONE;
          if (none == want_none) jump_to(forward ? next + arg : next - arg);
          break;
        }
        case JUMP_IF_FALSE_OR_POP:
        case JUMP_IF_TRUE_OR_POP: {  // (cond -- cond if jumping)
          bool t = tx.truth(peek(1), "and/or condition");
          if (t == (op == JUMP_IF_TRUE_OR_POP))
            jump_to(next + arg);
          else
            pop();
          break;
        }
        case GET_ITER: {  // (iterable -- iterator)
          VarPtr v = pop();
          push(v->kind == VarKind::Iterator ? v
                                            : std::make_shared<IteratorVar>(tx.unpack(v, "iteration")));
          break;
        }
        case FOR_ITER: {  // (iter -- iter, next) or (iter --) and jump when exhausted
          BREAK_IF(peek(1)->kind != VarKind::Iterator, "internal: FOR_ITER on a non-iterator");
          auto* it = as<IteratorVar>(peek(1));
          if (it->pos < it->items.size()) {
            push(it->items[it->pos++]);
          } else {
            pop();
            jump_to(next + arg);
          }
          break;
        }

        // -- exceptions: the handlers of try blocks that do not raise are never reached --
        case PUSH_EXC_INFO:
        case POP_EXCEPT:
        case CHECK_EXC_MATCH:
        case RERAISE:
        case WITH_EXCEPT_START:
        case PREP_RERAISE_STAR:
        case CHECK_EG_MATCH: graph_break("an exception handler was reached while tracing");
        case RAISE_VARARGS: graph_break("raise statement reached while tracing");
        case LOAD_ASSERTION_ERROR: graph_break("a failing assert was reached while tracing");
        case RETURN_GENERATOR:
        case YIELD_VALUE:
        case SEND:
        case GET_AWAITABLE: graph_break("generators and coroutines run in CPython");
        case BEFORE_WITH: graph_break("with statements are not supported yet");
        case IMPORT_NAME:
        case IMPORT_FROM: graph_break("import inside a traced function");
        default: {
          const char* name = op < 256 ? opcode_name(op) : "?";
          graph_break(std::string("unsupported opcode ") + name);
        }
      }
    }
  }

  static const char* opcode_name(int op) {
    switch (op) {
#define FJ_OPNAME(X) \
  case X: return #X;
      FJ_OPNAME(LOAD_NAME) FJ_OPNAME(STORE_NAME) FJ_OPNAME(GET_LEN) FJ_OPNAME(MATCH_CLASS)
      FJ_OPNAME(MATCH_MAPPING) FJ_OPNAME(MATCH_SEQUENCE) FJ_OPNAME(MATCH_KEYS)
      FJ_OPNAME(BUILD_SET) FJ_OPNAME(SET_ADD) FJ_OPNAME(SET_UPDATE) FJ_OPNAME(LOAD_BUILD_CLASS)
      FJ_OPNAME(DELETE_DEREF) FJ_OPNAME(LOAD_CLASSDEREF) FJ_OPNAME(GET_AITER) FJ_OPNAME(GET_ANEXT)
      FJ_OPNAME(SETUP_ANNOTATIONS) FJ_OPNAME(PRINT_EXPR) FJ_OPNAME(IMPORT_STAR)
#undef FJ_OPNAME
      default: return "?";
    }
  }

  void dict_set(DictVar& d, const VarPtr& key, const VarPtr& value) {
    OwnedRef k = tx.python_value(key, "dict key");
    BREAK_IF(PyObject_Hash(k.get()) == -1, "unhashable dict key");
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
    BREAK_IF(container->kind == VarKind::Tensor,
             "assigning into an array (x[...] = v) is not captured yet");
    BREAK_IF(container->source, "mutating a container the function received (a side effect)");
    if (container->kind == VarKind::Dict) {
      dict_set(*as<DictVar>(container), index, value);
      return;
    }
    if (container->kind == VarKind::List) {
      auto& items = as<SeqVar>(container)->items;
      int64_t i = tx.to_int(index, "list index");
      int64_t n = static_cast<int64_t>(items.size());
      if (i < 0) i += n;
      BREAK_IF(i < 0 || i >= n, "list assignment index out of range");
      items[i] = value;
      return;
    }
    graph_break(std::string("item assignment on ") + var_kind_name(container->kind));
  }

  VarPtr make_function(int flags) {
    // MAKE_FUNCTION (defaults?, kwdefaults?, annotations?, closure?, code -- function)
    auto fn = std::make_shared<FunctionVar>();
    VarPtr code = pop();
    fn->code = OwnedRef::borrow(const_value(code));
    if (flags & 0x08) {
      VarPtr closure = pop();
      for (auto& c : as<SeqVar>(closure)->items) {
        BREAK_IF(c->kind != VarKind::Cell, "internal: closure item is not a cell");
        fn->closure.push_back(std::static_pointer_cast<CellVar>(c));
      }
    }
    if (flags & 0x04) pop();  // annotations do not change what the function computes
    if (flags & 0x02) {
      VarPtr kw = pop();
      for (auto& [k, v] : as<DictVar>(kw)->items) fn->kwdefaults.emplace_back(k, v);
    }
    if (flags & 0x01) fn->defaults = tx.unpack(pop(), "defaults");
    fn->globals = f.globals;
    fn->globals_base = f.globals_base;
    fn->qualname = OwnedRef::borrow(reinterpret_cast<PyCodeObject*>(fn->code.get())->co_qualname);
    return fn;
  }
};

VarPtr Tracer::run_frame(TraceFrame& f) {
  OwnedRef bytes = OwnedRef::steal(PyCode_GetCode(f.code));  // new ref: co_code, unquickened
  BREAK_IF(!bytes, "cannot read the code object");
  f.code_bytes = bytes;
  f.instrs = reinterpret_cast<const uint16_t*>(PyBytes_AS_STRING(bytes.get()));
  f.num_instrs = static_cast<int>(PyBytes_GET_SIZE(bytes.get()) / 2);
  f.parent = current_;
  TraceFrame* saved = current_;
  current_ = &f;
  Interpreter interp{*this, f};
  try {
    VarPtr result = interp.run();
    current_ = saved;
    return result;
  } catch (GraphBreak& b) {
    if (!b.located) {  // while the innermost frame is still alive to name its line
      b.reason += " (" + location() + ")";
      b.located = true;
    }
    current_ = saved;
    throw;
  }
}

}  // namespace framejit::frontend
