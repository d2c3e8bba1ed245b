// writes.cpp — torch's in-place methods (x.add_(y), x.relu_(), x.fill_(v), x.copy_(src)) and
// in-place operators (x += y) as writes into arrays (Note [Torch writes]).
#include "frontend/cpython/pyref.h"
#include "frontend/interop/torch_array.h"
#include "frontend/ops/torch/torch_ops.h"

namespace framejit::frontend::ops::torch_ops {

// Note [Torch writes]
// An in-place torch op is its out-of-place op, converted to the target's dtype, written into the
// target with the tracer's writes (Note [Writes into arrays]): through every view the trace made,
// and back into an input once, at the end of the graph. torch decides whether the write is
// allowed (the result type must cast to the target's; the target must not broadcast): the
// in-place callable itself is asked on stand-ins, and a refusal runs the statement in CPython,
// which raises torch's error. The final write into an input is torch's own `dst[...] = src`, an
// extern step: torch bumps the tensor's version counter, which autograd checks, and framejit's
// store kernels would not.

namespace {

// The in-place methods captured: their out-of-place name, with the argument list they share.
bool has_out_of_place(const std::string& base) { return is_pointwise_name(base); }

VarPtr write_result(Tracer& tx, const VarPtr& x, VarPtr value, const std::string& what) {
  const jit::TensorMeta xm = tx.meta(x);  // NB: a copy: casts add nodes
  BREAK_IF(value->kind != VarKind::Tensor, what + " with a result that is not a tensor");
  if (tx.meta(value).dtype != xm.dtype) value = pointwise(tx, "to", {value, tx.wrap_const(torch_handles()->dtypes[static_cast<int>(xm.dtype)])}, {});
  const jit::TensorMeta vm = tx.meta(value);
  bool same_shape = vm.rank() == xm.rank();
  for (int d = 0; same_shape && d < xm.rank(); ++d) same_shape = vm.shape[static_cast<size_t>(d)].same_as(xm.shape[static_cast<size_t>(d)]);
  if (!same_shape) {
    // The value broadcasts to the target (x.add_(row)): expanded to x's shape first.
    value = shape_op(tx, "expand_as", {value, x}, {});
  }
  tx.assign_array(x, as<TensorVar>(value)->node, what);
  return x;
}

}  // namespace

bool is_inplace_method(const std::string& name) {
  if (name.size() < 2 || name.back() != '_' || name[name.size() - 2] == '_') return false;
  const std::string base = name.substr(0, name.size() - 1);
  return has_out_of_place(base) || base == "fill" || base == "zero" || base == "copy";
}

VarPtr inplace_method(Tracer& tx, const VarPtr& x, const std::string& name, const std::vector<VarPtr>& args,
                      const KwArgs& kwargs) {
  const std::string what = "torch.Tensor." + name;
  const std::string base = name.substr(0, name.size() - 1);
  BREAK_IF(x->kind != VarKind::Tensor, what + " of a non-tensor");
  std::vector<VarPtr> all{x};
  all.insert(all.end(), args.begin(), args.end());
  // torch's verdict on the write itself (dtype and shape), from the in-place method on stand-ins.
  OwnedRef method = OwnedRef::steal(PyObject_GetAttrString(reinterpret_cast<PyObject*>(torch_handles()->tensor), name.c_str()));
  if (!method) python_error_break(what + ": ");
  probe(tx, method.get(), what, all, kwargs);
  VarPtr value;
  if (base == "zero" || base == "fill") {
    BREAK_IF(base == "fill" && args.size() != 1, Raises{PyExc_TypeError}, what + "() takes one value");
    value = creation(tx, "full_like", {x, base == "zero" ? tx.wrap_const(OwnedRef::steal(PyLong_FromLong(0)).get()) : args[0]}, {});
  } else if (base == "copy") {
    BREAK_IF(args.size() != 1 || args[0]->kind != VarKind::Tensor, what + " from a non-tensor");
    value = args[0];
    if (tx.meta(value).dtype == tx.meta(x).dtype) value = operator_pointwise(tx, "pos", {value});  // a copy, not an alias
  } else {
    value = pointwise(tx, base, all, kwargs);
  }
  return write_result(tx, x, value, what);
}

VarPtr inplace_operator(Tracer& tx, const std::string& op, const VarPtr& x, const VarPtr& y) {
  const std::string what = "in-place " + op + " on a torch tensor";
  static PyObject* operators = PyImport_ImportModule("operator");  // kept for the process
  OwnedRef fn = operators ? OwnedRef::steal(PyObject_GetAttrString(operators, ("i" + op).c_str())) : OwnedRef();
  if (!fn) python_error_break(what + ": ");
  probe(tx, fn.get(), what, {x, y});
  return write_result(tx, x, operator_pointwise(tx, op, {x, y}), what);
}

}  // namespace framejit::frontend::ops::torch_ops
