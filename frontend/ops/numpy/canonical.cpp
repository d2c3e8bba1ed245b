// canonical.cpp — decoding NumPy calls, ndarray methods and Python operators into canonical ops.
#include "frontend/ops/numpy/canonical.h"

#include <algorithm>
#include <string_view>
#include <unordered_map>

#include "frontend/interop/numpy_abi.h"
#include "frontend/ops/numpy/promotion.h"

namespace framejit::frontend::ops {

namespace {

using jit::Arg;
using jit::IndexSpecItem;
using jit::OpAttrs;
using jit::OpKind;
using rt::DType;
using KwList = std::vector<std::pair<std::string, Arg>>;

// NumPy functions and ndarray methods by their NumPy name (aliases included).
const std::unordered_map<std::string_view, OpKind>& numpy_ops() {
  static const std::unordered_map<std::string_view, OpKind> table = {
      {"add", OpKind::Add}, {"subtract", OpKind::Sub}, {"multiply", OpKind::Mul},
      {"divide", OpKind::Div}, {"true_divide", OpKind::Div}, {"floor_divide", OpKind::FloorDiv},
      {"mod", OpKind::Mod}, {"remainder", OpKind::Mod}, {"fmod", OpKind::Fmod}, {"power", OpKind::Pow},
      {"float_power", OpKind::FloatPower}, {"maximum", OpKind::Maximum}, {"minimum", OpKind::Minimum},
      {"fmax", OpKind::Fmax}, {"fmin", OpKind::Fmin}, {"arctan2", OpKind::Arctan2}, {"hypot", OpKind::Hypot},
      {"copysign", OpKind::Copysign}, {"equal", OpKind::Eq}, {"not_equal", OpKind::Ne}, {"less", OpKind::Lt},
      {"less_equal", OpKind::Le}, {"greater", OpKind::Gt}, {"greater_equal", OpKind::Ge},
      {"logical_and", OpKind::LogicalAnd}, {"logical_or", OpKind::LogicalOr},
      {"logical_xor", OpKind::LogicalXor}, {"logical_not", OpKind::LogicalNot},
      {"bitwise_and", OpKind::BitAnd}, {"bitwise_or", OpKind::BitOr}, {"bitwise_xor", OpKind::BitXor},
      {"invert", OpKind::Invert}, {"bitwise_not", OpKind::Invert}, {"left_shift", OpKind::LeftShift},
      {"right_shift", OpKind::RightShift}, {"negative", OpKind::Neg}, {"positive", OpKind::Positive},
      {"exp", OpKind::Exp}, {"exp2", OpKind::Exp2}, {"expm1", OpKind::Expm1}, {"log", OpKind::Log},
      {"log2", OpKind::Log2}, {"log10", OpKind::Log10}, {"log1p", OpKind::Log1p}, {"sqrt", OpKind::Sqrt},
      {"cbrt", OpKind::Cbrt}, {"square", OpKind::Square}, {"reciprocal", OpKind::Reciprocal},
      {"sin", OpKind::Sin}, {"cos", OpKind::Cos}, {"tan", OpKind::Tan}, {"arcsin", OpKind::Arcsin},
      {"arccos", OpKind::Arccos}, {"arctan", OpKind::Arctan}, {"sinh", OpKind::Sinh}, {"cosh", OpKind::Cosh},
      {"tanh", OpKind::Tanh}, {"arcsinh", OpKind::Arcsinh}, {"arccosh", OpKind::Arccosh},
      {"arctanh", OpKind::Arctanh}, {"abs", OpKind::Abs}, {"absolute", OpKind::Abs}, {"fabs", OpKind::Abs},
      {"sign", OpKind::Sign}, {"floor", OpKind::Floor}, {"ceil", OpKind::Ceil}, {"trunc", OpKind::Trunc},
      {"rint", OpKind::Rint}, {"isnan", OpKind::IsNan}, {"isinf", OpKind::IsInf},
      {"isfinite", OpKind::IsFinite}, {"signbit", OpKind::Signbit}, {"where", OpKind::Where},
      {"clip", OpKind::Clip}, {"deg2rad", OpKind::Deg2Rad}, {"radians", OpKind::Deg2Rad},
      {"rad2deg", OpKind::Rad2Deg}, {"degrees", OpKind::Rad2Deg}, {"astype", OpKind::Cast},
      {"sum", OpKind::Sum}, {"prod", OpKind::Prod}, {"mean", OpKind::Mean}, {"max", OpKind::Max},
      {"amax", OpKind::Max}, {"min", OpKind::Min}, {"amin", OpKind::Min}, {"var", OpKind::Var},
      {"std", OpKind::Std}, {"argmax", OpKind::ArgMax}, {"argmin", OpKind::ArgMin}, {"any", OpKind::Any},
      {"all", OpKind::All}, {"matmul", OpKind::Matmul}, {"dot", OpKind::Dot},
      {"transpose", OpKind::Transpose}, {"swapaxes", OpKind::SwapAxes}, {"expand_dims", OpKind::ExpandDims},
      {"squeeze", OpKind::Squeeze}, {"reshape", OpKind::Reshape}, {"ravel", OpKind::Ravel},
      {"broadcast_to", OpKind::BroadcastTo}, {"copy", OpKind::Copy}, {"flatten", OpKind::Flatten},
      {"split", OpKind::Split}, {"concatenate", OpKind::Concatenate}, {"stack", OpKind::Stack},
      {"zeros", OpKind::Zeros}, {"ones", OpKind::Ones}, {"full", OpKind::Full}, {"empty", OpKind::Empty},
      {"arange", OpKind::Arange}, {"zeros_like", OpKind::ZerosLike}, {"ones_like", OpKind::OnesLike},
      {"empty_like", OpKind::EmptyLike}, {"full_like", OpKind::FullLike},
      // Calls that write into an argument.
      {"copyto", OpKind::Mutate}, {"put", OpKind::Mutate}, {"place", OpKind::Mutate},
      {"putmask", OpKind::Mutate}, {"fill_diagonal", OpKind::Mutate}, {"put_along_axis", OpKind::Mutate},
      {"seterr", OpKind::Mutate}, {"fill", OpKind::Mutate}, {"sort", OpKind::Mutate},
      {"itemset", OpKind::Mutate}, {"resize", OpKind::Mutate}, {"setfield", OpKind::Mutate},
      {"partition", OpKind::Mutate}, {"setflags", OpKind::Mutate}, {"__setitem__", OpKind::Mutate}};
  return table;
}

// Python's operator module on arrays (ndarray's operators are its ufuncs).
const std::unordered_map<std::string_view, OpKind>& array_operators() {
  static const std::unordered_map<std::string_view, OpKind> table = {
      {"add", OpKind::Add}, {"sub", OpKind::Sub}, {"mul", OpKind::Mul}, {"truediv", OpKind::Div},
      {"floordiv", OpKind::FloorDiv}, {"mod", OpKind::Mod}, {"pow", OpKind::Pow}, {"neg", OpKind::Neg},
      {"pos", OpKind::Positive}, {"invert", OpKind::Invert}, {"and_", OpKind::BitAnd},
      {"or_", OpKind::BitOr}, {"xor", OpKind::BitXor}, {"lshift", OpKind::LeftShift},
      {"rshift", OpKind::RightShift}, {"eq", OpKind::Eq}, {"ne", OpKind::Ne}, {"lt", OpKind::Lt},
      {"le", OpKind::Le}, {"gt", OpKind::Gt}, {"ge", OpKind::Ge}, {"matmul", OpKind::Matmul},
      {"abs", OpKind::Abs}};
  return table;
}

// Python's operator module on Python numbers.
const std::unordered_map<std::string_view, OpKind>& scalar_operators() {
  static const std::unordered_map<std::string_view, OpKind> table = {
      {"add", OpKind::ScalarAdd}, {"sub", OpKind::ScalarSub}, {"mul", OpKind::ScalarMul},
      {"truediv", OpKind::ScalarTrueDiv}, {"floordiv", OpKind::ScalarFloorDiv}, {"mod", OpKind::ScalarMod},
      {"pow", OpKind::ScalarPow}, {"and_", OpKind::ScalarAnd}, {"or_", OpKind::ScalarOr},
      {"xor", OpKind::ScalarXor}, {"lshift", OpKind::ScalarLShift}, {"rshift", OpKind::ScalarRShift},
      {"matmul", OpKind::ScalarMatmul}, {"neg", OpKind::ScalarNeg}, {"pos", OpKind::ScalarPos},
      {"invert", OpKind::ScalarInvert}, {"abs", OpKind::ScalarAbs}, {"float", OpKind::ScalarFloat}};
  return table;
}

OpKind lookup(const std::unordered_map<std::string_view, OpKind>& table, std::string_view name) {
  auto it = table.find(name);
  return it == table.end() ? OpKind::Extern : it->second;
}

// The operator module's in-place forms (iadd ...), setitem and delitem write into their first operand.
bool is_mutating_operator(std::string_view name) {
  if (name == "setitem" || name == "delitem" || name == "iconcat") return true;
  if (name.size() < 2 || name[0] != 'i') return false;
  std::string_view base = name.substr(1);
  return array_operators().count(base) && base != "invert" && base != "neg" && base != "pos" && base != "abs";
}

const Arg* kwarg(const KwList& kwargs, std::string_view name) {
  for (const auto& [k, v] : kwargs)
    if (k == name) return &v;
  return nullptr;
}

// Only the keywords in `allowed`; "order" must be "C" (another order may copy or reorder).
bool kwargs_ok(const KwList& kwargs, std::initializer_list<std::string_view> allowed) {
  for (const auto& [k, v] : kwargs) {
    if (std::find(allowed.begin(), allowed.end(), k) == allowed.end()) return false;
    if (k == "order" && (v.kind != Arg::Kind::Str || v.s != "C")) return false;
  }
  return true;
}

std::vector<Arg> items_of(const Arg& a) {
  return a.kind == Arg::Kind::Tuple || a.kind == Arg::Kind::List ? a.items : std::vector<Arg>{a};
}

// Constant axes (an int, or a tuple/list of ints), each normalized to [0, rank).
std::optional<std::vector<int>> const_axes(const Arg& a, int rank) {
  std::vector<int> out;
  for (const Arg& x : items_of(a)) {
    if (x.kind != Arg::Kind::Int || x.i < -rank || x.i >= rank) return std::nullopt;
    out.push_back(static_cast<int>(x.i < 0 ? x.i + rank : x.i));
  }
  return out;
}

IndexSpecItem full_slice() { return {IndexSpecItem::Kind::Slice, {Arg::none(), Arg::none(), Arg::none()}}; }

// A size or index: a constant int or a run-time int (a node); None only where allowed.
bool is_int_like(const Arg& a) { return a.kind == Arg::Kind::Int || a.kind == Arg::Kind::Node; }

const jit::TensorMeta* meta_of(const jit::Graph& graph, const Arg& a) {
  if (!a.is_node() || a.i < 0 || a.i >= static_cast<int64_t>(graph.nodes().size())) return nullptr;
  return &graph.node(static_cast<int>(a.i)).meta;
}

// ----- Pointwise: NumPy's loop signature --------------------------------------------------------


// The loop dtype of a comparison among arrays and operands NumPy 1.x reads by value (NumPy scalars,
// 0-d arrays), where their values cannot change it: float64 when every array is float64 (and no
// operand is wider), int64 when every array is int64 and the rest are integers or bools. None
// when every operand is read by value, or otherwise.
std::optional<DType> by_value_comparison_dtype(const std::vector<std::pair<DType, bool>>& tensors,
                                               const std::vector<OperandKind>& numbers) {
  std::optional<DType> array_dtype;
  bool floats = false;  // a float read by value, or a Python float
  for (const auto& [t, by_value] : tensors) {
    if (!by_value) {
      if (array_dtype && *array_dtype != t) return std::nullopt;
      array_dtype = t;
      continue;
    }
    if (t != DType::Bool && t != DType::UInt8 && t != DType::Int32 && t != DType::Int64 && t != DType::Float32 &&
        t != DType::Float64)
      return std::nullopt;
    floats |= t == DType::Float32 || t == DType::Float64;
  }
  for (OperandKind k : numbers) floats |= k == OperandKind::PyFloat;
  if (array_dtype == DType::Float64) return DType::Float64;
  if (array_dtype == DType::Int64 && !floats) return DType::Int64;
  return std::nullopt;
}

void decode_pointwise(const jit::Graph& graph, OpKind op, const std::vector<Arg>& args, const KwList& kwargs,
                      const jit::TensorMeta& result, CanonicalOp& c) {
  std::vector<Arg> operands = args;
  if (op == OpKind::Cast) {
    // astype(dtype[, order, casting, subok, copy]): the frontend broke the graph on any casting
    // rule but 'unsafe' and on copy=False, so this is a plain converting copy unless it asks for
    // another memory order or subclass handling.
    if (!kwargs_ok(kwargs, {"dtype", "casting", "copy"})) c.attrs.described = false;
    if (operands.size() > 2) c.attrs.described = false;
    c.attrs.dtype = result.dtype;
    if (operands.empty()) return;
    operands.resize(1);
  }
  // The loop dtypes (what each operand is converted to before the op runs), for the operands
  // framejit passes to kernels: arrays, NumPy scalars and Python numbers. Anything else leaves
  // them undecided. NumPy 1.x treats a NumPy scalar by its value; the result dtype already says
  // what that decided (the probe guarded the value's range), which fixes an arithmetic loop but
  // not a comparison's.
  std::vector<DType> arrays;
  std::vector<OperandKind> numbers;
  bool scalar_object = false;
  bool zero_d = false;  // a 0-d array among the operands
  int max_rank = 0;
  std::vector<std::pair<DType, bool>> tensors;  // dtype, and whether NumPy 1.x reads it by value
  for (const Arg& a : operands) {
    switch (a.kind) {
      case Arg::Kind::Node: {
        const jit::TensorMeta* m = meta_of(graph, a);
        if (!m) return;
        if (m->kind == jit::ValueKind::Scalar) {
          if (m->dtype == DType::Int64) numbers.push_back(OperandKind::PyInt);
          else if (m->dtype == DType::Float64) numbers.push_back(OperandKind::PyFloat);
          else if (m->dtype == DType::Bool) numbers.push_back(OperandKind::PyBool);  // (k < n) in a loop
          else return;
        } else {
          scalar_object |= m->scalar_object;
          zero_d |= m->rank() == 0;
          max_rank = std::max(max_rank, m->rank());
          arrays.push_back(m->dtype);
          tensors.emplace_back(m->dtype, m->scalar_object || m->rank() == 0);
        }
        break;
      }
      case Arg::Kind::Int: numbers.push_back(OperandKind::PyInt); break;
      case Arg::Kind::Float: numbers.push_back(OperandKind::PyFloat); break;
      case Arg::Kind::Bool: numbers.push_back(OperandKind::PyBool); break;
      default: return;
    }
  }
  // NB: beside higher-rank arrays NumPy 1.x casts a 0-d array by its value too (a float32 array
  // <= a 0-d float64 array compares in float32), so such comparisons are left to NumPy, as a
  // scalar's are. NumPy 2 (NEP 50) and framejit.Tensor without NumPy promote by type.
  const NumPyHandles* np = numpy_handles();
  const bool by_value = scalar_object || (zero_d && max_rank > 0 && np && np->major < 2);
  if (arrays.empty()) return;
  const size_t n = operands.size();
  std::vector<DType>& loop = c.attrs.loop_dtypes;
  if (by_value && jit::is_comparison_op(op)) {
    // Except where the value cannot matter: beside float64 arrays every scalar of ours compares in
    // float64, and beside int64 arrays every integer or bool scalar in int64, whatever its value
    // (NumPy ignores a scalar whose kind the arrays' reaches; none of ours is wider). A NumPy
    // scalar compared with such an array (rmax * i / npt <= radius) then fuses.
    if (auto t = by_value_comparison_dtype(tensors, numbers)) loop.assign(n, *t);
    return;
  }
  if (op == OpKind::Cast || op == OpKind::Positive) {
    if (operands[0].is_node()) loop = {meta_of(graph, operands[0])->dtype};
  } else if (jit::is_comparison_op(op)) {
    if (auto t = comparison_loop_dtype(arrays, numbers)) loop.assign(n, *t);
  } else if (jit::is_logical_op(op)) {
    loop.assign(n, DType::Bool);
  } else if (op == OpKind::Where) {
    loop.assign(n, result.dtype);
    loop[0] = DType::Bool;
  } else if (op != OpKind::Clip && op != OpKind::IsNan && op != OpKind::IsInf && op != OpKind::IsFinite &&
             op != OpKind::Signbit) {
    // Arithmetic and math functions: NumPy's loop for these computes in the result type.
    loop.assign(n, result.dtype);
  }
}

// ----- Reductions --------------------------------------------------------------------------------

// NumPy's positional parameters after the array.
std::vector<std::string_view> reduction_params(OpKind op) {
  switch (op) {
    case OpKind::Sum:
    case OpKind::Prod: return {"axis", "dtype", "out", "keepdims", "initial", "where"};
    case OpKind::Mean: return {"axis", "dtype", "out", "keepdims"};
    case OpKind::Max:
    case OpKind::Min: return {"axis", "out", "keepdims", "initial", "where"};
    case OpKind::Var:
    case OpKind::Std: return {"axis", "dtype", "out", "ddof", "keepdims"};
    case OpKind::Any:
    case OpKind::All: return {"axis", "out", "keepdims"};
    default: return {"axis", "out"};  // argmax, argmin
  }
}

void decode_reduction(const jit::Graph& graph, OpKind op, const std::vector<Arg>& args, const KwList& kwargs,
                      CanonicalOp& c) {
  OpAttrs& at = c.attrs;
  const jit::TensorMeta* in = args.empty() ? nullptr : meta_of(graph, args[0]);
  if (!in) {
    at.described = false;
    return;
  }
  const int rank = in->rank();
  const auto params = reduction_params(op);
  std::unordered_map<std::string_view, const Arg*> bound;
  if (args.size() - 1 > params.size()) {
    at.described = false;
    return;
  }
  for (size_t p = 1; p < args.size(); ++p) bound[params[p - 1]] = &args[p];
  for (const auto& [k, v] : kwargs) {
    static constexpr std::string_view kKnown[] = {"axis", "dtype", "out", "keepdims", "initial", "where", "ddof"};
    if (bound.count(k) || std::find(std::begin(kKnown), std::end(kKnown), k) == std::end(kKnown)) {
      at.described = false;
      return;
    }
    bound[std::string_view(k)] = &v;
  }
  auto get = [&](std::string_view name) -> const Arg* {
    auto b = bound.find(name);
    return b == bound.end() ? nullptr : b->second;
  };
  auto none = [](const Arg* a) { return !a || a->kind == Arg::Kind::None; };
  // out= writes elsewhere, initial= and where= change what is combined: not described.
  if (!none(get("out")) || get("initial")) at.described = false;
  if (const Arg* w = get("where"); w && !(w->kind == Arg::Kind::Bool && w->i)) at.described = false;
  if (const Arg* d = get("dtype"); !none(d)) {
    if (d->kind == Arg::Kind::DType) at.dtype = static_cast<DType>(d->i);
    else at.described = false;
  }
  if (const Arg* k = get("keepdims")) {
    if (k->kind == Arg::Kind::Bool || k->kind == Arg::Kind::Int) at.keepdims = k->i != 0;
    else at.described = false;
  }
  if (const Arg* d = get("ddof")) {
    if (d->kind == Arg::Kind::Int) at.ddof = d->i;
    else at.described = false;
  }
  const Arg* axis = get("axis");
  if (none(axis)) return;
  at.all_axes = false;
  auto axes = const_axes(*axis, rank);
  if (!axes) {
    at.described = false;
    return;
  }
  at.axes = *axes;
  std::vector<int> sorted = at.axes;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) at.described = false;  // NumPy raises
}

// ----- Views -------------------------------------------------------------------------------------

// A basic index (ints, slices, None, Ellipsis) as index items; false for anything else.
bool decode_basic_index(const Arg& key, OpAttrs& at) {
  for (const Arg& a : key.kind == Arg::Kind::Tuple ? key.items : std::vector<Arg>{key}) {
    switch (a.kind) {
      case Arg::Kind::None: at.index.push_back({IndexSpecItem::Kind::NewAxis, {}}); break;
      case Arg::Kind::Ellipsis: at.index.push_back({IndexSpecItem::Kind::Ellipsis, {}}); break;
      case Arg::Kind::Slice:
        for (const Arg& part : a.items)
          if (!is_int_like(part) && part.kind != Arg::Kind::None) return false;
        at.index.push_back({IndexSpecItem::Kind::Slice, a.items});
        break;
      default:
        // bools index as masks, floats raise: only ints (constant or run-time) select.
        if (!is_int_like(a)) return false;
        at.index.push_back({IndexSpecItem::Kind::Int, {a}});
    }
  }
  return true;
}

void decode_view(const jit::Graph& graph, OpKind op, const std::vector<Arg>& args, const KwList& kwargs,
                 const jit::TensorMeta& result, CanonicalOp& c) {
  OpAttrs& at = c.attrs;
  const jit::TensorMeta* in = args.empty() ? nullptr : meta_of(graph, args[0]);
  if (!in) {
    at.described = false;
    return;
  }
  const int rank = in->rank();
  std::vector<Arg> rest(args.begin() + 1, args.end());
  auto fail = [&] { at.described = false; };
  switch (op) {
    case OpKind::Transpose: {
      if (!kwargs_ok(kwargs, {"axes"})) return fail();
      if (const Arg* axes = kwarg(kwargs, "axes")) rest = {*axes};
      if (rest.empty() || (rest.size() == 1 && rest[0].kind == Arg::Kind::None)) {
        for (int d = rank - 1; d >= 0; --d) at.perm.push_back(d);
        return;
      }
      auto axes = const_axes(rest.size() == 1 ? rest[0] : Arg::tuple(rest), rank);
      if (!axes || static_cast<int>(axes->size()) != rank) return fail();
      at.perm = *axes;
      return;
    }
    case OpKind::SwapAxes: {
      if (!kwargs_ok(kwargs, {"axis1", "axis2"})) return fail();
      if (const Arg* a = kwarg(kwargs, "axis1")) rest.push_back(*a);
      if (const Arg* a = kwarg(kwargs, "axis2")) rest.push_back(*a);
      if (rest.size() != 2) return fail();
      auto axes = const_axes(Arg::tuple(rest), rank);
      if (!axes) return fail();
      for (int d = 0; d < rank; ++d) at.perm.push_back(d);
      std::swap(at.perm[(*axes)[0]], at.perm[(*axes)[1]]);
      return;
    }
    case OpKind::ExpandDims: {
      if (!kwargs_ok(kwargs, {"axis"})) return fail();
      if (const Arg* a = kwarg(kwargs, "axis")) rest.push_back(*a);
      if (rest.size() != 1) return fail();
      const int out_rank = result.rank();
      auto axes = const_axes(rest[0], out_rank);
      if (!axes) return fail();
      for (int d = 0; d < out_rank; ++d)
        at.index.push_back(std::count(axes->begin(), axes->end(), d) ? IndexSpecItem{IndexSpecItem::Kind::NewAxis, {}}
                                                                     : full_slice());
      return;
    }
    case OpKind::Squeeze: {
      if (!kwargs_ok(kwargs, {"axis"})) return fail();
      if (const Arg* a = kwarg(kwargs, "axis")) rest.push_back(*a);
      if (rest.size() > 1) return fail();
      std::vector<bool> drop(rank, false);
      auto is_one = [&](int d) { return in->shape[d].is_const() && in->shape[d].const_value() == 1; };
      if (rest.empty() || rest[0].kind == Arg::Kind::None) {
        for (int d = 0; d < rank; ++d) drop[d] = is_one(d);
      } else {
        auto axes = const_axes(rest[0], rank);
        if (!axes) return fail();
        for (int d : *axes) {
          if (!is_one(d)) return fail();
          drop[d] = true;
        }
      }
      for (int d = 0; d < rank; ++d)
        at.index.push_back(drop[d] ? IndexSpecItem{IndexSpecItem::Kind::Int, {Arg::integer(0)}} : full_slice());
      return;
    }
    case OpKind::GetItem:
      if (args.size() != 2 || !kwargs.empty() || !decode_basic_index(args[1], at)) return fail();
      return;
    case OpKind::Reshape:
    case OpKind::BroadcastTo: {
      const char* shape_kw = op == OpKind::Reshape ? "newshape" : "shape";
      if (op == OpKind::Reshape ? !kwargs_ok(kwargs, {"order", "newshape"}) : !kwargs_ok(kwargs, {"shape"}))
        return fail();
      if (const Arg* a = kwarg(kwargs, shape_kw)) rest.push_back(*a);
      if (rest.empty() || (op == OpKind::BroadcastTo && rest.size() != 1)) return fail();
      for (const Arg& a : rest.size() == 1 ? items_of(rest[0]) : rest) {
        if (!is_int_like(a)) return fail();
        at.shape.push_back(a);
      }
      return;
    }
    case OpKind::Ravel:
      if (!kwargs_ok(kwargs, {"order"}) || !rest.empty()) return fail();
      at.shape = {Arg::integer(-1)};
      return;
    default: return;
  }
}

}  // namespace

CanonicalOp canonicalize(const jit::Graph& graph, const std::string& target, const std::vector<Arg>& args,
                         const KwList& kwargs, const jit::TensorMeta& result) {
  CanonicalOp c;
  const size_t dot = target.find('.');
  const std::string_view module = dot == std::string::npos ? std::string_view() : std::string_view(target).substr(0, dot);
  const std::string_view name = dot == std::string::npos ? std::string_view(target) : std::string_view(target).substr(dot + 1);
  const bool python_number = result.kind == jit::ValueKind::Scalar;
  if (dot == std::string::npos) {
    if (name == "sym_size") c.op = OpKind::SymSize;
    else if (name == "getitem") c.op = OpKind::GetItem;
    else if (name == "setitem") c.op = OpKind::Mutate;
  } else if (module == "operator" || module == "builtins") {
    if (module == "operator" && is_mutating_operator(name)) c.op = OpKind::Mutate;
    else c.op = lookup(python_number ? scalar_operators() : array_operators(), name);
    c.attrs.operator_form = c.op == OpKind::Pow;
  } else if (module == "framejit") {
    // Note [Writes into arrays]: the copy back into a written input is the one write the program
    // does to memory the caller sees.
    if (name == "_C._copy_into") {
      c.op = OpKind::CopyInto;
    } else if (name == "_C._index_put") {
      // base with base[key] = value: the key is a basic index (the trace checked it as one).
      c.op = OpKind::IndexPut;
      if (args.size() != 3 || !kwargs.empty() || !decode_basic_index(args[1], c.attrs)) c.attrs.described = false;
    }
  } else if (module == "numpy" || module == "method") {
    if (module == "method" && name.starts_with("__i") && name.ends_with("__")) {
      c.op = OpKind::Mutate;  // in-place dunders (__iadd__ ...)
    } else if (module == "method" && (name == "__pow__" || name == "__rpow__")) {
      c.op = OpKind::Pow;
      c.attrs.operator_form = true;
      c.attrs.exponent = name == "__rpow__" ? 0 : 1;
    } else if (module == "numpy" && (name.starts_with("random.") || name.ends_with(".at"))) {
      c.op = OpKind::Mutate;  // a draw advances the generator; ufunc.at writes into its operand
    } else if (module == "method" && !args.empty() && args[0].is_node() &&
               graph.node(static_cast<int>(args[0].i)).meta.kind == jit::ValueKind::Object) {
      c.op = OpKind::Mutate;  // a method of a library object (a generator's draw) changes it
    } else if (module == "numpy" && (name == "sort" || name == "partition")) {
      c.op = OpKind::Extern;  // numpy.sort returns a sorted copy; ndarray.sort is the in-place one
    } else {
      c.op = lookup(numpy_ops(), name);
    }
  }
  if (jit::is_pointwise(c.op)) decode_pointwise(graph, c.op, args, kwargs, result, c);
  else if (jit::is_reduction(c.op)) decode_reduction(graph, c.op, args, kwargs, c);
  else if (jit::is_view(c.op)) decode_view(graph, c.op, args, kwargs, result, c);
  return c;
}

int add_canonical_call(jit::Graph& graph, const std::string& target, std::vector<Arg> args, KwList kwargs,
                       jit::TensorMeta result) {
  CanonicalOp c = canonicalize(graph, target, args, kwargs, result);
  return graph.add_call(c.op, std::move(c.attrs), target, std::move(args), std::move(kwargs), std::move(result));
}

}  // namespace framejit::frontend::ops
