// side_effects.cpp — the tracer's log of stores outside the frame, what later reads see, and the
// replays made from it at the end of a trace (Note [Side effects]).
#include <string>
#include <unordered_set>

#include "frontend/trace/tracer.h"

namespace framejit::frontend {

namespace {

std::string text_of(PyObject* s) {  // borrowed
  const char* c = PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : nullptr;
  if (!c) {
    PyErr_Clear();
    return "?";
  }
  return c;
}

// Whether `v` can be made again after the graph: graph values, constants, values from a source,
// and tuples, lists and dicts of those. `made` collects the lists and dicts the trace made.
bool rebuildable(const VarPtr& v, std::vector<const Var*>& made) {
  if (!v) return false;
  if (v->source) return true;
  switch (v->kind) {
    case VarKind::Tensor:
    case VarKind::Scalar:
    case VarKind::Const: return true;
    case VarKind::List:
    case VarKind::Dict:
      made.push_back(v.get());
      [[fallthrough]];
    case VarKind::Tuple:
      if (v->kind == VarKind::Dict) {
        for (const auto& [k, x] : as<DictVar>(v)->items)
          if (!rebuildable(x, made)) return false;
        return true;
      }
      for (const VarPtr& x : as<SeqVar>(v)->items)
        if (!rebuildable(x, made)) return false;
      return true;
    default: return false;
  }
}

void collect_made(const VarPtr& v, std::unordered_set<const Var*>& out) {
  std::vector<const Var*> made;
  rebuildable(v, made);
  out.insert(made.begin(), made.end());
}

// Whether `value` may be stored outside the frame (checked before anything is logged: a break
// leaves the trace as it was). A list or dict the trace made must stay one object: stored once.
void check_storable(const VarPtr& value, const std::string& what, const std::vector<LoggedEffect>& log) {
  std::vector<const Var*> made;
  BREAK_IF(!rebuildable(value, made), BreakKind::SideEffect,
           "storing " + std::string(var_kind_name(value->kind)) + " made inside the function into " + what +
               " (it cannot be made again after the graph)");
  if (made.empty()) return;
  std::unordered_set<const Var*> stored;
  for (const LoggedEffect& e : log) collect_made(e.value, stored);
  for (const Var* m : made)
    BREAK_IF(stored.count(m), BreakKind::SideEffect,
             "a " + std::string(var_kind_name(m->kind)) + " made inside the function is stored in two places");
}

}  // namespace

void Tracer::store_attr(const VarPtr& obj, PyObject* name, const VarPtr& value) {
  const std::string n = text_of(name);
  if (in_body()) refuse_in_body("assigning attribute '" + n + "'");
  BREAK_IF((obj->kind != VarKind::Object && obj->kind != VarKind::Class) || !obj->source, BreakKind::SideEffect,
           "assigning attribute '" + n + "' of " + var_kind_name(obj->kind) + " (a side effect)");
  PyObject* o = as<ObjectVar>(obj)->obj.get();  // borrowed
  PyTypeObject* type = Py_TYPE(o);
  if (obj->kind == VarKind::Object) {
    BREAK_IF(type->tp_setattro != PyObject_GenericSetAttr, BreakKind::SideEffect,
             "assigning attribute '" + n + "' of " + type->tp_name + ", which defines __setattr__");
    PyObject* type_attr = _PyType_Lookup(type, name);  // borrowed
    BREAK_IF(type_attr && Py_TYPE(type_attr)->tp_descr_set, BreakKind::SideEffect,
             "assigning attribute '" + n + "', a property or slot of " + type->tp_name);
    BREAK_IF(!_PyObject_GetDictPtr(o), BreakKind::SideEffect,
             "assigning attribute '" + n + "' of " + type->tp_name + ", which has no __dict__ (__slots__)");
  } else {
    // A class attribute: type.__setattr__ also updates the type's slots for dunder names.
    BREAK_IF(type->tp_setattro != PyType_Type.tp_setattro, BreakKind::SideEffect,
             "assigning attribute '" + n + "' of a class whose metaclass defines __setattr__");
    BREAK_IF(n.size() > 4 && n.rfind("__", 0) == 0, BreakKind::SideEffect,
             "assigning special class attribute '" + n + "'");
    PyObject* meta_attr = _PyType_Lookup(type, name);  // borrowed
    BREAK_IF(meta_attr && Py_TYPE(meta_attr)->tp_descr_set, BreakKind::SideEffect,
             "assigning attribute '" + n + "', a property of the metaclass " + type->tp_name);
  }
  auto& attrs = written_attrs_[o];
  auto it = attrs.find(n);
  BREAK_IF(it != attrs.end() && it->second.owner != obj, BreakKind::SideEffect,
           "assigning attribute '" + n + "' of an object reached through two paths");
  check_storable(value, "attribute '" + n + "'", effects_);

  effect_refs_.push_back(OwnedRef::borrow(o));
  attrs[n] = {obj, value};
  LoggedEffect e;
  e.kind = EffectKind::SetAttr;
  e.target.kind = EffectTarget::Kind::Slot;
  e.target.index = out_.guards.slot_for(obj->source);
  e.key = OwnedRef::borrow(name);
  e.value = value;
  effects_.push_back(std::move(e));
}

VarPtr Tracer::attr_written(const VarPtr& obj, PyObject* name) {
  if (written_attrs_.empty()) return nullptr;
  auto it = written_attrs_.find(as<ObjectVar>(obj)->obj.get());
  if (it == written_attrs_.end()) return nullptr;
  auto a = it->second.find(text_of(name));
  if (a == it->second.end()) return nullptr;
  BREAK_IF(a->second.owner != obj, BreakKind::SideEffect,
           "reading attribute '" + text_of(name) + "' assigned through another path to the same object");
  return a->second.value;
}

void Tracer::store_global(PyObject* globals, bool root_globals, PyObject* name, const VarPtr& value) {
  if (in_body()) refuse_in_body("assigning global '" + text_of(name) + "'");
  check_storable(value, "global '" + text_of(name) + "'", effects_);
  effect_refs_.push_back(OwnedRef::borrow(globals));
  written_globals_[globals][text_of(name)] = value;
  LoggedEffect e;
  e.kind = EffectKind::SetItem;
  // An inlined function's globals are those of a function a guard pins by identity.
  e.target.kind = root_globals ? EffectTarget::Kind::RootGlobals : EffectTarget::Kind::Held;
  if (!root_globals) e.target.obj = OwnedRef::borrow(globals);
  e.key = OwnedRef::borrow(name);
  e.value = value;
  effects_.push_back(std::move(e));
}

VarPtr Tracer::global_written(PyObject* globals, PyObject* name) const {
  if (written_globals_.empty()) return nullptr;
  auto it = written_globals_.find(globals);
  if (it == written_globals_.end()) return nullptr;
  auto g = it->second.find(text_of(name));
  return g == it->second.end() ? nullptr : g->second;
}

namespace {
// The real cell behind a cell read from a source: the frame function's own (Closure), or one of
// an inlined function's (FuncCell), that function being pinned by an identity guard.
PyObject* real_cell(const Source& src, const FrameView& view) {  // borrowed
  if (src.kind == SourceKind::Closure) {
    if (!view.closure || src.index >= PyTuple_GET_SIZE(view.closure)) return nullptr;
    return PyTuple_GET_ITEM(view.closure, src.index);
  }
  if (src.kind == SourceKind::FuncCell && src.base) {
    PyObject* fn = fetch_source(*src.base, view);  // borrowed
    if (!fn || !PyFunction_Check(fn)) return nullptr;
    PyObject* closure = PyFunction_GET_CLOSURE(fn);  // borrowed
    if (!closure || src.index >= PyTuple_GET_SIZE(closure)) return nullptr;
    return PyTuple_GET_ITEM(closure, src.index);
  }
  return nullptr;
}
}  // namespace

void Tracer::store_outside_cell(CellVar& cell, const VarPtr& value) {
  if (in_body()) refuse_in_body("assigning to a variable of an enclosing function");
  PyObject* real = cell.source ? real_cell(*cell.source, view_) : nullptr;  // borrowed
  BREAK_IF(!real || !PyCell_Check(real), BreakKind::SideEffect,
           "assigning to a variable of an enclosing function whose cell cannot be found");
  check_storable(value, "a variable of an enclosing function", effects_);
  effect_refs_.push_back(OwnedRef::borrow(real));
  written_cells_[real] = value;
  cell.contents = value;
  LoggedEffect e;
  e.kind = EffectKind::SetCell;
  if (cell.source->kind == SourceKind::Closure) {
    // The frame's own closure: one code object serves many closures, so found per call.
    e.target.kind = EffectTarget::Kind::RootCell;
    e.target.index = cell.source->index;
  } else {
    e.target.kind = EffectTarget::Kind::Held;
    e.target.obj = OwnedRef::borrow(real);
  }
  e.value = value;
  effects_.push_back(std::move(e));
}

VarPtr Tracer::outside_cell_written(const CellVar& cell) {
  if (written_cells_.empty() || !cell.source) return nullptr;
  PyObject* real = real_cell(*cell.source, view_);  // borrowed
  auto it = written_cells_.find(real);
  return it == written_cells_.end() ? nullptr : it->second;
}

void Tracer::log_container_store(const VarPtr& container, PyObject* key, const VarPtr& value) {
  if (in_body()) refuse_in_body(std::string("changing ") + var_kind_name(container->kind) + " the function received");
  BREAK_IF(!container->source, BreakKind::Internal, "internal: logging a store into a container made by the trace");
  check_storable(value, std::string(var_kind_name(container->kind)) + " the function received", effects_);
  LoggedEffect e;
  e.kind = key ? EffectKind::SetItem : EffectKind::ListAppend;
  e.target.kind = EffectTarget::Kind::Slot;
  e.target.index = out_.guards.slot_for(container->source);
  if (key) e.key = OwnedRef::borrow(key);
  e.value = value;
  effects_.push_back(std::move(e));
}

void Tracer::build_replays(std::vector<jit::Arg>& outs, std::unordered_set<const Var*>& shared) {
  replays_ = Replays{};
  if (effects_.empty()) return;
  const size_t first_own = outs.size();
  reuse_value_outputs_ = true;
  for (const LoggedEffect& e : effects_) {
    std::vector<const Var*> made;
    rebuildable(e.value, made);
    for (const Var* m : made)
      BREAK_IF(!shared.insert(m).second, BreakKind::SideEffect,
               std::string(var_kind_name(m->kind)) + " made inside the function is both stored outside and " +
                   "kept by the frame");
    Replay r;
    r.kind = e.kind;
    r.target = e.target;
    r.key = e.key;
    r.value = output_spec(e.value, outs);
    replays_.steps.push_back(std::move(r));
  }
  reuse_value_outputs_ = false;
  for (size_t i = first_own; i < outs.size(); ++i) replays_.own_outputs.push_back(static_cast<int>(i));
}

}  // namespace framejit::frontend
