// writes.cpp — torch's in-place methods (x.add_(y), x.relu_(), x.fill_(v), x.copy_(src)) and
// in-place operators (x += y) as writes into arrays (Note [Torch writes]).
#include "frontend/cpython/pyref.h"
#include "frontend/interop/torch_array.h"
#include "frontend/ops/numpy/families.h"
#include "frontend/ops/numpy/registry.h"
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
// `x[index] = v` is NumPy's write (the same key, broadcast and cast rules) where torch agrees with
// NumPy, and a break where it does not: torch raises for a negative step, for an index tensor of
// another dtype than int64 or bool, for a number the target's dtype cannot hold (NumPy 1.x
// wraps), and for a source that partly overlaps the target (x[1:] = x[:-1], which NumPy copies
// as if buffered); each of those statements runs in CPython, which gives torch's behaviour.

namespace {

// The in-place methods captured: their out-of-place name, with the argument list they share.
bool has_out_of_place(const std::string& base) { return is_pointwise_name(base); }

// The array a chain of views ends at (the trace's own value, or an input).
const Var* root_of(const VarPtr& v) {
  const Var* r = v.get();
  while (r->kind == VarKind::Tensor && static_cast<const TensorVar*>(r)->is_view && static_cast<const TensorVar*>(r)->base)
    r = static_cast<const TensorVar*>(r)->base.get();
  return r;
}

// Breaks when `source` is a view of the memory `target` lives in (and not `target` itself): torch
// refuses partial overlaps and copies in an order NumPy's functional write does not reproduce.
void check_no_overlap(const VarPtr& target, const VarPtr& source, const std::string& what) {
  if (source->kind != VarKind::Tensor || source.get() == target.get()) return;
  BREAK_IF(root_of(source) == root_of(target), BreakKind::SideEffect,
           what + " from a view of the tensor written (torch refuses partly overlapping memory)");
}

// Whether torch stores the Python number `v` into a tensor of `dt`: it refuses what overflows.
bool torch_holds(rt::DType dt, PyObject* v) {
  const TorchHandles* h = torch_handles();
  OwnedRef shape = OwnedRef::steal(Py_BuildValue("(())"));  // torch.empty(()): one element
  OwnedRef kw = OwnedRef::steal(Py_BuildValue("{s:O}", "dtype", h->dtypes[static_cast<int>(dt)]));
  OwnedRef t = shape && kw ? OwnedRef::steal(PyObject_Call(h->empty, shape.get(), kw.get())) : OwnedRef();
  OwnedRef r = t ? OwnedRef::steal(PyObject_CallMethod(t.get(), "fill_", "O", v)) : OwnedRef();
  if (!r) PyErr_Clear();
  return static_cast<bool>(r);
}

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
  for (const VarPtr& a : args) check_no_overlap(x, a, what);
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
  check_no_overlap(x, y, what);
  probe(tx, fn.get(), what, {x, y});
  return write_result(tx, x, operator_pointwise(tx, op, {x, y}), what);
}

void torch_setitem(Tracer& tx, const VarPtr& x, const VarPtr& index, const VarPtr& value) {
  const std::string what = "x[...] = v on a torch tensor";
  BREAK_IF(x->kind != VarKind::Tensor, what + " of a non-tensor");
  check_index(tx, index);
  const rt::DType dt = tx.meta(x).dtype;
  switch (value->kind) {
    case VarKind::Tensor:
      check_no_overlap(x, value, what);
      break;
    case VarKind::Const:
      BREAK_IF(PyNumber_Check(const_value(value)) && !torch_holds(dt, const_value(value)), Raises{PyExc_RuntimeError},
               "value cannot be converted to type " + std::string(rt::dtype_name(dt)) + " without overflow");
      break;
    case VarKind::Scalar: {
      // A number known only at run time: only where no value of its type can overflow the target
      // (any number into float64; an int, which the trace holds as int64, into int64).
      const bool fits = dt == rt::DType::Float64 || (dt == rt::DType::Int64 && !rt::dtype_is_float(tx.meta(value).dtype));
      BREAK_IF(!fits, what + " of a run-time number into a " + std::string(rt::dtype_name(dt)) +
                          " tensor (torch checks overflow)");
      break;
    }
    default:
      break;  // NumPy's setitem names what it refuses
  }
  ops::setitem(tx, x, index, value);
}

}  // namespace framejit::frontend::ops::torch_ops
