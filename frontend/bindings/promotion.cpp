// promotion.cpp — framejit._C._promotion_result: the native dtype rules (frontend/ops/numpy/promotion.h)
// exposed for tests/python/test_promotion.py, which compares them with the installed NumPy.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "frontend/ops/numpy/promotion.h"

namespace py = pybind11;
namespace ops = framejit::frontend::ops;
using framejit::rt::DType;

namespace {

DType dtype_arg(const std::string &name) {
  std::optional<DType> t = framejit::rt::dtype_from_name(name);
  if (!t)
    throw py::value_error("_promotion_result: unknown dtype '" + name + "'");
  return *t;
}

ops::PyIntValue int_value(py::handle v) {
  int overflow = 0;
  long long s = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (s == -1 && PyErr_Occurred())
    throw py::error_already_set();
  if (!overflow)
    return ops::PyIntValue::of(s);
  if (overflow > 0) {
    unsigned long long u = PyLong_AsUnsignedLongLong(v.ptr());
    if (!PyErr_Occurred())
      return ops::PyIntValue::of_unsigned(u);
    PyErr_Clear();
  }
  return ops::PyIntValue::huge(overflow < 0);
}

// An operand spec: a dtype name (a tensor), "py_bool" / "py_int" / "py_float" (a Python scalar of
// that kind), or ("py_int", value).
ops::PromoOperand operand_arg(py::handle spec) {
  if (py::isinstance<py::tuple>(spec)) {
    py::tuple t = py::reinterpret_borrow<py::tuple>(spec);
    if (t.size() != 2 || t[0].cast<std::string>() != "py_int" || !PyLong_Check(t[1].ptr()))
      throw py::value_error("_promotion_result: a tuple operand is ('py_int', value)");
    return ops::PromoOperand::py_int(int_value(t[1]));
  }
  std::string s = spec.cast<std::string>();
  if (s == "py_bool")
    return ops::PromoOperand::py_bool();
  if (s == "py_int")
    return ops::PromoOperand::py_int();
  if (s == "py_float")
    return ops::PromoOperand::py_float();
  return ops::PromoOperand::tensor(dtype_arg(s));
}

py::tuple to_python(const ops::PromoResult &r) {
  static const char *kStatus[] = {"ok", "type_error", "overflow", "unsupported"};
  py::list operand_dtypes;
  for (DType t : r.operand_dtypes)
    operand_dtypes.append(std::string(framejit::rt::dtype_name(t)));
  py::object dtype = py::none();
  if (r.ok())
    dtype = py::str(std::string(framejit::rt::dtype_name(r.dtype)));
  return py::make_tuple(kStatus[static_cast<int>(r.status)], dtype, operand_dtypes, r.why);
}

} // namespace

void bind_promotion(py::module_ &m) {
  m.def(
      "_promotion_result",
      [](const std::string &kind, const std::string &op, py::list specs, py::object dtype_kw) {
        std::vector<ops::PromoOperand> operands;
        for (py::handle s : specs)
          operands.push_back(operand_arg(s));
        std::optional<DType> kw;
        if (!dtype_kw.is_none())
          kw = dtype_arg(dtype_kw.cast<std::string>());
        if (kind == "elementwise")
          return to_python(ops::elementwise_result(op, operands));
        if (kind == "inplace")
          return to_python(ops::inplace_result(op, operands));
        if (kind == "reduction" || kind == "matmul") {
          if (operands.size() != (kind == "matmul" ? 2u : 1u))
            throw py::value_error("_promotion_result: wrong operand count for " + kind);
          for (const ops::PromoOperand &o : operands)
            if (o.kind != ops::OperandKind::Tensor)
              throw py::value_error("_promotion_result: " + kind + " takes tensors only");
          if (kind == "matmul")
            return to_python(ops::matmul_result(operands[0].dtype, operands[1].dtype));
          return to_python(ops::reduction_result(op, operands[0].dtype, kw));
        }
        throw py::value_error(
            "_promotion_result: kind is elementwise, inplace, reduction or matmul");
      },
      py::arg("kind"), py::arg("op"), py::arg("operands"), py::arg("dtype") = py::none(),
      "Test hook: (status, dtype, operand dtypes, why) from the native dtype rules. Operands are "
      "dtype names (tensors), 'py_bool'/'py_int'/'py_float' (Python scalars) or ('py_int', "
      "value).");
  m.def(
      "_ufunc_for_operator",
      [](const std::string &name) -> py::object {
        std::optional<std::string_view> u = ops::ufunc_for_operator(name);
        if (!u)
          return py::none();
        return py::str(std::string(*u));
      },
      "Test hook: the ufunc behind an operator module name ('sub' -> 'subtract').");
}
