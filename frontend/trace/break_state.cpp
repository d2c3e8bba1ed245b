// break_state.cpp — what the root frame holds at a graph break, as graph outputs and recipes for
// the code that replaces the frame (Note [Break entries]).
#include <unordered_map>
#include <unordered_set>

#include "frontend/trace/tracer.h"

namespace framejit::frontend {

namespace {

using bytecode::Recipe;

// A list or dict the trace made is rebuilt as a new object wherever it appears; two places that
// hold the same one must stay one object, so a second sighting is refused. Containers from a
// source come back as themselves (guard slots) and may appear any number of times.
void check_unshared(const VarPtr& v, std::unordered_set<const Var*>& seen) {
  if (!v || v->source) return;
  switch (v->kind) {
    case VarKind::List:
    case VarKind::Dict:
      BREAK_IF(!seen.insert(v.get()).second,
               std::string("the ") + var_kind_name(v->kind) + " made before it is held in two places");
      break;
    default:
      break;
  }
  if (v->kind == VarKind::Tuple || v->kind == VarKind::List)
    for (const VarPtr& x : as<SeqVar>(v)->items) check_unshared(x, seen);
  if (v->kind == VarKind::Dict)
    for (const auto& [k, x] : as<DictVar>(v)->items) check_unshared(x, seen);
}

// Whether `v` or a view it was made from is a reshape whose sharing is not known at trace time.
bool through_maybe_copy(const TensorVar& v) {
  for (const TensorVar* t = &v; t && t->is_view; t = t->base ? as<TensorVar>(t->base) : nullptr)
    if (t->maybe_copy) return true;
  return false;
}

// Whether `v` is the root frame's own argument `slot`, as it was on entry.
bool is_entry_value(const VarPtr& v, int slot) {
  return v && v->source && v->source->kind == SourceKind::Local && !v->source->base && v->source->index == slot;
}

}  // namespace

BreakState Tracer::break_state(const FrameSnapshot& snap) {
  BreakState st;
  st.values.kind = OutputSpec::Kind::Tuple;
  std::vector<jit::Arg> outs;
  std::unordered_map<const Var*, int> index;  // one tuple item per value, however often it appears
  std::unordered_set<const Var*> seen;
  auto recipe = [&](const VarPtr& v) -> Recipe {
    if (!v || v->kind == VarKind::Null) return Recipe::null();
    if (v->kind == VarKind::Const) return Recipe::constant(as<ConstVar>(v)->value.get());
    if (auto it = index.find(v.get()); it != index.end()) return Recipe::graph_output(it->second);
    // A reshape NumPy may have copied is a view in the graph's program: after the break CPython
    // could write through it, or through its base, and the two would not agree on sharing.
    BREAK_IF(v->kind == VarKind::Tensor && through_maybe_copy(*as<TensorVar>(v)),
             "a reshape that NumPy may have copied is live at the break");
    // CPython may write through it after the break: it must be the caller's memory itself.
    BREAK_IF(v->kind == VarKind::Tensor && is_view_of_written_input(*as<TensorVar>(v)) &&
                 written_input_root(*as<TensorVar>(v)) < 0,
             "a view of a written input that cannot be made from the input itself");
    check_unshared(v, seen);
    const int k = static_cast<int>(st.values.items.size());
    st.values.items.push_back(output_spec(v, outs));
    index.emplace(v.get(), k);
    return Recipe::graph_output(k);
  };
  for (const VarPtr& v : snap.stack) st.stack.push_back(recipe(v));
  const auto* code = reinterpret_cast<PyCodeObject*>(fn_->func_code);
  const int nargs = code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) ? 1 : 0) +
                    ((code->co_flags & CO_VARKEYWORDS) ? 1 : 0);
  for (const LiveLocal& l : snap.locals) {
    st.live_locals.push_back(l.slot);
    if (!l.value) continue;  // an argument the trace never read: the new code has it as passed
    if (l.value->kind == VarKind::Cell) {
      // A closure's own cell (COPY_FREE_VARS) is the function's, and the trace never writes it.
      if (l.value->source) continue;
      // MAKE_CELL made it: the new code's own MAKE_CELL holds the entry value; store the rest.
      const VarPtr& contents = as<CellVar>(l.value)->contents;
      if (!contents) {
        BREAK_IF(l.slot < nargs, "a deleted argument held in a cell");
        continue;
      }
      if (is_entry_value(contents, l.slot)) continue;
      st.stores.push_back({l.slot, recipe(contents)});
      continue;
    }
    if (is_entry_value(l.value, l.slot)) continue;
    st.stores.push_back({l.slot, recipe(l.value)});
  }
  // The stores logged before the breaking instruction run before it (Note [Side effects]).
  effects_.resize(effects_mark_);
  build_replays(outs, seen);
  add_copy_backs(outs);
  out_.graph.set_output(std::move(outs));
  return st;
}

}  // namespace framejit::frontend
