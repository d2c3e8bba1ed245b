// elementwise.cpp — ufuncs, their operator forms, where and clip.
#include "frontend/ops/numpy/families.h"
#include "frontend/ops/numpy/promotion.h"

#include <cmath>

#include "frontend/interop/numpy_abi.h"

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

// A ufunc of constants computed now (np.sqrt(2 / np.pi)): NumPy gives a float64 scalar, which
// then meets arrays as the constant it is, value-based casting included, instead of a 0-d node
// whose value the trace cannot see. Only when every operand is a finite number and so is the
// result: then NumPy raised no floating-point warning that the compiled call would owe.
VarPtr fold_constants(Tracer& tx, PyObject* fn, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  // NumPy 2 types the float64 result strongly, which a graph constant cannot carry (to_arg).
  const NumPyHandles* np = numpy_handles();
  if (!fn || !kwargs.empty() || args.empty() || !np || np->major >= 2) return nullptr;
  std::vector<PyObject*> argv;
  for (const VarPtr& a : args) {
    if (a->kind != VarKind::Const) return nullptr;
    PyObject* c = const_value(a);  // borrowed
    if (!PyLong_Check(c) && !PyFloat_Check(c)) return nullptr;
    if (PyFloat_Check(c) && !std::isfinite(PyFloat_AS_DOUBLE(c))) return nullptr;
    argv.push_back(c);
  }
  OwnedRef r = OwnedRef::steal(PyObject_Vectorcall(fn, argv.data(), argv.size(), nullptr));
  if (!r) {
    PyErr_Clear();  // the graph keeps the call, and CPython's error, as before
    return nullptr;
  }
  if (!PyFloat_Check(r.get()) || !std::isfinite(PyFloat_AS_DOUBLE(r.get()))) return nullptr;
  return tx.wrap_const(r.get());
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
  if (VarPtr folded = fold_constants(tx, probe, args, kwargs)) return folded;
  std::vector<Shape> shapes;
  for (auto& a : args) {
    BREAK_IF(is_seq(a), "a list or tuple as an array operand (it would be converted with numpy.asarray)");
    BREAK_IF(a->kind != VarKind::Tensor && a->kind != VarKind::Scalar && a->kind != VarKind::Const,
             std::string("an operand that is ") + var_kind_name(a->kind));
    if (a->kind == VarKind::Const) {
      PyObject* c = const_value(a);
      const NumPyHandles* np = numpy_handles();
      const bool numpy_scalar = np && PyObject_TypeCheck(c, np->generic) && PyNumber_Check(c);
      BREAK_IF(!PyLong_Check(c) && !PyFloat_Check(c) && !PyBool_Check(c) && !PyComplex_Check(c) && c != Py_None &&
                   !numpy_scalar,
               std::string("a ") + Py_TYPE(c)->tp_name + " constant as an array operand");
    }
    shapes.push_back(shape_of(tx, a));
  }
  DTypeAnswer dt = probe_dtype(tx, DTypeRule::Elementwise, ufunc_name(target), probe, args, probe_kwargs);
  Shape shape = broadcast_shapes(tx, shapes);
  // A NumPy scalar constant (numpy.float32(0.1)) goes into the graph as the Python number of its
  // exact value, which a graph argument can hold, when NumPy gives that number the same result
  // type (the kernels and an extern call both follow the node's operands).
  std::vector<VarPtr> operands = args;
  const NumPyHandles* np = numpy_handles();
  std::string converted;
  for (VarPtr& a : operands) {
    if (a->kind != VarKind::Const || !np || !PyObject_TypeCheck(const_value(a), np->generic)) continue;
    converted = Py_TYPE(const_value(a))->tp_name;
    OwnedRef item = OwnedRef::steal(PyObject_CallMethod(const_value(a), "item", nullptr));  // new ref
    if (!item) python_error_break("a " + converted + " constant: ");
    a = tx.wrap_const(item.get());
  }
  if (!converted.empty()) {
    // With no array among the operands, the Python numbers become the NumPy scalars NumPy's
    // operator makes of them (h * numpy.float64(c) is a numpy.float64), so the node computes on a
    // NumPy scalar as the original does.
    bool any_array = false;
    for (const VarPtr& a : operands) any_array |= a->kind == VarKind::Tensor;
    if (!any_array)
      for (VarPtr& a : operands)
        if (a->kind == VarKind::Scalar) a = elementwise(tx, "numpy.positive", numpy_attr("positive"), {a}, {});
    DTypeAnswer same = probe_dtype(tx, DTypeRule::Elementwise, ufunc_name(target), probe, operands, probe_kwargs);
    BREAK_IF(same.dtype != dt.dtype || same.scalar_object != dt.scalar_object,
             "a " + converted + " constant whose type NumPy reads differently from a Python number's here");
  }
  return tx.add_tensor(target, to_args(tx, operands), tensor_meta(dt.dtype, shape, dt.scalar_object),
                       to_kwargs(tx, kwargs));
}

}  // namespace framejit::frontend::ops
