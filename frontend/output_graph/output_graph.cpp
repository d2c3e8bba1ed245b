// output_graph.cpp — graph inputs, symbols and shape decisions of one trace.
#include "frontend/output_graph/output_graph.h"

#include <cstdlib>

namespace framejit::frontend {

std::string OutputGraph::claim_array_kind(ArrayKind kind) {
  if (array_kind == ArrayKind::NumPy && kind_from_scalars && kind == ArrayKind::CuPy) {
    // What the NumPy scalars computed so far is the host's work, which a device graph does not do.
    for (const jit::Node& n : graph.nodes())
      if (n.kind == jit::NodeKind::Call && n.meta.kind == jit::ValueKind::Tensor)
        return "arithmetic on NumPy scalars before the first CuPy array";
    array_kind = ArrayKind::None;
  }
  if (array_kind != ArrayKind::None && array_kind != kind)
    return std::string(array_kind_name(array_kind)) + " and " + array_kind_name(kind) + " in one graph";
  array_kind = kind;
  kind_from_scalars = false;
  return "";
}

int OutputGraph::add_input(const SourcePtr& src, const std::string& name, jit::TensorMeta meta) {
  saw_tensor |= meta.kind == jit::ValueKind::Tensor;
  int node = root_graph().add_placeholder(name, std::move(meta));
  inputs.push_back({src, guards.slot_for(src), node});
  return node;
}

int OutputGraph::new_symbol(int placeholder, int dim, int64_t hint, std::string description) {
  int id = root_graph().add_symbol(placeholder, dim, hint);
  symbol_hints.push_back(hint);
  symbol_names.push_back(std::move(description));
  guards.set_num_symbols(static_cast<int>(symbol_hints.size()));
  return id;
}

int OutputGraph::new_unbacked_symbol(int node, int dim, std::string description, StopTrace stop) {
  stop_on_unbacked_ = stop;
  int id = root_graph().add_unbacked_symbol(node, dim);
  symbol_hints.push_back(0);  // never read: check_backed stops every decision first
  symbol_names.push_back(std::move(description));
  // NB: guards never read it, so it does not widen their symbol table (the hit path's is small).
  return id;
}

int OutputGraph::count_symbol(int mask) const {
  for (const auto& [m, s] : count_symbols_)
    if (m == mask) return s;
  return -1;
}

bool OutputGraph::is_unbacked(const jit::SymInt& e) const {
  using K = jit::SymInt::Kind;
  if (e.kind() == K::Const) return false;
  if (e.kind() == K::Symbol) {
    const int id = e.symbol_id();
    return id < static_cast<int>(root_graph().symbols().size()) && root_graph().symbols()[id].unbacked;
  }
  return is_unbacked(e.lhs()) || is_unbacked(e.rhs());
}

void OutputGraph::check_backed(const jit::SymInt& e, const std::string& why) const {
  using K = jit::SymInt::Kind;
  if (e.kind() == K::Const) return;
  if (e.kind() == K::Symbol) {
    const int id = e.symbol_id();
    if (id < static_cast<int>(root_graph().symbols().size()) && root_graph().symbols()[id].unbacked) {
      stop_on_unbacked_("the size of " + symbol_names[id] + " is known only at run time (" + why + ")");
      std::abort();  // NB: unreachable: stop throws
    }
    return;
  }
  check_backed(e.lhs(), why);
  check_backed(e.rhs(), why);
}

static CmpOp negate(CmpOp op) {
  switch (op) {
    case CmpOp::Eq: return CmpOp::Ne;
    case CmpOp::Ne: return CmpOp::Eq;
    case CmpOp::Lt: return CmpOp::Ge;
    case CmpOp::Le: return CmpOp::Gt;
    case CmpOp::Gt: return CmpOp::Le;
    case CmpOp::Ge: return CmpOp::Lt;
  }
  return op;
}

bool OutputGraph::decide(const jit::SymInt& expr, CmpOp op, int64_t rhs, const std::string& why) {
  // `s0 + -4 > 0` reads (and settles below) better as `s0 > 4`: constants move to the right.
  check_backed(expr, why);
  jit::SymInt e = expr;
  while (e.kind() == jit::SymInt::Kind::Add && e.rhs().is_const()) {
    rhs -= e.rhs().const_value();
    e = e.lhs();
  }
  int64_t v = hint(e);
  bool r = false;
  switch (op) {
    case CmpOp::Eq: r = v == rhs; break;
    case CmpOp::Ne: r = v != rhs; break;
    case CmpOp::Lt: r = v < rhs; break;
    case CmpOp::Le: r = v <= rhs; break;
    case CmpOp::Gt: r = v > rhs; break;
    case CmpOp::Ge: r = v >= rhs; break;
  }
  if (e.is_const()) return r;
  if (r && op == CmpOp::Eq && e.kind() == jit::SymInt::Kind::Symbol) note_equal(e, rhs);
  // Every symbol is >= 2 by its tensor guard; a single symbol compared against a bound at or below
  // 2 is already decided, and guarding it again would only slow the check.
  if (e.kind() == jit::SymInt::Kind::Symbol) {
    bool settled = (op == CmpOp::Ge && rhs <= 2) || (op == CmpOp::Gt && rhs < 2) ||
                   (op == CmpOp::Lt && rhs <= 2) || (op == CmpOp::Le && rhs < 2) ||
                   ((op == CmpOp::Eq || op == CmpOp::Ne) && rhs < 2);
    if (settled) return r;
  }
  guards.add_shape({e, r ? op : negate(op), rhs, why});
  return r;
}

int64_t OutputGraph::specialize(const jit::SymInt& e, const std::string& why) {
  check_backed(e, why);
  int64_t v = hint(e);
  if (!e.is_const()) guards.add_shape({e, CmpOp::Eq, v, why});
  if (e.kind() == jit::SymInt::Kind::Symbol) note_equal(e, v);
  return v;
}

void OutputGraph::note_equal(const jit::SymInt& a, const jit::SymInt& b) {
  auto& facts = root_graph().size_facts;
  auto resolve = [&](const jit::SymInt& e) {
    jit::SymInt r = e;
    while (r.kind() == jit::SymInt::Kind::Symbol && r.symbol_id() < static_cast<int>(facts.size()) &&
           facts[r.symbol_id()])
      r = *facts[r.symbol_id()];
    return r;
  };
  jit::SymInt x = resolve(a), y = resolve(b);
  const bool xs = x.kind() == jit::SymInt::Kind::Symbol, ys = y.kind() == jit::SymInt::Kind::Symbol;
  if ((!xs && !ys) || x.same_as(y) || is_unbacked(x) || is_unbacked(y)) return;
  // x becomes the symbol the fact is about, pointing at the constant, else at the older symbol:
  // no fact points at a newer one, so the facts form no cycle.
  if (!xs || (ys && y.symbol_id() > x.symbol_id())) std::swap(x, y);
  const int id = x.symbol_id();
  if (id >= static_cast<int>(facts.size())) facts.resize(id + 1);
  facts[id] = y;
}

bool OutputGraph::sizes_equal(const jit::SymInt& a, const jit::SymInt& b, const std::string& why) {
  if (a.same_as(b)) return true;
  if (a.is_const() && b.is_const()) return a.const_value() == b.const_value();
  const bool equal = decide(a - b, CmpOp::Eq, 0, why);
  if (equal && a.kind() == jit::SymInt::Kind::Symbol && b.kind() == jit::SymInt::Kind::Symbol) note_equal(a, b);
  return equal;
}

PyObject* build_return(const OutputSpec& spec, PyObject* const* outputs, PyObject* const* slots,
                       bool steal_outputs) {
  switch (spec.kind) {
    case OutputSpec::Kind::Value:
      if (!steal_outputs) Py_INCREF(outputs[spec.index]);
      return outputs[spec.index];
    case OutputSpec::Kind::Slot: Py_INCREF(slots[spec.index]); return slots[spec.index];
    case OutputSpec::Kind::Const: Py_INCREF(spec.value.get()); return spec.value.get();
    case OutputSpec::Kind::Tuple:
    case OutputSpec::Kind::List: {
      bool tuple = spec.kind == OutputSpec::Kind::Tuple;
      PyObject* r = tuple ? PyTuple_New(spec.items.size()) : PyList_New(spec.items.size());
      for (size_t i = 0; i < spec.items.size(); ++i) {
        PyObject* x = build_return(spec.items[i], outputs, slots, steal_outputs);
        if (!x) Py_CLEAR(r);  // an attribute lookup raised
        if (!r) {
          Py_XDECREF(x);
          continue;
        }
        if (tuple)
          PyTuple_SET_ITEM(r, i, x);  // steals x
        else
          PyList_SET_ITEM(r, i, x);  // steals x
      }
      if (r && tuple && spec.value) {  // a named tuple (torch.return_types.max): type(items)
        PyObject* named = PyObject_CallOneArg(spec.value.get(), r);
        Py_DECREF(r);
        return named;
      }
      return r;
    }
    case OutputSpec::Kind::Dict: {
      PyObject* r = PyDict_New();
      for (size_t i = 0; i < spec.items.size(); ++i) {
        PyObject* x = build_return(spec.items[i], outputs, slots, steal_outputs);
        if (!x || (r && PyDict_SetItem(r, spec.keys[i].get(), x) < 0)) Py_CLEAR(r);
        Py_XDECREF(x);
      }
      return r;
    }
    case OutputSpec::Kind::Attr: {
      PyObject* base = build_return(spec.items[0], outputs, slots, steal_outputs);  // new ref
      if (!base) return nullptr;
      PyObject* r = PyObject_GetAttr(base, spec.value.get());  // new ref
      Py_DECREF(base);
      return r;
    }
  }
  return nullptr;
}

}  // namespace framejit::frontend
