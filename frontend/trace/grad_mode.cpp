// grad_mode.cpp — `with torch.no_grad():`, `torch.enable_grad()` and `torch.inference_mode()`
// blocks traced into the graph instead of breaking it (Note [Grad-mode blocks]).
#include <algorithm>

#include "frontend/interop/torch_array.h"
#include "frontend/trace/tracer.h"

namespace framejit::frontend {

// Note [Grad-mode blocks]
// A model is run for inference under `with torch.no_grad():` (or inference_mode, or a method
// decorated with either), and its parameters require grad. A `with` block is otherwise a break
// on entry (Note [With blocks]); for these three managers the trace enters the block itself.
// It keeps torch's grad mode as trace state: the caller's at the start of the trace, set by
// entering a block (no_grad and inference_mode turn it off, enable_grad on, inference_mode(False)
// leaves it), restored when the block's __exit__ is called at its normal end.
//
// What the mode decides is the autograd rule of Note [Torch values]: a tensor that requires grad
// may be read by a graph only where grad mode is off. The builder checks it where the tensor is
// first read, and every node added checks its operands, so a parameter read inside the block and
// used again after it breaks at that use. Results of the graph never require grad, as results
// computed under no_grad do not. A graph that reads such tensors runs its program with torch's
// grad mode off (TorchGradOff): its library steps (torch.cat on a parameter) then make no
// autograd history, and the final write into a parameter (an optimizer's `p.add_(...)` under
// no_grad) is allowed as it is in eager code. The guard of such an input holds the caller's grad
// mode at the trace: under another mode the same code may read it elsewhere.
//
// The block's exception handler only restores the mode and re-raises; whatever the graph raises
// leaves the mode as the caller had it, which is where __exit__ would have left it, so an op
// that may raise inside the block is covered only by what covers the `with` statement itself
// (Note [Raising under a handler]).
// A break inside the block cannot keep the graph before it: its break code would have to resume
// inside a block CPython never entered. The frame stops instead at the instruction that made the
// outermost open block's manager (the root's call that made it, when an inlined call did), as a
// break inside a loop stops at the loop (Note [Breaks inside loops]); CPython then makes and
// enters the manager, and the resume function traces the body under the real mode, as any with
// block. Only a block entered in the root frame needs this: a break inside an inlined call already
// stops at the root's call.
// Differences left: tensors made under inference_mode are inference tensors in eager code and
// ordinary ones here; torch.set_grad_enabled(...) and torch.is_grad_enabled() are not traced.

VarPtr Tracer::grad_mode_manager(PyObject* cls, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const TorchHandles* h = torch_handles();
  if (!h || !cls || (cls != h->no_grad && cls != h->enable_grad && cls != h->inference_mode)) return nullptr;
  int8_t enabled = cls == h->enable_grad ? 1 : 0;
  bool mode = true;  // inference_mode(mode=True)
  if (cls == h->inference_mode) {
    BREAK_IF(args.size() + kwargs.size() > 1 || (kwargs.size() == 1 && kwargs[0].first != "mode"),
             "torch.inference_mode with these arguments");
    const VarPtr* m = !args.empty() ? &args[0] : !kwargs.empty() ? &kwargs[0].second : nullptr;
    if (m) mode = truth(*m, "inference_mode's mode");
    if (!mode) enabled = -1;  // inference_mode(False) leaves grad mode as it is
  } else {
    BREAK_IF(!args.empty() || !kwargs.empty(), "torch.no_grad or enable_grad with arguments");
  }
  // The real object: no side effect until it is entered; it names the block in messages.
  OwnedRef obj = OwnedRef::steal(cls == h->inference_mode ? PyObject_CallOneArg(cls, mode ? Py_True : Py_False)
                                                          : PyObject_CallNoArgs(cls));
  if (!obj) python_error_break("making a grad-mode manager: ");
  TraceFrame* root = current_;
  while (root->parent) root = root->parent;
  const int made_at = root->cur_offset * static_cast<int>(sizeof(uint16_t));
  return std::make_shared<GradModeVar>(std::move(obj), GradModeVar::Role::Manager, enabled, made_at);
}

VarPtr Tracer::enter_grad_block(TraceFrame& f, const VarPtr& manager) {
  auto* g = dynamic_cast<GradModeVar*>(manager.get());
  if (!g || g->role != GradModeVar::Role::Manager) return nullptr;
  // The block's handler covers the instruction after BEFORE_WITH (the store of the entered value).
  int handler = -1;
  for (const bytecode::ExceptionEntry& e : f.handlers)
    if (e.start <= f.ip && f.ip < e.end) handler = e.target;
  BREAK_IF(handler < 0, BreakKind::Internal, "internal: a with block without its handler");
  f.grad_blocks.push_back({handler, f.cur_offset, grad_enabled_, g->made_at});
  if (g->enabled >= 0) grad_enabled_ = g->enabled == 1;
  return std::make_shared<GradModeVar>(g->obj, GradModeVar::Role::Exit, g->enabled, g->made_at);
}

VarPtr Tracer::exit_grad_block(const std::vector<VarPtr>& args) {
  BREAK_IF(args.size() != 3, BreakKind::Internal, "internal: a grad-mode block's __exit__ with other arguments");
  for (const VarPtr& a : args)
    BREAK_IF(!is_const(a) || const_value(a) != Py_None, "calling a grad-mode block's __exit__ with an exception");
  BREAK_IF(current_->grad_blocks.empty(), BreakKind::Internal, "internal: leaving a grad-mode block never entered");
  grad_enabled_ = current_->grad_blocks.back().outer_enabled;
  current_->grad_blocks.pop_back();
  return wrap_const(Py_None);
}

void Tracer::check_grad_use(int node) {
  if (!grad_enabled_ || out_.requires_grad_inputs.empty()) return;
  const jit::Node& n = out_.graph.node(node);
  // The copy of a written input's final value, at the end of the graph: its writes were made
  // where grad mode was off.
  if (n.target == "framejit._C._copy_into") return;
  const auto& rg = out_.requires_grad_inputs;
  bool reads = false;
  auto visit = [&](int i) { reads |= std::find(rg.begin(), rg.end(), i) != rg.end(); };
  for (const jit::Arg& a : n.args) a.for_each_node(visit);
  for (const auto& kw : n.kwargs) kw.second.for_each_node(visit);
  BREAK_IF(reads, "autograd: a tensor that requires grad is used under grad mode (framejit does not build backward "
                  "graphs yet; the statement runs in CPython with torch's autograd)");
}

}  // namespace framejit::frontend
