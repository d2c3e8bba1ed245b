// side_effects.cpp — replaying logged stores on the hit path (Note [Side effects]).
#include "frontend/output_graph/side_effects.h"

namespace framejit::frontend {

namespace {

PyObject* target_object(const EffectTarget& t, PyObject* const* slots, const FrameView& view) {  // borrowed
  switch (t.kind) {
    case EffectTarget::Kind::Slot: return slots[t.index];
    case EffectTarget::Kind::Held: return t.obj.get();
    case EffectTarget::Kind::RootGlobals: return view.globals;
    case EffectTarget::Kind::RootCell:
      return view.closure && t.index < PyTuple_GET_SIZE(view.closure) ? PyTuple_GET_ITEM(view.closure, t.index)
                                                                     : nullptr;
  }
  return nullptr;
}

}  // namespace

bool replay_effects(const Replays& r, PyObject* const* outputs, PyObject* const* slots,
                    const FrameView& view) noexcept {
  for (const Replay& step : r.steps) {
    PyObject* target = target_object(step.target, slots, view);  // borrowed
    if (!target) {
      PyErr_SetString(PyExc_RuntimeError, "framejit: the object a side effect stores into is gone");
      return false;
    }
    PyObject* value = build_return(step.value, outputs, slots, false);  // new ref
    if (!value) return false;
    int rc = -1;
    switch (step.kind) {
      case EffectKind::SetAttr: rc = PyObject_SetAttr(target, step.key.get(), value); break;
      case EffectKind::SetItem:
        // NB: exact lists and dicts only (the tracer logs no other), so no __setitem__ runs code.
        rc = PyDict_Check(target) ? PyDict_SetItem(target, step.key.get(), value)
                                  : PyObject_SetItem(target, step.key.get(), value);
        break;
      case EffectKind::SetCell: rc = PyCell_Set(target, value); break;
      case EffectKind::ListAppend: rc = PyList_Append(target, value); break;
    }
    Py_DECREF(value);
    if (rc < 0) return false;
  }
  return true;
}

void release_replay_outputs(const Replays& r, PyObject** outputs) noexcept {
  for (int i : r.own_outputs) Py_CLEAR(outputs[i]);
}

}  // namespace framejit::frontend
