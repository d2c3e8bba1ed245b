// element_loop.cpp — ElementLoop's text and verifier, run_element_loop (the reference interpreter), and
// optimize_element_loop (the rewrites the code generator runs first).
#include "jit/ir/element_loop.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

namespace framejit::jit {

using rt::DType;
using rt::LoopError;

namespace {

const char* op_name(EOp op) {
  switch (op) {
    case EOp::Const: return "const";
    case EOp::Mov: return "mov";
    case EOp::Add: return "add";
    case EOp::Sub: return "sub";
    case EOp::Mul: return "mul";
    case EOp::Div: return "div";
    case EOp::FloorDiv: return "floordiv";
    case EOp::Mod: return "mod";
    case EOp::Neg: return "neg";
    case EOp::Abs: return "abs";
    case EOp::Min: return "min";
    case EOp::Max: return "max";
    case EOp::Minimum: return "minimum";
    case EOp::Maximum: return "maximum";
    case EOp::BitAnd: return "and";
    case EOp::BitOr: return "or";
    case EOp::BitXor: return "xor";
    case EOp::Invert: return "invert";
    case EOp::Shl: return "shl";
    case EOp::Shr: return "shr";
    case EOp::Cmp: return "cmp";
    case EOp::Not: return "not";
    case EOp::ToFloat: return "tofloat";
    case EOp::ToInt: return "toint";
    case EOp::Sqrt: return "sqrt";
    case EOp::Call1: return "call1";
    case EOp::Call2: return "call2";
    case EOp::Dim: return "dim";
    case EOp::Load: return "load";
    case EOp::Store: return "store";
    case EOp::Jump: return "jump";
    case EOp::Branch: return "br";
    case EOp::Exit: return "exit";
    case EOp::Fail: return "fail";
  }
  return "?";
}

const char* cond_name(ECond c) {
  switch (c) {
    case ECond::Lt: return "lt";
    case ECond::Le: return "le";
    case ECond::Eq: return "eq";
    case ECond::Ne: return "ne";
    case ECond::Gt: return "gt";
    case ECond::Ge: return "ge";
  }
  return "?";
}

const char* loop_error_name(LoopError e) {
  switch (e) {
    case LoopError::None: return "none";
    case LoopError::IndexOutOfBounds: return "IndexOutOfBounds";
    case LoopError::ZeroDivision: return "ZeroDivision";
    case LoopError::IntOverflow: return "IntOverflow";
    case LoopError::MathDomain: return "MathDomain";
    case LoopError::MathRange: return "MathRange";
    case LoopError::FloatToInt: return "FloatToInt";
    case LoopError::ShapeMismatch: return "ShapeMismatch";
  }
  return "?";
}

char type_char(EType t) { return t == EType::Int ? 'i' : 'f'; }

// Round-trips exactly (the text is the kernel cache key); a NaN keeps its bits.
std::string format_double(double v) {
  char buf[64];
  if (std::isnan(v))
    std::snprintf(buf, sizeof buf, "nan(0x%016llx)", static_cast<unsigned long long>(std::bit_cast<uint64_t>(v)));
  else
    std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string var(int v) { return "v" + std::to_string(v); }

std::string index_text(const EInstr& e) {
  std::string s = "a" + std::to_string(e.array) + "[";
  for (size_t k = 0; k < e.index.size(); ++k) s += (k ? ", " : "") + var(e.index[k]);
  return s + "]";
}

bool int_only(EOp op) {
  switch (op) {
    case EOp::BitAnd: case EOp::BitOr: case EOp::BitXor: case EOp::Invert: case EOp::Shl: case EOp::Shr:
      return true;
    default: return false;
  }
}

bool float_only(EOp op) {
  return op == EOp::Div || op == EOp::Sqrt || op == EOp::Call1 || op == EOp::Call2 || op == EOp::Minimum ||
         op == EOp::Maximum;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Text

std::string ElementLoop::to_string() const {
  std::string s = "vars";
  for (size_t v = 0; v < vars.size(); ++v) s += " " + var(static_cast<int>(v)) + ":" + type_char(vars[v]);
  s += "\n";
  for (size_t j = 0; j < arrays.size(); ++j) {
    const ElementArray& a = arrays[j];
    s += "array a" + std::to_string(j) + " " + std::string(rt::dtype_name(a.dtype)) + " rank " +
         std::to_string(a.rank) + (a.written ? " written" : "") + "\n";
  }
  s += "params";
  for (int p : params) s += " " + var(p);
  s += "\nresults";
  for (int r : results) s += " " + var(r);
  s += "\n";
  for (size_t b = 0; b < blocks.size(); ++b) {
    s += "b" + std::to_string(b) + ":\n";
    for (const EInstr& e : blocks[b].instrs) {
      s += "  ";
      if (e.dst >= 0 && e.op != EOp::Store && !e.is_terminator())
        s += var(e.dst) + ":" + type_char(e.op == EOp::Cmp ? EType::Int : e.type) + " = ";
      s += op_name(e.op);
      if (e.op == EOp::Cmp) s += std::string(".") + cond_name(e.cond) + ":" + type_char(e.type);
      if (e.checked) s += ".checked";
      if (e.op == EOp::Div && e.checked && e.imm) s += ".ints";
      switch (e.op) {
        case EOp::Const:
          s += " " + (e.type == EType::Int ? std::to_string(e.imm) : format_double(e.fimm));
          break;
        case EOp::Call1: case EOp::Call2:
          s += " " + e.fn_name + "(" + var(e.a) + (e.op == EOp::Call2 ? ", " + var(e.b) : "") + ")";
          if (e.checked) s += std::string(" inf:") + loop_error_name(e.inf_error);
          break;
        case EOp::Dim: s += " a" + std::to_string(e.array) + ", " + std::to_string(e.axis); break;
        case EOp::Load: s += " " + index_text(e); break;
        case EOp::Store: s += " " + index_text(e) + " = " + var(e.a); break;
        case EOp::Jump: s += " b" + std::to_string(e.target); break;
        case EOp::Branch:
          s += " " + var(e.a) + " ? b" + std::to_string(e.target) + " : b" + std::to_string(e.target2);
          break;
        case EOp::Exit: break;
        case EOp::Fail:
          s += std::string(" ") + loop_error_name(static_cast<LoopError>(e.imm));
          for (size_t k = 0; k < e.index.size(); ++k) s += (k ? ", " : " ") + var(e.index[k]);
          break;
        default:
          if (e.a >= 0) s += " " + var(e.a);
          if (e.b >= 0) s += ", " + var(e.b);
          break;
      }
      s += "\n";
    }
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Verifier

Status ElementLoop::verify() const {
  const int nvars = static_cast<int>(vars.size()), nblocks = static_cast<int>(blocks.size());
  const int narrays = static_cast<int>(arrays.size());
  auto fail = [](const std::string& where, const std::string& why) {
    return Status::invalid("element loop: " + where + ": " + why);
  };
  for (int j = 0; j < narrays; ++j) {
    const ElementArray& a = arrays[j];
    if (static_cast<int>(a.dtype) >= rt::kNumDTypes || rt::dtype_is_complex(a.dtype))
      return fail("a" + std::to_string(j), "unsupported dtype");
    if (a.rank < 0) return fail("a" + std::to_string(j), "negative rank");
  }
  for (int p : params)
    if (p < 0 || p >= nvars) return fail("params", "variable " + std::to_string(p) + " out of range");
  for (int r : results)
    if (r < 0 || r >= nvars) return fail("results", "variable " + std::to_string(r) + " out of range");
  if (blocks.empty()) return fail("blocks", "no entry block");

  for (int b = 0; b < nblocks; ++b) {
    const std::vector<EInstr>& instrs = blocks[b].instrs;
    if (instrs.empty()) return fail("b" + std::to_string(b), "empty block");
    for (size_t k = 0; k < instrs.size(); ++k) {
      const EInstr& e = instrs[k];
      const std::string where = "b" + std::to_string(b) + " #" + std::to_string(k) + " (" + op_name(e.op) + ")";
      if (static_cast<int>(e.op) > static_cast<int>(EOp::Fail)) return fail(where, "unknown op");
      if (e.is_terminator() != (k + 1 == instrs.size()))
        return fail(where, e.is_terminator() ? "terminator before the end of the block" : "block without terminator");
      if (e.type != EType::Int && e.type != EType::Float) return fail(where, "unknown type");
      // Every variable operand the instruction reads or writes must exist.
      auto check_var = [&](int v, const char* role) -> Status {
        if (v < 0 || v >= nvars)
          return fail(where, std::string(role) + " variable " + std::to_string(v) + " out of range");
        return Status::ok();
      };
      auto check_target = [&](int t) -> Status {
        if (t < 0 || t >= nblocks) return fail(where, "target b" + std::to_string(t) + " out of range");
        return Status::ok();
      };
      auto want = [&](int v, EType t, const char* role) -> Status {
        if (vars[v] != t)
          return fail(where, std::string(role) + " " + var(v) + " is " + (t == EType::Int ? "not Int" : "not Float"));
        return Status::ok();
      };
      auto check_array = [&]() -> Status {
        if (e.array < 0 || e.array >= narrays) return fail(where, "array " + std::to_string(e.array) + " out of range");
        return Status::ok();
      };
      auto check_index = [&]() -> Status {
        FJ_PROPAGATE(check_array());
        if (static_cast<int>(e.index.size()) != arrays[e.array].rank)
          return fail(where, "index count " + std::to_string(e.index.size()) + " != rank " +
                                 std::to_string(arrays[e.array].rank));
        for (int v : e.index) {
          FJ_PROPAGATE(check_var(v, "index"));
          FJ_PROPAGATE(want(v, EType::Int, "index"));
        }
        return Status::ok();
      };

      if (int_only(e.op) && e.type != EType::Int) return fail(where, "Int only");
      if (float_only(e.op) && e.type != EType::Float) return fail(where, "Float only");
      switch (e.op) {
        case EOp::Const:
          FJ_PROPAGATE(check_var(e.dst, "dst"));
          FJ_PROPAGATE(want(e.dst, e.type, "dst"));
          break;
        case EOp::Mov: case EOp::Neg: case EOp::Abs: case EOp::Invert: case EOp::Sqrt: case EOp::Call1:
          FJ_PROPAGATE(check_var(e.dst, "dst"));
          FJ_PROPAGATE(check_var(e.a, "a"));
          FJ_PROPAGATE(want(e.dst, e.type, "dst"));
          FJ_PROPAGATE(want(e.a, e.type, "a"));
          if (e.op == EOp::Call1 && (!e.fn1 || e.fn_name.empty())) return fail(where, "no function or no name");
          break;
        case EOp::Cmp:
          FJ_PROPAGATE(check_var(e.dst, "dst"));
          FJ_PROPAGATE(check_var(e.a, "a"));
          FJ_PROPAGATE(check_var(e.b, "b"));
          FJ_PROPAGATE(want(e.dst, EType::Int, "dst"));
          FJ_PROPAGATE(want(e.a, e.type, "a"));
          FJ_PROPAGATE(want(e.b, e.type, "b"));
          if (static_cast<int>(e.cond) > static_cast<int>(ECond::Ge)) return fail(where, "unknown condition");
          break;
        case EOp::Not:
          FJ_PROPAGATE(check_var(e.dst, "dst"));
          FJ_PROPAGATE(check_var(e.a, "a"));
          if (e.type != EType::Int) return fail(where, "result must be Int");
          FJ_PROPAGATE(want(e.dst, EType::Int, "dst"));
          break;
        case EOp::ToFloat: case EOp::ToInt: {
          const EType to = e.op == EOp::ToFloat ? EType::Float : EType::Int;
          const EType from = to == EType::Float ? EType::Int : EType::Float;
          FJ_PROPAGATE(check_var(e.dst, "dst"));
          FJ_PROPAGATE(check_var(e.a, "a"));
          if (e.type != to) return fail(where, "wrong result type");
          FJ_PROPAGATE(want(e.dst, to, "dst"));
          FJ_PROPAGATE(want(e.a, from, "a"));
          break;
        }
        case EOp::Dim:
          FJ_PROPAGATE(check_var(e.dst, "dst"));
          FJ_PROPAGATE(check_array());
          if (e.type != EType::Int) return fail(where, "result must be Int");
          FJ_PROPAGATE(want(e.dst, EType::Int, "dst"));
          if (e.axis < 0 || e.axis >= arrays[e.array].rank) return fail(where, "axis out of range");
          break;
        case EOp::Load:
          FJ_PROPAGATE(check_var(e.dst, "dst"));
          FJ_PROPAGATE(check_index());
          FJ_PROPAGATE(want(e.dst, e.type, "dst"));
          if (e.type == EType::Int && rt::dtype_is_float(arrays[e.array].dtype))
            return fail(where, "a float element loaded into an Int variable");
          break;
        case EOp::Store:
          FJ_PROPAGATE(check_var(e.a, "a"));
          FJ_PROPAGATE(check_index());
          if (!arrays[e.array].written) return fail(where, "a" + std::to_string(e.array) + " is not written");
          if (vars[e.a] == EType::Float && rt::dtype_is_integer(arrays[e.array].dtype))
            return fail(where, "a Float variable stored into an integer element");
          break;
        case EOp::Jump: FJ_PROPAGATE(check_target(e.target)); break;
        case EOp::Branch:
          FJ_PROPAGATE(check_var(e.a, "a"));
          FJ_PROPAGATE(want(e.a, EType::Int, "condition"));
          FJ_PROPAGATE(check_target(e.target));
          FJ_PROPAGATE(check_target(e.target2));
          break;
        case EOp::Exit: break;
        case EOp::Fail:
          if (e.index.size() > 3) return fail(where, "more than 3 details");
          for (int v : e.index) {
            FJ_PROPAGATE(check_var(v, "detail"));
            FJ_PROPAGATE(want(v, EType::Int, "detail"));
          }
          if (e.imm <= 0 || e.imm > static_cast<int64_t>(LoopError::ShapeMismatch)) return fail(where, "unknown error");
          break;
        default:  // the binary operations
          FJ_PROPAGATE(check_var(e.dst, "dst"));
          FJ_PROPAGATE(check_var(e.a, "a"));
          FJ_PROPAGATE(check_var(e.b, "b"));
          FJ_PROPAGATE(want(e.dst, e.type, "dst"));
          FJ_PROPAGATE(want(e.a, e.type, "a"));
          FJ_PROPAGATE(want(e.b, e.type, "b"));
          if (e.op == EOp::Call2 && (!e.fn2 || e.fn_name.empty())) return fail(where, "no function or no name");
          break;
      }
      if ((e.op == EOp::Call1 || e.op == EOp::Call2) &&
          static_cast<int>(e.inf_error) > static_cast<int>(LoopError::FloatToInt))
        return fail(where, "unknown inf_error");
    }
  }
  return Status::ok();
}

// ---------------------------------------------------------------------------------------------
// Python's float floor division and remainder

double element_mod(double a, double b) {
  double mod = std::fmod(a, b);
  if (b == 0) return mod;  // NaN (npy_remainder)
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);  // fmod's zero may carry either sign
  }
  return mod;
}

double element_floordiv(double a, double b) {
  if (b == 0) return a / b;  // npy_floor_divide: inf or NaN
  double mod = std::fmod(a, b);
  // fmod is exact, so a - mod is very nearly a multiple of b.
  double div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) div -= 1.0;
  }
  if (div == 0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;  // snap to the nearest integral value
  return floordiv;
}

// ---------------------------------------------------------------------------------------------
// Interpreter

namespace {

template <typename T>
T read(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
void write(char* p, T v) {
  std::memcpy(p, &v, sizeof v);
}

int64_t load_int(DType t, const char* p) {
  switch (t) {
    case DType::Bool: return read<uint8_t>(p) != 0;
    case DType::Int8: return read<int8_t>(p);
    case DType::Int16: return read<int16_t>(p);
    case DType::Int32: return read<int32_t>(p);
    case DType::UInt8: return read<uint8_t>(p);
    case DType::UInt16: return read<uint16_t>(p);
    case DType::UInt32: return read<uint32_t>(p);
    default: return read<int64_t>(p);  // Int64, UInt64 (its bits)
  }
}

double load_float(DType t, const char* p) {
  switch (t) {
    case DType::Float64: return read<double>(p);
    case DType::Float32: return read<float>(p);
    case DType::Float16: return rt::half_to_double(read<uint16_t>(p));
    case DType::BFloat16: return rt::bfloat16_to_double(read<uint16_t>(p));
    case DType::UInt64: return static_cast<double>(read<uint64_t>(p));
    default: return static_cast<double>(load_int(t, p));
  }
}

void store_int(DType t, char* p, int64_t v) {
  switch (t) {
    case DType::Bool: write<uint8_t>(p, v != 0); break;
    case DType::Int8: case DType::UInt8: write(p, static_cast<uint8_t>(v)); break;
    case DType::Int16: case DType::UInt16: write(p, static_cast<uint16_t>(v)); break;
    case DType::Int32: case DType::UInt32: write(p, static_cast<uint32_t>(v)); break;
    case DType::Float64: write(p, static_cast<double>(v)); break;
    case DType::Float32: write(p, static_cast<float>(v)); break;
    case DType::Float16: write(p, rt::double_to_half(static_cast<double>(v))); break;
    case DType::BFloat16: write(p, rt::double_to_bfloat16(static_cast<double>(v))); break;
    default: write(p, v); break;
  }
}

void store_float(DType t, char* p, double v) {
  switch (t) {
    case DType::Float64: write(p, v); break;
    case DType::Float32: write(p, static_cast<float>(v)); break;
    case DType::Float16: write(p, rt::double_to_half(v)); break;
    case DType::BFloat16: write(p, rt::double_to_bfloat16(v)); break;
    default: write<uint8_t>(p, v != 0); break;  // Bool (integer elements are rejected by verify)
  }
}

bool compare(ECond c, auto a, auto b) {
  switch (c) {
    case ECond::Lt: return a < b;
    case ECond::Le: return a <= b;
    case ECond::Eq: return a == b;
    case ECond::Ne: return a != b;
    case ECond::Gt: return a > b;
    default: return a >= b;
  }
}

// CPython's math_1 / math_2 checks of a function's result.
LoopError math_check(const EInstr& e, double r, double a, double b) {
  const bool two = e.op == EOp::Call2;
  if (std::isnan(r) && !std::isnan(a) && !(two && std::isnan(b))) return LoopError::MathDomain;
  if (std::isinf(r) && std::isfinite(a) && (!two || std::isfinite(b))) return e.inf_error;
  return LoopError::None;
}

}  // namespace

rt::ZeroDivisionMessage zero_division_message(const EInstr& e) {
  using M = rt::ZeroDivisionMessage;
  const bool is_int = e.type == EType::Int;
  switch (e.op) {
    case EOp::FloorDiv: return is_int ? M::IntFloorDivide : M::FloorDivide;
    case EOp::Mod: return is_int ? M::IntModulo : M::Modulo;
    default: return e.imm ? M::IntTrueDivide : M::TrueDivide;
  }
}

namespace {

LoopError zero_division(rt::ElementLoopCall* call, const EInstr& e) {
  call->detail[0] = static_cast<int64_t>(zero_division_message(e));
  return LoopError::ZeroDivision;
}

}  // namespace

rt::LoopError run_element_loop(const ElementLoop& loop, rt::ElementLoopCall* call) {
  // One slot per variable in the array of its type (the other stays unused).
  std::vector<int64_t> iv(loop.vars.size(), 0);
  std::vector<double> fv(loop.vars.size(), 0.0);
  for (size_t k = 0; k < loop.params.size(); ++k) {
    const int p = loop.params[k];
    if (loop.vars[p] == EType::Int) iv[p] = call->scalars[k];
    else fv[p] = std::bit_cast<double>(call->scalars[k]);
  }

  // The element's address, or null with detail set when an index is out of range.
  auto element = [&](const EInstr& e) -> char* {
    char* p = call->data[e.array];
    for (size_t k = 0; k < e.index.size(); ++k) {
      const int64_t i = iv[e.index[k]], n = call->dims[e.array][k];
      const int64_t t = i < 0 ? i + n : i;
      if (t < 0 || t >= n) {
        call->detail[0] = i;
        call->detail[1] = static_cast<int64_t>(k);
        call->detail[2] = n;
        return nullptr;
      }
      p += static_cast<int64_t>(static_cast<uint64_t>(t) * static_cast<uint64_t>(call->strides[e.array][k]));
    }
    return p;
  };

  int64_t scratch_i = 0;
  double scratch_f = 0;
  int block = 0;
  for (;;) {
    int next = -1;
    for (const EInstr& e : loop.blocks[block].instrs) {
      const bool is_int = e.type == EType::Int;
      // Writes through these only where the instruction has a dst.
      int64_t& di = e.dst >= 0 ? iv[e.dst] : scratch_i;
      double& df = e.dst >= 0 ? fv[e.dst] : scratch_f;
      const int64_t ia = e.a >= 0 ? iv[e.a] : 0, ib = e.b >= 0 ? iv[e.b] : 0;
      const double fa = e.a >= 0 ? fv[e.a] : 0, fb = e.b >= 0 ? fv[e.b] : 0;
      switch (e.op) {
        case EOp::Const:
          if (is_int) di = e.imm;
          else df = e.fimm;
          break;
        case EOp::Mov:
          if (is_int) di = ia;
          else df = fa;
          break;
        case EOp::Add: case EOp::Sub: case EOp::Mul:
          if (is_int) {
            int64_t r;
            bool overflow = e.op == EOp::Add   ? __builtin_add_overflow(ia, ib, &r)
                            : e.op == EOp::Sub ? __builtin_sub_overflow(ia, ib, &r)
                                               : __builtin_mul_overflow(ia, ib, &r);
            if (overflow && e.checked) return LoopError::IntOverflow;
            di = r;
          } else {
            df = e.op == EOp::Add ? fa + fb : e.op == EOp::Sub ? fa - fb : fa * fb;
          }
          break;
        case EOp::Div:
          if (e.checked && fb == 0) return zero_division(call, e);
          df = fa / fb;
          break;
        case EOp::FloorDiv: case EOp::Mod:
          if (is_int) {
            int64_t q, r;
            if (ib == 0) {
              if (e.checked) return zero_division(call, e);
              q = r = 0;
            } else if (ib == -1) {
              // Apart: INT64_MIN / -1 traps in hardware (and is UB in C++).
              if (ia == std::numeric_limits<int64_t>::min() && e.checked && e.op == EOp::FloorDiv)
                return LoopError::IntOverflow;
              q = static_cast<int64_t>(0 - static_cast<uint64_t>(ia));
              r = 0;
            } else {
              q = ia / ib;
              r = ia % ib;
              if (r != 0 && (r ^ ib) < 0) {
                q -= 1;
                r += ib;
              }
            }
            di = e.op == EOp::FloorDiv ? q : r;
          } else {
            if (e.checked && fb == 0) return zero_division(call, e);
            df = e.op == EOp::FloorDiv ? element_floordiv(fa, fb) : element_mod(fa, fb);
          }
          break;
        case EOp::Neg: case EOp::Abs:
          if (is_int) {
            if (e.checked && ia == std::numeric_limits<int64_t>::min()) return LoopError::IntOverflow;
            const int64_t neg = static_cast<int64_t>(0 - static_cast<uint64_t>(ia));
            di = e.op == EOp::Neg ? neg : (ia < 0 ? neg : ia);
          } else {
            df = e.op == EOp::Neg ? -fa : std::fabs(fa);
          }
          break;
        case EOp::Min:
          if (is_int) di = ib < ia ? ib : ia;
          else df = fb < fa ? fb : fa;
          break;
        case EOp::Max:
          if (is_int) di = ib > ia ? ib : ia;
          else df = fb > fa ? fb : fa;
          break;
        case EOp::Minimum: df = fa <= fb || fa != fa ? fa : fb; break;
        case EOp::Maximum: df = fa >= fb || fa != fa ? fa : fb; break;
        case EOp::BitAnd: di = ia & ib; break;
        case EOp::BitOr: di = ia | ib; break;
        case EOp::BitXor: di = ia ^ ib; break;
        case EOp::Invert: di = ~ia; break;
        case EOp::Shl:
          if (e.checked) {
            if (ib < 0) return LoopError::IntOverflow;
            if (ib >= 64) {
              if (ia != 0) return LoopError::IntOverflow;
              di = 0;
            } else {
              const int64_t r = static_cast<int64_t>(static_cast<uint64_t>(ia) << ib);
              if ((r >> ib) != ia) return LoopError::IntOverflow;
              di = r;
            }
          } else {
            // NumPy's npy_lshift: a count outside [0, 64) gives 0.
            di = static_cast<uint64_t>(ib) < 64 ? static_cast<int64_t>(static_cast<uint64_t>(ia) << ib) : 0;
          }
          break;
        case EOp::Shr:
          if (e.checked && ib < 0) return LoopError::IntOverflow;
          // NumPy's npy_rshift: a count outside [0, 64) keeps only the sign.
          di = ia >> (static_cast<uint64_t>(ib) < 64 ? ib : 63);
          break;
        case EOp::Cmp:
          iv[e.dst] = is_int ? compare(e.cond, ia, ib) : compare(e.cond, fa, fb);
          break;
        case EOp::Not:
          iv[e.dst] = loop.vars[e.a] == EType::Int ? ia == 0 : fa == 0.0;
          break;
        case EOp::ToFloat: df = static_cast<double>(ia); break;
        case EOp::ToInt:
          if (std::isnan(fa)) {
            call->detail[0] = 1;
            return LoopError::FloatToInt;
          }
          if (!(fa >= -0x1p63 && fa < 0x1p63)) {
            call->detail[0] = 0;
            return LoopError::FloatToInt;
          }
          di = static_cast<int64_t>(fa);
          break;
        case EOp::Sqrt:
          if (e.checked && fa < 0) return LoopError::MathDomain;
          df = std::sqrt(fa);
          break;
        case EOp::Call1: case EOp::Call2: {
          const double r = e.op == EOp::Call1 ? e.fn1(fa) : e.fn2(fa, fb);
          if (e.checked) {
            const LoopError err = math_check(e, r, fa, fb);
            if (err != LoopError::None) return err;
          }
          df = r;
          break;
        }
        case EOp::Dim: di = call->dims[e.array][e.axis]; break;
        case EOp::Load: {
          const char* p = element(e);
          if (!p) return LoopError::IndexOutOfBounds;
          const DType t = loop.arrays[e.array].dtype;
          if (is_int) di = load_int(t, p);
          else df = load_float(t, p);
          break;
        }
        case EOp::Store: {
          char* p = element(e);
          if (!p) return LoopError::IndexOutOfBounds;
          const DType t = loop.arrays[e.array].dtype;
          if (loop.vars[e.a] == EType::Int) store_int(t, p, ia);
          else store_float(t, p, fa);
          break;
        }
        case EOp::Jump: next = e.target; break;
        case EOp::Branch: next = ia != 0 ? e.target : e.target2; break;
        case EOp::Exit: {
          const size_t np = loop.params.size();
          for (size_t k = 0; k < loop.results.size(); ++k) {
            const int r = loop.results[k];
            call->scalars[np + k] = loop.vars[r] == EType::Int ? iv[r] : std::bit_cast<int64_t>(fv[r]);
          }
          return LoopError::None;
        }
        case EOp::Fail:
          for (size_t k = 0; k < e.index.size(); ++k) call->detail[k] = iv[e.index[k]];
          return static_cast<LoopError>(e.imm);
      }
    }
    block = next;
  }
}

}  // namespace framejit::jit

// ---------------------------------------------------------------------------------------------
// Optimization

namespace framejit::jit {

// Note [Element loop optimization]
// The frontend writes what the bytecode says: every local and stack slot is a variable, copied on
// every edge, constants are variables set once in the entry block, blocks hold just a jump. The
// passes below clean that up for the code generator, in rounds until nothing changes:
//
//  - simplify_cfg: a branch on a constant or to one place becomes a jump; jumps go straight to
//    where a chain of jump-only blocks leads; a block whose only predecessor jumps to it is
//    appended to that predecessor; unreachable blocks go.
//  - forward: where on every path `d = mov s` ran and neither changed since, a read of d reads s;
//    where on every path an operation was computed from the same variables (or equal constants),
//    none assigned since, it becomes a copy of that result. That includes loads of the same
//    element (none stored since: any store ends it, whatever the array) and checked operations:
//    the first one passed its check, the second would. When a variable is assigned, another one
//    that still holds its old value (a copy) takes its place in what is known. (A dataflow
//    problem over the blocks, solved by iteration, intersecting at joins.)
//  - propagate_copies: `d = mov s` where that is d's only assignment, it comes before every read
//    of d, and s is assigned at most once, before it: every read of d reads s. A copy of a constant
//    becomes the constant.
//  - coalesce: `t = op ...; ...; x = mov t` with t read only in that block, x neither read nor
//    written between, nor written after the copy before the last read of t, computes op into x
//    directly (and the reads of t read x).
//  - hoist_common: an instruction both arms of a branch start with (the same operation on the
//    same operands, or on constants of equal value) runs once before the branch.
//  - sink_updates: `x = mov i; i = add i, 1; ...reads of x...` moves the add after the reads of
//    x, so that they read i and x goes.
//  - uncheck: a checked operation that cannot fail, given what its operands can hold, loses its
//    check (i - 1 for an i >= 0, i + 1 for a loop counter after its test `i < n`). Which Int
//    variables are never negative is a greatest fixpoint over their assignments
//    (element_loop_nonnegative); the code generator uses it too.
//  - hoist_invariants: an instruction in a loop that cannot fail and does not read memory, whose
//    operands the loop does not assign, moves to the loop's preheader.
//  - simplify_flags: `c ? (x = 0) : (x = 1)` becomes `x = not c`, and not(a < b) for Ints a >= b.
//  - fold_identities: Int x + 0, x - 0 and x * 1 become copies of x; a Float x * 2.0 is x + x.
//  - eliminate_dead: an instruction whose result nothing reads and that cannot fail goes. One
//    that can fail stays: a Load whose value is unused writes a variable nothing reads (the code
//    generator then only checks its index), checked arithmetic stays as it is.
//  - unroll_constant_loops and promote_carried_loads (after the others, then they run again):
//    Note [Unrolling] and Note [Carried elements]; last, Note [Reassociated extremes].
//
// Variables are mutable, so "comes before" is dominance at the instruction level, and a
// parameter counts as assigned before the entry block. Errors keep their place: only
// instructions that cannot fail are deleted or moved past others, but for hoist_common, which
// moves a failing instruction past the branch only (which cannot fail), sink_updates, which moves
// one past instructions that cannot fail, and promote_carried_loads, whose first-iteration load
// moves to the end of the preheader, just before the header where it was.

std::vector<int> successors(const EBlock& b) {
  const EInstr& t = b.instrs.back();
  if (t.op == EOp::Jump) return {t.target};
  if (t.op == EOp::Branch) {
    if (t.target == t.target2) return {t.target};
    return {t.target, t.target2};
  }
  return {};
}

bool has_dst(EOp op) {
  return op != EOp::Store && op != EOp::Jump && op != EOp::Branch && op != EOp::Exit && op != EOp::Fail;
}

bool reads_a(EOp op) {
  return op != EOp::Const && op != EOp::Dim && op != EOp::Load && op != EOp::Jump && op != EOp::Exit &&
         op != EOp::Fail;
}

bool reads_b(EOp op) {
  switch (op) {
    case EOp::Add: case EOp::Sub: case EOp::Mul: case EOp::Div: case EOp::FloorDiv: case EOp::Mod:
    case EOp::Min: case EOp::Max: case EOp::Minimum: case EOp::Maximum: case EOp::BitAnd: case EOp::BitOr:
    case EOp::BitXor: case EOp::Shl: case EOp::Shr: case EOp::Cmp: case EOp::Call2:
      return true;
    default: return false;
  }
}

namespace {

// Calls f(v) for each variable operand of e (an int& for a non-const e); not Exit's results.
template <typename I, typename F>
void for_each_operand(I& e, F&& f) {
  if (reads_a(e.op)) f(e.a);
  if (reads_b(e.op)) f(e.b);
  if (e.op == EOp::Load || e.op == EOp::Store || e.op == EOp::Fail)
    for (auto& v : e.index) f(v);
}

bool reads_var(const ElementLoop& loop, const EInstr& e, int v) {
  bool r = false;
  for_each_operand(e, [&](int x) { r |= x == v; });
  if (e.op == EOp::Exit)
    for (int x : loop.results) r |= x == v;
  return r;
}

bool writes_var(const EInstr& e, int v) { return has_dst(e.op) && e.dst == v; }

// Whether e may stop the loop with an error (or has an effect besides its dst).
bool can_fail(const EInstr& e) {
  switch (e.op) {
    case EOp::Load: case EOp::Store: case EOp::ToInt: case EOp::Fail: return true;
    case EOp::Add: case EOp::Sub: case EOp::Mul: case EOp::Neg: case EOp::Abs:
      return e.checked && e.type == EType::Int;
    case EOp::Div: case EOp::FloorDiv: case EOp::Mod: case EOp::Shl: case EOp::Shr: case EOp::Sqrt:
    case EOp::Call1: case EOp::Call2:
      return e.checked;
    default: return false;
  }
}

// Operations whose result depends only on their operands (and arrays' contents or sizes).
bool recomputable(EOp op) {
  switch (op) {
    case EOp::Const: case EOp::Mov: case EOp::Store: case EOp::Jump: case EOp::Branch: case EOp::Exit: case EOp::Fail:
      return false;
    default: return true;
  }
}

bool commutative(const EInstr& e) {
  if (e.type != EType::Int) return false;  // NaN payloads: keep float operands in order
  switch (e.op) {
    case EOp::Add: case EOp::Mul: case EOp::BitAnd: case EOp::BitOr: case EOp::BitXor: case EOp::Min: case EOp::Max:
      return true;
    default: return false;
  }
}

// y computes what x computed, given equal operand values, and cannot fail where x did not.
// `same(u, v)` says whether operands u (of x) and v (of y) hold the same value.
template <typename Same>
bool same_computation(const EInstr& x, const EInstr& y, Same&& same) {
  if (x.op != y.op || x.type != y.type) return false;
  if (x.checked != y.checked && !(x.checked && !y.checked)) return false;
  if (x.op == EOp::Cmp && x.cond != y.cond) return false;
  if (x.op == EOp::Div && x.imm != y.imm) return false;  // CPython's message (zero_division_message)
  if (x.op == EOp::Dim && (x.array != y.array || x.axis != y.axis)) return false;
  if (x.op == EOp::Load || x.op == EOp::Store) {
    if (x.array != y.array || x.index.size() != y.index.size()) return false;
    for (size_t k = 0; k < x.index.size(); ++k)
      if (!same(x.index[k], y.index[k])) return false;
  }
  if (x.op == EOp::Call1 || x.op == EOp::Call2) {
    if (x.fn1 != y.fn1 || x.fn2 != y.fn2 || x.fn_name != y.fn_name || x.inf_error != y.inf_error) return false;
  }
  const bool ra = reads_a(x.op), rb = reads_b(x.op);
  if (ra && rb && commutative(x) && same(x.a, y.b) && same(x.b, y.a)) return true;
  if (ra && !same(x.a, y.a)) return false;
  if (rb && !same(x.b, y.b)) return false;
  return true;
}


struct Cfg {
  std::vector<std::vector<int>> succ, pred;  // pred: distinct reachable predecessors
  std::vector<int> order;                    // the reachable blocks in reverse postorder
  std::vector<int> rank;                     // position in order, -1 when unreachable
  std::vector<int> idom;

  bool reachable(int b) const { return rank[b] >= 0; }
  // a dominates b (reflexive); both reachable.
  bool dom(int a, int b) const {
    for (;;) {
      if (a == b) return true;
      if (b == 0) return false;
      b = idom[b];
    }
  }
};

Cfg build_cfg(const ElementLoop& loop) {
  const int n = static_cast<int>(loop.blocks.size());
  Cfg g;
  g.succ.resize(n);
  g.pred.resize(n);
  g.rank.assign(n, -1);
  g.idom.assign(n, -1);
  for (int b = 0; b < n; ++b) g.succ[b] = successors(loop.blocks[b]);
  // Postorder by an explicit stack.
  std::vector<int> post;
  std::vector<char> seen(n, 0);
  std::vector<std::pair<int, size_t>> stack{{0, 0}};
  seen[0] = 1;
  while (!stack.empty()) {
    auto& [b, k] = stack.back();
    if (k < g.succ[b].size()) {
      const int s = g.succ[b][k++];
      if (!seen[s]) {
        seen[s] = 1;
        stack.push_back({s, 0});
      }
    } else {
      post.push_back(b);
      stack.pop_back();
    }
  }
  g.order.assign(post.rbegin(), post.rend());
  for (size_t i = 0; i < g.order.size(); ++i) g.rank[g.order[i]] = static_cast<int>(i);
  for (int b : g.order)
    for (int s : g.succ[b]) g.pred[s].push_back(b);
  // Cooper, Harvey and Kennedy's iteration.
  g.idom[0] = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (int b : g.order) {
      if (b == 0) continue;
      int d = -1;
      for (int p : g.pred[b]) {
        if (g.idom[p] < 0) continue;
        if (d < 0) {
          d = p;
          continue;
        }
        int x = p, y = d;
        while (x != y) {
          while (g.rank[x] > g.rank[y]) x = g.idom[x];
          while (g.rank[y] > g.rank[x]) y = g.idom[y];
        }
        d = x;
      }
      if (d >= 0 && g.idom[b] != d) {
        g.idom[b] = d;
        changed = true;
      }
    }
  }
  return g;
}

// An instruction's place; a parameter is assigned at {0, -1}, before the entry block.
struct Pos {
  int b = 0, k = -1;
};

bool dominates(const Cfg& g, Pos d, Pos u) { return d.b == u.b ? d.k < u.k : g.dom(d.b, u.b); }

// Assignments and reads of each variable, in the reachable blocks.
struct VarInfo {
  std::vector<int> ndefs;  // a parameter counts one
  std::vector<Pos> def;    // the assignment, where ndefs == 1
  std::vector<std::vector<Pos>> reads;
  std::vector<char> is_param;
};

VarInfo analyze(const ElementLoop& loop, const Cfg& g) {
  const size_t nv = loop.vars.size();
  VarInfo in;
  in.ndefs.assign(nv, 0);
  in.def.assign(nv, Pos{});
  in.reads.assign(nv, {});
  in.is_param.assign(nv, 0);
  for (int p : loop.params) {
    in.is_param[p] = 1;
    ++in.ndefs[p];
    in.def[p] = Pos{0, -1};
  }
  for (int b : g.order) {
    const std::vector<EInstr>& instrs = loop.blocks[b].instrs;
    for (int k = 0; k < static_cast<int>(instrs.size()); ++k) {
      const EInstr& e = instrs[k];
      for_each_operand(e, [&](int v) { in.reads[v].push_back({b, k}); });
      if (e.op == EOp::Exit)
        for (int v : loop.results) in.reads[v].push_back({b, k});
      if (has_dst(e.op)) {
        ++in.ndefs[e.dst];
        in.def[e.dst] = {b, k};
      }
    }
  }
  return in;
}

std::vector<const EInstr*> constants_of(const ElementLoop& loop, const Cfg& g, const VarInfo& in) {
  std::vector<const EInstr*> c(loop.vars.size(), nullptr);
  for (size_t v = 0; v < loop.vars.size(); ++v) {
    if (in.ndefs[v] != 1 || in.is_param[v]) continue;
    const Pos d = in.def[v];
    const EInstr& e = loop.blocks[d.b].instrs[d.k];
    if (e.op != EOp::Const) continue;
    bool ok = true;
    for (const Pos& r : in.reads[v]) ok &= dominates(g, d, r);
    if (ok) c[v] = &e;
  }
  return c;
}

bool same_constant(const EInstr* x, const EInstr* y) {
  if (!x || !y || x->type != y->type) return false;
  if (x->type == EType::Int) return x->imm == y->imm;
  return std::bit_cast<uint64_t>(x->fimm) == std::bit_cast<uint64_t>(y->fimm);
}

// Live variables at the start of each block (vectors of flags).
struct Liveness {
  std::vector<std::vector<char>> in, out;
};

Liveness liveness(const ElementLoop& loop, const Cfg& g) {
  const size_t nv = loop.vars.size(), nb = loop.blocks.size();
  std::vector<std::vector<char>> use(nb, std::vector<char>(nv, 0)), def(nb, std::vector<char>(nv, 0));
  for (int b : g.order) {
    for (const EInstr& e : loop.blocks[b].instrs) {
      auto read = [&](int v) {
        if (!def[b][v]) use[b][v] = 1;
      };
      for_each_operand(e, read);
      if (e.op == EOp::Exit)
        for (int v : loop.results) read(v);
      if (has_dst(e.op)) def[b][e.dst] = 1;
    }
  }
  Liveness l;
  l.in = use;
  l.out.assign(nb, std::vector<char>(nv, 0));
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = g.order.size(); i-- > 0;) {
      const int b = g.order[i];
      for (int s : g.succ[b]) {
        for (size_t v = 0; v < nv; ++v) {
          if (l.in[s][v] && !l.out[b][v]) {
            l.out[b][v] = 1;
            if (!def[b][v] && !l.in[b][v]) l.in[b][v] = 1;
            changed = true;
          }
        }
      }
    }
  }
  return l;
}

// A natural loop: its header and blocks (per block, a flag).
struct NaturalLoop {
  int header;
  std::vector<char> body;
};

std::vector<NaturalLoop> natural_loops(const Cfg& g) {
  const int n = static_cast<int>(g.succ.size());
  std::vector<NaturalLoop> loops;
  for (int u : g.order) {
    for (int h : g.succ[u]) {
      if (!g.dom(h, u)) continue;  // not a back edge
      auto it = std::find_if(loops.begin(), loops.end(), [&](const NaturalLoop& l) { return l.header == h; });
      if (it == loops.end()) {
        loops.push_back({h, std::vector<char>(n, 0)});
        it = loops.end() - 1;
      }
      it->body[h] = 1;
      std::vector<int> work{u};
      while (!work.empty()) {
        const int x = work.back();
        work.pop_back();
        if (it->body[x]) continue;
        it->body[x] = 1;
        for (int p : g.pred[x]) work.push_back(p);
      }
    }
  }
  return loops;
}

EInstr make_jump(int target) {
  EInstr j;
  j.op = EOp::Jump;
  j.target = target;
  return j;
}

EInstr make_mov(const ElementLoop& loop, int dst, int src) {
  EInstr m;
  m.op = EOp::Mov;
  m.type = loop.vars[dst];
  m.dst = dst;
  m.a = src;
  return m;
}

// ---- the passes ----

bool simplify_cfg(ElementLoop& loop) {
  bool changed = false;
  const int n = static_cast<int>(loop.blocks.size());
  {
    const Cfg g = build_cfg(loop);
    const VarInfo in = analyze(loop, g);
    const std::vector<const EInstr*> consts = constants_of(loop, g, in);
    for (EBlock& blk : loop.blocks) {
      EInstr& t = blk.instrs.back();
      if (t.op != EOp::Branch) continue;
      if (t.target == t.target2) {
        t = make_jump(t.target);
        changed = true;
      } else if (consts[t.a] && consts[t.a]->type == EType::Int) {
        t = make_jump(consts[t.a]->imm != 0 ? t.target : t.target2);
        changed = true;
      }
    }
  }
  // Jumps straight to where jump-only blocks lead.
  auto forward = [&](int t) {
    for (int steps = 0; steps < n; ++steps) {
      const std::vector<EInstr>& in = loop.blocks[t].instrs;
      if (in.size() != 1 || in[0].op != EOp::Jump || in[0].target == t) break;
      t = in[0].target;
    }
    return t;
  };
  for (EBlock& blk : loop.blocks) {
    EInstr& t = blk.instrs.back();
    if (t.op != EOp::Jump && t.op != EOp::Branch) continue;
    const int a = forward(t.target);
    if (a != t.target) {
      t.target = a;
      changed = true;
    }
    if (t.op == EOp::Branch) {
      const int b = forward(t.target2);
      if (b != t.target2) {
        t.target2 = b;
        changed = true;
      }
      if (t.target == t.target2) t = make_jump(t.target);
    }
  }
  // A block whose only predecessor jumps to it joins that predecessor.
  {
    const Cfg g = build_cfg(loop);
    std::vector<char> merged(n, 0);
    for (int a : g.order) {
      if (merged[a]) continue;
      for (;;) {
        const EInstr& t = loop.blocks[a].instrs.back();
        if (t.op != EOp::Jump) break;
        const int b = t.target;
        if (b == 0 || b == a || merged[b] || g.pred[b].size() != 1) break;
        std::vector<EInstr>& ai = loop.blocks[a].instrs;
        ai.pop_back();
        std::vector<EInstr>& bi = loop.blocks[b].instrs;
        ai.insert(ai.end(), std::make_move_iterator(bi.begin()), std::make_move_iterator(bi.end()));
        bi.assign(1, make_jump(b));  // unreachable now
        merged[b] = 1;
        changed = true;
      }
    }
  }
  // Unreachable blocks go; the others keep their order.
  const Cfg g = build_cfg(loop);
  if (static_cast<int>(g.order.size()) != n) {
    std::vector<int> number(n, -1);
    std::vector<EBlock> blocks;
    for (int b = 0; b < n; ++b) {
      if (!g.reachable(b)) continue;
      number[b] = static_cast<int>(blocks.size());
      blocks.push_back(std::move(loop.blocks[b]));
    }
    for (EBlock& blk : blocks) {
      EInstr& t = blk.instrs.back();
      if (t.op == EOp::Jump || t.op == EOp::Branch) t.target = number[t.target];
      if (t.op == EOp::Branch) t.target2 = number[t.target2];
    }
    loop.blocks = std::move(blocks);
    changed = true;
  }
  return changed;
}

// Exactly the same instruction (operands included), for intersecting what is known.
bool same_key(const EInstr& x, const EInstr& y) {
  if (x.op != y.op || x.type != y.type || x.checked != y.checked || x.cond != y.cond) return false;
  if (reads_a(x.op) && x.a != y.a) return false;
  if (reads_b(x.op) && x.b != y.b) return false;
  if (x.array != y.array || x.axis != y.axis || x.index != y.index) return false;
  return x.fn1 == y.fn1 && x.fn2 == y.fn2 && x.inf_error == y.inf_error && x.fn_name == y.fn_name;
}

// What holds at a point: copies (d, s: d holds what s holds) and computations whose result a
// variable holds. `top`: nothing computed yet (the identity of intersection).
struct Facts {
  bool top = true;
  std::vector<std::pair<int, int>> copies;
  std::vector<std::pair<EInstr, int>> avail;

  void meet(const Facts& o) {
    if (o.top) return;
    if (top) {
      *this = o;
      return;
    }
    std::erase_if(copies, [&](const auto& c) {
      return std::find(o.copies.begin(), o.copies.end(), c) == o.copies.end();
    });
    std::erase_if(avail, [&](const auto& a) {
      for (const auto& b : o.avail)
        if (b.second == a.second && same_key(a.first, b.first)) return false;
      return true;
    });
  }
  bool operator==(const Facts& o) const {
    if (top != o.top || copies != o.copies || avail.size() != o.avail.size()) return false;
    for (size_t k = 0; k < avail.size(); ++k)
      if (avail[k].second != o.avail[k].second || !same_key(avail[k].first, o.avail[k].first)) return false;
    return true;
  }
};

// What forward remembers at most (the oldest go first): it stays linear in long blocks.
constexpr size_t kMaxFacts = 48;

// Runs instruction e over the facts; with `rewrite`, also rewrites e: reads through copies, and a
// computation already available becomes a copy of it.
bool forward_instr(const ElementLoop& loop, const std::vector<const EInstr*>& consts, Facts& st, EInstr& e,
                   bool rewrite) {
  EInstr r = e;
  for_each_operand(r, [&](int& v) {
    for (const auto& [d, s] : st.copies) {
      if (d == v) {
        v = s;
        break;
      }
    }
  });
  if (recomputable(r.op)) {
    auto same = [&](int u, int v) { return u == v || same_constant(consts[u], consts[v]); };
    for (const auto& [x, h] : st.avail) {
      if (same_computation(x, r, same)) {
        if (h != r.dst) r = make_mov(loop, r.dst, h);
        break;
      }
    }
  }
  if (has_dst(r.op) && !(r.op == EOp::Mov && r.a == r.dst)) {
    const int w = r.dst;
    // A variable still holding w's old value takes its place in what is known.
    int alias = -1;
    for (const auto& [d, s] : st.copies)
      if (s == w && d != w) {
        alias = d;
        break;
      }
    std::erase_if(st.copies, [&](const auto& c) { return c.first == w || (c.second == w && c.first == alias); });
    if (alias >= 0) {
      for (auto& c : st.copies)
        if (c.second == w) c.second = alias;
      for (auto& [x, h] : st.avail) {
        for_each_operand(x, [&](int& v) {
          if (v == w) v = alias;
        });
        if (h == w) h = alias;
      }
      std::erase_if(st.avail, [&](const auto& a) { return a.second == alias && reads_var(loop, a.first, alias); });
    } else {
      std::erase_if(st.copies, [&](const auto& c) { return c.second == w; });
      std::erase_if(st.avail, [&](const auto& a) { return a.second == w || reads_var(loop, a.first, w); });
    }
  }
  if (r.op == EOp::Store)
    std::erase_if(st.avail, [](const auto& a) { return a.first.op == EOp::Load; });
  if (r.op == EOp::Mov && r.a != r.dst) {
    st.copies.push_back({r.dst, r.a});
    if (st.copies.size() > kMaxFacts) st.copies.erase(st.copies.begin());
  } else if (recomputable(r.op) && !reads_var(loop, r, r.dst)) {
    st.avail.push_back({r, r.dst});
    if (st.avail.size() > kMaxFacts) st.avail.erase(st.avail.begin());
  }
  if (!rewrite) return false;
  const bool changed = !same_key(r, e) || r.dst != e.dst;
  e = std::move(r);
  return changed;
}

bool forward(ElementLoop& loop) {
  const Cfg g = build_cfg(loop);
  const VarInfo vi = analyze(loop, g);
  const std::vector<const EInstr*> consts = constants_of(loop, g, vi);
  const int n = static_cast<int>(loop.blocks.size());
  std::vector<Facts> out(n);
  auto in_of = [&](int b) {
    Facts f;
    if (b == 0) f.top = false;  // nothing is known on entry
    for (int p : g.pred[b]) f.meet(out[p]);
    if (f.top) f.top = false;  // (unreachable so far)
    return f;
  };
  for (int round = 0; round < 50; ++round) {
    bool changed = false;
    for (int b : g.order) {
      Facts st = in_of(b);
      for (EInstr e : loop.blocks[b].instrs) forward_instr(loop, consts, st, e, false);
      if (!(st == out[b])) {
        out[b] = std::move(st);
        changed = true;
      }
    }
    if (!changed) break;
  }
  bool changed = false;
  for (int b : g.order) {
    Facts st = in_of(b);
    for (EInstr& e : loop.blocks[b].instrs) changed |= forward_instr(loop, consts, st, e, true);
  }
  return changed;
}

bool propagate_copies(ElementLoop& loop) {
  const Cfg g = build_cfg(loop);
  const VarInfo in = analyze(loop, g);
  const std::vector<const EInstr*> consts = constants_of(loop, g, in);
  const size_t nv = loop.vars.size();
  std::vector<int> repl(nv, -1);
  bool changed = false;
  for (int b : g.order) {
    std::vector<EInstr>& instrs = loop.blocks[b].instrs;
    for (int k = 0; k < static_cast<int>(instrs.size()); ++k) {
      EInstr& e = instrs[k];
      if (e.op != EOp::Mov || e.a == e.dst) continue;
      const int d = e.dst, s = e.a;
      if (const EInstr* c = consts[s]) {
        // The copy of a constant is that constant (d may be assigned elsewhere too).
        EInstr k2 = *c;
        k2.dst = d;
        e = k2;
        changed = true;
        continue;
      }
      if (in.ndefs[d] != 1 || in.is_param[d]) continue;
      const Pos at{b, k};
      if (!(in.ndefs[s] == 0 || (in.ndefs[s] == 1 && dominates(g, in.def[s], at)))) continue;
      bool ok = true;
      for (const Pos& r : in.reads[d]) ok &= dominates(g, at, r);
      if (ok) repl[d] = s;
    }
  }
  auto final_of = [&](int v) {
    for (size_t steps = 0; steps < nv && repl[v] >= 0; ++steps) v = repl[v];
    return v;
  };
  for (EBlock& blk : loop.blocks) {
    for (EInstr& e : blk.instrs) {
      for_each_operand(e, [&](int& v) {
        const int f = final_of(v);
        if (f != v) {
          v = f;
          changed = true;
        }
      });
    }
  }
  for (int& r : loop.results) {
    const int f = final_of(r);
    if (f != r) {
      r = f;
      changed = true;
    }
  }
  return changed;
}

bool coalesce(ElementLoop& loop) {
  bool changed = false;
  const Cfg g = build_cfg(loop);
  const VarInfo in = analyze(loop, g);
  for (int b : g.order) {
    std::vector<EInstr>& instrs = loop.blocks[b].instrs;
    // Backwards: an erased copy moves only what comes after it, done already; the analysis holds
    // for the rest (t's one assignment is checked where it stands).
    for (int k = static_cast<int>(instrs.size()) - 1; k >= 0; --k) {
      const EInstr& e = instrs[k];
      if (e.op != EOp::Mov || e.a == e.dst) continue;
      const int x = e.dst, t = e.a;
      if (in.ndefs[t] != 1 || in.is_param[t]) continue;
      if (std::find(loop.results.begin(), loop.results.end(), t) != loop.results.end()) continue;  // Exit's
      const Pos d = in.def[t];
      if (d.b != b || d.k >= k || !has_dst(instrs[d.k].op) || instrs[d.k].dst != t) continue;
      // t may also be read between its def and the copy (`t = sub acc, p; store t; acc = mov t`):
      // those reads read x then, which holds t's value there.
      // And after it (forward made `acc = mov t; store acc` read t) while x keeps that value.
      bool ok = true;
      int last = k;  // the last instruction that reads t
      for (const Pos& r : in.reads[t]) {
        ok &= r.b == b && r.k > d.k;
        last = std::max(last, r.k);
      }
      for (int j = d.k + 1; j < k && ok; ++j) ok = !reads_var(loop, instrs[j], x) && !writes_var(instrs[j], x);
      for (int j = k + 1; j < last && ok; ++j) ok = !writes_var(instrs[j], x);
      if (!ok) continue;
      instrs[d.k].dst = x;
      for (int j = d.k + 1; j <= last; ++j)
        for_each_operand(instrs[j], [&](int& v) {
          if (v == t) v = x;
        });
      instrs.erase(instrs.begin() + k);
      changed = true;
    }
  }
  return changed;
}

bool hoist_common(ElementLoop& loop) {
  bool changed = false;
  for (bool again = true; again;) {
    again = false;
    const Cfg g = build_cfg(loop);
    const VarInfo in = analyze(loop, g);
    const std::vector<const EInstr*> consts = constants_of(loop, g, in);
    const Liveness live = liveness(loop, g);
    for (int b : g.order) {
      std::vector<EInstr>& bi = loop.blocks[b].instrs;
      const EInstr br = bi.back();
      if (br.op != EOp::Branch) continue;
      const int tb = br.target, fb = br.target2;
      if (tb == fb || tb == b || fb == b || g.pred[tb].size() != 1 || g.pred[fb].size() != 1) continue;
      std::vector<EInstr>& ti = loop.blocks[tb].instrs;
      std::vector<EInstr>& fi = loop.blocks[fb].instrs;
      const EInstr& et = ti.front();
      const EInstr& ef = fi.front();
      if (et.is_terminator() || ef.is_terminator()) continue;
      auto same = [&](int u, int v) { return u == v || same_constant(consts[u], consts[v]); };
      if (!same_computation(et, ef, same) || et.checked != ef.checked || et.op == EOp::Const) continue;
      if (et.op == EOp::Mov && !same(et.a, ef.a)) continue;
      const bool dst = has_dst(et.op);
      if (dst && et.dst != ef.dst) {
        // F's path now assigns et.dst too: nothing after ef in F may read its old value.
        std::vector<char> after = live.out[fb];
        for (size_t k = fi.size(); k-- > 1;) {
          const EInstr& e = fi[k];
          if (has_dst(e.op)) after[e.dst] = 0;
          for_each_operand(e, [&](int v) { after[v] = 1; });
          if (e.op == EOp::Exit)
            for (int v : loop.results) after[v] = 1;
        }
        if (after[et.dst]) continue;
      }
      // Before the branch, or before the Cmp feeding it when et leaves that alone.
      size_t at = bi.size() - 1;
      if (bi.size() >= 2) {
        const EInstr& c = bi[bi.size() - 2];
        if (c.op == EOp::Cmp && c.dst == br.a && !reads_var(loop, et, c.dst) &&
            !(dst && (et.dst == c.dst || et.dst == c.a || et.dst == c.b)))
          at = bi.size() - 2;
      }
      if (at == bi.size() - 1 && dst && et.dst == br.a) continue;
      const EInstr moved = et;
      EInstr replace_f;
      const bool keep_f = dst && ef.dst != et.dst;
      if (keep_f) replace_f = make_mov(loop, ef.dst, et.dst);
      ti.erase(ti.begin());
      if (keep_f) fi.front() = replace_f;
      else fi.erase(fi.begin());
      bi.insert(bi.begin() + static_cast<std::ptrdiff_t>(at), moved);
      again = changed = true;
      break;
    }
  }
  return changed;
}

// `x = mov w; ...; w = op(w, ...); <reads of x>` (a loop counter: x the value this iteration, w
// the next one) moves `w = op` to just after the last read of x when nothing on the way reads w
// or assigns w, x or op's operands, so that forward then reads w for x and x goes: one
// variable live instead of two. An instruction that can fail moves only past instructions that
// cannot.
bool sink_updates(ElementLoop& loop) {
  bool changed = false;
  for (EBlock& blk : loop.blocks) {
    std::vector<EInstr>& in = blk.instrs;
    // Not past the terminator, nor past a Cmp that the branch reads (the two fuse).
    size_t end = in.size() - 1;
    if (end >= 1 && in[end].op == EOp::Branch && in[end - 1].op == EOp::Cmp && in[end - 1].dst == in[end].a) --end;
    for (size_t k = 0; k + 1 < end; ++k) {
      const EInstr& e = in[k];
      if (!has_dst(e.op) || e.op == EOp::Mov || e.op == EOp::Load || !reads_var(loop, e, e.dst)) continue;
      const int w = e.dst;
      std::vector<int> copies;  // variables that got w's value before e
      for (size_t j = 0; j < k; ++j)
        if (in[j].op == EOp::Mov && in[j].a == w && in[j].dst != w) copies.push_back(in[j].dst);
      if (copies.empty()) continue;
      // e goes just after the last read of a copy, if it may move that far.
      size_t to = k;
      for (size_t j = k + 1; j < end; ++j)
        for (int c : copies)
          if (reads_var(loop, in[j], c)) to = j;
      if (to == k) continue;
      const bool fails = can_fail(e);
      bool ok = true;
      for (size_t j = k + 1; j <= to && ok; ++j) {
        const EInstr& x = in[j];
        ok = !reads_var(loop, x, w) && !(fails && can_fail(x));
        if (has_dst(x.op)) for_each_operand(e, [&](int v) { ok &= x.dst != v; });
        if (has_dst(x.op))
          for (int c : copies) ok &= x.dst != c;
      }
      if (!ok) continue;
      EInstr moved = e;
      in.erase(in.begin() + static_cast<std::ptrdiff_t>(k));
      in.insert(in.begin() + static_cast<std::ptrdiff_t>(to), std::move(moved));
      changed = true;
      --k;
    }
  }
  return changed;
}

// Whether Int variable v is less than some other value (so v + 1 cannot overflow) at
// instruction k of block b: b's only predecessor sends it here on `v < y`, and b does not assign
// v before k; or v's one assignment anywhere is a copy `v = mov x` with x below there.
bool below(const ElementLoop& loop, const Cfg& g, const VarInfo& vi, int b, size_t k, int v, int depth = 0) {
  const std::vector<EInstr>& in = loop.blocks[b].instrs;
  if (g.pred[b].size() == 1) {
    const std::vector<EInstr>& h = loop.blocks[g.pred[b][0]].instrs;
    const EInstr& br = h.back();
    if (br.op == EOp::Branch && br.target == b && br.target2 != b && h.size() >= 2) {
      const EInstr& c = h[h.size() - 2];
      if (c.op == EOp::Cmp && c.dst == br.a && c.type == EType::Int && c.cond == ECond::Lt && c.a == v) {
        bool kept = true;
        for (size_t j = 0; j < k && j < in.size(); ++j) kept &= !(has_dst(in[j].op) && in[j].dst == v);
        if (kept) return true;
      }
    }
  }
  if (depth >= 3 || vi.is_param[v] || vi.ndefs[v] != 1) return false;
  const Pos p = vi.def[v];
  const EInstr& d = loop.blocks[p.b].instrs[p.k];
  return d.op == EOp::Mov && below(loop, g, vi, p.b, static_cast<size_t>(p.k), d.a, depth + 1);
}

// Int variables that never hold a negative value (Note [Element loop optimization]).
std::vector<char> nonnegative_of(const ElementLoop& loop, const Cfg& g) {
  const size_t nv = loop.vars.size();
  const VarInfo vi = analyze(loop, g);
  std::vector<char> nn(nv, 0);
  for (size_t v = 0; v < nv; ++v) nn[v] = loop.vars[v] == EType::Int;
  for (int p : loop.params) nn[p] = 0;
  // `d = add a, 1` where a is below something (a loop counter after its test): no wrap.
  auto guarded_step = [&](int b, size_t k) {
    const EInstr& e = loop.blocks[b].instrs[k];
    if (e.op != EOp::Add || vi.ndefs[e.b] != 1 || vi.is_param[e.b]) return false;
    const EInstr& c = loop.blocks[vi.def[e.b].b].instrs[vi.def[e.b].k];
    if (c.op != EOp::Const || c.imm != 1) return false;
    return below(loop, g, vi, b, k, e.a);
  };
  auto def_ok = [&](int b, size_t k) {
    const EInstr& e = loop.blocks[b].instrs[k];
    if (e.type != EType::Int && e.op != EOp::Cmp && e.op != EOp::Not) return false;
    switch (e.op) {
      case EOp::Const: return e.imm >= 0;
      case EOp::Mov: return nn[e.a] != 0;
      case EOp::Dim: case EOp::Cmp: case EOp::Not: return true;
      case EOp::Load: {
        const DType t = loop.arrays[e.array].dtype;
        return t == DType::Bool || t == DType::UInt8 || t == DType::UInt16 || t == DType::UInt32;
      }
      case EOp::Add: return (e.checked && nn[e.a] && nn[e.b]) || (nn[e.a] && guarded_step(b, k));
      case EOp::Mul: return e.checked && nn[e.a] && nn[e.b];
      case EOp::FloorDiv: return nn[e.a] && nn[e.b];
      case EOp::Mod: return nn[e.b] != 0;
      case EOp::Min: case EOp::BitOr: case EOp::BitXor: return nn[e.a] && nn[e.b];
      case EOp::Max: case EOp::BitAnd: return nn[e.a] || nn[e.b];
      case EOp::Shr: return nn[e.a] != 0;
      case EOp::Abs: return e.checked;
      default: return false;
    }
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (int b : g.order) {
      const std::vector<EInstr>& in = loop.blocks[b].instrs;
      for (size_t k = 0; k < in.size(); ++k) {
        const EInstr& e = in[k];
        if (!has_dst(e.op) || !nn[e.dst] || def_ok(b, k)) continue;
        nn[e.dst] = 0;
        changed = true;
      }
    }
  }
  return nn;
}

// An upper bound on the bit length of each Int variable's values, for those never negative (64:
// unknown, or possibly negative): constants, Bool and unsigned loads, and what and/or/xor, shifts by
// constants, + and * make of them. A least fixpoint over the assignments, from 0 up: a carried
// `crc = ((crc << 1) ^ 0x1021) & 0xFFFF` stays at 16 bits, and a counter that only grows reaches
// 64 in at most 64 rounds.
std::vector<int> bit_widths(const ElementLoop& loop, const Cfg& g) {
  constexpr int kUnknown = 64;
  const size_t nv = loop.vars.size();
  const VarInfo vi = analyze(loop, g);
  const std::vector<const EInstr*> consts = constants_of(loop, g, vi);
  std::vector<int> w(nv, 0);
  for (size_t v = 0; v < nv; ++v)
    if (loop.vars[v] != EType::Int || vi.is_param[v]) w[v] = kUnknown;
  auto cap = [](int x) { return x > 63 ? kUnknown : x; };
  auto width_of = [&](const EInstr& e) -> int {
    const int a = reads_a(e.op) ? w[e.a] : 0, b = reads_b(e.op) ? w[e.b] : 0;
    const bool b_const = reads_b(e.op) && consts[e.b] && consts[e.b]->type == EType::Int;
    const int64_t c = b_const ? consts[e.b]->imm : -1;
    switch (e.op) {
      case EOp::Const:
        return e.type == EType::Int && e.imm >= 0 ? std::bit_width(static_cast<uint64_t>(e.imm)) : kUnknown;
      case EOp::Mov: return a;
      case EOp::Cmp: case EOp::Not: return 1;
      case EOp::Load:
        switch (loop.arrays[e.array].dtype) {
          case DType::Bool: return 1;
          case DType::UInt8: return 8;
          case DType::UInt16: return 16;
          case DType::UInt32: return 32;
          default: return kUnknown;
        }
      case EOp::BitAnd: return std::min(a, b);  // at most the operand known >= 0
      case EOp::Min: return a == kUnknown || b == kUnknown ? kUnknown : std::min(a, b);
      case EOp::BitOr: case EOp::BitXor: case EOp::Max: return std::max(a, b);
      case EOp::Add: return a == kUnknown || b == kUnknown ? kUnknown : cap(std::max(a, b) + 1);
      case EOp::Mul: return a == kUnknown || b == kUnknown ? kUnknown : cap(a + b);
      case EOp::Shl: return a == kUnknown || c < 0 || c > 63 ? kUnknown : cap(a + static_cast<int>(c));
      case EOp::Shr:
        if (a == kUnknown) return kUnknown;
        return c >= 0 && c <= 63 ? std::max(0, a - static_cast<int>(c)) : a;
      case EOp::FloorDiv: return b == kUnknown ? kUnknown : a;
      case EOp::Mod: return b;
      default: return kUnknown;
    }
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (int b : g.order)
      for (const EInstr& e : loop.blocks[b].instrs) {
        if (!has_dst(e.op) || loop.vars[e.dst] != EType::Int || w[e.dst] == kUnknown) continue;
        const int x = e.type == EType::Int || e.op == EOp::Cmp || e.op == EOp::Not ? width_of(e) : kUnknown;
        if (x > w[e.dst]) {
          w[e.dst] = x;
          changed = true;
        }
      }
  }
  return w;
}

// Checked operations that cannot fail on what their operands can hold become unchecked (and
// so free to move or go): + , * and << by a constant of values whose bit widths (bit_widths) leave
// the result in 63 bits, a - b and -a of values >= 0, a + c for a >= 0 and a constant c < 0,
// a + 1 for an a below something (a loop counter after its test, or a copy of one), a >> b with
// b >= 0, |a| with a >= 0, and floor division and modulo of a >= 0 by a constant other than 0
// and -1.
bool uncheck(ElementLoop& loop) {
  const Cfg g = build_cfg(loop);
  const std::vector<char> nn = nonnegative_of(loop, g);
  const std::vector<int> width = bit_widths(loop, g);
  const VarInfo vi = analyze(loop, g);
  const std::vector<const EInstr*> consts = constants_of(loop, g, vi);
  auto const_value = [&](int v, int64_t& c) {
    if (!consts[v] || consts[v]->type != EType::Int) return false;
    c = consts[v]->imm;
    return true;
  };
  bool changed = false;
  for (int b : g.order) {
    for (size_t k = 0; k < loop.blocks[b].instrs.size(); ++k) {
      EInstr& e = loop.blocks[b].instrs[k];
      if (!e.checked || e.type != EType::Int) continue;
      int64_t c = 0;
      bool safe = false;
      switch (e.op) {
        case EOp::Sub: safe = nn[e.a] && nn[e.b]; break;
        case EOp::Add:
          safe = (nn[e.a] && const_value(e.b, c) && c < 0) ||
                 (const_value(e.b, c) && c == 1 && below(loop, g, vi, b, k, e.a)) ||
                 std::max(width[e.a], width[e.b]) <= 62;
          break;
        case EOp::Mul: safe = width[e.a] + width[e.b] <= 63; break;
        case EOp::Shl: safe = const_value(e.b, c) && c >= 0 && c < 64 && width[e.a] + c <= 63; break;
        case EOp::Neg: case EOp::Abs: safe = nn[e.a] != 0; break;
        case EOp::Shr: safe = nn[e.b] != 0; break;
        case EOp::FloorDiv: case EOp::Mod: safe = nn[e.a] && const_value(e.b, c) && c != 0 && c != -1; break;
        default: break;
      }
      if (safe) {
        e.checked = false;
        changed = true;
      }
    }
  }
  return changed;
}

// Loop-invariant code motion: an instruction in a loop that cannot fail, reads no memory, and
// reads only variables the loop does not assign, and is the loop's only assignment of a variable
// not live at the header, moves to the end of the loop's preheader (the one block outside the
// loop that leads to the header, by a jump).
bool hoist_invariants(ElementLoop& loop) {
  const Cfg g = build_cfg(loop);
  const std::vector<NaturalLoop> loops = natural_loops(g);
  const Liveness live = liveness(loop, g);
  const int n = static_cast<int>(loop.blocks.size());
  bool changed = false;
  for (const NaturalLoop& l : loops) {
    int pre = -1, outside = 0;
    for (int p : g.pred[l.header])
      if (!l.body[p]) {
        pre = p;
        ++outside;
      }
    if (outside != 1 || loop.blocks[pre].instrs.back().op != EOp::Jump) continue;
    std::vector<int> defs(loop.vars.size(), 0);
    for (int b = 0; b < n; ++b)
      if (l.body[b])
        for (const EInstr& e : loop.blocks[b].instrs)
          if (has_dst(e.op)) ++defs[e.dst];
    for (int b : g.order) {
      if (!l.body[b]) continue;
      std::vector<EInstr>& in = loop.blocks[b].instrs;
      for (size_t k = 0; k < in.size(); ++k) {
        const EInstr& e = in[k];
        if (!recomputable(e.op) || e.op == EOp::Load || e.op == EOp::Call1 || e.op == EOp::Call2 || can_fail(e))
          continue;
        if (defs[e.dst] != 1 || live.in[l.header][e.dst]) continue;
        bool invariant = true;
        for_each_operand(e, [&](int v) { invariant &= defs[v] == 0; });
        if (!invariant) continue;
        std::vector<EInstr>& pi = loop.blocks[pre].instrs;
        pi.insert(pi.end() - 1, e);
        defs[e.dst] = 0;
        in.erase(in.begin() + static_cast<std::ptrdiff_t>(k));
        --k;
        changed = true;
      }
    }
    if (changed) return true;  // one loop at a time: the analyses are stale now
  }
  return changed;
}

// Small rewrites: not(cmp) becomes the opposite Int compare; a branch whose arms only assign one
// variable 0 and 1 (and meet again) becomes a Not (or two) of its condition.
// Int x + 0, 0 + x, x - 0, x * 1, 1 * x: a copy of x (none can overflow, so a checked one too).
bool fold_identities(ElementLoop& loop) {
  const Cfg g = build_cfg(loop);
  const std::vector<const EInstr*> cst = constants_of(loop, g, analyze(loop, g));
  auto is = [&](int v, int64_t x) { return v >= 0 && cst[v] && cst[v]->type == EType::Int && cst[v]->imm == x; };
  auto is_two = [&](int v) { return v >= 0 && cst[v] && cst[v]->type == EType::Float && cst[v]->fimm == 2.0; };
  bool changed = false;
  for (EBlock& blk : loop.blocks)
    for (EInstr& e : blk.instrs) {
      if (e.type == EType::Float && e.op == EOp::Mul && !e.checked && (is_two(e.a) || is_two(e.b))) {
        // 2.0 * x is x + x to the bit (inf, NaN and -0.0 included), a cycle shorter.
        const int x = is_two(e.a) ? e.b : e.a;
        e.op = EOp::Add;
        e.a = e.b = x;
        changed = true;
        continue;
      }
      if (e.type != EType::Int) continue;
      int keep = -1;
      if ((e.op == EOp::Add || e.op == EOp::Sub) && is(e.b, 0)) keep = e.a;
      else if (e.op == EOp::Add && is(e.a, 0)) keep = e.b;
      else if (e.op == EOp::Mul && is(e.b, 1)) keep = e.a;
      else if (e.op == EOp::Mul && is(e.a, 1)) keep = e.b;
      if (keep < 0) continue;
      e.op = EOp::Mov;
      e.a = keep;
      e.b = -1;
      e.checked = false;
      changed = true;
    }
  return changed;
}

bool simplify_flags(ElementLoop& loop) {
  const Cfg g = build_cfg(loop);
  const VarInfo vi = analyze(loop, g);
  const std::vector<const EInstr*> consts = constants_of(loop, g, vi);
  bool changed = false;
  // The one-instruction arms: x = const 0 / 1, then a jump to the join.
  for (int b : g.order) {
    EInstr& br = loop.blocks[b].instrs.back();
    if (br.op != EOp::Branch || br.target == br.target2) continue;
    const int t = br.target, f = br.target2;
    auto arm = [&](int x, int& dst, int64_t& v) {
      const std::vector<EInstr>& in = loop.blocks[x].instrs;
      if (x == b || g.pred[x].size() != 1 || in.size() != 2 || in[1].op != EOp::Jump) return -1;
      const EInstr* c = &in[0];
      if (c->op == EOp::Mov && consts[c->a] && consts[c->a]->type == EType::Int) {
        dst = c->dst;
        v = consts[c->a]->imm;
        return in[1].target;
      }
      if (c->op != EOp::Const || c->type != EType::Int) return -1;
      dst = c->dst;
      v = c->imm;
      return in[1].target;
    };
    int dt = -1, df = -1;
    int64_t vt = 0, vf = 0;
    const int jt = arm(t, dt, vt), jf = arm(f, df, vf);
    if (jt < 0 || jt != jf || dt != df || dt == br.a) continue;
    if (!((vt == 0 && vf == 1) || (vt == 1 && vf == 0))) continue;
    // x = cond == 0 (t: 0, f: 1), or x = (cond == 0) == 0.
    const int cond = br.a, join = jt;
    std::vector<EInstr>& in = loop.blocks[b].instrs;
    in.pop_back();
    EInstr n1;
    n1.op = EOp::Not;
    n1.dst = vt == 1 ? loop.new_var(EType::Int) : dt;
    n1.a = cond;
    in.push_back(n1);
    if (vt == 1) {
      EInstr n2 = n1;
      n2.dst = dt;
      n2.a = n1.dst;
      in.push_back(n2);
    }
    in.push_back(make_jump(join));
    changed = true;
    break;  // the analyses are stale now
  }
  if (changed) return true;
  // not(a <c> b) for Int compares: a <!c> b.
  const VarInfo v2 = analyze(loop, g);
  for (int b : g.order) {
    std::vector<EInstr>& in = loop.blocks[b].instrs;
    for (size_t k = 0; k < in.size(); ++k) {
      EInstr& e = in[k];
      if (e.op != EOp::Not || loop.vars[e.a] != EType::Int || v2.ndefs[e.a] != 1 || v2.is_param[e.a]) continue;
      const Pos d = v2.def[e.a];
      const EInstr& c = loop.blocks[d.b].instrs[d.k];
      if (c.op != EOp::Cmp || c.type != EType::Int) continue;
      // c's operands must hold the same values here: c in this block before e, neither assigned between.
      if (d.b != b || d.k >= static_cast<int>(k)) continue;
      bool kept = true;
      for (size_t j = d.k + 1; j < k; ++j)
        if (has_dst(in[j].op) && (in[j].dst == c.a || in[j].dst == c.b)) kept = false;
      if (!kept) continue;
      static const ECond opposite[] = {ECond::Ge, ECond::Gt, ECond::Ne, ECond::Eq, ECond::Le, ECond::Lt};
      EInstr r = c;
      r.dst = e.dst;
      r.cond = opposite[static_cast<int>(c.cond)];
      e = r;
      changed = true;
    }
  }
  return changed;
}

bool eliminate_dead(ElementLoop& loop, std::vector<int>& sink) {
  const Cfg g = build_cfg(loop);
  const Liveness live = liveness(loop, g);
  bool changed = false;
  for (int b : g.order) {
    std::vector<EInstr>& instrs = loop.blocks[b].instrs;
    std::vector<char> l = live.out[b];
    l.resize(loop.vars.size(), 0);  // (sink variables made in this pass)
    for (size_t k = instrs.size(); k-- > 0;) {
      EInstr& e = instrs[k];
      if (has_dst(e.op) && (!l[e.dst] || (e.op == EOp::Mov && e.a == e.dst))) {
        if (!can_fail(e)) {
          instrs.erase(instrs.begin() + static_cast<std::ptrdiff_t>(k));
          changed = true;
          continue;
        }
        if (e.op == EOp::Load) {
          int& s = sink[static_cast<int>(e.type)];
          if (s < 0) {
            s = loop.new_var(e.type);
            l.push_back(0);
          }
          if (e.dst != s) {
            e.dst = s;
            changed = true;
          }
        }
      }
      if (has_dst(e.op)) l[e.dst] = 0;
      for_each_operand(e, [&](int v) { l[v] = 1; });
      if (e.op == EOp::Exit)
        for (int v : loop.results) l[v] = 1;
    }
  }
  return changed;
}

// Note [Reassociated extremes]
// `D[i, j] = min(D[i - 1, j] + 1, D[i, j - 1] + 1, D[i - 1, j - 1] + cost)`: with D[i, j - 1] carried
// in a register (Note [Carried elements]), each iteration waits for the last one's result through
// `+ 1` and then both mins in order. Integer min and max are associative and commutative (the
// value is the same whichever of equal values wins), so where `t = min(x, y); r = min(t, c)` has
// only x depending on a value the loop carries, it becomes `t = min(y, c); r = min(t, x)`: the
// carried chain is one min long. (Floats keep their order: which NaN or which zero wins depends
// on it.)
bool reassociate_extremes(ElementLoop& loop) {
  const Cfg g = build_cfg(loop);
  const std::vector<NaturalLoop> loops = natural_loops(g);
  const Liveness live = liveness(loop, g);
  const VarInfo vi = analyze(loop, g);
  const size_t nv = loop.vars.size();
  bool changed = false;
  for (const NaturalLoop& l : loops) {
    // Carried: live at the header and computed in the loop; a counter (`i = i + c`) or a flag
    // (`f = const`) is ready early in an iteration and does not count.
    std::vector<char> assigned(nv, 0), carried(nv, 0);
    auto cheap = [&](const EInstr& e) {
      if (e.op == EOp::Const) return true;
      if ((e.op != EOp::Add && e.op != EOp::Sub) || e.a != e.dst) return false;
      if (vi.ndefs[e.b] != 1 || vi.is_param[e.b]) return false;
      return loop.blocks[vi.def[e.b].b].instrs[vi.def[e.b].k].op == EOp::Const;
    };
    for (size_t b = 0; b < loop.blocks.size(); ++b)
      if (l.body[b])
        for (const EInstr& e : loop.blocks[b].instrs)
          if (has_dst(e.op) && !cheap(e)) assigned[e.dst] = 1;
    for (size_t v = 0; v < nv; ++v) carried[v] = live.in[l.header][v] && assigned[v];
    // What depends on a carried value within an iteration (a few passes in block order suffice
    // for a heuristic: a miss only keeps the order as written). A load starts afresh: its indices
    // are addresses, known early.
    for (int round = 0; round < 3; ++round)
      for (int b : g.order) {
        if (!l.body[b]) continue;
        for (const EInstr& e : loop.blocks[b].instrs) {
          if (!has_dst(e.op) || carried[e.dst] || e.op == EOp::Load) continue;
          bool dep = false;
          for_each_operand(e, [&](int v) { dep |= carried[v] != 0; });
          if (dep) carried[e.dst] = 1;
        }
      }
    for (int b : g.order) {
      if (!l.body[b]) continue;
      std::vector<EInstr>& in = loop.blocks[b].instrs;
      for (size_t k = 0; k < in.size(); ++k) {
        EInstr& outer = in[k];
        if ((outer.op != EOp::Min && outer.op != EOp::Max) || loop.vars[outer.dst] != EType::Int) continue;
        for (int side = 0; side < 2; ++side) {
          const int t = side ? outer.b : outer.a, c = side ? outer.a : outer.b;
          if (vi.ndefs[t] != 1 || vi.is_param[t] || vi.reads[t].size() != 1 || vi.def[t].b != b) continue;
          if (std::find(loop.results.begin(), loop.results.end(), t) != loop.results.end()) continue;
          const size_t j = static_cast<size_t>(vi.def[t].k);
          EInstr& inner = in[j];
          if (j >= k || inner.op != outer.op || loop.vars[inner.dst] != EType::Int) continue;
          int x = inner.a, y = inner.b;
          if (!carried[x]) std::swap(x, y);
          if (!carried[x] || carried[y] || carried[c]) continue;
          bool kept = true;  // x and c hold at j what they hold at k
          for (size_t m = j + 1; m < k; ++m) kept &= !writes_var(in[m], x) && !writes_var(in[m], c);
          if (!kept) continue;
          inner.a = y;
          inner.b = c;
          outer.a = t;
          outer.b = x;
          changed = true;
          break;
        }
      }
    }
  }
  return changed;
}

// Note [Carried elements]
// `for k in ...: A[i, j] -= A[i, k] * A[k, j]`: each iteration loads A[i, j] and ends storing it,
// so the next load waits for the store to reach memory and come back. Where an innermost loop's
// every latch ends with `a[I] = y` (no store after it, y and the indices I kept), the indices are
// not assigned in the loop, and a load of a[I] comes before any store in the iteration, that
// load reads the y of the iteration before (the element's type holding y exactly: float64 for a
// Float, int64 or uint64 for an Int). If the load is the header's first instruction, it moves to
// the end of the preheader, and each latch ends with `x = mov y`. If it opens the body and the
// header only tests, the test is repeated after the preheader, which then loads when the loop will
// run. Else a flag set in the latches and cleared in the preheader picks between the load (the
// first iteration) and a copy of y.
// The store stays; the load still checks its index in the first iteration, and later ones skip
// a check that the same indices passed in the store. Likewise, with a counter c that the one latch
// steps by 1 after the store a[..., c, ...] = y (the loop's only store into a), a load of
// a[..., c - 1, ...] (c - 1 computed in the iteration before c steps) reads the y of the
// iteration before: `D[i, j] = min(D[i, j - 1] + 1, ...)`, a running sum `a[j] = a[j - 1] + x[j]`
// (through the flag: the first iteration loads).
bool promote_carried_loads(ElementLoop& loop) {
  const Cfg g = build_cfg(loop);
  const std::vector<NaturalLoop> loops = natural_loops(g);
  const int n = static_cast<int>(loop.blocks.size());
  const VarInfo vi = analyze(loop, g);
  const std::vector<const EInstr*> consts = constants_of(loop, g, vi);
  auto is_int = [&](int v, int64_t c) {
    return consts[v] && consts[v]->type == EType::Int && consts[v]->imm == c;
  };
  for (const NaturalLoop& l : loops) {
    // Innermost: no other header inside.
    bool inner = false;
    for (const NaturalLoop& o : loops) inner |= o.header != l.header && l.body[o.header];
    if (inner) continue;
    int pre = -1, outside = 0;
    std::vector<int> latches;
    for (int p : g.pred[l.header]) {
      if (l.body[p]) latches.push_back(p);
      else {
        pre = p;
        ++outside;
      }
    }
    if (outside != 1 || loop.blocks[pre].instrs.back().op != EOp::Jump) continue;
    std::vector<int> written(loop.vars.size(), 0);  // assignments in the loop
    for (int b = 0; b < n; ++b)
      if (l.body[b])
        for (const EInstr& e : loop.blocks[b].instrs)
          if (has_dst(e.op)) ++written[e.dst];
    // The store each latch ends with.
    const EInstr* element = nullptr;
    std::vector<int> stored;  // per latch: y
    // A counter c stepped by 1 after the store (one latch): a load of the element at c - 1 reads
    // the y of the iteration before (edit distance's D[i, j - 1]). Its position in the index.
    int counter = -1, at = -1;
    bool ok = !latches.empty();
    for (int lt : latches) {
      const std::vector<EInstr>& in = loop.blocks[lt].instrs;
      if (in.back().op != EOp::Jump) ok = false;
      int s = -1;
      for (int k = static_cast<int>(in.size()) - 1; k >= 0 && s < 0; --k)
        if (in[k].op == EOp::Store) s = k;
      if (!ok || s < 0) {
        ok = false;
        break;
      }
      const EInstr& st = in[s];
      for (size_t k = s + 1; k < in.size(); ++k) {
        if (!has_dst(in[k].op)) continue;
        const auto pos = std::find(st.index.begin(), st.index.end(), in[k].dst);
        const EInstr& e = in[k];
        if (pos != st.index.end() && latches.size() == 1 && counter < 0 && e.op == EOp::Add && e.a == e.dst &&
            is_int(e.b, 1) && written[e.dst] == 1 && std::count(st.index.begin(), st.index.end(), e.dst) == 1) {
          counter = e.dst;
          at = static_cast<int>(pos - st.index.begin());
          continue;
        }
        if (e.dst == st.a || pos != st.index.end()) ok = false;
      }
      if (element && (element->array != st.array || element->index != st.index)) ok = false;
      element = &st;
      stored.push_back(st.a);
      if (!ok) break;
    }
    if (!ok) continue;
    const DType dt = loop.arrays[element->array].dtype;
    const EType t = loop.vars[stored[0]];
    const bool exact = (dt == DType::Float64 && t == EType::Float) ||
                       ((dt == DType::Int64 || dt == DType::UInt64) && t == EType::Int);
    for (int y : stored) ok &= loop.vars[y] == t;
    for (int v : element->index) ok &= !written[v] || v == counter;
    if (counter >= 0) {
      // The latch's store is the loop's only one into the array.
      int stores = 0;
      for (int b = 0; b < n; ++b)
        if (l.body[b])
          for (const EInstr& e : loop.blocks[b].instrs) stores += e.op == EOp::Store && e.array == element->array;
      ok &= stores == 1;
    }
    if (!ok || !exact) continue;
    // The element the iteration before stored: its index, or (with the counter) the index with
    // c - 1 at `at`, c - 1 computed in the loop from c before c steps.
    auto same_element = [&](const EInstr& e, int b, size_t k) {
      if (e.index == element->index) return counter < 0;  // (with a counter: this iteration's element)
      if (counter < 0 || e.index.size() != element->index.size()) return false;
      for (size_t q = 0; q < e.index.size(); ++q)
        if (static_cast<int>(q) != at && e.index[q] != element->index[q]) return false;
      const int w = e.index[at];
      if (written[w] != 1) return false;
      const std::vector<EInstr>& in = loop.blocks[b].instrs;
      for (size_t j = 0; j < k; ++j) {
        const EInstr& d = in[j];
        if (has_dst(d.op) && d.dst == w)
          return (d.op == EOp::Sub && d.a == counter && is_int(d.b, 1)) ||
                 (d.op == EOp::Add && d.a == counter && is_int(d.b, -1));
      }
      return false;
    };
    // A load of the element that no store precedes in the iteration.
    std::vector<char> clean_in(n, 0), clean_out(n, 0);
    int at_b = -1, at_k = -1;
    for (int b : g.order) {
      if (!l.body[b]) continue;
      bool c = true;
      if (b != l.header)
        for (int p : g.pred[b]) c &= l.body[p] && clean_out[p];
      clean_in[b] = c;
      const std::vector<EInstr>& in = loop.blocks[b].instrs;
      // A load this pass made already (the first iteration's): its block's only predecessor
      // branches on a flag the latches set.
      bool made = false;
      if (g.pred[b].size() == 1) {
        const EInstr& br = loop.blocks[g.pred[b][0]].instrs.back();
        if (br.op == EOp::Branch && br.target2 == b) {
          made = true;
          for (int lt : latches) {
            bool sets = false;
            for (const EInstr& e : loop.blocks[lt].instrs) sets |= e.op == EOp::Const && e.dst == br.a && e.imm == 1;
            made &= sets;
          }
        }
      }
      for (size_t k = 0; k < in.size() && c; ++k) {
        const EInstr& e = in[k];
        if (at_b < 0 && !made && e.op == EOp::Load && e.array == element->array && same_element(e, b, k) &&
            e.type == t) {
          at_b = b;
          at_k = static_cast<int>(k);
        }
        if (e.op == EOp::Store) c = false;
      }
      clean_out[b] = c;
    }
    if (at_b < 0) continue;
    const EInstr ld = loop.blocks[at_b].instrs[at_k];
    const int x = ld.dst;
    auto before_end = [&](int b, EInstr e) {
      std::vector<EInstr>& in = loop.blocks[b].instrs;
      in.insert(in.end() - 1, std::move(e));
    };
    if (at_b == l.header && at_k == 0) {
      std::vector<EInstr>& hi = loop.blocks[l.header].instrs;
      hi.erase(hi.begin());
      before_end(pre, ld);
      for (size_t k = 0; k < latches.size(); ++k) before_end(latches[k], make_mov(loop, x, stored[k]));
      return true;
    }
    // The header only tests and the load opens the body: the test is repeated on the way in, and
    // the element is loaded there when the first iteration will run (no flag in the loop).
    const std::vector<EInstr> hi = loop.blocks[l.header].instrs;
    if (at_k == 0 && hi.size() == 2 && hi[0].op == EOp::Cmp && hi[1].op == EOp::Branch && hi[1].a == hi[0].dst &&
        g.pred[at_b].size() == 1 && (hi[1].target == at_b) != (hi[1].target2 == at_b)) {
      const int guard_b = n, load_b = n + 1;
      EInstr br = hi[1];
      (br.target == at_b ? br.target : br.target2) = load_b;
      loop.blocks.resize(n + 2);
      loop.blocks[guard_b].instrs = {hi[0], br};
      loop.blocks[load_b].instrs = {ld, make_jump(l.header)};
      loop.blocks[pre].instrs.back().target = guard_b;
      std::vector<EInstr>& body = loop.blocks[at_b].instrs;
      body.erase(body.begin());
      for (size_t k = 0; k < latches.size(); ++k) before_end(latches[k], make_mov(loop, x, stored[k]));
      return true;
    }
    const int flag = loop.new_var(EType::Int), carried = loop.new_var(t);
    EInstr zero, one;
    zero.op = one.op = EOp::Const;
    zero.dst = one.dst = flag;
    one.imm = 1;
    before_end(pre, zero);
    for (size_t k = 0; k < latches.size(); ++k) {
      before_end(latches[k], make_mov(loop, carried, stored[k]));
      before_end(latches[k], one);
    }
    // Split at the load: [before] br flag ? copy : load; both go on to [after].
    const int load_b = n, copy_b = n + 1, rest_b = n + 2;
    loop.blocks.resize(n + 3);
    std::vector<EInstr>& in = loop.blocks[at_b].instrs;
    loop.blocks[rest_b].instrs.assign(in.begin() + at_k + 1, in.end());
    in.erase(in.begin() + at_k, in.end());
    EInstr br;
    br.op = EOp::Branch;
    br.a = flag;
    br.target = copy_b;
    br.target2 = load_b;
    in.push_back(br);
    loop.blocks[load_b].instrs = {ld, make_jump(rest_b)};
    loop.blocks[copy_b].instrs = {make_mov(loop, x, carried), make_jump(rest_b)};
    return true;
  }
  return false;
}

// Note [Unrolling]
// An innermost loop `for i in range(s, n)` with s and n constants and a small body (crc16's
// `for _ in range(8)`) runs as n - s copies of its body, one after the other: no counter test per
// iteration, and no loop-exit branch for the predictor to learn. The body must leave only through
// the header, and step i by 1 exactly once per iteration (in a block on every way round); i holds
// s + t in copy t, so each copy's test would pass, and the header, reached after the last copy,
// goes straight to the exit.
constexpr int kMaxUnrollTrips = 16;
constexpr size_t kMaxUnrolledInstrs = 160;

bool unroll_constant_loops(ElementLoop& loop) {
  const Cfg g = build_cfg(loop);
  const std::vector<NaturalLoop> loops = natural_loops(g);
  const VarInfo vi = analyze(loop, g);
  const std::vector<const EInstr*> consts = constants_of(loop, g, vi);
  const int n = static_cast<int>(loop.blocks.size());
  auto int_const = [&](int v, int64_t& c) {
    if (!consts[v] || consts[v]->type != EType::Int) return false;
    c = consts[v]->imm;
    return true;
  };
  for (const NaturalLoop& l : loops) {
    bool inner = false;
    for (const NaturalLoop& o : loops) inner |= o.header != l.header && l.body[o.header];
    if (inner) continue;
    const std::vector<EInstr>& hi = loop.blocks[l.header].instrs;
    if (hi.size() != 2 || hi[0].op != EOp::Cmp || hi[0].type != EType::Int || hi[0].cond != ECond::Lt ||
        hi[1].op != EOp::Branch || hi[1].a != hi[0].dst)
      continue;
    const int i = hi[0].a, entry = hi[1].target, exit = hi[1].target2;
    int64_t bound = 0, start = 0;
    if (!l.body[entry] || l.body[exit] || entry == l.header || !int_const(hi[0].b, bound)) continue;
    int pre = -1, outside = 0;
    std::vector<int> latches;
    for (int p : g.pred[l.header]) {
      if (l.body[p]) latches.push_back(p);
      else {
        pre = p;
        ++outside;
      }
    }
    if (outside != 1 || loop.blocks[pre].instrs.back().op != EOp::Jump) continue;
    // i's value entering: the preheader's last assignment of it, a constant.
    bool known = false;
    for (size_t k = loop.blocks[pre].instrs.size() - 1; k-- > 0;) {
      const EInstr& e = loop.blocks[pre].instrs[k];
      if (!has_dst(e.op) || e.dst != i) continue;
      if (e.op == EOp::Const && e.type == EType::Int) {
        start = e.imm;
        known = true;
      } else if (e.op == EOp::Mov) {
        known = int_const(e.a, start);
      }
      break;
    }
    if (!known) continue;
    // Only the header leaves; the body steps i by 1 once, on every way round.
    size_t size = 0;
    bool ok = !latches.empty();
    std::vector<std::pair<int, size_t>> defs;
    for (int b = 0; b < n && ok; ++b) {
      if (!l.body[b] || b == l.header) continue;
      for (int s2 : g.succ[b]) ok &= l.body[s2] != 0;
      size += loop.blocks[b].instrs.size();
      for (size_t k = 0; k < loop.blocks[b].instrs.size(); ++k) {
        const EInstr& e = loop.blocks[b].instrs[k];
        if (has_dst(e.op) && e.dst == i) defs.push_back({b, k});
      }
    }
    for (int lt : latches) ok &= loop.blocks[lt].instrs.back().op == EOp::Jump;
    if (!ok || defs.size() != 1) continue;
    const auto [db, dk] = defs[0];
    const EInstr* step = &loop.blocks[db].instrs[dk];
    if (step->op == EOp::Mov) {
      // i = next, where next = i + 1 earlier in the block (next assigned nowhere else in the loop).
      const int next = step->a;
      const EInstr* found = nullptr;
      int count = 0;
      for (int b = 0; b < n; ++b)
        if (l.body[b])
          for (size_t k = 0; k < loop.blocks[b].instrs.size(); ++k)
            if (has_dst(loop.blocks[b].instrs[k].op) && loop.blocks[b].instrs[k].dst == next) {
              ++count;
              if (b == db && k < dk) found = &loop.blocks[b].instrs[k];
            }
      if (count != 1 || !found) continue;
      step = found;
    }
    int64_t one = 0;
    const bool plus_one = step->op == EOp::Add &&
                          ((step->a == i && int_const(step->b, one) && one == 1) ||
                           (step->b == i && int_const(step->a, one) && one == 1));
    if (!plus_one) continue;
    for (int lt : latches) ok &= g.dom(db, lt);
    if (!ok) continue;
    const int64_t trips = bound > start ? bound - start : 0;
    if (trips == 0 || trips > kMaxUnrollTrips || static_cast<size_t>(trips) * size > kMaxUnrolledInstrs) continue;
    // Copies of the body, chained; the last goes back to the header, which now just leaves.
    std::vector<int> body;
    for (int b = 0; b < n; ++b)
      if (l.body[b] && b != l.header) body.push_back(b);
    std::vector<std::vector<int>> copy(static_cast<size_t>(trips), std::vector<int>(n, -1));
    for (int64_t t = 0; t < trips; ++t)
      for (int b : body) {
        copy[t][b] = static_cast<int>(loop.blocks.size());
        loop.blocks.push_back(loop.blocks[b]);
      }
    for (int64_t t = 0; t < trips; ++t) {
      for (int b : body) {
        EInstr& term = loop.blocks[copy[t][b]].instrs.back();
        auto retarget = [&](int& x) {
          if (x == l.header) x = t + 1 < trips ? copy[t + 1][entry] : l.header;
          else x = copy[t][x];
        };
        if (term.op == EOp::Jump || term.op == EOp::Branch) retarget(term.target);
        if (term.op == EOp::Branch) retarget(term.target2);
      }
    }
    loop.blocks[pre].instrs.back().target = copy[0][entry];
    loop.blocks[l.header].instrs.back() = make_jump(exit);
    return true;
  }
  return false;
}

}  // namespace

std::vector<const EInstr*> element_loop_constants(const ElementLoop& loop) {
  const Cfg g = build_cfg(loop);
  return constants_of(loop, g, analyze(loop, g));
}

std::vector<char> element_loop_nonnegative(const ElementLoop& loop) {
  const Cfg g = build_cfg(loop);
  return nonnegative_of(loop, g);
}

void optimize_element_loop(ElementLoop& loop) {
  if (loop.blocks.empty()) return;
  std::vector<int> sink = {-1, -1};  // per type: the variable dead loads write
  auto rounds = [&] {
    for (int round = 0; round < 16; ++round) {
      bool changed = simplify_cfg(loop);
      changed |= forward(loop);
      changed |= propagate_copies(loop);
      changed |= coalesce(loop);
      changed |= hoist_common(loop);
      changed |= sink_updates(loop);
      changed |= uncheck(loop);
      changed |= hoist_invariants(loop);
      changed |= simplify_flags(loop);
      changed |= fold_identities(loop);
      changed |= eliminate_dead(loop, sink);
      if (!changed) break;
    }
  };
  rounds();
  // Each of these changes the loop's blocks: one at a time, cleaned up after.
  for (int k = 0; k < 4 && unroll_constant_loops(loop); ++k) rounds();
  for (int k = 0; k < 8 && promote_carried_loads(loop); ++k) rounds();
  if (reassociate_extremes(loop)) rounds();
}

bool element_loop_may_fail(const ElementLoop& loop) {
  for (const EBlock& b : loop.blocks)
    for (const EInstr& e : b.instrs)
      if (can_fail(e)) return true;
  return false;
}

}  // namespace framejit::jit
