// graph_break.cpp — throwing structured graph breaks; describing a break's values for explain().
#include "frontend/trace/graph_break.h"

#include "frontend/output_graph/output_graph.h"

namespace framejit::frontend {

const char* break_kind_name(BreakKind k) {
  switch (k) {
    case BreakKind::Unsupported: return "unsupported";
    case BreakKind::EagerError: return "eager_error";
    case BreakKind::MissingAttribute: return "missing_attribute";
    case BreakKind::DataDependent: return "data_dependent";
    case BreakKind::SideEffect: return "side_effect";
    case BreakKind::Limit: return "limit";
    case BreakKind::Internal: return "internal";
  }
  return "?";
}

GraphBreak GraphBreak::without_snapshot() const {
  GraphBreak b = *this;
  b.snapshot.reset();
  return b;
}

void graph_break(std::string reason) { graph_break(BreakKind::Unsupported, std::move(reason)); }

void graph_break(BreakKind kind, std::string reason) {
  GraphBreak b;
  b.kind = kind;
  b.reason = std::move(reason);
  if (kind == BreakKind::MissingAttribute) b.exc_type = OwnedRef::borrow(PyExc_AttributeError);
  throw b;
}

void graph_break(Raises raises, std::string reason) {
  GraphBreak b;
  b.kind = BreakKind::EagerError;
  b.reason = std::move(reason);
  b.exc_type = OwnedRef::borrow(raises.type);
  throw b;
}

void python_error_break(const std::string& before, const std::string& after) {
  // The type is read before fetch_error_text() clears the error.
  OwnedRef type = OwnedRef::borrow(PyErr_Occurred());  // borrowed -> new ref
  GraphBreak b;
  b.kind = type ? BreakKind::EagerError : BreakKind::Internal;
  b.reason = before + fetch_error_text() + after;
  b.exc_type = std::move(type);
  throw b;
}

namespace {

std::string repr_of(PyObject* o) {  // borrowed
  OwnedRef r = OwnedRef::steal(PyObject_Repr(o));
  const char* s = r ? PyUnicode_AsUTF8(r.get()) : nullptr;
  if (!s) {
    PyErr_Clear();
    return "?";
  }
  std::string out = s;
  constexpr size_t kMax = 60;
  if (out.size() > kMax) out = out.substr(0, kMax - 3) + "...";
  return out;
}

}  // namespace

std::string describe_var(const VarPtr& v, const OutputGraph& og) {
  if (!v) return "argument";  // a root argument the trace never read (LiveLocal::value)
  switch (v->kind) {
    case VarKind::Tensor: return "tensor " + og.graph.node(as<TensorVar>(v)->node).meta.to_string();
    case VarKind::Scalar: return "number " + repr_of(as<ScalarVar>(v)->hint.get());
    case VarKind::Const: return "const " + repr_of(const_value(v));
    case VarKind::Null: return "null";
    case VarKind::Tuple:
    case VarKind::List: {
      const auto& items = as<SeqVar>(v)->items;
      return std::string(v->kind == VarKind::Tuple ? "tuple[" : "list[") +
             std::to_string(items.size()) + "]";
    }
    case VarKind::Dict: return "dict[" + std::to_string(as<DictVar>(v)->items.size()) + "]";
    case VarKind::Cell: {
      const VarPtr& c = as<CellVar>(v)->contents;
      return c ? "cell(" + describe_var(c, og) + ")" : "cell";
    }
    case VarKind::Builtin: return "builtin " + repr_of(as<BuiltinVar>(v)->obj.get());
    case VarKind::Module: return "module " + repr_of(as<ModuleVar>(v)->module.get());
    case VarKind::Object:
      return std::string("object ") + Py_TYPE(as<ObjectVar>(v)->obj.get())->tp_name;
    case VarKind::Class:
      return std::string("class ") +
             reinterpret_cast<PyTypeObject*>(as<ObjectVar>(v)->obj.get())->tp_name;
    case VarKind::Function: {
      PyObject* q = as<FunctionVar>(v)->qualname.get();  // borrowed
      const char* s = q && PyUnicode_Check(q) ? PyUnicode_AsUTF8(q) : nullptr;
      if (!s) PyErr_Clear();
      return std::string("function ") + (s ? s : "?");
    }
    default: return var_kind_name(v->kind);
  }
}

}  // namespace framejit::frontend
