// elementwise.cpp — ufuncs, their operator forms, where and clip.
#include "frontend/ops/numpy/families.h"
#include "frontend/ops/numpy/promotion.h"

namespace framejit::frontend::ops {

namespace {

// NumPy's name of the op a target calls: operator.add -> add, builtins.abs -> absolute,
// numpy.exp -> exp, method.clip -> clip.
std::string ufunc_name(const std::string& target) {
  const size_t dot = target.find('.');
  const std::string name = target.substr(dot + 1);
  if (target.compare(0, dot, "operator") == 0 || target.compare(0, dot, "builtins") == 0)
    if (auto u = ufunc_for_operator(name)) return std::string(*u);
  return name;
}

}  // namespace

VarPtr elementwise(Tracer& tx, const std::string& target, PyObject* probe, const std::vector<VarPtr>& args,
                   const KwArgs& kwargs) {
  KwArgs probe_kwargs;
  for (auto& [k, v] : kwargs) {
    bool is_none = v->kind == VarKind::Const && const_value(v) == Py_None;
    if (k == "dtype") {
      probe_kwargs.emplace_back(k, v);
      continue;
    }
    if ((k == "out" || k == "where") && !is_none) graph_break("NumPy call with " + k + "= (writes into an array)");
    BREAK_IF(k != "out" && k != "where" && !is_none, "NumPy call with keyword " + k + "=");
  }
  std::vector<Shape> shapes;
  for (auto& a : args) {
    BREAK_IF(is_seq(a), "a list or tuple as an array operand (it would be converted with numpy.asarray)");
    BREAK_IF(a->kind != VarKind::Tensor && a->kind != VarKind::Scalar && a->kind != VarKind::Const,
             std::string("an operand that is ") + var_kind_name(a->kind));
    if (a->kind == VarKind::Const) {
      PyObject* c = const_value(a);
      BREAK_IF(!PyLong_Check(c) && !PyFloat_Check(c) && !PyBool_Check(c) && !PyComplex_Check(c) && c != Py_None,
               std::string("a ") + Py_TYPE(c)->tp_name + " constant as an array operand");
    }
    shapes.push_back(shape_of(tx, a));
  }
  DTypeAnswer dt = probe_dtype(tx, DTypeRule::Elementwise, ufunc_name(target), probe, args, probe_kwargs);
  Shape shape = broadcast_shapes(tx, shapes);
  return tx.add_tensor(target, to_args(tx, args), tensor_meta(dt.dtype, shape, dt.numpy_scalar),
                       to_kwargs(tx, kwargs));
}

}  // namespace framejit::frontend::ops
