// promotion.cpp — NumPy 2's dtype rules for ufuncs, reductions and matmul (Note [Native
// promotion]).
#include "frontend/ops/numpy/promotion.h"

#include <algorithm>
#include <array>
#include <limits>

namespace framejit::frontend::ops {

using rt::DType;

namespace {

// ---------------------------------------------------------------------------------------------
// dtype facts

bool is_bool(DType t) { return t == DType::Bool; }
bool is_int(DType t) { return rt::dtype_is_integer(t); }
bool is_unsigned(DType t) { return t >= DType::UInt8 && t <= DType::UInt64; }
bool is_float(DType t) { return rt::dtype_is_float(t); }
bool is_int_or_bool(DType t) { return is_bool(t) || is_int(t); }
int bits(DType t) { return rt::dtype_itemsize(t) * 8; }

/// What framejit computes for NumPy: everything but the half types and complex (float16's loops
/// are not modeled here yet; NumPy has no bfloat16).
bool computable(DType t) { return !rt::dtype_is_complex(t) && !rt::dtype_is_half(t); }

DType signed_int_of_bits(int b) {
  switch (b) {
  case 8:
    return DType::Int8;
  case 16:
    return DType::Int16;
  case 32:
    return DType::Int32;
  default:
    return DType::Int64;
  }
}

/// The smallest float that holds every value of an integer of `b` bits exactly enough for NumPy's
/// "safe" casting: 8-bit ints fit float16, 16-bit ints float32, wider ones float64.
DType float_for_int_bits(int b) {
  if (b <= 8)
    return DType::Float16;
  if (b <= 16)
    return DType::Float32;
  return DType::Float64;
}

/// NumPy's casting "kinds" ordered for same_kind casting: bool < unsigned < signed < float.
int kind_rank(DType t) {
  if (is_bool(t))
    return 0;
  if (is_unsigned(t))
    return 1;
  if (is_int(t))
    return 2;
  return 3;
}

std::string name(DType t) { return std::string(rt::dtype_name(t)); }

// ---------------------------------------------------------------------------------------------
// loop tables

// Every loop table of the ops here is a union of three groups, each searched in NumPy's order:
// bool; the integers (int8, uint8, int16, uint16, int32, uint32, int64, uint64); the floats
// (float16, float32, float64). All loops are homogeneous (every input of one dtype).
enum LoopGroups : uint8_t { kBoolLoop = 1, kIntLoops = 2, kFloatLoops = 4 };
constexpr uint8_t kAllLoops = kBoolLoop | kIntLoops | kFloatLoops;
constexpr uint8_t kNumberLoops = kIntLoops | kFloatLoops;

constexpr std::array<DType, 12> kSearchOrder = {
    DType::Bool,   DType::Int8,  DType::UInt8,  DType::Int16,   DType::UInt16,  DType::Int32,
    DType::UInt32, DType::Int64, DType::UInt64, DType::Float16, DType::Float32, DType::Float64};

bool has_loop(uint8_t groups, DType t) {
  if (is_bool(t))
    return groups & kBoolLoop;
  if (is_int(t))
    return groups & kIntLoops;
  if (is_float(t))
    return groups & kFloatLoops;
  return false;
}

/// How NumPy picks the loop of an op (its "type resolver").
enum class Way : uint8_t {
  Common,     // the common dtype of all inputs; TypeError when the table has no loop for it
  FirstLoop,  // the first loop of the table that every input casts to safely
  TrueDivide, // float64 when every input is int or bool, else FirstLoop
  Compare,    // bool result; inputs at their common dtype (int64 vs uint64 compare exactly)
  Logical,    // bool result; inputs read as truth values
  Where,      // where(cond, x, y): the common dtype of x and y
};

enum class Out : uint8_t { Same, Bool };

struct OpRule {
  std::string_view name;
  int nin;
  Way way;
  uint8_t loops;
  Out out;
};

// Ops in NumPy 2.1+ (floor/ceil/trunc of ints and bools keep their dtype since 2.1; NumPy 2.0
// computed them in a float loop).
constexpr OpRule kRules[] = {
    // binary arithmetic
    {"add", 2, Way::Common, kAllLoops, Out::Same},
    {"subtract", 2, Way::Common, kNumberLoops, Out::Same},
    {"multiply", 2, Way::Common, kAllLoops, Out::Same},
    {"true_divide", 2, Way::TrueDivide, kFloatLoops, Out::Same},
    {"floor_divide", 2, Way::FirstLoop, kNumberLoops, Out::Same},
    {"remainder", 2, Way::FirstLoop, kNumberLoops, Out::Same},
    {"fmod", 2, Way::FirstLoop, kNumberLoops, Out::Same},
    {"power", 2, Way::FirstLoop, kNumberLoops, Out::Same},
    {"maximum", 2, Way::Common, kAllLoops, Out::Same},
    {"minimum", 2, Way::Common, kAllLoops, Out::Same},
    {"fmax", 2, Way::Common, kAllLoops, Out::Same},
    {"fmin", 2, Way::Common, kAllLoops, Out::Same},
    {"arctan2", 2, Way::FirstLoop, kFloatLoops, Out::Same},
    {"hypot", 2, Way::FirstLoop, kFloatLoops, Out::Same},
    {"copysign", 2, Way::FirstLoop, kFloatLoops, Out::Same},
    // comparisons and logic
    {"equal", 2, Way::Compare, kAllLoops, Out::Bool},
    {"not_equal", 2, Way::Compare, kAllLoops, Out::Bool},
    {"less", 2, Way::Compare, kAllLoops, Out::Bool},
    {"less_equal", 2, Way::Compare, kAllLoops, Out::Bool},
    {"greater", 2, Way::Compare, kAllLoops, Out::Bool},
    {"greater_equal", 2, Way::Compare, kAllLoops, Out::Bool},
    {"logical_and", 2, Way::Logical, kAllLoops, Out::Bool},
    {"logical_or", 2, Way::Logical, kAllLoops, Out::Bool},
    {"logical_xor", 2, Way::Logical, kAllLoops, Out::Bool},
    {"logical_not", 1, Way::Logical, kAllLoops, Out::Bool},
    // bits
    {"bitwise_and", 2, Way::FirstLoop, kBoolLoop | kIntLoops, Out::Same},
    {"bitwise_or", 2, Way::FirstLoop, kBoolLoop | kIntLoops, Out::Same},
    {"bitwise_xor", 2, Way::FirstLoop, kBoolLoop | kIntLoops, Out::Same},
    {"invert", 1, Way::FirstLoop, kBoolLoop | kIntLoops, Out::Same},
    {"left_shift", 2, Way::FirstLoop, kIntLoops, Out::Same},
    {"right_shift", 2, Way::FirstLoop, kIntLoops, Out::Same},
    // unary arithmetic
    {"negative", 1, Way::Common, kNumberLoops, Out::Same},
    {"positive", 1, Way::Common, kNumberLoops, Out::Same},
    {"absolute", 1, Way::Common, kAllLoops, Out::Same},
    {"sign", 1, Way::Common, kNumberLoops, Out::Same},
    {"fabs", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"square", 1, Way::FirstLoop, kNumberLoops, Out::Same},
    {"reciprocal", 1, Way::FirstLoop, kNumberLoops, Out::Same},
    {"floor", 1, Way::FirstLoop, kAllLoops, Out::Same},
    {"ceil", 1, Way::FirstLoop, kAllLoops, Out::Same},
    {"trunc", 1, Way::FirstLoop, kAllLoops, Out::Same},
    {"rint", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    // float functions: ints go to the smallest float that holds them (int8 -> float16)
    {"sqrt", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"cbrt", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"exp", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"exp2", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"expm1", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"log", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"log2", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"log10", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"log1p", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"sin", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"cos", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"tan", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"arcsin", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"arccos", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"arctan", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"sinh", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"cosh", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"tanh", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"arcsinh", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"arccosh", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"arctanh", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"deg2rad", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    {"rad2deg", 1, Way::FirstLoop, kFloatLoops, Out::Same},
    // predicates
    {"isnan", 1, Way::FirstLoop, kAllLoops, Out::Bool},
    {"isinf", 1, Way::FirstLoop, kAllLoops, Out::Bool},
    {"isfinite", 1, Way::FirstLoop, kAllLoops, Out::Bool},
    {"signbit", 1, Way::FirstLoop, kFloatLoops, Out::Bool},
    // not ufuncs, same machinery
    {"clip", 3, Way::Common, kAllLoops, Out::Same},
    {"where", 3, Way::Where, kAllLoops, Out::Same},
};

// NumPy's other names for the same ufuncs (np.divide is true_divide's ufunc, np.mod remainder's,
// NumPy 2's array-API names...).
constexpr std::pair<std::string_view, std::string_view> kAliases[] = {
    {"divide", "true_divide"},
    {"mod", "remainder"},
    {"abs", "absolute"},
    {"pow", "power"},
    {"bitwise_not", "invert"},
    {"bitwise_invert", "invert"},
    {"bitwise_left_shift", "left_shift"},
    {"bitwise_right_shift", "right_shift"},
    {"acos", "arccos"},
    {"asin", "arcsin"},
    {"atan", "arctan"},
    {"atan2", "arctan2"},
    {"acosh", "arccosh"},
    {"asinh", "arcsinh"},
    {"atanh", "arctanh"},
    {"radians", "deg2rad"},
    {"degrees", "rad2deg"},
};

const OpRule *find_rule(std::string_view op) {
  for (const auto &[alias, target] : kAliases)
    if (alias == op)
      op = target;
  for (const OpRule &r : kRules)
    if (r.name == op)
      return &r;
  return nullptr;
}

PromoResult fail(PromoStatus s, std::string why) {
  PromoResult r;
  r.status = s;
  r.why = std::move(why);
  return r;
}

PromoResult ok(DType out, std::vector<DType> operand_dtypes) {
  PromoResult r;
  r.dtype = out;
  r.operand_dtypes = std::move(operand_dtypes);
  return r;
}

/// NumPy's type numbers order its dtypes by how much they know: the most "knowledgeable" dtype of
/// a list leads its promotion (float16 comes last of all).
int type_number(DType t) {
  switch (t) {
  case DType::Bool:
    return 0;
  case DType::Int8:
    return 1;
  case DType::UInt8:
    return 2;
  case DType::Int16:
    return 3;
  case DType::UInt16:
    return 4;
  case DType::Int32:
    return 5;
  case DType::UInt32:
    return 6;
  case DType::Int64:
    return 7;
  case DType::UInt64:
    return 8;
  case DType::Float32:
    return 11;
  case DType::Float64:
    return 12;
  case DType::Complex64:
    return 14;
  case DType::Complex128:
    return 15;
  case DType::Float16:
    return 23;
  case DType::BFloat16:
    return 0;  // not a NumPy type
  }
  return 0;
}

// Note [Promoting several dtypes]
// np.result_type of more than two dtypes is not a left fold of promote_types: NumPy promotes the
// leading dtype (highest type number) with each of the others and combines those answers. So
// (int16, uint16, float32) is float32, while promote(promote(int16, uint16), float32) = float64:
// the int32 that int16 and uint16 would need is never formed.
DType common_of(const std::vector<DType> &ts) {
  if (ts.size() == 1)
    return ts[0];
  if (ts.size() == 2)
    return *promote_types(ts[0], ts[1]);
  size_t lead = 0;
  for (size_t i = 1; i < ts.size(); ++i)
    if (type_number(ts[i]) > type_number(ts[lead]))
      lead = i;
  std::optional<DType> acc;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (i == lead)
      continue;
    DType p = *promote_types(ts[lead], ts[i]);
    acc = acc ? *promote_types(*acc, p) : p;
  }
  return *acc;
}

/// The first loop of `groups` that every dtype in `ts` casts to safely.
std::optional<DType> first_loop(uint8_t groups, const std::vector<DType> &ts) {
  for (DType loop : kSearchOrder) {
    if (!has_loop(groups, loop))
      continue;
    if (std::all_of(ts.begin(), ts.end(), [&](DType t) { return can_cast_safely(t, loop); }))
      return loop;
  }
  return std::nullopt;
}

std::string list_names(const std::vector<DType> &ts) {
  std::string s;
  for (size_t i = 0; i < ts.size(); ++i)
    s += (i ? ", " : "") + name(ts[i]);
  return s;
}

/// NEP 50: what dtype each operand takes. Tensors and Python bools keep theirs; a Python int or
/// float takes the category of the strong operands' common dtype, or the default dtype (int64,
/// float64) when there is none.
std::vector<DType> resolve_weak(const std::vector<PromoOperand> &ops) {
  std::vector<DType> strong_dtypes;
  for (const PromoOperand &o : ops)
    if (o.kind == OperandKind::Tensor || o.kind == OperandKind::PyBool)
      strong_dtypes.push_back(o.kind == OperandKind::PyBool ? DType::Bool : o.dtype);
  std::optional<DType> strong;
  if (!strong_dtypes.empty())
    strong = common_of(strong_dtypes);
  std::vector<DType> out;
  for (const PromoOperand &o : ops) {
    switch (o.kind) {
    case OperandKind::Tensor:
      out.push_back(o.dtype);
      break;
    case OperandKind::PyBool:
      out.push_back(DType::Bool);
      break;
    case OperandKind::PyInt:
      out.push_back(strong && !is_bool(*strong) ? *strong : DType::Int64);
      break;
    case OperandKind::PyFloat:
      out.push_back(strong && is_float(*strong) ? *strong : DType::Float64);
      break;
    }
  }
  return out;
}

std::string int_value_text(const PyIntValue &v) {
  if (v.beyond_64_bits)
    return v.negative ? "a Python int below -2**64" : "a Python int above 2**64";
  return std::string("Python int ") + (v.negative ? "-" : "") + std::to_string(v.magnitude);
}

PromoResult resolve(const OpRule &rule, const std::vector<PromoOperand> &ops) {
  for (const PromoOperand &o : ops)
    if (o.kind == OperandKind::Tensor && !computable(o.dtype))
      return fail(PromoStatus::Unsupported,
                  "framejit has no " + name(o.dtype) + " kernels (" + std::string(rule.name) + ")");

  const std::string op(rule.name);
  std::vector<DType> in;
  if (rule.way == Way::Where) {
    // The condition is only read as truth values: it takes no part in the promotion.
    in = resolve_weak({ops[1], ops[2]});
    in.insert(in.begin(), ops[0].kind == OperandKind::Tensor ? ops[0].dtype : DType::Bool);
  } else {
    in = resolve_weak(ops);
  }
  std::vector<DType> loop(in.size());
  DType out = DType::Bool;

  switch (rule.way) {
  case Way::Common: {
    DType c = common_of(in);
    if (!has_loop(rule.loops, c)) {
      if (op == "subtract")
        return fail(PromoStatus::TypeError,
                    "numpy boolean subtract, the `-` operator, is not supported");
      if (op == "negative")
        return fail(PromoStatus::TypeError,
                    "The numpy boolean negative, the `-` operator, is not supported");
      return fail(PromoStatus::TypeError, "ufunc '" + op + "' has no loop for " + name(c));
    }
    std::fill(loop.begin(), loop.end(), c);
    out = c;
    break;
  }
  case Way::TrueDivide:
    if (std::all_of(in.begin(), in.end(), is_int_or_bool)) {
      std::fill(loop.begin(), loop.end(), DType::Float64);
      out = DType::Float64;
      break;
    }
    [[fallthrough]];
  case Way::FirstLoop: {
    std::optional<DType> l = first_loop(rule.loops, in);
    if (!l)
      return fail(PromoStatus::TypeError,
                  "ufunc '" + op + "' not supported for the input types (" + list_names(in) + ")");
    std::fill(loop.begin(), loop.end(), *l);
    // signbit of an int needs no float: the sign survives the cast (NumPy uses float16 loops).
    if (op == "signbit" && *l == DType::Float16)
      loop = in;
    out = rule.out == Out::Bool ? DType::Bool : *l;
    break;
  }
  case Way::Compare: {
    DType c = common_of(in);
    if (is_int(in[0]) && is_int(in[1]) && !is_int(c)) {
      // int64 against uint64 (or any signed/unsigned pair past 64 bits): NumPy compares the
      // values exactly in a mixed loop instead of going through float64.
      for (size_t i = 0; i < in.size(); ++i)
        loop[i] = is_unsigned(in[i]) ? DType::UInt64 : DType::Int64;
    } else {
      std::fill(loop.begin(), loop.end(), c);
    }
    out = DType::Bool;
    break;
  }
  case Way::Logical:
    std::fill(loop.begin(), loop.end(), DType::Bool);
    out = DType::Bool;
    break;
  case Way::Where: {
    DType c = common_of({in[1], in[2]});
    loop = {DType::Bool, c, c};
    out = c;
    break;
  }
  }

  if (!computable(out))
    return fail(PromoStatus::Unsupported, "NumPy computes " + op + " of (" + list_names(in) +
                                              ") in " + name(out) + "; framejit has no " +
                                              name(out) + " kernels");
  for (DType t : loop)
    if (!computable(t))
      return fail(PromoStatus::Unsupported, "NumPy computes " + op + " of (" + list_names(in) +
                                                ") in " + name(t) + "; framejit has no " + name(t) +
                                                " kernels");

  // NumPy >= 2.1 drops a Python int bound of clip that lies outside an integer array's range
  // (2.0 raised OverflowError); the bound may fit the common dtype all the same.
  if (op == "clip" && ops[0].kind == OperandKind::Tensor && is_int(ops[0].dtype)) {
    for (size_t i = 1; i < ops.size(); ++i) {
      const PromoOperand &o = ops[i];
      if (o.kind == OperandKind::PyInt && o.int_value && !o.int_value->fits(ops[0].dtype))
        return fail(PromoStatus::Unsupported, "clip bound " + int_value_text(*o.int_value) +
                                                  " lies outside " + name(ops[0].dtype) +
                                                  "'s range");
    }
  }
  // Python ints whose value does not fit the integer dtype they become.
  for (size_t i = 0; i < ops.size(); ++i) {
    const PromoOperand &o = ops[i];
    if (o.kind != OperandKind::PyInt || !o.int_value)
      continue;
    if (rule.way == Way::Logical) {
      // Read as a truth value, but through a C long first: NumPy 2 raises past int64's range
      // whatever the other operand is (seen on NumPy 2.5).
      if (!o.int_value->fits(DType::Int64))
        return fail(PromoStatus::Overflow,
                    int_value_text(*o.int_value) + " is too large to convert to C long");
      continue;
    }
    if (!is_int(loop[i]) || o.int_value->fits(loop[i]))
      continue;
    const std::string v = int_value_text(*o.int_value);
    if (rule.way == Way::Compare && ops[1 - i].kind == OperandKind::Tensor &&
        is_int(ops[1 - i].dtype))
      // NumPy 2 compares an integer array with any Python int exactly: the result is constant.
      return fail(PromoStatus::Unsupported,
                  op + " of " + name(loop[i]) + " with " + v + ", out of its range, is constant");
    if (rule.way == Way::Where)
      // NumPy casts where's operands unsafely: the value would wrap.
      return fail(PromoStatus::Unsupported,
                  "where with " + v + ", out of " + name(loop[i]) + "'s range");
    return fail(PromoStatus::Overflow, v + " out of bounds for " + name(loop[i]));
  }
  return ok(out, std::move(loop));
}

} // namespace

// ---------------------------------------------------------------------------------------------
// public

PyIntValue PyIntValue::of(int64_t v) {
  PyIntValue r;
  r.negative = v < 0;
  r.magnitude = v < 0 ? uint64_t(0) - uint64_t(v) : uint64_t(v);
  return r;
}

PyIntValue PyIntValue::of_unsigned(uint64_t v) {
  PyIntValue r;
  r.magnitude = v;
  return r;
}

PyIntValue PyIntValue::huge(bool negative) {
  PyIntValue r;
  r.negative = negative;
  r.beyond_64_bits = true;
  return r;
}

bool PyIntValue::fits(DType t) const {
  if (beyond_64_bits)
    return false;
  if (is_bool(t))
    return !negative && magnitude <= 1;
  if (is_unsigned(t)) {
    if (negative)
      return magnitude == 0;
    return bits(t) == 64 || magnitude <= (uint64_t(1) << bits(t)) - 1;
  }
  const uint64_t max_pos = (uint64_t(1) << (bits(t) - 1)) - 1;
  return negative ? magnitude <= max_pos + 1 : magnitude <= max_pos;
}

std::optional<DType> promote_types(DType a, DType b) {
  if (rt::dtype_is_complex(a) || rt::dtype_is_complex(b))
    return std::nullopt;
  if (a == b)
    return a;
  if (is_bool(a))
    return b;
  if (is_bool(b))
    return a;
  if (is_float(a) && is_float(b))
    return bits(a) >= bits(b) ? a : b;
  if (is_float(a) || is_float(b)) {
    DType f = is_float(a) ? a : b;
    DType i = is_float(a) ? b : a;
    DType need = float_for_int_bits(bits(i));
    return bits(need) >= bits(f) ? need : f;
  }
  // Two integers.
  if (is_unsigned(a) == is_unsigned(b))
    return bits(a) >= bits(b) ? a : b;
  DType s = is_unsigned(a) ? b : a;
  DType u = is_unsigned(a) ? a : b;
  if (bits(s) > bits(u))
    return s;
  if (bits(u) < 64)
    return signed_int_of_bits(bits(u) * 2);
  return DType::Float64; // no integer holds both int64 and uint64
}

bool can_cast_safely(DType from, DType to) {
  if (from == to)
    return true;
  if (rt::dtype_is_complex(from) || rt::dtype_is_complex(to))
    return false;
  if (is_bool(from))
    return true;
  if (is_bool(to))
    return false;
  if (is_float(from))
    return is_float(to) && bits(to) >= bits(from);
  if (is_float(to))
    return bits(to) >= bits(float_for_int_bits(bits(from)));
  if (is_unsigned(from))
    return is_unsigned(to) ? bits(to) >= bits(from) : bits(to) > bits(from);
  return !is_unsigned(to) && bits(to) >= bits(from);
}

bool can_cast_same_kind(DType from, DType to) {
  if (rt::dtype_is_complex(from) || rt::dtype_is_complex(to))
    return can_cast_safely(from, to);
  return kind_rank(from) <= kind_rank(to);
}

PromoResult elementwise_result(std::string_view op, const std::vector<PromoOperand> &operands) {
  const OpRule *rule = find_rule(op);
  if (!rule)
    return fail(PromoStatus::Unsupported, "no dtype rule for '" + std::string(op) + "'");
  if (static_cast<int>(operands.size()) != rule->nin)
    return fail(PromoStatus::Unsupported, std::string(rule->name) + " takes " +
                                              std::to_string(rule->nin) + " operand(s), got " +
                                              std::to_string(operands.size()));
  return resolve(*rule, operands);
}

PromoResult inplace_result(std::string_view op, const std::vector<PromoOperand> &operands) {
  if (operands.empty() || operands[0].kind != OperandKind::Tensor)
    return fail(PromoStatus::Unsupported, "in-place " + std::string(op) + " needs a tensor target");
  PromoResult r = elementwise_result(op, operands);
  if (!r.ok())
    return r;
  const DType target = operands[0].dtype;
  if (!can_cast_same_kind(r.dtype, target))
    return fail(PromoStatus::TypeError, "Cannot cast ufunc '" + std::string(op) + "' output from " +
                                            name(r.dtype) + " to " + name(target) +
                                            " with casting rule 'same_kind'");
  r.dtype = target;
  return r;
}

PromoResult reduction_result(std::string_view op, DType input, std::optional<DType> dtype_kw) {
  const std::string o(op);
  if (!computable(input))
    return fail(PromoStatus::Unsupported,
                "framejit has no " + name(input) + " kernels (" + o + ")");
  if (dtype_kw && !computable(*dtype_kw))
    return fail(PromoStatus::Unsupported,
                "framejit has no " + name(*dtype_kw) + " kernels (" + o + " dtype=)");

  if (op == "sum" || op == "prod") {
    if (dtype_kw)
      return ok(*dtype_kw, {*dtype_kw});
    // NumPy accumulates small integers in the default integer (int64 on 64-bit Linux), unsigned
    // ones in uint64.
    DType acc = input;
    if (is_bool(input) || (is_int(input) && !is_unsigned(input)))
      acc = DType::Int64;
    else if (is_unsigned(input))
      acc = DType::UInt64;
    return ok(acc, {acc});
  }
  if (op == "mean" || op == "var" || op == "std") {
    if (dtype_kw) {
      // An integer dtype= truncates after dividing, and std then fails or not depending on the
      // axis: not modeled.
      if (!is_float(*dtype_kw))
        return fail(PromoStatus::Unsupported,
                    o + " with dtype=" + name(*dtype_kw) + " is not modeled");
      return ok(*dtype_kw, {*dtype_kw});
    }
    DType r = is_float(input) ? input : DType::Float64;
    return ok(r, {r});
  }
  const bool same = op == "max" || op == "min" || op == "amax" || op == "amin";
  const bool arg = op == "argmax" || op == "argmin";
  const bool truth = op == "any" || op == "all";
  if (!same && !arg && !truth)
    return fail(PromoStatus::Unsupported, "no dtype rule for '" + o + "'");
  if (dtype_kw)
    return fail(PromoStatus::TypeError, o + "() got an unexpected keyword argument 'dtype'");
  if (same)
    return ok(input, {input});
  if (arg)
    return ok(DType::Int64, {input});
  return ok(DType::Bool, {DType::Bool});
}

PromoResult matmul_result(DType a, DType b) {
  for (DType t : {a, b})
    if (!computable(t))
      return fail(PromoStatus::Unsupported, "framejit has no " + name(t) + " kernels (matmul)");
  // matmul's loops are bool, every integer and every float, searched smallest first: the first
  // one both inputs cast to safely is their promoted dtype.
  DType c = *promote_types(a, b);
  return ok(c, {c, c});
}

std::optional<std::string_view> ufunc_for_operator(std::string_view op_name) {
  static constexpr std::pair<std::string_view, std::string_view> kOps[] = {
      {"add", "add"},
      {"sub", "subtract"},
      {"mul", "multiply"},
      {"truediv", "true_divide"},
      {"floordiv", "floor_divide"},
      {"mod", "remainder"},
      {"pow", "power"},
      {"matmul", "matmul"},
      {"lt", "less"},
      {"le", "less_equal"},
      {"eq", "equal"},
      {"ne", "not_equal"},
      {"gt", "greater"},
      {"ge", "greater_equal"},
      {"and_", "bitwise_and"},
      {"or_", "bitwise_or"},
      {"xor", "bitwise_xor"},
      {"lshift", "left_shift"},
      {"rshift", "right_shift"},
      {"neg", "negative"},
      {"pos", "positive"},
      {"invert", "invert"},
      {"inv", "invert"},
      {"abs", "absolute"},
  };
  // In-place forms: "iadd" -> "add", "iand" -> "and_", ...
  std::string_view base = op_name;
  if (op_name.size() > 1 && op_name[0] == 'i') {
    std::string_view rest = op_name.substr(1);
    for (const auto &[py, uf] : kOps) {
      if (py == rest || (py.back() == '_' && py.substr(0, py.size() - 1) == rest)) {
        // Neither "inv" nor "invert" has an in-place form.
        if (py == "invert" || py == "inv" || py == "neg" || py == "pos" || py == "abs")
          continue;
        return uf;
      }
    }
  }
  for (const auto &[py, uf] : kOps)
    if (py == base)
      return uf;
  return std::nullopt;
}

std::optional<DType> comparison_loop_dtype(const std::vector<DType> &arrays,
                                           const std::vector<OperandKind> &numbers) {
  if (arrays.empty()) return std::nullopt;
  DType t = arrays[0];
  for (DType a : arrays) {
    auto p = promote_types(t, a);
    if (!p) return std::nullopt;
    t = *p;
  }
  for (OperandKind n : numbers) {
    // NumPy 1 compares float16 with a float past float16's range (1e10) in float32, by its value.
    if (n == OperandKind::PyFloat && t == DType::Float16) return std::nullopt;
    if (n == OperandKind::PyBool || n == OperandKind::Tensor || is_float(t)) continue;
    if (n == OperandKind::PyInt) {
      t = DType::Int64;
    } else {
      if (t != DType::Int32 && t != DType::Int64) return std::nullopt;
      t = DType::Float64;
    }
  }
  return t;
}

} // namespace framejit::frontend::ops
