// linalg.cpp — matmul, dot and the `@` operator, with batch dims and 1-d operands.
#include "frontend/ops/numpy/compose.h"

namespace framejit::frontend::ops {

namespace {

// numpy.dot with a list or a Python number: lists become arrays (numpy.asarray); a number is a
// 0-d array of its default type, which dot does not narrow by value (np.dot(2.0, x32) is
// float64), so the array operand is cast to dot's type and multiplied by the number.
VarPtr dot_of_non_arrays(Tracer& tx, const std::string& target, const std::vector<VarPtr>& args) {
  std::vector<VarPtr> ops;
  for (const VarPtr& v : args) {
    if (is_sequence(v)) {
      claim_numpy_arrays(tx, "numpy.dot of a list");
      ops.push_back(array_from_list(tx, v, "numpy.dot"));
      continue;
    }
    const bool number = v->kind == VarKind::Scalar ||
                        (is_const(v) && (PyLong_Check(const_value(v)) || PyFloat_Check(const_value(v))));
    BREAK_IF(v->kind != VarKind::Tensor && !number, "dot of a " + std::string(var_kind_name(v->kind)) + " operand");
    ops.push_back(v);
  }
  if (ops[0]->kind == VarKind::Tensor && ops[1]->kind == VarKind::Tensor) return linalg(tx, "dot", target, ops, {});
  // Two numbers: two 0-d arrays of their default types, whose dot is their product, a NumPy
  // scalar of the same type numpy.multiply gives them (bool, int64 or float64).
  if (ops[0]->kind != VarKind::Tensor && ops[1]->kind != VarKind::Tensor) return ufunc(tx, "multiply", ops);
  const int arr = ops[0]->kind == VarKind::Tensor ? 0 : 1;
  DTypeAnswer dt = probe_dtype(tx, DTypeRule::Matmul, "dot", numpy_attr("dot"), ops, {});
  VarPtr x = ops[arr];
  if (tx.meta(x).dtype != dt.dtype) x = cast(tx, x, dt.dtype);
  std::vector<VarPtr> mul = arr == 0 ? std::vector<VarPtr>{x, ops[1]} : std::vector<VarPtr>{ops[0], x};
  return ufunc(tx, "multiply", mul);
}

}  // namespace

VarPtr linalg(Tracer& tx, const std::string& name, const std::string& target, const std::vector<VarPtr>& args,
              const KwArgs& kwargs) {
  for (auto& [k, v] : kwargs)
    BREAK_IF(!(v->kind == VarKind::Const && const_value(v) == Py_None), name + "() with " + k + "=");
  BREAK_IF(args.size() != 2, name + "() takes two operands");
  if (name == "dot" && (args[0]->kind != VarKind::Tensor || args[1]->kind != VarKind::Tensor))
    return dot_of_non_arrays(tx, target, args);
  const VarPtr &a = args[0], &b = args[1];
  BREAK_IF(a->kind != VarKind::Tensor || b->kind != VarKind::Tensor,
           name + " of a non-array operand");
  Shape sa = tx.meta(a).shape, sb = tx.meta(b).shape;
  Shape out;
  std::string why = name + " at " + tx.location();
  if (name == "dot" && (sa.empty() || sb.empty())) {
    out = broadcast_shapes(tx, {sa, sb});  // dot with a 0-d operand is multiplication
  } else {
    BREAK_IF(sa.empty() || sb.empty(), "matmul: input operand does not have enough dimensions");
    bool a_vec = sa.size() == 1, b_vec = sb.size() == 1;
    SymInt k_a = sa.back();
    SymInt k_b = b_vec ? sb[0] : sb[sb.size() - 2];
    BREAK_IF(!tx.out().sizes_equal(k_a, k_b, why), Raises{PyExc_ValueError}, name + ": shapes are not aligned");
    if (name == "dot" && sb.size() > 2) {
      // dot(a, b)[i..., j..., m] = sum(a[i..., :] * b[j..., :, m])
      out.assign(sa.begin(), sa.end() - 1);
      out.insert(out.end(), sb.begin(), sb.end() - 2);
      out.push_back(sb.back());
    } else if (name == "dot" || (sa.size() <= 2 && sb.size() <= 2)) {
      out.assign(sa.begin(), sa.end() - 1);
      if (!b_vec) out.push_back(sb.back());
    } else {
      Shape ba(sa.begin(), sa.end() - (a_vec ? 1 : 2));
      Shape bb(sb.begin(), sb.end() - (b_vec ? 1 : 2));
      out = broadcast_shapes(tx, {ba, bb});
      if (!a_vec) out.push_back(sa[sa.size() - 2]);
      if (!b_vec) out.push_back(sb.back());
    }
  }
  PyObject* fn = numpy_attr(name == "dot" ? "dot" : "matmul");
  DTypeAnswer dt = probe_dtype(tx, DTypeRule::Matmul, name, fn, {a, b}, {});
  std::vector<VarPtr> ops = args;
  if (rt::dtype_is_float(dt.dtype) && !sa.empty() && !sb.empty()) {
    // Operands of two dtypes: NumPy's loop is the result's, into which it casts both first
    // (float32 @ float64 is a float64 product), so the backend's product of one dtype applies.
    for (VarPtr& v : ops)
      if (tx.meta(v).dtype != dt.dtype) v = cast(tx, v, dt.dtype);
  }
  return tx.add_tensor(target, to_args(tx, ops), tensor_meta(dt.dtype, out, dt.scalar_object), to_kwargs(tx, kwargs));
}

}  // namespace framejit::frontend::ops
