// creation.cpp — zeros ones empty full arange and zeros_like ones_like empty_like full_like.
#include <cmath>

#include "frontend/interop/numpy_abi.h"
#include "frontend/ops/numpy/families.h"

namespace framejit::frontend::ops {

VarPtr creation(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  std::string target = "numpy." + name;
  bool like = name.size() > 5 && name.compare(name.size() - 5, 5, "_like") == 0;
  if (name == "arange") {
    auto b = bind_args(name, {"start", "stop", "step", "dtype", "*", "like"}, args, kwargs);
    BREAK_IF(!is_absent(b, "like"), "arange(like=)");
    BREAK_IF(!b.count("start"), "arange() needs at least one argument");
    SymInt length(0);
    bool all_int = true;
    std::vector<VarPtr> bounds;
    for (const char* k : {"start", "stop", "step"})
      if (!is_absent(b, k)) bounds.push_back(b[k]);
    for (auto& v : bounds) {
      BREAK_IF(v->kind == VarKind::Tensor, "arange with array bounds");
      PyObject* h = v->kind == VarKind::Scalar ? as<ScalarVar>(v)->hint.get() : const_value(v);
      BREAK_IF(!PyLong_Check(h) && !PyFloat_Check(h), "arange bounds must be numbers");
      all_int &= PyLong_Check(h) != 0;
    }
    if (bounds.size() == 1 && all_int && tx.as_sym(bounds[0])) {
      SymInt n = *tx.as_sym(bounds[0]);
      length = n.is_const() ? SymInt(std::max<int64_t>(0, n.const_value()))
                            : (tx.out().decide(n, CmpOp::Ge, 0, "arange length") ? n : SymInt(0));
    } else {
      double v[3] = {0, 0, 1};
      if (bounds.size() == 1) {
        v[1] = PyFloat_AsDouble(tx.python_value(bounds[0], "arange bound").get());
      } else {
        for (size_t i = 0; i < bounds.size(); ++i) v[i] = PyFloat_AsDouble(tx.python_value(bounds[i], "arange bound").get());
      }
      BREAK_IF(v[2] == 0, "arange: step is zero");
      double len = std::ceil((v[1] - v[0]) / v[2]);
      BREAK_IF(!std::isfinite(len), "arange: length is not finite");
      length = SymInt(static_cast<int64_t>(std::max(0.0, len)));
    }
    rt::DType dt = !is_absent(b, "dtype") ? dtype_of(tx, b["dtype"]) : (all_int ? rt::DType::Int64 : rt::DType::Float64);
    return tx.add_tensor(target, to_args(tx, args), tensor_meta(dt, {length}), to_kwargs(tx, kwargs));
  }

  std::vector<std::string> params;
  if (like) {
    params = {"a"};
    if (name == "full_like") params.push_back("fill_value");
    for (const char* s : {"dtype", "order", "subok", "shape"}) params.push_back(s);
  } else {
    params = {"shape"};
    if (name == "full") params.push_back("fill_value");
    for (const char* s : {"dtype", "order", "*", "like"}) params.push_back(s);
  }
  auto b = bind_args(name, params, args, kwargs);
  BREAK_IF(!is_absent(b, "like"), name + "(like=)");
  if (!is_absent(b, "order")) {
    OwnedRef o = tx.python_value(b["order"], "order");
    BREAK_IF(!PyUnicode_Check(o.get()) || (PyUnicode_CompareWithASCIIString(o.get(), "C") != 0 &&
                                           PyUnicode_CompareWithASCIIString(o.get(), "K") != 0),
             name + "() with an order other than 'C'");
  }
  if (!is_absent(b, "subok")) BREAK_IF(!tx.truth(b["subok"], "subok"), name + "(subok=False)");
  Shape shape;
  std::vector<VarPtr> probe_args;
  KwArgs probe_kwargs;
  if (!is_absent(b, "dtype")) probe_kwargs.emplace_back("dtype", b["dtype"]);
  if (like) {
    BREAK_IF(!b.count("a") || b["a"]->kind != VarKind::Tensor, name + " of a non-array");
    shape = is_absent(b, "shape") ? tx.meta(b["a"]).shape : parse_shape(tx, b["shape"]);
    probe_args.push_back(b["a"]);
  } else {
    BREAK_IF(!b.count("shape"), name + "() needs a shape");
    shape = parse_shape(tx, b["shape"]);
    probe_args.push_back(tx.wrap_const(OwnedRef::steal(PyTuple_New(0)).get()));
  }
  for (auto& d : shape) BREAK_IF(d.is_const() && d.const_value() < 0, "negative dimensions are not allowed");
  if (b.count("fill_value")) {
    BREAK_IF(b["fill_value"]->kind == VarKind::Tensor, name + " with an array fill value");
    probe_args.push_back(b["fill_value"]);
  }
  DTypeAnswer dt = probe_dtype(tx, DTypeRule::NumPyOnly, name, numpy_attr(name.c_str()), probe_args, probe_kwargs);
  return tx.add_tensor(target, to_args(tx, args), tensor_meta(dt.dtype, shape), to_kwargs(tx, kwargs));
}

}  // namespace framejit::frontend::ops
