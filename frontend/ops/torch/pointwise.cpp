// pointwise.cpp — torch's elementwise math, comparisons, casts and activations as canonical
// pointwise ops (Note [Torch ops]).
#include <cmath>
#include <unordered_map>

#include "frontend/cpython/pyref.h"
#include "frontend/interop/torch_array.h"
#include "frontend/ops/torch/torch_ops.h"

namespace framejit::frontend::ops::torch_ops {

namespace {

using jit::OpKind;
using rt::DType;

struct Spec {
  OpKind op;
  int arity;
};

// torch's names (functions, methods and the operator module's for operators) of the ops that are
// one canonical op.
const std::unordered_map<std::string, Spec>& direct() {
  static const auto* t = new std::unordered_map<std::string, Spec>{
      {"neg", {OpKind::Neg, 1}}, {"negative", {OpKind::Neg, 1}}, {"abs", {OpKind::Abs, 1}},
      {"absolute", {OpKind::Abs, 1}}, {"sqrt", {OpKind::Sqrt, 1}}, {"square", {OpKind::Square, 1}},
      {"reciprocal", {OpKind::Reciprocal, 1}}, {"exp", {OpKind::Exp, 1}}, {"exp2", {OpKind::Exp2, 1}},
      {"expm1", {OpKind::Expm1, 1}}, {"log", {OpKind::Log, 1}}, {"log2", {OpKind::Log2, 1}},
      {"log10", {OpKind::Log10, 1}}, {"log1p", {OpKind::Log1p, 1}}, {"sin", {OpKind::Sin, 1}},
      {"cos", {OpKind::Cos, 1}}, {"tan", {OpKind::Tan, 1}}, {"asin", {OpKind::Arcsin, 1}},
      {"arcsin", {OpKind::Arcsin, 1}}, {"acos", {OpKind::Arccos, 1}}, {"arccos", {OpKind::Arccos, 1}},
      {"atan", {OpKind::Arctan, 1}}, {"arctan", {OpKind::Arctan, 1}}, {"sinh", {OpKind::Sinh, 1}},
      {"cosh", {OpKind::Cosh, 1}}, {"tanh", {OpKind::Tanh, 1}}, {"asinh", {OpKind::Arcsinh, 1}},
      {"arcsinh", {OpKind::Arcsinh, 1}}, {"acosh", {OpKind::Arccosh, 1}}, {"arccosh", {OpKind::Arccosh, 1}},
      {"atanh", {OpKind::Arctanh, 1}}, {"arctanh", {OpKind::Arctanh, 1}}, {"erf", {OpKind::Erf, 1}}, {"sign", {OpKind::Sign, 1}},
      {"floor", {OpKind::Floor, 1}}, {"ceil", {OpKind::Ceil, 1}}, {"trunc", {OpKind::Trunc, 1}},
      {"round", {OpKind::Rint, 1}}, {"isnan", {OpKind::IsNan, 1}}, {"isinf", {OpKind::IsInf, 1}},
      {"isfinite", {OpKind::IsFinite, 1}}, {"signbit", {OpKind::Signbit, 1}}, {"logical_not", {OpKind::LogicalNot, 1}},
      {"bitwise_not", {OpKind::Invert, 1}}, {"invert", {OpKind::Invert, 1}}, {"pos", {OpKind::Positive, 1}},
      {"add", {OpKind::Add, 2}}, {"sub", {OpKind::Sub, 2}}, {"subtract", {OpKind::Sub, 2}}, {"mul", {OpKind::Mul, 2}},
      {"multiply", {OpKind::Mul, 2}}, {"div", {OpKind::Div, 2}}, {"divide", {OpKind::Div, 2}},
      {"true_divide", {OpKind::Div, 2}}, {"truediv", {OpKind::Div, 2}}, {"floordiv", {OpKind::FloorDiv, 2}},
      {"floor_divide", {OpKind::FloorDiv, 2}}, {"mod", {OpKind::Mod, 2}}, {"remainder", {OpKind::Mod, 2}},
      {"fmod", {OpKind::Fmod, 2}}, {"pow", {OpKind::Pow, 2}}, {"maximum", {OpKind::Maximum, 2}},
      {"minimum", {OpKind::Minimum, 2}}, {"fmax", {OpKind::Fmax, 2}}, {"fmin", {OpKind::Fmin, 2}},
      {"atan2", {OpKind::Arctan2, 2}}, {"arctan2", {OpKind::Arctan2, 2}}, {"hypot", {OpKind::Hypot, 2}},
      {"copysign", {OpKind::Copysign, 2}}, {"eq", {OpKind::Eq, 2}}, {"ne", {OpKind::Ne, 2}}, {"lt", {OpKind::Lt, 2}},
      {"le", {OpKind::Le, 2}}, {"gt", {OpKind::Gt, 2}}, {"ge", {OpKind::Ge, 2}}, {"less", {OpKind::Lt, 2}},
      {"greater", {OpKind::Gt, 2}}, {"less_equal", {OpKind::Le, 2}}, {"greater_equal", {OpKind::Ge, 2}},
      {"not_equal", {OpKind::Ne, 2}}, {"logical_and", {OpKind::LogicalAnd, 2}}, {"logical_or", {OpKind::LogicalOr, 2}},
      {"logical_xor", {OpKind::LogicalXor, 2}}, {"bitwise_and", {OpKind::BitAnd, 2}}, {"and_", {OpKind::BitAnd, 2}},
      {"bitwise_or", {OpKind::BitOr, 2}}, {"or_", {OpKind::BitOr, 2}}, {"bitwise_xor", {OpKind::BitXor, 2}},
      {"xor", {OpKind::BitXor, 2}}, {"where", {OpKind::Where, 3}}};
  return *t;
}

// Composed ops: their own torch callable types the result, then they are traced as the ops they
// are made of.
const char* const kComposed[] = {"relu", "sigmoid", "silu", "gelu", "softplus", "elu", "leaky_relu", "hardtanh",
                                 "clamp", "clip", "clamp_min", "clamp_max", "rsqrt", "relu6", "mish", "tanhshrink"};

// The callable that types `name`: torch.<name>, else torch.nn.functional.<name>; operators by
// their operator-module function.
PyObject* operator_fn(const std::string& name) {
  static PyObject* op_module = PyImport_ImportModule("operator");  // kept for the process
  if (!op_module) {
    PyErr_Clear();
    return nullptr;
  }
  PyObject* f = PyObject_GetAttrString(op_module, name.c_str());
  if (!f) PyErr_Clear();
  Py_XDECREF(f);  // the module keeps it
  return f;
}

PyObject* typing_callable(const std::string& name) {
  if (PyObject* f = torch_attr(name.c_str())) return f;
  return functional_attr(name.c_str());
}

bool is_int_like(DType d) { return rt::dtype_is_integer(d) || d == DType::Bool; }

// One canonical pointwise node computing `op` on `operands` as the torch call `target`, typed
// `dtype`, its loop converting every operand to `loop` (comparisons: the operands' common type).
VarPtr emit(Tracer& tx, OpKind op, const std::string& target, const std::vector<VarPtr>& operands, DType dtype,
            std::optional<DType> loop, const KwArgs& kwargs = {}) {
  std::vector<Shape> shapes;
  for (const VarPtr& a : operands) shapes.push_back(shape_of(tx, a));
  jit::OpAttrs attrs;
  const size_t n = operands.size();
  if (op == OpKind::Cast) {
    attrs.dtype = dtype;
    attrs.loop_dtypes = {tx.meta(operands[0]).dtype};
  } else if (jit::is_logical_op(op)) {
    attrs.loop_dtypes.assign(n, DType::Bool);
  } else if (op == OpKind::Where) {
    attrs.loop_dtypes.assign(n, dtype);
    attrs.loop_dtypes[0] = DType::Bool;
  } else if (op != OpKind::Clip && op != OpKind::IsNan && op != OpKind::IsInf && op != OpKind::IsFinite &&
             op != OpKind::Signbit) {
    attrs.loop_dtypes.assign(n, loop ? *loop : dtype);
  }
  // Note [Half types] (jit/lower/loop_ir.h): torch's CUDA kernels meet a Python number in float32
  // (their "opmath" type) where its CPU kernels round it to the half type first, as NumPy does.
  // The graph's one device (Note [One device per graph]) decides: an intermediate's meta has none.
  const bool cuda = tx.out().has_device && tx.out().device.type == rt::DeviceType::CUDA;
  if (cuda && !attrs.loop_dtypes.empty() && rt::dtype_is_half(attrs.loop_dtypes.back()) && op != OpKind::Cast) {
    for (size_t k = 0; k < n; ++k)
      if (operands[k]->kind != VarKind::Tensor) attrs.loop_dtypes[k] = DType::Float32;
  }
  // Integer division, remainder and powers raise in torch where NumPy's loops give a value
  // (division by zero, negative exponents): those run as torch's own call.
  bool library_only = false;
  if ((op == OpKind::FloorDiv || op == OpKind::Mod || op == OpKind::Fmod || op == OpKind::Pow) && is_int_like(dtype))
    library_only = true;
  if (!kwargs.empty()) library_only = true;
  if (library_only) {
    op = OpKind::Extern;
    attrs = jit::OpAttrs{};
  }
  return add_node(tx, op, std::move(attrs), target, operands, kwargs,
                  tensor_meta(dtype, broadcast_shapes(tx, shapes)));
}

VarPtr num(Tracer& tx, double v) {
  OwnedRef o = OwnedRef::steal(PyFloat_FromDouble(v));
  return tx.wrap_const(o.get());
}
VarPtr inum(Tracer& tx, long v) {
  OwnedRef o = OwnedRef::steal(PyLong_FromLong(v));
  return tx.wrap_const(o.get());
}

std::map<std::string, VarPtr> bind(const std::string& user, const std::vector<std::string>& params,
                                   const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  return bind_args(user, params, args, kwargs);
}

double number_arg(Tracer& tx, const VarPtr& v, const std::string& what) {
  BREAK_IF(!is_const(v) || !PyNumber_Check(const_value(v)) || PyBool_Check(const_value(v)),
           what + " that is not a constant number");
  (void)tx;
  const double d = PyFloat_AsDouble(const_value(v));
  if (PyErr_Occurred()) python_error_break(what + ": ");
  return d;
}

VarPtr composed(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "torch." + name;
  PyObject* fn = typing_callable(name);
  BREAK_IF(!fn, user + " is not in this torch");
  auto b = [&](const std::vector<std::string>& params) { return bind(user, params, args, kwargs); };
  if (name == "clamp" || name == "clip" || name == "clamp_min" || name == "clamp_max" || name == "hardtanh" ||
      name == "relu6") {
    auto a = name == "clamp_min"   ? b({"input", "min"})
             : name == "clamp_max" ? b({"input", "max"})
             : name == "hardtanh"  ? b({"input", "min_val", "max_val", "inplace"})
             : name == "relu6"     ? b({"input", "inplace"})
                                   : b({"input", "min", "max"});
    BREAK_IF(a.count("inplace") && !(is_const(a["inplace"]) && const_value(a["inplace"]) == Py_False),
             user + "(inplace=True)");
    VarPtr lo = a.count("min") ? a["min"] : a.count("min_val") ? a["min_val"] : nullptr;
    VarPtr hi = a.count("max") ? a["max"] : a.count("max_val") ? a["max_val"] : nullptr;
    if (name == "hardtanh") {
      if (!lo) lo = num(tx, -1.0);
      if (!hi) hi = num(tx, 1.0);
    }
    if (name == "relu6") lo = inum(tx, 0), hi = inum(tx, 6);
    const VarPtr& x = a["input"];
    std::vector<VarPtr> probe_args{x};
    KwArgs probe_kw;
    if (lo && !is_absent(a, lo == a["min"] ? "min" : "min_val")) probe_kw.emplace_back("min", lo);
    if (name == "relu6" || name == "hardtanh") probe_kw = {{"min", lo}, {"max", hi}};
    else if (hi) probe_kw.emplace_back("max", hi);
    PyObject* clamp = torch_attr("clamp");
    const Answer r = probe(tx, clamp, user, probe_args, probe_kw);
    // torch.clamp: NaN stays NaN; with min > max every element is max (what maximum then minimum
    // gives).
    VarPtr out = x;
    const bool has_lo = lo && !(is_const(lo) && const_value(lo) == Py_None);
    const bool has_hi = hi && !(is_const(hi) && const_value(hi) == Py_None);
    BREAK_IF(!has_lo && !has_hi, Raises{PyExc_RuntimeError}, "At least one of 'min' or 'max' must not be None");
    if (has_lo) out = emit(tx, OpKind::Maximum, "torch.clamp_min", {out, lo}, r.dtype, std::nullopt);
    if (has_hi) out = emit(tx, OpKind::Minimum, "torch.clamp_max", {out, hi}, r.dtype, std::nullopt);
    return out;
  }
  if (name == "relu") {
    auto a = b({"input", "inplace"});
    BREAK_IF(a.count("inplace") && !(is_const(a["inplace"]) && const_value(a["inplace"]) == Py_False),
             user + "(inplace=True)");
    const Answer r = probe(tx, torch_attr("relu"), user, {a["input"]});
    return emit(tx, OpKind::Maximum, "torch.clamp_min", {a["input"], inum(tx, 0)}, r.dtype, std::nullopt);
  }
  auto x_only = b({"input"});
  if (name == "rsqrt") {
    const Answer r = probe(tx, fn, user, {x_only["input"]});
    VarPtr s = emit(tx, OpKind::Sqrt, "torch.sqrt", {x_only["input"]}, r.dtype, std::nullopt);
    return emit(tx, OpKind::Reciprocal, "torch.reciprocal", {s}, r.dtype, std::nullopt);
  }
  graph_break(user + " is not captured yet");
}

VarPtr sigmoid_of(Tracer& tx, const VarPtr& x, DType dt) {
  VarPtr e = emit(tx, OpKind::Exp, "torch.exp", {emit(tx, OpKind::Neg, "torch.neg", {x}, dt, std::nullopt)}, dt, std::nullopt);
  return emit(tx, OpKind::Reciprocal, "torch.reciprocal", {emit(tx, OpKind::Add, "torch.add", {e, inum(tx, 1)}, dt, std::nullopt)},
              dt, std::nullopt);
}

VarPtr activation_of(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "torch.nn.functional." + name;
  PyObject* fn = typing_callable(name);
  BREAK_IF(!fn, user + " is not in this torch");
  if (name == "sigmoid" || name == "silu") {
    auto a = bind_args(user, name == "silu" ? std::vector<std::string>{"input", "inplace"} : std::vector<std::string>{"input"},
                       args, kwargs);
    BREAK_IF(a.count("inplace") && !(is_const(a["inplace"]) && const_value(a["inplace"]) == Py_False), user + "(inplace=True)");
    const Answer r = probe(tx, fn, user, {a["input"]});
    VarPtr s = sigmoid_of(tx, a["input"], r.dtype);
    return name == "sigmoid" ? s : emit(tx, OpKind::Mul, "torch.mul", {a["input"], s}, r.dtype, std::nullopt);
  }
  if (name == "gelu") {
    auto a = bind_args(user, {"input", "approximate"}, args, kwargs);
    const Answer r = probe(tx, fn, user, {a["input"]}, a.count("approximate") ? KwArgs{{"approximate", a["approximate"]}} : KwArgs{});
    PyObject* approx = a.count("approximate") && is_const(a["approximate"]) ? const_value(a["approximate"]) : nullptr;
    const bool tanh_form = approx && PyUnicode_Check(approx) && std::string(PyUnicode_AsUTF8(approx)) == "tanh";
    const VarPtr& x = a["input"];
    const DType dt = r.dtype;
    if (!tanh_form) {
      // 0.5 * x * (1 + erf(x / sqrt(2))), as torch's kernel computes it.
      VarPtr e = emit(tx, OpKind::Erf, "torch.erf", {emit(tx, OpKind::Mul, "torch.mul", {x, num(tx, M_SQRT1_2)}, dt, std::nullopt)}, dt,
                      std::nullopt);
      VarPtr half_x = emit(tx, OpKind::Mul, "torch.mul", {x, num(tx, 0.5)}, dt, std::nullopt);
      return emit(tx, OpKind::Mul, "torch.mul", {half_x, emit(tx, OpKind::Add, "torch.add", {e, inum(tx, 1)}, dt, std::nullopt)}, dt,
                  std::nullopt);
    }
    // 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))), as torch's kernel computes it.
    VarPtr x3 = emit(tx, OpKind::Mul, "torch.mul", {emit(tx, OpKind::Mul, "torch.mul", {x, x}, dt, std::nullopt), x}, dt, std::nullopt);
    VarPtr inner = emit(tx, OpKind::Add, "torch.add", {x, emit(tx, OpKind::Mul, "torch.mul", {x3, num(tx, 0.044715)}, dt, std::nullopt)}, dt,
                        std::nullopt);
    VarPtr t = emit(tx, OpKind::Tanh, "torch.tanh",
                    {emit(tx, OpKind::Mul, "torch.mul", {inner, num(tx, std::sqrt(2.0 / M_PI))}, dt, std::nullopt)}, dt, std::nullopt);
    VarPtr half_x = emit(tx, OpKind::Mul, "torch.mul", {x, num(tx, 0.5)}, dt, std::nullopt);
    return emit(tx, OpKind::Mul, "torch.mul", {half_x, emit(tx, OpKind::Add, "torch.add", {t, inum(tx, 1)}, dt, std::nullopt)}, dt,
                std::nullopt);
  }
  if (name == "softplus") {
    auto a = bind_args(user, {"input", "beta", "threshold"}, args, kwargs);
    const double beta = a.count("beta") ? number_arg(tx, a["beta"], "softplus beta") : 1.0;
    const double threshold = a.count("threshold") ? number_arg(tx, a["threshold"], "softplus threshold") : 20.0;
    const Answer r = probe(tx, fn, user, {a["input"]});
    const VarPtr& x = a["input"];
    const DType dt = r.dtype;
    // x * beta > threshold ? x : log1p(exp(x * beta)) / beta
    VarPtr bx = beta == 1.0 ? x : emit(tx, OpKind::Mul, "torch.mul", {x, num(tx, beta)}, dt, std::nullopt);
    VarPtr soft = emit(tx, OpKind::Log1p, "torch.log1p", {emit(tx, OpKind::Exp, "torch.exp", {bx}, dt, std::nullopt)}, dt, std::nullopt);
    if (beta != 1.0) soft = emit(tx, OpKind::Div, "torch.div", {soft, num(tx, beta)}, dt, std::nullopt);
    VarPtr over = emit(tx, OpKind::Gt, "torch.gt", {bx, num(tx, threshold)}, DType::Bool, dt);
    return emit(tx, OpKind::Where, "torch.where", {over, x, soft}, dt, std::nullopt);
  }
  if (name == "elu" || name == "leaky_relu") {
    auto a = name == "elu" ? bind_args(user, {"input", "alpha", "inplace"}, args, kwargs)
                           : bind_args(user, {"input", "negative_slope", "inplace"}, args, kwargs);
    BREAK_IF(a.count("inplace") && !(is_const(a["inplace"]) && const_value(a["inplace"]) == Py_False), user + "(inplace=True)");
    const double k = name == "elu" ? (a.count("alpha") ? number_arg(tx, a["alpha"], "elu alpha") : 1.0)
                                   : (a.count("negative_slope") ? number_arg(tx, a["negative_slope"], "negative_slope") : 0.01);
    const Answer r = probe(tx, fn, user, {a["input"]});
    BREAK_IF(!rt::dtype_is_float(r.dtype), user + " of a " + std::string(rt::dtype_name(r.dtype)) + " tensor");
    const VarPtr& x = a["input"];
    const DType dt = r.dtype;
    VarPtr neg = name == "elu" ? emit(tx, OpKind::Mul, "torch.mul", {emit(tx, OpKind::Expm1, "torch.expm1", {x}, dt, std::nullopt), num(tx, k)},
                                      dt, std::nullopt)
                               : emit(tx, OpKind::Mul, "torch.mul", {x, num(tx, k)}, dt, std::nullopt);
    VarPtr pos = emit(tx, OpKind::Gt, "torch.gt", {x, inum(tx, 0)}, DType::Bool, dt);
    return emit(tx, OpKind::Where, "torch.where", {pos, x, neg}, dt, std::nullopt);
  }
  return composed(tx, name, args, kwargs);
}

// The Tensor method that casts to `d` without arguments (x.float() ...), or null.
const char* cast_method(DType d) {
  switch (d) {
    case DType::Float32: return "float";
    case DType::Float64: return "double";
    case DType::Float16: return "half";
    case DType::BFloat16: return "bfloat16";
    case DType::Int64: return "long";
    case DType::Int32: return "int";
    case DType::Int16: return "short";
    case DType::Int8: return "char";
    case DType::UInt8: return "byte";
    case DType::Bool: return "bool";
    default: return nullptr;
  }
}

const char* const kCasts[] = {"float", "double", "half", "bfloat16", "int", "long",
                              "short", "bool", "byte", "char", "to", "type_as"};

// x.float(), x.to(dtype), x.to(other), x.type_as(other): a converting copy, or x itself when the
// dtype is already right (torch returns self then).
VarPtr cast(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "Tensor." + name;
  BREAK_IF(args.empty() || args[0]->kind != VarKind::Tensor, user + " of a non-tensor");
  const VarPtr& x = args[0];
  DType to = tx.meta(x).dtype;
  if (name == "to" || name == "type_as") {
    BREAK_IF(args.size() != 2, user + " with " + std::to_string(args.size() - 1) + " arguments");
    for (const auto& [k, v] : kwargs)
      BREAK_IF(!(k == "copy" && is_const(v) && const_value(v) == Py_False) && !(k == "non_blocking"),
               user + "(" + k + "=)");
    const VarPtr& target = args[1];
    if (target->kind == VarKind::Tensor) to = tx.meta(target).dtype;
    else to = dtype_arg(tx, target, user + " with an argument");  // devices and strings: not yet
  } else {
    BREAK_IF(args.size() != 1 || !kwargs.empty(), user + " with arguments");
    for (int i = 0; i < rt::kNumDTypes; ++i)
      if (const char* m = cast_method(static_cast<DType>(i)); m && name == m) to = static_cast<DType>(i);
  }
  if (to == tx.meta(x).dtype) return x;
  const char* m = cast_method(to);
  BREAK_IF(!m, user + " to " + std::string(rt::dtype_name(to)));
  jit::OpAttrs attrs;
  attrs.dtype = to;
  attrs.loop_dtypes = {tx.meta(x).dtype};
  return add_node(tx, OpKind::Cast, std::move(attrs), std::string("method.") + m, {x}, {},
                  tensor_meta(to, shape_of(tx, x)));
}

}  // namespace

// Note [Composites in float32]
// torch's one-kernel composites (softmax, layer_norm, gelu, silu...) and its reductions (sum,
// mean, var...) compute a float16 or bfloat16 input in float32 and round their result once;
// traced as the ops they are made of, each op of a half type would round its own result (Note
// [Half types] in jit/lower/loop_ir.h) and lose accuracy eager does not lose. So they are traced
// on x.float(), and the result converted back: one rounding, as eager (whose CPU kernels in torch
// 1.13 round some intermediates, and land a unit further from the exact result than this now and
// then: tests/python/test_half_types.py compares with float64).
VarPtr in_opmath(Tracer& tx, const std::vector<VarPtr>& args,
                 const std::function<VarPtr(const std::vector<VarPtr>&)>& body) {
  if (args.empty() || args[0]->kind != VarKind::Tensor || !rt::dtype_is_half(tx.meta(args[0]).dtype)) return body(args);
  const DType half = tx.meta(args[0]).dtype;
  std::vector<VarPtr> wide = args;
  wide[0] = cast(tx, "float", {args[0]}, {});
  VarPtr y = body(wide);
  if (!y || y->kind != VarKind::Tensor || tx.meta(y).dtype != DType::Float32) return y;
  return cast(tx, cast_method(half), {y}, {});
}

static VarPtr activation(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  return in_opmath(tx, args, [&](const std::vector<VarPtr>& a) { return activation_of(tx, name, a, kwargs); });
}

bool is_pointwise_name(const std::string& name) {
  if (direct().count(name)) return true;
  for (const char* n : kComposed)
    if (name == n) return true;
  for (const char* n : kCasts)
    if (name == n) return true;
  return false;
}

VarPtr pointwise_call(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs,
                      bool operator_form);

VarPtr pointwise(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  return pointwise_call(tx, name, args, kwargs, false);
}

VarPtr operator_pointwise(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args) {
  return pointwise_call(tx, name, args, {}, true);
}

VarPtr pointwise_call(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs,
                      bool operator_form) {
  for (const char* n : kCasts)
    if (name == n) return cast(tx, name, args, kwargs);
  const auto& d = direct();
  auto it = d.find(name);
  if (it == d.end()) return activation(tx, name, args, kwargs);
  const Spec s = it->second;
  const std::string user = operator_form ? "operator." + name : "torch." + name;
  BREAK_IF(static_cast<int>(args.size()) != s.arity, user + " with " + std::to_string(args.size()) + " positional operands");
  for (const auto& [k, v] : kwargs) {
    // out= writes into an argument; alpha= and rounding_mode= change the op: torch's own call.
    BREAK_IF(k == "out" && !(is_const(v) && const_value(v) == Py_None), user + "(out=) writes into an argument");
  }
  PyObject* fn = operator_form ? operator_fn(name) : typing_callable(name);
  const Answer r = probe(tx, fn, user, args, kwargs);
  std::optional<DType> loop;
  if (jit::is_comparison_op(s.op)) {
    // Compared in the operands' common type (torch.result_type of the two).
    loop = probe(tx, operator_fn("add"), user, args).dtype;
  }
  const std::string target = operator_form                    ? "operator." + name
                             : fn == torch_attr(name.c_str()) ? "torch." + name
                                                              : "torch.nn.functional." + name;
  return emit(tx, s.op, target, args, r.dtype, loop, kwargs);
}

}  // namespace framejit::frontend::ops::torch_ops
