// common.cpp — dtype probes, broadcasting, axes, shapes and argument binding for the op families.
#include "frontend/ops/numpy/common.h"

#include <algorithm>

#include "frontend/interop/numpy_abi.h"
#include "frontend/ops/numpy/promotion.h"
#include "frontend/cpython/python_env.h"

namespace framejit::frontend::ops {

PyObject* numpy_attr(const char* name) {
  const NumPyHandles* np = numpy_handles();
  if (!np) return nullptr;
  PyObject* r = PyObject_GetAttrString(np->module, name);  // new ref; numpy keeps it alive
  if (!r) {
    PyErr_Clear();
    return nullptr;
  }
  Py_DECREF(r);
  return r;
}

namespace {
thread_local int g_cupy_calls = 0;
}  // namespace

CupyCall::CupyCall() { ++g_cupy_calls; }
CupyCall::~CupyCall() { --g_cupy_calls; }
bool in_cupy_call() { return g_cupy_calls > 0; }

void claim_numpy_arrays(Tracer& tx, const std::string& what) {
  ArrayKind& k = tx.out().array_kind;
  BREAK_IF(k == ArrayKind::Tensor, what + " in a graph of framejit.Tensors");
  if (k == ArrayKind::CuPy) {
    BREAK_IF(!in_cupy_call(), what + " makes a NumPy array, in a graph of CuPy arrays");
    return;
  }
  k = ArrayKind::NumPy;
}

jit::TensorMeta tensor_meta(rt::DType dtype, Shape shape, bool scalar_object) {
  jit::TensorMeta m;
  m.dtype = dtype;
  m.shape = std::move(shape);
  m.scalar_object = scalar_object;
  return m;
}

namespace {

PyObject* g_probe_fn = nullptr;  // framejit._probe.result_type: new ref held for the process

PyObject* probe_fn() { return g_probe_fn; }  // borrowed

// The graph input a NumPy scalar operand is (numpy.float64(2.0) passed in), or null: its value
// varies from call to call, but the probe may ask which values keep the result type.
const GraphInput* numpy_scalar_input(Tracer& tx, const VarPtr& v) {
  if (v->kind != VarKind::Tensor || !tx.meta(v).scalar_object) return nullptr;
  const int node = as<TensorVar>(v)->node;
  if (as<TensorVar>(v)->scope != 0 || tx.node_of(v).kind != jit::NodeKind::Placeholder) return nullptr;
  for (const GraphInput& in : tx.out().inputs)
    if (in.node == node) return &in;
  return nullptr;
}

OwnedRef make_spec(Tracer& tx, const VarPtr& v) {
  switch (v->kind) {
    case VarKind::Tensor: {
      if (const GraphInput* in = numpy_scalar_input(tx, v)) {
        // ("n", value): a NumPy scalar input; the probe computes with its traced value.
        if (PyObject* value = fetch_source(*in->source, tx.view()))  // borrowed
          return OwnedRef::steal(Py_BuildValue("(sO)", "n", value));
      }
      const jit::TensorMeta& m = tx.meta(v);
      std::string_view name = rt::dtype_name(m.dtype);
      return OwnedRef::steal(Py_BuildValue("(ss#iO)", "t", name.data(), (Py_ssize_t)name.size(), m.rank(),
                                           m.scalar_object ? Py_True : Py_False));
    }
    case VarKind::Scalar:
      return OwnedRef::steal(Py_BuildValue("(sO)", "s", as<ScalarVar>(v)->hint.get()));
    case VarKind::Tuple:
    case VarKind::List: {
      bool any_tensor = false;
      for (auto& x : as<SeqVar>(v)->items) any_tensor |= x->kind == VarKind::Tensor;
      if (any_tensor) {
        OwnedRef items = OwnedRef::steal(PyList_New(0));
        for (auto& x : as<SeqVar>(v)->items) PyList_Append(items.get(), make_spec(tx, x).get());
        return OwnedRef::steal(Py_BuildValue("(sO)", "l", items.get()));
      }
      break;
    }
    default: break;
  }
  OwnedRef c = tx.python_value(v, "argument of a NumPy call");
  return OwnedRef::steal(Py_BuildValue("(sO)", "c", c.get()));
}

}  // namespace

namespace {

// A Python int's value as the promotion rules see it.
PyIntValue int_value_of(PyObject* v) {  // borrowed int
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (!overflow) return PyIntValue::of(x);
  PyErr_Clear();
  unsigned long long u = PyLong_AsUnsignedLongLong(v);
  if (!PyErr_Occurred()) return PyIntValue::of_unsigned(u);
  PyErr_Clear();
  return PyIntValue::huge(overflow < 0);
}

// Guards a run-time Python int to the range of the integer dtype it is computed in: NumPy 2
// raises OverflowError for a value outside it, so a new value outside must not reuse the graph.
void guard_int_range(Tracer& tx, const ScalarVar& s, rt::DType dtype) {
  if (!s.source || !rt::dtype_is_integer(dtype) || dtype == rt::DType::Int64 || dtype == rt::DType::UInt64) return;
  const int bits = 8 * rt::dtype_itemsize(dtype);
  RangeGuard g;
  g.is_float = false;
  g.ilo = rt::dtype_is_signed(dtype) ? -(int64_t{1} << (bits - 1)) : 0;
  g.ihi = rt::dtype_is_signed(dtype) ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;
  tx.out().guards.add_range(s.source, g);
}

DTypeAnswer native_dtype(Tracer& tx, DTypeRule rule, std::string_view op, const std::vector<VarPtr>& args,
                         const std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  // Creation and joins make NumPy arrays: the registry keeps them out of Tensor graphs, and
  // without NumPy they are not registered at all.
  BREAK_IF(rule == DTypeRule::NumPyOnly, "numpy." + std::string(op) + " has no native dtype rule");
  std::optional<rt::DType> dtype_kw;
  for (auto& [k, v] : kwargs) {
    if (k == "dtype") {
      if (!(v->kind == VarKind::Const && const_value(v) == Py_None)) dtype_kw = dtype_of(tx, v);
    } else if (k != "axis" && k != "keepdims" && k != "ddof") {
      graph_break(std::string(op) + "() with " + k + "= on framejit.Tensor");
    }
  }
  PromoResult r;
  if (rule == DTypeRule::Reduction) {
    BREAK_IF(args.size() != 1 || args[0]->kind != VarKind::Tensor, std::string(op) + " of a non-array");
    r = reduction_result(op, tx.meta(args[0]).dtype, dtype_kw);
  } else if (rule == DTypeRule::Matmul) {
    BREAK_IF(args.size() != 2 || args[0]->kind != VarKind::Tensor || args[1]->kind != VarKind::Tensor,
             std::string(op) + " of a non-array");
    r = matmul_result(tx.meta(args[0]).dtype, tx.meta(args[1]).dtype);
  } else {
    BREAK_IF(dtype_kw, std::string(op) + "(dtype=) on framejit.Tensor");
    std::vector<PromoOperand> operands;
    for (const VarPtr& a : args) {
      if (a->kind == VarKind::Tensor) {
        operands.push_back(PromoOperand::tensor(tx.meta(a).dtype));
        continue;
      }
      PyObject* v = a->kind == VarKind::Scalar ? as<ScalarVar>(a)->hint.get()
                    : a->kind == VarKind::Const ? const_value(a)
                                                : nullptr;
      if (v && PyBool_Check(v)) operands.push_back(PromoOperand::py_bool());
      else if (v && PyLong_Check(v)) operands.push_back(PromoOperand::py_int(int_value_of(v)));
      else if (v && PyFloat_Check(v)) operands.push_back(PromoOperand::py_float());
      else if (v == Py_None && op == "clip") operands.push_back(PromoOperand::tensor(tx.meta(args[0]).dtype));
      else graph_break(std::string("an operand of type ") + (v ? Py_TYPE(v)->tp_name : var_kind_name(a->kind)) +
                       " in " + std::string(op) + " on framejit.Tensor");
    }
    r = elementwise_result(op, operands);
    if (r.ok())
      for (size_t i = 0; i < args.size() && i < r.operand_dtypes.size(); ++i)
        if (args[i]->kind == VarKind::Scalar && PyLong_Check(as<ScalarVar>(args[i])->hint.get()))
          guard_int_range(tx, *as<ScalarVar>(args[i]), r.operand_dtypes[i]);
  }
  switch (r.status) {
    case PromoStatus::Ok: return {r.dtype, false};  // a full reduction of a Tensor is a 0-d Tensor
    case PromoStatus::Overflow: graph_break(Raises{PyExc_OverflowError}, "a Python int out of range of its dtype (NumPy 2 raises OverflowError)");
    case PromoStatus::TypeError: graph_break(Raises{PyExc_TypeError}, std::string(op) + " raises TypeError: " + r.why);
    case PromoStatus::Unsupported: break;
  }
  graph_break(r.why.empty() ? std::string(op) + " is not supported" : r.why);
}

}  // namespace

bool uses_native_rules(Tracer& tx) { return tx.out().array_kind == ArrayKind::Tensor || !numpy_handles(); }

DTypeAnswer probe_dtype(Tracer& tx, DTypeRule rule, std::string_view op, PyObject* fn,
                        const std::vector<VarPtr>& args, const std::vector<std::pair<std::string, VarPtr>>& kwargs) {
  if (uses_native_rules(tx)) return native_dtype(tx, rule, op, args, kwargs);
  PyObject* probe = probe_fn();
  BREAK_IF(!probe, "framejit._probe is missing");
  OwnedRef specs = OwnedRef::steal(PyList_New(0));
  for (auto& a : args) PyList_Append(specs.get(), make_spec(tx, a).get());
  OwnedRef kw = OwnedRef::steal(PyDict_New());
  for (auto& [k, v] : kwargs) PyDict_SetItemString(kw.get(), k.c_str(), tx.python_value(v, "keyword argument").get());
  OwnedRef r = OwnedRef::steal(PyObject_CallFunctionObjArgs(probe, fn, specs.get(), kw.get(), nullptr));
  if (!r) graph_break("NumPy raised " + fetch_error_text());
  PyObject* name = PyTuple_GET_ITEM(r.get(), 0);
  BREAK_IF(name == Py_None, "the NumPy call does not return an array");
  auto dt = rt::dtype_from_name(PyUnicode_AsUTF8(name));
  BREAK_IF(!dt, std::string("result dtype ") + PyUnicode_AsUTF8(name) + " is not supported");
  PyObject* dependent = PyTuple_GET_ITEM(r.get(), 2);
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(dependent); ++i) {
    PyObject* d = PyTuple_GET_ITEM(dependent, i);
    const VarPtr& v = args[PyLong_AsLong(PyTuple_GET_ITEM(d, 0))];
    const GraphInput* scalar_input = numpy_scalar_input(tx, v);
    BREAK_IF((v->kind == VarKind::Tensor && !scalar_input) || PyTuple_GET_SIZE(d) < 5,
             "the result dtype depends on the value of a 0-d array (NumPy value-based casting)");
    SourcePtr source;
    if (scalar_input) {
      source = scalar_input->source;
    } else if (v->kind != VarKind::Scalar) {
      continue;  // a constant: nothing can change
    } else if (!(source = as<ScalarVar>(v)->source)) {
      tx.python_value(v, "NumPy's result dtype depends on this value");
      continue;
    }
    // Guard the interval of values with the same result type, not the value itself: a new
    // learning rate does not recompile, a value NumPy 1.x would promote does.
    RangeGuard g;
    g.is_float = PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(d, 1), "f") == 0;
    if (g.is_float) {
      g.flo = PyFloat_AsDouble(PyTuple_GET_ITEM(d, 2));
      g.fhi = PyFloat_AsDouble(PyTuple_GET_ITEM(d, 3));
      g.nonfinite_ok = PyTuple_GET_ITEM(d, 4) == Py_True;
    } else {
      int overflow = 0;
      long long lo = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(d, 2), &overflow);
      g.ilo = overflow ? INT64_MIN : lo + 1;
      long long hi = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(d, 3), &overflow);
      g.ihi = overflow ? INT64_MAX : hi - 1;
    }
    if (PyErr_Occurred()) graph_break(BreakKind::Internal, "internal: bad probe answer " + fetch_error_text());
    tx.out().guards.add_range(source, g);
  }
  return {*dt, PyTuple_GET_ITEM(r.get(), 1) == Py_True};
}

Shape shape_of(Tracer& tx, const VarPtr& v) {
  if (v->kind == VarKind::Tensor) return tx.meta(v).shape;
  return {};
}

SymInt numel(const Shape& s) {
  SymInt n(1);
  for (const SymInt& d : s) n = n * d;
  return n;
}

Shape broadcast_shapes(Tracer& tx, const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (auto& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, SymInt(1));
  for (auto& s : shapes) {
    size_t off = rank - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      SymInt& o = out[off + i];
      const SymInt& d = s[i];
      if (d.is_const() && d.const_value() == 1) continue;
      if (o.is_const() && o.const_value() == 1) {
        o = d;
        continue;
      }
      BREAK_IF(!tx.out().sizes_equal(o, d, "broadcast at " + tx.location()), Raises{PyExc_ValueError},
               "operands could not be broadcast together");
    }
  }
  return out;
}

int normalize_axis(Tracer& tx, int64_t axis, int rank) {
  (void)tx;
  BREAK_IF(axis < -rank || axis >= rank, Raises{PyExc_ValueError}, "axis " + std::to_string(axis) + " is out of bounds for array of dimension " +
                                              std::to_string(rank));
  return static_cast<int>(axis < 0 ? axis + rank : axis);
}

std::optional<std::vector<int>> normalize_axes(Tracer& tx, const VarPtr& axis, int rank) {
  if (!axis) return std::nullopt;
  OwnedRef a = tx.python_value(axis, "axis");
  if (a.get() == Py_None) return std::nullopt;
  std::vector<int> out;
  if (PyTuple_Check(a.get()) || PyList_Check(a.get())) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(a.get()); ++i) {
      PyObject* x = PySequence_Fast_GET_ITEM(a.get(), i);
      BREAK_IF(!PyLong_Check(x), "axis must be an integer");
      out.push_back(normalize_axis(tx, PyLong_AsLongLong(x), rank));
    }
  } else {
    BREAK_IF(!PyLong_Check(a.get()) && !PyIndex_Check(a.get()), "axis must be an integer");
    out.push_back(normalize_axis(tx, PyNumber_AsSsize_t(a.get(), nullptr), rank));
  }
  std::vector<int> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  BREAK_IF(std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end(), Raises{PyExc_ValueError}, "repeated axis");
  return out;
}

Shape parse_shape(Tracer& tx, const VarPtr& v) {
  Shape out;
  if (auto s = tx.as_sym(v)) return {*s};
  std::vector<VarPtr> items = tx.unpack(v, "shape");
  for (auto& x : items) {
    auto s = tx.as_sym(x);
    BREAK_IF(!s, "a shape must hold integers");
    out.push_back(*s);
  }
  return out;
}

Shape parse_shape_args(Tracer& tx, const std::vector<VarPtr>& args) {
  if (args.size() == 1) return parse_shape(tx, args[0]);
  Shape out;
  for (auto& a : args) {
    auto s = tx.as_sym(a);
    BREAK_IF(!s, "a shape must hold integers");
    out.push_back(*s);
  }
  return out;
}

std::map<std::string, VarPtr> bind_args(const std::string& fn_name, const std::vector<std::string>& params,
                                        const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  std::map<std::string, VarPtr> out;
  size_t pos = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    BREAK_IF(pos >= params.size() || params[pos] == "*",
             fn_name + "() takes at most " + std::to_string(pos) + " positional arguments");
    out[params[pos++]] = args[i];
  }
  for (auto& [k, v] : kwargs) {
    BREAK_IF(std::find(params.begin(), params.end(), k) == params.end(),
             fn_name + "() got an unexpected keyword argument '" + k + "'");
    BREAK_IF(out.count(k), fn_name + "() got multiple values for argument '" + k + "'");
    out[k] = v;
  }
  return out;
}

bool is_absent(const std::map<std::string, VarPtr>& bound, const std::string& name) {
  auto it = bound.find(name);
  return it == bound.end() || (it->second->kind == VarKind::Const && const_value(it->second) == Py_None);
}

std::vector<jit::Arg> to_args(Tracer& tx, const std::vector<VarPtr>& args) {
  std::vector<jit::Arg> out;
  for (auto& a : args) out.push_back(tx.to_arg(a));
  return out;
}

std::vector<std::pair<std::string, jit::Arg>> to_kwargs(Tracer& tx, const KwArgs& kwargs) {
  std::vector<std::pair<std::string, jit::Arg>> out;
  for (auto& [k, v] : kwargs) out.emplace_back(k, tx.to_arg(v));
  return out;
}

rt::DType dtype_of(Tracer& tx, const VarPtr& v) {
  OwnedRef o = tx.python_value(v, "dtype");
  // Names and Python's own types are read without NumPy (framejit.Tensor programs may have none).
  if (PyUnicode_Check(o.get())) {
    const char* name = PyUnicode_AsUTF8(o.get());
    if (!name) graph_break("not a dtype: " + fetch_error_text());
    if (auto dt = rt::dtype_from_name(name)) return *dt;
  }
  if (o.get() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return rt::DType::Float64;
  if (o.get() == reinterpret_cast<PyObject*>(&PyLong_Type)) return rt::DType::Int64;
  if (o.get() == reinterpret_cast<PyObject*>(&PyBool_Type)) return rt::DType::Bool;
  const NumPyHandles* np = numpy_handles();
  BREAK_IF(!np, std::string("a dtype given as ") + Py_TYPE(o.get())->tp_name + " (without NumPy)");
  OwnedRef d = OwnedRef::steal(PyObject_CallOneArg(np->dtype_fn, o.get()));
  if (!d) graph_break("not a dtype: " + fetch_error_text());
  auto dt = dtype_from_descr(d.get());
  BREAK_IF(!dt, "dtype is not supported");
  return *dt;
}

bool init_probe() {
  if (g_probe_fn) return true;
  PyObject* probe = PyImport_ImportModule("framejit._probe");  // new ref
  if (!probe) return false;
  g_probe_fn = PyObject_GetAttrString(probe, "result_type");
  Py_DECREF(probe);
  return g_probe_fn != nullptr;
}

}  // namespace framejit::frontend::ops
