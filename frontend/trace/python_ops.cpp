// python_ops.cpp — Python operators on traced values.
#include "frontend/trace/python_ops.h"

#include <opcode.h>

#include <algorithm>


#include "frontend/interop/numpy_abi.h"
#include "frontend/trace/op_table.h"
#include "frontend/cpython/python_env.h"

namespace framejit::frontend {

namespace {

constexpr int kNumNbOps = 13;
const char* const kNbNames[2 * kNumNbOps] = {
    "add",  "and_",  "floordiv",  "lshift",  "matmul",  "mul",  "mod",  "or_",  "pow",
    "rshift",  "sub",  "truediv",  "xor",
    "iadd", "iand",  "ifloordiv", "ilshift", "imatmul", "imul", "imod", "ior",  "ipow",
    "irshift", "isub", "itruediv", "ixor"};

bool is_python_value(const VarPtr& v) { return v->kind == VarKind::Const || v->kind == VarKind::Scalar; }

bool is_number(PyObject* o) {
  return PyLong_CheckExact(o) || PyFloat_CheckExact(o) || PyBool_Check(o);
}

VarPtr call_python(Tracer& tx, const char* op, PyObject* a, PyObject* b) {
  OwnedRef r = OwnedRef::steal(b ? PyObject_CallFunctionObjArgs(operator_fn(op), a, b, nullptr)
                                 : PyObject_CallFunctionObjArgs(operator_fn(op), a, nullptr));
  if (!r) python_error_break("Python raised ", std::string(" in operator.") + op);
  return tx.wrap_const(r.get());
}

std::vector<std::shared_ptr<ScalarVar>> deps_of(const VarPtr& v) {
  if (v->kind != VarKind::Scalar) return {};
  auto s = std::static_pointer_cast<ScalarVar>(v);
  // A size expression counts as well: what is computed from it without a symbolic form (3 % s0)
  // is pinned through it (python_value specializes it).
  if (s->source || s->loop_carried || (s->sym && !s->sym->is_const())) return {s};
  return s->deps;
}

// Note [Loop-carried numbers]: a number that changes per iteration, or one computed from it.
bool loop_carried(const VarPtr& v) {
  if (v->kind != VarKind::Scalar) return false;
  auto* s = as<ScalarVar>(v);
  if (s->loop_carried) return true;
  for (auto& d : s->deps)
    if (d->loop_carried) return true;
  return false;
}

// Scalar arithmetic that stays in the graph: at least one operand is a run-time scalar.
VarPtr scalar_binary(Tracer& tx, const char* op, const VarPtr& a, const VarPtr& b) {
  auto hint = [&](const VarPtr& v) -> OwnedRef {
    return v->kind == VarKind::Scalar ? as<ScalarVar>(v)->hint : as<ConstVar>(v)->value;
  };
  OwnedRef ha = hint(a), hb = hint(b);
  BREAK_IF(!is_number(ha.get()) || !is_number(hb.get()),
           std::string("operator.") + op + " between a run-time number and a non-number");
  OwnedRef r = OwnedRef::steal(PyObject_CallFunctionObjArgs(operator_fn(op), ha.get(), hb.get(), nullptr));
  if (!r) python_error_break("Python raised ", std::string(" in operator.") + op);
  std::optional<jit::SymInt> sym;
  // Size arithmetic stays symbolic; other run-time numbers stay run-time (as_sym would pin a plain
  // int with a guard: a counter `n + 1` would recompile on every new n).
  auto has_sym = [](const VarPtr& v) { return v->kind == VarKind::Scalar && as<ScalarVar>(v)->sym; };
  std::optional<jit::SymInt> sa, sb;
  if (has_sym(a) || has_sym(b)) {
    sa = tx.as_sym(a);
    sb = tx.as_sym(b);
  }
  std::string o = op;
  // SymInt's algebra is 64-bit and wraps (`n - k` is n + k * -1): it stays exact for size-like
  // values. A huge operand or result (`n - (-2**63)`) is the plain call, CPython's big int.
  auto size_like = [](PyObject* x) {
    int overflow = 0;
    const long long v = PyLong_CheckExact(x) ? PyLong_AsLongLongAndOverflow(x, &overflow) : 0;
    return PyLong_CheckExact(x) && !overflow && v > -(1LL << 31) && v < (1LL << 31);
  };
  if (sa && sb && size_like(r.get()) && size_like(ha.get()) && size_like(hb.get())) {
    if (o == "add") sym = *sa + *sb;
    if (o == "sub") sym = *sa - *sb;
    if (o == "mul") sym = *sa * *sb;
    if (o == "floordiv" && sb->is_const() && sb->const_value() != 0) sym = floordiv(*sa, *sb);
    if (o == "mod" && sb->is_const() && sb->const_value() != 0) sym = mod(*sa, *sb);
  }
  if (sym) return tx.sym_value(*sym);
  // A set (a handful of graph inputs), not a concatenation: `z = z * z + c` in a loop would
  // double the list every iteration (a mandelbrot of 20 iterations never finished tracing).
  auto deps = deps_of(a);
  for (auto& d : deps_of(b))
    if (std::find(deps.begin(), deps.end(), d) == deps.end()) deps.push_back(d);
  return tx.add_scalar("operator." + o, {tx.to_arg(a), tx.to_arg(b)}, r.get(), std::nullopt, deps);
}

bool is_tensor(const VarPtr& v) { return v->kind == VarKind::Tensor; }

}  // namespace

const char* nb_op_name(int nb_op) { return nb_op >= 0 && nb_op < 2 * kNumNbOps ? kNbNames[nb_op] : "?"; }

VarPtr binary_op(Tracer& tx, int nb_op, const VarPtr& lhs, const VarPtr& rhs) {
  BREAK_IF(nb_op < 0 || nb_op >= 2 * kNumNbOps, "unknown binary operator");
  bool inplace = nb_op >= kNumNbOps;
  const char* name = kNbNames[nb_op % kNumNbOps];
  if (is_tensor(lhs) || is_tensor(rhs)) return tx.array_ops().binary(tx, name, lhs, rhs, inplace);
  // A run-time Python number with a NumPy scalar constant (h * np.sqrt(np.pi)) is a NumPy
  // scalar, typed by NumPy's rules: the array library computes it.
  const NumPyHandles* np = numpy_handles();
  auto numpy_scalar = [&](const VarPtr& v) {
    return np && v->kind == VarKind::Const && PyObject_TypeCheck(const_value(v), np->generic) &&
           PyNumber_Check(const_value(v));
  };
  if ((lhs->kind == VarKind::Scalar && numpy_scalar(rhs)) || (rhs->kind == VarKind::Scalar && numpy_scalar(lhs)))
    return tx.array_ops().binary(tx, name, lhs, rhs, inplace);

  if (is_seq(lhs) || is_seq(rhs)) {
    std::string n = name;
    if (n == "add" && lhs->kind == rhs->kind) {
      std::vector<VarPtr> items = as<SeqVar>(lhs)->items;
      for (auto& x : as<SeqVar>(rhs)->items) items.push_back(x);
      if (inplace && lhs->kind == VarKind::List) {
        if (lhs->source) {  // the caller's list: each item's append logged (Note [Side effects])
          BREAK_IF(rhs.get() == lhs.get(), BreakKind::SideEffect, "extending a list the function received by itself");
          for (const VarPtr& x : as<SeqVar>(rhs)->items) tx.log_container_store(lhs, nullptr, x);
        }
        as<SeqVar>(lhs)->items = items;
        return lhs;
      }
      return std::make_shared<SeqVar>(lhs->kind, std::move(items));
    }
    if (n == "add" && (is_const(lhs) || is_const(rhs))) {
      // tuple var + constant tuple: unpack the constant side
      std::vector<VarPtr> items = tx.unpack(lhs, "sequence concatenation");
      for (auto& x : tx.unpack(rhs, "sequence concatenation")) items.push_back(x);
      VarKind k = is_seq(lhs) ? lhs->kind : rhs->kind;
      return std::make_shared<SeqVar>(k, std::move(items));
    }
    if (n == "mul") {
      const VarPtr& seq = is_seq(lhs) ? lhs : rhs;
      const VarPtr& count = is_seq(lhs) ? rhs : lhs;
      int64_t c = tx.to_int(count, "sequence repetition count");
      std::vector<VarPtr> items;
      for (int64_t i = 0; i < c; ++i)
        for (auto& x : as<SeqVar>(seq)->items) items.push_back(x);
      return std::make_shared<SeqVar>(seq->kind, std::move(items));
    }
    graph_break(std::string("operator.") + name + " on a sequence");
  }
  if (is_const(lhs) && is_const(rhs))
    return call_python(tx, kNbNames[nb_op], const_value(lhs), const_value(rhs));
  if (is_python_value(lhs) && is_python_value(rhs)) return scalar_binary(tx, name, lhs, rhs);
  graph_break(std::string("operator.") + name + " on " + var_kind_name(lhs->kind) + " and " +
              var_kind_name(rhs->kind));
}

VarPtr compare_op(Tracer& tx, int cmp, const VarPtr& lhs, const VarPtr& rhs) {
  static const char* kNames[] = {"lt", "le", "eq", "ne", "gt", "ge"};
  BREAK_IF(cmp < 0 || cmp > 5, "unknown comparison");
  if (is_tensor(lhs) || is_tensor(rhs)) return tx.array_ops().binary(tx, kNames[cmp], lhs, rhs, false);
  // A loop's counter against its bound: a graph value, decided at run time.
  if (loop_carried(lhs) || loop_carried(rhs)) return scalar_binary(tx, kNames[cmp], lhs, rhs);
  auto sa = tx.as_sym(lhs), sb = tx.as_sym(rhs);
  if (sa && sb && (!sa->is_const() || !sb->is_const())) {
    // A size comparison: decide it from the hints and guard exactly that outcome.
    static const CmpOp kOps[] = {CmpOp::Lt, CmpOp::Le, CmpOp::Eq, CmpOp::Ne, CmpOp::Gt, CmpOp::Ge};
    bool r = tx.out().decide(*sa - *sb, kOps[cmp], 0, "comparison at " + tx.location());
    return tx.wrap_const(r ? Py_True : Py_False);
  }
  OwnedRef a = tx.python_value(lhs, "comparison");
  OwnedRef b = tx.python_value(rhs, "comparison");
  auto builtin_value = [](PyObject* o) {
    return is_number(o) || o == Py_None || PyUnicode_CheckExact(o) || PyTuple_CheckExact(o) ||
           PyList_CheckExact(o) || PyBytes_CheckExact(o) || PyType_Check(o) ||
           PyFloat_Check(o) || PyLong_Check(o);
  };
  // NumPy dtypes compare with strings and types (x.dtype == np.float32); both are trace-time facts.
  BREAK_IF(!builtin_value(a.get()) && !PyObject_TypeCheck(a.get(), &PyBaseObject_Type),
           "comparison of unsupported values");
  return call_python(tx, kNames[cmp], a.get(), b.get());
}

bool is_none(Tracer& tx, const VarPtr& v) {
  (void)tx;
  BREAK_IF(v->kind == VarKind::Null, BreakKind::Internal, "internal: NULL compared with None");
  return v->kind == VarKind::Const && const_value(v) == Py_None;
}

static PyObject* real_object(const VarPtr& v) {  // borrowed, or nullptr if not a real object
  switch (v->kind) {
    case VarKind::Const: return const_value(v);
    case VarKind::Builtin: return as<BuiltinVar>(v)->obj.get();
    case VarKind::Module: return as<ModuleVar>(v)->module.get();
    case VarKind::Object:
    case VarKind::Class: return as<ObjectVar>(v)->obj.get();
    case VarKind::Function: return as<FunctionVar>(v)->real.get();
    default: return nullptr;
  }
}

VarPtr is_op(Tracer& tx, const VarPtr& lhs, const VarPtr& rhs, bool negate) {
  bool r;
  if (lhs == rhs) {
    r = true;
  } else if (is_none(tx, lhs) || is_none(tx, rhs)) {
    r = is_none(tx, lhs) && is_none(tx, rhs);
  } else {
    PyObject* a = real_object(lhs);
    PyObject* b = real_object(rhs);
    // Values made by the trace (arrays, containers) are never the same object as a real one.
    if (!a || !b) {
      BREAK_IF(lhs->kind == rhs->kind && (is_tensor(lhs) || is_seq(lhs)),
               "identity of two traced values");
      r = false;
    } else {
      r = a == b;
    }
  }
  return tx.wrap_const((r != negate) ? Py_True : Py_False);
}

VarPtr contains_op(Tracer& tx, const VarPtr& item, const VarPtr& container, bool negate) {
  OwnedRef needle = tx.python_value(item, "`in` test");
  bool found = false;
  if (container->kind == VarKind::Dict) {
    for (auto& [k, v] : as<DictVar>(container)->items) {
      int eq = PyObject_RichCompareBool(k.get(), needle.get(), Py_EQ);
      if (eq < 0) PyErr_Clear();
      if (eq == 1) found = true;
    }
  } else if (is_seq(container)) {
    for (auto& x : as<SeqVar>(container)->items) {
      BREAK_IF(is_tensor(x), "`in` test against a sequence of arrays");
      OwnedRef v = tx.python_value(x, "`in` test");
      int eq = PyObject_RichCompareBool(v.get(), needle.get(), Py_EQ);
      if (eq < 0) PyErr_Clear();
      if (eq == 1) found = true;
    }
  } else if (is_const(container) || container->kind == VarKind::Set) {
    OwnedRef haystack = tx.python_value(container, "`in` test");
    int r = PySequence_Contains(haystack.get(), needle.get());
    if (r < 0) python_error_break("Python raised ", " in an `in` test");
    found = r == 1;
  } else {
    graph_break(std::string("`in` test on ") + var_kind_name(container->kind));
  }
  return tx.wrap_const((found != negate) ? Py_True : Py_False);
}

VarPtr unary_op(Tracer& tx, UnaryOp op, const VarPtr& v) {
  if (op == UnaryOp::Not) return tx.wrap_const(tx.truth(v, "`not`") ? Py_False : Py_True);
  static const char* kNames[] = {"pos", "neg", "invert"};
  const char* name = kNames[static_cast<int>(op)];
  if (is_tensor(v)) return tx.array_ops().unary(tx, name, v);
  if (is_const(v)) return call_python(tx, name, const_value(v), nullptr);
  if (v->kind == VarKind::Scalar) {
    auto* s = as<ScalarVar>(v);
    OwnedRef r = OwnedRef::steal(PyObject_CallFunctionObjArgs(operator_fn(name), s->hint.get(), nullptr));
    if (!r) python_error_break("Python raised ");
    if (s->sym && op == UnaryOp::Negative) return tx.sym_value(jit::SymInt(0) - *s->sym);
    if (s->sym && op == UnaryOp::Positive) return v;
    return tx.add_scalar(std::string("operator.") + name, {tx.to_arg(v)}, r.get(), std::nullopt, deps_of(v));
  }
  graph_break(std::string("operator.") + name + " on " + var_kind_name(v->kind));
}

}  // namespace framejit::frontend
