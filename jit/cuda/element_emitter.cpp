// element_emitter.cpp — PTX for one element of a loop-IR body, and loads and stores of one or four
// elements: what every CUDA kernel generator (pointwise, reduction, row chain) builds on.
#include "jit/cuda/element_emitter_p.h"

#include <bit>
#include <cstdio>
#include <cstdint>

#include "jit/math/atan.h"
#include "jit/math/erf.h"
#include "jit/math/exp_log.h"
#include "jit/math/pow.h"
#include "jit/math/tanh_sigmoid.h"
#include "jit/math/trig.h"

namespace framejit::jit::cuda {

using rt::DType;

std::vector<std::string> ElementEmitter::hoist(const PointwiseKernelIR& ir, const std::string& args, int params_at) {
  std::vector<std::string> hoisted(ir.body.size());
  for (size_t i = 0; i < ir.body.size(); ++i) {
    const ScalarExpr& x = ir.body[i];
    if (x.op == ScalarOp::Const) hoisted[i] = constant(x.dtype, x.fconst);
    if (x.op == ScalarOp::Param) {
      const bool is_int = ir.param_dtypes[x.input] == DType::Int64;
      std::string raw = w_.reg(64);
      w_.op("ld.param.b64 " + raw + ", [" + args + "+" + std::to_string(params_at + 8 * x.input) + "]");
      hoisted[i] = param(x.dtype, raw, is_int);
    }
  }
  return hoisted;
}

std::vector<std::string> ElementEmitter::body(const PointwiseKernelIR& ir, const std::vector<std::string>& hoisted,
                                              const std::vector<std::string>& inputs) {
  std::vector<std::string> v(ir.body.size());
  for (size_t i = 0; i < ir.body.size(); ++i) {
    const ScalarExpr& x = ir.body[i];
    switch (x.op) {
      case ScalarOp::Load: v[i] = inputs[x.input]; break;
      case ScalarOp::Param:
      case ScalarOp::Const: v[i] = hoisted[i]; break;
      case ScalarOp::Cast: v[i] = cast(ir.body[x.a].dtype, x.dtype, v[x.a]); break;
      case ScalarOp::Where: {
        std::string p = w_.reg(1), r = reg(x.dtype);
        w_.op("setp.ne.b32 " + p + ", " + v[x.c] + ", 0");
        w_.op(std::string("selp.") + btype(x.dtype) + " " + r + ", " + v[x.a] + ", " + v[x.b] + ", " + p);
        v[i] = r;
        break;
      }
      default:
        if (is_comparison(x.op)) v[i] = compare(x.op, ir.body[x.a].dtype, v[x.a], v[x.b]);
        else if (is_fp(x.dtype)) v[i] = float_op(x, v);
        else v[i] = int_op(x, v);
    }
  }
  return v;
}

std::string ElementEmitter::constant(DType t, double value) {
  std::string r = reg(t);
  char buf[40];
  if (t == DType::Float32)
    std::snprintf(buf, sizeof buf, "0f%08X", std::bit_cast<uint32_t>(static_cast<float>(value)));
  else if (t == DType::Float64)
    std::snprintf(buf, sizeof buf, "0d%016llX", static_cast<unsigned long long>(std::bit_cast<uint64_t>(value)));
  else {
    // Integers: as NumPy converts a Python int (wrapping to the width).
    int64_t i = t == DType::Bool ? (value != 0) : static_cast<int64_t>(value);
    if (t == DType::UInt8) i &= 0xFF;
    if (t == DType::Int32) i = static_cast<int32_t>(i);
    std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(wide(t) ? i : static_cast<int64_t>(static_cast<uint32_t>(i))));
  }
  w_.op(std::string("mov.") + btype(t) + " " + r + ", " + buf);
  return r;
}

std::string ElementEmitter::param(DType t, const std::string& raw, bool is_int) {
  if (is_fp(t)) {
    if (t == DType::Float64 && !is_int) return raw;
    std::string r = reg(t);
    if (is_int) w_.op(std::string("cvt.rn.") + ftype(t) + ".s64 " + r + ", " + raw);
    else w_.op("cvt.rn.f32.f64 " + r + ", " + raw);
    return r;
  }
  // Integer and bool kernels only meet integer parameters: the low bits (bool: != 0).
  return cast(DType::Int64, t, raw);
}

// Note [Half types] (jit/lower/loop_ir.h): a half value is its 16 bits in the low half of a 32-bit
// register, loaded and stored as such; these casts are the only operations on it. bfloat16 is
// float32's upper half: widening is a shift, rounding cvt.rn.bf16.f32 (sm_80).
std::string ElementEmitter::half_cast(DType from, DType to, const std::string& a) {
  if (rt::dtype_is_half(from)) {
    std::string f = reg(DType::Float32);
    if (from == DType::BFloat16) {
      w_.op("shl.b32 " + f + ", " + a + ", 16");
    } else {
      std::string h = w_.reg(16);
      w_.op("cvt.u16.u32 " + h + ", " + a);
      w_.op("cvt.f32.f16 " + f + ", " + h);
    }
    return cast(DType::Float32, to, f);
  }
  const std::string f = cast(from, DType::Float32, a);
  std::string h = w_.reg(16), r = reg(to);
  w_.op(std::string(to == DType::BFloat16 ? "cvt.rn.bf16.f32 " : "cvt.rn.f16.f32 ") + h + ", " + f);
  w_.op("cvt.u32.u16 " + r + ", " + h);
  return r;
}

std::string ElementEmitter::cast(DType from, DType to, const std::string& a) {
  if (from == to) return a;
  if (rt::dtype_is_half(from) || rt::dtype_is_half(to)) return half_cast(from, to, a);
  std::string r = reg(to);
  if (to == DType::Bool) {
    std::string p = w_.reg(1);
    if (is_fp(from)) w_.op(std::string("setp.neu.") + ftype(from) + " " + p + ", " + a + ", 0" + (from == DType::Float64 ? "d0000000000000000" : "f00000000"));
    else w_.op(std::string("setp.ne.") + btype(from) + " " + p + ", " + a + ", 0");
    w_.op("selp.b32 " + r + ", 1, 0, " + p);
    return r;
  }
  if (is_fp(from) && is_fp(to)) {
    w_.op(to == DType::Float64 ? "cvt.f64.f32 " + r + ", " + a : "cvt.rn.f32.f64 " + r + ", " + a);
    return r;
  }
  if (!is_fp(from) && is_fp(to)) {
    // The canonical value is exact in its integer type: one conversion rounds once.
    w_.op(std::string("cvt.rn.") + ftype(to) + "." + itype(from) + " " + r + ", " + a);
    return r;
  }
  if (is_fp(from)) {
    // float -> int truncates; out of range or NaN gives the x86 "integer indefinite" (INT_MIN
    // of the conversion's width), where PTX would saturate. int64 converts at 64 bits; int32
    // and uint8 through the 32-bit conversion (uint8 then keeps the low byte).
    const bool to64 = to == DType::Int64;
    const char* ft = ftype(from);
    std::string lo = w_.reg(1), hi = w_.reg(1), in = w_.reg(1);
    const char* lim_lo = from == DType::Float64 ? (to64 ? "0dC3E0000000000000" : "0dC1E0000000000000")
                                                : (to64 ? "0fDF000000" : "0fCF000000");
    const char* lim_hi = from == DType::Float64 ? (to64 ? "0d43E0000000000000" : "0d41E0000000000000")
                                                : (to64 ? "0f5F000000" : "0f4F000000");
    // In range: -2^w <= x < 2^w for w = 63 or 31 (truncation toward zero stays in range; for
    // float64 -> int32 values in (-2^31 - 1, -2^31) truncate to -2^31 too, which is INT_MIN).
    w_.op(std::string("setp.ge.") + ft + " " + lo + ", " + a + ", " + lim_lo);
    w_.op(std::string("setp.lt.") + ft + " " + hi + ", " + a + ", " + lim_hi);
    w_.op("and.pred " + in + ", " + lo + ", " + hi);
    std::string t = w_.reg(to64 ? 64 : 32);
    w_.op(std::string("cvt.rzi.") + (to64 ? "s64." : "s32.") + ft + " " + t + ", " + a);
    w_.op(std::string("selp.") + (to64 ? "b64 " : "b32 ") + r + ", " + t + ", " + (to64 ? "0x8000000000000000" : "0x80000000") + ", " + in);
    if (to == DType::UInt8) w_.op("and.b32 " + r + ", " + r + ", 255");
    return r;
  }
  // int -> int: widen by sign (int32) or zero (uint8, bool); narrow by keeping the low bits.
  if (to == DType::Int64) {
    w_.op(std::string("cvt.s64.") + (from == DType::Int32 ? "s32 " : "u32 ") + r + ", " + a);
  } else if (from == DType::Int64) {
    w_.op("cvt.u32.u64 " + r + ", " + a);
    if (to == DType::UInt8) w_.op("and.b32 " + r + ", " + r + ", 255");
  } else if (to == DType::UInt8) {
    w_.op("and.b32 " + r + ", " + a + ", 255");
  } else {
    w_.op("mov.b32 " + r + ", " + a);  // uint8/bool -> int32: already canonical
  }
  return r;
}

std::string ElementEmitter::compare(ScalarOp op, DType t, const std::string& a, const std::string& b) {
  const char* name = "eq";
  const bool fp = is_fp(t);
  switch (op) {
    case ScalarOp::Eq: name = "eq"; break;
    case ScalarOp::Ne: name = fp ? "neu" : "ne"; break;  // NaN != anything
    case ScalarOp::Lt: name = "lt"; break;
    case ScalarOp::Le: name = "le"; break;
    case ScalarOp::Gt: name = "gt"; break;
    default: name = "ge"; break;
  }
  std::string p = w_.reg(1), r = reg(DType::Bool);
  w_.op(std::string("setp.") + name + "." + (fp ? ftype(t) : itype(t)) + " " + p + ", " + a + ", " + b);
  w_.op("selp.b32 " + r + ", 1, 0, " + p);
  return r;
}

std::string ElementEmitter::float_op(const ScalarExpr& x, const std::vector<std::string>& v) {
  const DType t = x.dtype;
  const std::string ft = ftype(t), bt = btype(t);
  const std::string& a = v[x.a];
  auto un = [&](const std::string& op) {
    std::string r = reg(t);
    w_.op(op + "." + ft + " " + r + ", " + a);
    return r;
  };
  auto bin = [&](const std::string& op) {
    std::string r = reg(t);
    w_.op(op + "." + ft + " " + r + ", " + a + ", " + v[x.b]);
    return r;
  };
  PtxOps o(w_, t == DType::Float64);
  const PtxVal va{a};
  switch (x.op) {
    case ScalarOp::Neg: return o.neg(va).reg;  // the sign bit flipped, NaN too (as x86's xor)
    case ScalarOp::Abs: return o.abs(va).reg;
    case ScalarOp::Sqrt: return un("sqrt.rn");
    case ScalarOp::Square: {
      std::string r = reg(t);
      w_.op("mul.rn." + ft + " " + r + ", " + a + ", " + a);
      return r;
    }
    case ScalarOp::Reciprocal: {
      std::string r = reg(t);
      w_.op("div.rn." + ft + " " + r + ", " + (t == DType::Float64 ? "0d3FF0000000000000" : "0f3F800000") + ", " + a);
      return r;
    }
    case ScalarOp::Floor: return un("cvt.rmi." + ft);  // rounding to an integral float: cvt.rmi.f32.f32
    case ScalarOp::Ceil: return un("cvt.rpi." + ft);
    case ScalarOp::Add: return bin("add.rn");
    case ScalarOp::Sub: return bin("sub.rn");
    case ScalarOp::Mul: return bin("mul.rn");
    case ScalarOp::Div: return bin("div.rn");
    case ScalarOp::Max:
    case ScalarOp::Min: {
      // NumPy's (a > b || isnan(a)) ? a : b (< for minimum): a tie returns b.
      std::string keep = w_.reg(1), nan = w_.reg(1), r = reg(t);
      w_.op(std::string("setp.") + (x.op == ScalarOp::Max ? "gt." : "lt.") + ft + " " + keep + ", " + a + ", " + v[x.b]);
      w_.op("setp.nan." + ft + " " + nan + ", " + a + ", " + a);
      w_.op("or.pred " + keep + ", " + keep + ", " + nan);
      w_.op("selp." + bt + " " + r + ", " + a + ", " + v[x.b] + ", " + keep);
      return r;
    }
    case ScalarOp::Exp: return math::emit_exp(o, va).reg;
    case ScalarOp::Log: return math::emit_log(o, va).reg;
    case ScalarOp::Log1p: return math::emit_log1p(o, va).reg;
    case ScalarOp::Expm1: return math::emit_expm1(o, va).reg;
    case ScalarOp::Tanh: return math::emit_tanh(o, va).reg;
    case ScalarOp::Sigmoid: return math::emit_sigmoid(o, va).reg;
    case ScalarOp::Erf: return math::emit_erf(o, va).reg;
    case ScalarOp::Atan: return math::emit_atan(o, va).reg;
    case ScalarOp::Sin: return math::emit_sin(o, va).reg;
    case ScalarOp::Cos: return math::emit_cos(o, va).reg;
    case ScalarOp::Tan: return math::emit_tan(o, va).reg;
    case ScalarOp::Atan2: return math::emit_atan2(o, va, PtxVal{v[x.b]}).reg;
    case ScalarOp::Pow: {
      // pow needs log|x| to ~2^-64 either way: float32 runs the float64 routine, as on x86.
      if (t == DType::Float64) return math::emit_pow(o, va, PtxVal{v[x.b]}).reg;
      PtxOps d(w_, true);
      std::string wa = w_.reg(64), wb = w_.reg(64), r = reg(t);
      w_.op("cvt.f64.f32 " + wa + ", " + a);
      w_.op("cvt.f64.f32 " + wb + ", " + v[x.b]);
      PtxVal p = math::emit_pow(d, PtxVal{wa}, PtxVal{wb});
      w_.op("cvt.rn.f32.f64 " + r + ", " + p.reg);
      return r;
    }
    default: break;
  }
  failed_ = std::string("no PTX for ") + scalar_op_name(x.op);
  return a;
}

std::string ElementEmitter::int_op(const ScalarExpr& x, const std::vector<std::string>& v) {
  const DType t = x.dtype;
  const bool w64 = wide(t);
  const std::string bt = btype(t), it = itype(t);
  const std::string& a = v[x.a];
  const std::string b = x.b >= 0 ? v[x.b] : std::string();
  std::string r = reg(t);
  auto wrap = [&] {  // uint8 arithmetic wraps at 8 bits
    if (t == DType::UInt8) w_.op("and.b32 " + r + ", " + r + ", 255");
  };
  const std::string lo = w64 ? "s64" : "s32";  // modular arithmetic: the low bits are the same
  switch (x.op) {
    case ScalarOp::Add: w_.op("add." + lo + " " + r + ", " + a + ", " + b); wrap(); return r;
    case ScalarOp::Sub: w_.op("sub." + lo + " " + r + ", " + a + ", " + b); wrap(); return r;
    case ScalarOp::Mul: w_.op("mul.lo." + lo + " " + r + ", " + a + ", " + b); wrap(); return r;
    case ScalarOp::Square: w_.op("mul.lo." + lo + " " + r + ", " + a + ", " + a); wrap(); return r;
    case ScalarOp::Neg: w_.op("neg." + lo + " " + r + ", " + a); wrap(); return r;
    case ScalarOp::Abs:  // |MIN| wraps to MIN, as in NumPy; unsigned values are their own
      if (t == DType::UInt8 || t == DType::Bool) w_.op("mov.b32 " + r + ", " + a);
      else w_.op("abs." + lo + " " + r + ", " + a);
      return r;
    case ScalarOp::And: w_.op("and." + bt + " " + r + ", " + a + ", " + b); return r;
    case ScalarOp::Or: w_.op("or." + bt + " " + r + ", " + a + ", " + b); return r;
    case ScalarOp::Xor: w_.op("xor." + bt + " " + r + ", " + a + ", " + b); return r;
    case ScalarOp::Not:
      if (t == DType::Bool) w_.op("xor.b32 " + r + ", " + a + ", 1");
      else w_.op("not." + bt + " " + r + ", " + a);
      wrap();
      return r;
    case ScalarOp::Max:
    case ScalarOp::Min: w_.op(std::string(x.op == ScalarOp::Max ? "max." : "min.") + it + " " + r + ", " + a + ", " + b); return r;
    case ScalarOp::FloorDiv:
    case ScalarOp::Mod: return floor_div_mod(x.op == ScalarOp::FloorDiv, t, a, b);
    default: break;
  }
  failed_ = std::string("no PTX for integer ") + scalar_op_name(x.op);
  return a;
}

// NumPy's integer floor_divide / remainder (loop_ir.h): x // 0 == x % 0 == 0, the quotient
// rounds toward -inf, the remainder takes the divisor's sign, MIN // -1 wraps to MIN.
std::string ElementEmitter::floor_div_mod(bool want_div, DType t, const std::string& a, const std::string& b) {
  const std::string bt = btype(t), it = itype(t);
  std::string q = reg(t), rem = reg(t), out = reg(t);
  std::string zero = w_.reg(1);
  if (t == DType::UInt8 || t == DType::Bool) {
    w_.op("setp.eq.u32 " + zero + ", " + b + ", 0");
    std::string safe = reg(t);
    w_.op("selp.b32 " + safe + ", 1, " + b + ", " + zero);
    w_.op("div.u32 " + q + ", " + a + ", " + safe);
    w_.op("rem.u32 " + rem + ", " + a + ", " + safe);
    w_.op("selp.b32 " + out + ", 0, " + (want_div ? q : rem) + ", " + zero);
    return out;
  }
  // Divide by a safe divisor (1 where b is 0 or -1), then fix those cases and floor.
  std::string minus1 = w_.reg(1), special = w_.reg(1), safe = reg(t);
  w_.op("setp.eq." + it + " " + zero + ", " + b + ", 0");
  w_.op("setp.eq." + it + " " + minus1 + ", " + b + ", -1");
  w_.op("or.pred " + special + ", " + zero + ", " + minus1);
  w_.op("selp." + bt + " " + safe + ", 1, " + b + ", " + special);
  w_.op("div." + it + " " + q + ", " + a + ", " + safe);
  w_.op("rem." + it + " " + rem + ", " + a + ", " + safe);
  // A nonzero remainder whose sign differs from the divisor's: q - 1, rem + b.
  std::string x = reg(t), nz = w_.reg(1), neg = w_.reg(1), fix = w_.reg(1);
  w_.op("setp.ne." + it + " " + nz + ", " + rem + ", 0");
  w_.op("xor." + bt + " " + x + ", " + rem + ", " + b);
  w_.op("setp.lt." + it + " " + neg + ", " + x + ", 0");
  w_.op("and.pred " + fix + ", " + nz + ", " + neg);
  w_.op("@" + fix + " sub." + it + " " + q + ", " + q + ", 1");
  w_.op("@" + fix + " add." + it + " " + rem + ", " + rem + ", " + b);
  // b == -1: -a (wrapping) and 0; b == 0: 0 and 0.
  std::string na = reg(t);
  w_.op("neg." + it + " " + na + ", " + a);
  w_.op("selp." + bt + " " + q + ", " + na + ", " + q + ", " + minus1);
  w_.op("selp." + bt + " " + rem + ", 0, " + rem + ", " + minus1);
  w_.op("selp." + bt + " " + out + ", 0, " + (want_div ? q : rem) + ", " + zero);
  return out;
}

std::string ElementEmitter::load(DType t, const std::string& addr) {
  std::string r = reg(t);
  switch (t) {
    case DType::Float16:
    case DType::BFloat16: w_.op("ld.global.u16 " + r + ", [" + addr + "]"); break;
    case DType::UInt8: w_.op("ld.global.u8 " + r + ", [" + addr + "]"); break;
    case DType::Bool:
      w_.op("ld.global.u8 " + r + ", [" + addr + "]");
      w_.op("min.u32 " + r + ", " + r + ", 1");  // any nonzero byte is true
      break;
    default: w_.op(std::string("ld.global.") + btype(t) + " " + r + ", [" + addr + "]");
  }
  return r;
}

void ElementEmitter::store(DType t, const std::string& addr, const std::string& v) {
  if (rt::dtype_is_half(t)) {
    std::string h = w_.reg(16);
    w_.op("cvt.u16.u32 " + h + ", " + v);
    w_.op("st.global.u16 [" + addr + "], " + h);
    return;
  }
  if (t == DType::UInt8 || t == DType::Bool) {
    std::string h = w_.reg(16);
    w_.op("cvt.u16.u32 " + h + ", " + v);
    w_.op("st.global.u8 [" + addr + "], " + h);
    return;
  }
  w_.op(std::string("st.global.") + btype(t) + " [" + addr + "], " + v);
}

std::vector<std::string> ElementEmitter::load4(DType t, const std::string& addr) {
  std::vector<std::string> r(4);
  for (auto& x : r) x = reg(t);
  const int size = rt::dtype_itemsize(t);
  if (size == 4) {
    w_.op("ld.global.v4.b32 {" + r[0] + ", " + r[1] + ", " + r[2] + ", " + r[3] + "}, [" + addr + "]");
  } else if (size == 8) {
    w_.op("ld.global.v2.b64 {" + r[0] + ", " + r[1] + "}, [" + addr + "]");
    w_.op("ld.global.v2.b64 {" + r[2] + ", " + r[3] + "}, [" + addr + "+16]");
  } else if (size == 2) {
    std::string lo = w_.reg(32), hi = w_.reg(32);
    w_.op("ld.global.v2.b32 {" + lo + ", " + hi + "}, [" + addr + "]");
    w_.op("and.b32 " + r[0] + ", " + lo + ", 65535");
    w_.op("shr.u32 " + r[1] + ", " + lo + ", 16");
    w_.op("and.b32 " + r[2] + ", " + hi + ", 65535");
    w_.op("shr.u32 " + r[3] + ", " + hi + ", 16");
  } else {
    std::string word = w_.reg(32);
    w_.op("ld.global.b32 " + word + ", [" + addr + "]");
    for (int j = 0; j < 4; ++j) {
      w_.op("bfe.u32 " + r[j] + ", " + word + ", " + std::to_string(8 * j) + ", 8");
      if (t == DType::Bool) w_.op("min.u32 " + r[j] + ", " + r[j] + ", 1");
    }
  }
  return r;
}

void ElementEmitter::store4(DType t, const std::string& addr, const std::vector<std::string>& v) {
  const int size = rt::dtype_itemsize(t);
  if (size == 4) {
    w_.op("st.global.v4.b32 [" + addr + "], {" + v[0] + ", " + v[1] + ", " + v[2] + ", " + v[3] + "}");
  } else if (size == 8) {
    w_.op("st.global.v2.b64 [" + addr + "], {" + v[0] + ", " + v[1] + "}");
    w_.op("st.global.v2.b64 [" + addr + "+16], {" + v[2] + ", " + v[3] + "}");
  } else if (size == 2) {
    std::string lo = w_.reg(32), hi = w_.reg(32);
    w_.op("prmt.b32 " + lo + ", " + v[0] + ", " + v[1] + ", 0x5410");  // the low halves of both
    w_.op("prmt.b32 " + hi + ", " + v[2] + ", " + v[3] + ", 0x5410");
    w_.op("st.global.v2.b32 [" + addr + "], {" + lo + ", " + hi + "}");
  } else {
    std::string word = w_.reg(32);
    w_.op("mov.b32 " + word + ", " + v[0]);
    for (int j = 1; j < 4; ++j) w_.op("bfi.b32 " + word + ", " + v[j] + ", " + word + ", " + std::to_string(8 * j) + ", 8");
    w_.op("st.global.b32 [" + addr + "], " + word);
  }
}

}  // namespace framejit::jit::cuda
