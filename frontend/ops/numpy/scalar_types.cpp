// scalar_types.cpp — numpy.float32(v), numpy.int64(n) and the other scalar types called as
// constructors: a constant folds at trace time; a graph value becomes a cast whose result is a
// NumPy scalar, so value-based casting (NumPy 1.x) and NEP 50 treat it as NumPy would.
#include "frontend/interop/numpy_abi.h"
#include "frontend/ops/numpy/compose.h"
#include "frontend/ops/numpy/families.h"

namespace framejit::frontend::ops {

VarPtr scalar_type(Tracer& tx, const std::string& name, PyObject* type, const std::vector<VarPtr>& args,
                   const KwArgs& kwargs) {  // type borrowed
  const std::string what = "numpy." + name;
  BREAK_IF(args.size() != 1 || !kwargs.empty(), what + "() with other than one positional argument");
  const VarPtr& v = args[0];
  if (v->kind == VarKind::Const) {
    // Pure: the constructor of an immutable scalar from an immutable value.
    OwnedRef r = OwnedRef::steal(PyObject_CallOneArg(type, const_value(v)));  // new ref
    if (!r) python_error_break(what + "(): ");
    return tx.wrap_const(r.get());
  }
  const rt::DType dt = dtype_of(tx, tx.wrap_const(type));
  VarPtr t = v;
  // A Python number that is a run-time input: numpy.positive makes it the NumPy scalar NumPy's
  // constructor would read it as (int -> int64, float -> float64), exactly, before the cast.
  if (v->kind == VarKind::Scalar) t = ufunc(tx, "positive", {v});
  BREAK_IF(t->kind != VarKind::Tensor, what + "() of " + var_kind_name(v->kind));
  const jit::TensorMeta& m = tx.meta(t);
  // numpy.float64(x) of an array of any rank but 0 is an array (astype); of a 0-d array or a
  // scalar it is a scalar.
  const bool scalar = m.rank() == 0;
  if (scalar && m.scalar_object && m.dtype == dt) return t;  // already that immutable scalar
  jit::TensorMeta out = tensor_meta(dt, m.shape, scalar);
  return tx.add_tensor("method.astype", to_args(tx, {t, dtype_const(tx, dt)}), std::move(out), {});
}

}  // namespace framejit::frontend::ops
