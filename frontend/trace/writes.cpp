// writes.cpp — writes into input arrays: what the trace checks and guards, and the copy back of
// their final values at the end of the graph (Note [Writes into arrays]).
#include "frontend/interop/array_adapter.h"
#include "frontend/interop/cupy_array.h"
#include "frontend/interop/numpy_abi.h"
#include "frontend/interop/torch_array.h"
#include "frontend/trace/op_table.h"
#include "frontend/trace/tracer.h"
#include "runtime/dtype.h"

namespace framejit::frontend {

// Note [Writes into arrays]
// Inside a graph every write is functional: `x[i] = v` is the node index_put(x, i, v), a new
// array, and `x op= v` is the op's result; the trace value of `x` (every name bound to it is the
// same Var) moves to that node, so later reads see the write and passes and fusion need no notion
// of order. What the caller can see is the memory of the graph's input arrays: for each input
// written, the graph ends with copy_into(input, final value), a Mutate step that runs after every
// output and every final value is computed (its `after` argument), so no read of an input's old
// contents is scheduled after its write. The caller then sees exactly what NumPy would have done,
// through every view of that memory: the input object is the same and only its contents change.
// Returning a written input returns the input object itself.
//
// Views are where memory is shared inside the trace. A view remembers its base and the node that
// made it; writing into a view made by basic indexing writes its base (base[key] = the view's new
// value, recursively up the chain), and after any write every view of the written array that the
// code can still reach is made again from the new value, so it shows the write as NumPy's view
// would. Writes through other views (a transpose, a reshape) break. An output that is a view of a
// written input is made from the input itself, so it shares the caller's memory.
// Across inputs the guards pin down that a written input shares no memory with any other input
// array (f(a, a), a view and its base) and is writeable; a read-only input makes the write break,
// and CPython raises NumPy's error there. Writes into framejit.Tensors are not captured yet.
//
// Cost: the jit backend runs index_put as a store kernel that writes in place where no later
// reader needs the old value, and copy_into writes nothing when the chain of writes already ran
// in the input's own memory (Note [Lowered writes] in jit/schedule/program.cpp). Elsewhere (the
// eager backend, a write it does not lower) index_put copies its target and each written input is
// copied back once.

namespace {

// The node `view_node` (a view op whose args[0] is its base) made again from `base_node`.
int remake_view(OpTable& ops, jit::Graph& g, int view_node, int base_node) {
  const jit::Node n = g.node(view_node);  // NB: a copy: add_call grows the node list
  std::vector<jit::Arg> args = n.args;
  args[0] = jit::Arg::node(base_node);
  return ops.add_call(g, n.target, std::move(args), n.kwargs, n.meta);
}

// Breaks (before any change) when a live view of `t` cannot be made again after a write.
void check_views_remakeable(const TensorVar& t) {
  for (const auto& w : t.views) {
    VarPtr v = w.lock();
    if (!v) continue;
    auto* vv = as<TensorVar>(v);
    BREAK_IF(vv->maybe_copy, BreakKind::SideEffect,
             "a write into an array with a live reshape of it that NumPy may have copied");
    check_views_remakeable(*vv);
  }
}

// Every view of `t` the code can still reach, and theirs, made again from t's current node: they
// show what was written, as NumPy's views would.
void remake_views(OpTable& ops, jit::Graph& g, TensorVar& t) {
  std::vector<std::weak_ptr<Var>> live;
  for (const auto& w : t.views) {
    VarPtr v = w.lock();
    if (!v) continue;
    auto* vv = as<TensorVar>(v);
    vv->node = remake_view(ops, g, vv->view_node, t.node);
    vv->view_node = vv->node;
    remake_views(ops, g, *vv);
    live.push_back(w);
  }
  t.views = std::move(live);
}

}  // namespace

void Tracer::assign_array(const VarPtr& t, int value, const std::string& what) {
  // Every reason to break is checked before anything changes: a break inside this instruction
  // must leave the trace as it was when the instruction started (Note [Break snapshot]), or the
  // graph before the break would already hold the write that CPython then makes again.
  check_assignable(t, what);
  auto* tv = as<TensorVar>(t);
  if (tv->is_view) {
    // The write lands in the base's memory: base[key] = the view's new value.
    jit::Arg key = out_.graph.node(tv->view_node).args.at(1);
    jit::TensorMeta m = meta(tv->base);
    m.layout = jit::Layout::Contiguous;  // index_put's copy is C-ordered
    VarPtr put = add_tensor("framejit._C._index_put", {to_arg(tv->base), std::move(key), jit::Arg::node(value)}, m);
    // The base's live views include this one: it is made again from the base's new value.
    assign_array(tv->base, as<TensorVar>(put)->node, what);
    return;
  }
  if (t->source) note_input_write(t, what);
  tv->node = value;
  remake_views(array_ops(), out_.graph, *tv);
}

void Tracer::check_assignable(const VarPtr& t, const std::string& what) {
  auto* tv = as<TensorVar>(t);
  // A body may write only arrays it made (Note [Tracing bodies]); a view's write goes to its base.
  for (const TensorVar* v = tv; v && in_body(); v = v->base ? as<TensorVar>(v->base) : nullptr)
    if (v->scope < out_.scope() || (v->is_view && !v->base) ||
        out_.graph.node(v->node).kind == jit::NodeKind::Placeholder)  // an operand: the caller's
      refuse_in_body(what + " into an array made outside it");
  if (tv->is_view) {
    BREAK_IF(!tv->base, BreakKind::SideEffect, what + " into a view of an array the function received");
    BREAK_IF(!tv->index_view, BreakKind::SideEffect,
             what + " through a view made by " + out_.graph.node(tv->view_node).target + " is not captured yet");
    check_assignable(tv->base, what);
    return;
  }
  BREAK_IF(tv->may_be_operand, BreakKind::SideEffect,
           what + " into a framejit.cond result that may be one of its operands (CPython writes through it)");
  if (t->source && !is_written_input(t.get())) check_input_write(t, what);
  check_views_remakeable(*tv);
}

// The placeholder a view's chain ends at when every step may be made again from it, else -1: a
// reshape NumPy may have copied is kept as the value it is (a copy of the written array, made in
// the graph), and a reshape is a view only of a contiguous array, which an input's guard pins.
int Tracer::written_input_root(const TensorVar& v) const {
  if (!v.is_view || !v.base || v.maybe_copy) return -1;
  int root = written_input_root_of(v.base.get());
  const bool direct = root >= 0;
  if (!direct) root = written_input_root(*as<TensorVar>(v.base));
  if (root < 0) return -1;
  const jit::OpKind op = out_.graph.node(v.view_node).op;
  if ((op == jit::OpKind::Reshape || op == jit::OpKind::Ravel) &&
      (!direct || out_.graph.node(root).meta.layout != jit::Layout::Contiguous))
    return -1;
  return root;
}

int Tracer::view_of_written_input(const TensorVar& v) {
  if (written_input_root(v) < 0) return -1;
  const int direct = written_input_root_of(v.base.get());
  const int base = direct >= 0 ? direct : view_of_written_input(*as<TensorVar>(v.base));
  return remake_view(array_ops(), out_.graph, v.view_node, base);
}

int Tracer::written_input_root_of(const Var* written) const {
  for (const auto& w : out_.input_writes)
    if (w.var.get() == written) return w.placeholder;
  return -1;
}

bool Tracer::is_view_of_written_input(const TensorVar& v) const {
  if (!v.is_view || !v.base) return false;
  return is_written_input(v.base.get()) || is_view_of_written_input(*as<TensorVar>(v.base));
}

void Tracer::check_input_write(const VarPtr& t, const std::string& what) {
  if (in_body()) refuse_in_body(what + " into an input array");
  auto* tv = as<TensorVar>(t);
  const jit::Node& n = out_.graph.node(tv->node);
  BREAK_IF(n.kind != jit::NodeKind::Placeholder, BreakKind::Internal, "internal: a written input is not a placeholder");
  PyObject* obj = fetch_source(*t->source, view_);  // borrowed
  const NumPyHandles* np = numpy_handles();
  // torch tensors are written through torch's own setitem at the end (Note [Torch writes]).
  if (obj && out_.array_kind == ArrayKind::Torch && is_torch_tensor(obj)) return;
  // A CuPy array has no read-only flag: every one may be written.
  if (obj && out_.array_kind == ArrayKind::CuPy && is_cupy_array(obj)) return;
  BREAK_IF(!obj || !np || Py_TYPE(obj) != np->ndarray, BreakKind::SideEffect,
           what + " on a " + std::string(obj ? Py_TYPE(obj)->tp_name : "value") +
               " (only NumPy arrays, CuPy arrays and torch tensors are written)");
  BREAK_IF(!(as_ndarray(obj)->flags & kNpyWriteable), Raises{PyExc_ValueError}, "assignment destination is read-only");
}

void Tracer::note_input_write(const VarPtr& t, const std::string& what) {
  if (is_written_input(t.get())) return;
  check_input_write(t, what);
  auto* tv = as<TensorVar>(t);
  out_.guards.require_writeable(t->source);
  out_.input_writes.push_back({tv->node, t->source, t});
}

bool Tracer::is_written_input(const Var* v) const {
  for (const auto& w : out_.input_writes)
    if (w.var.get() == v) return true;
  return false;
}

void Tracer::add_copy_backs(const std::vector<jit::Arg>& outs) {
  if (out_.input_writes.empty()) return;
  std::vector<jit::Arg> after = outs;
  for (const auto& w : out_.input_writes) after.push_back(jit::Arg::node(as<TensorVar>(w.var)->node));
  for (const auto& w : out_.input_writes) {
    // The written array shares no memory with any other input array: guarded, and checked now.
    PyObject* mine = fetch_source(*w.source, view_);  // borrowed
    const int my_slot = out_.guards.slot_for(w.source);
    const int my_size = static_cast<int>(rt::dtype_itemsize(out_.graph.node(w.placeholder).meta.dtype));
    for (const GraphInput& in : out_.inputs) {
      if (in.node == w.placeholder) continue;
      PyObject* other = fetch_source(*in.source, view_);  // borrowed
      if (!other || !array_fields(other).ok) continue;
      const int size = static_cast<int>(rt::dtype_itemsize(out_.graph.node(in.node).meta.dtype));
      BREAK_IF(!arrays_disjoint(mine, my_size, other, size), BreakKind::SideEffect,
               "an input array written by the function shares memory with another input");
      out_.guards.add_disjoint(my_slot, in.slot, my_size, size);
    }
    const int final_node = as<TensorVar>(w.var)->node;
    if (final_node == w.placeholder) continue;
    add_tensor("framejit._C._copy_into", {jit::Arg::node(w.placeholder), jit::Arg::node(final_node)},
               out_.graph.node(w.placeholder).meta, {{"after", jit::Arg::tuple(after)}});
  }
}

}  // namespace framejit::frontend
