// pointwise_codegen.cpp — PTX for fused pointwise kernels: a grid-stride loop over 4-element
// chunks with vector accesses, then over single elements (Note [CUDA pointwise kernel ABI]).
#include "jit/cuda/pointwise_codegen.h"

#include <array>
#include <bit>
#include <cstdio>
#include <cstdint>
#include <vector>

#include "jit/cuda/ptx_ops.h"
#include "jit/lower/lowering.h"
#include "jit/math/atan.h"
#include "jit/math/erf.h"
#include "jit/math/exp_log.h"
#include "jit/math/pow.h"
#include "jit/math/tanh_sigmoid.h"
#include "runtime/cuda/launch.h"

namespace framejit::jit::cuda {

namespace {

using rt::DType;

// Note [PTX values]
// Every value lives in a bit-size register: float32, int32, uint8 and bool in 32 bits, float64
// and int64 in 64. Narrow values are kept canonical — uint8 zero-extended (0..255), bool 0 or 1 —
// so comparisons and conversions read them as they are, and uint8 arithmetic masks its result
// back to 8 bits (NumPy's wrap-around).
bool wide(DType t) { return t == DType::Int64 || t == DType::Float64; }
int reg_bits(DType t) { return wide(t) ? 64 : 32; }
bool is_fp(DType t) { return t == DType::Float32 || t == DType::Float64; }
const char* btype(DType t) { return wide(t) ? "b64" : "b32"; }
const char* ftype(DType t) { return t == DType::Float64 ? "f64" : "f32"; }
// The integer type its compares, divisions and conversions use.
const char* itype(DType t) {
  switch (t) {
    case DType::Int64: return "s64";
    case DType::Int32: return "s32";
    default: return "u32";  // uint8, bool
  }
}

class Emitter {
public:
  Emitter(const PointwiseKernelIR& ir) : ir_(ir) {}

  std::string reg(DType t) { return w_.reg(reg_bits(t)); }
  PtxWriter& w() { return w_; }

  // ---- one element's computation ---------------------------------------------------------------

  // Values of the hoisted expressions (constants and parameters), computed once per thread.
  void hoist(const std::string& args) {
    hoisted_.assign(ir_.body.size(), "");
    for (size_t i = 0; i < ir_.body.size(); ++i) {
      const ScalarExpr& x = ir_.body[i];
      if (x.op == ScalarOp::Const) hoisted_[i] = constant(x.dtype, x.fconst);
      if (x.op == ScalarOp::Param) {
        const bool is_int = ir_.param_dtypes[x.input] == DType::Int64;
        std::string raw = w_.reg(64);
        w_.op("ld.param.b64 " + raw + ", [" + args + "+" + std::to_string(rt::cuda::kArgsParams + 8 * x.input) + "]");
        hoisted_[i] = param(x.dtype, raw, is_int);
      }
    }
  }

  // The body over `inputs` (a register per kernel input); returns a register per body value.
  std::vector<std::string> body(const std::vector<std::string>& inputs) {
    std::vector<std::string> v(ir_.body.size());
    for (size_t i = 0; i < ir_.body.size(); ++i) {
      const ScalarExpr& x = ir_.body[i];
      switch (x.op) {
        case ScalarOp::Load: v[i] = inputs[x.input]; break;
        case ScalarOp::Param:
        case ScalarOp::Const: v[i] = hoisted_[i]; break;
        case ScalarOp::Cast: v[i] = cast(ir_.body[x.a].dtype, x.dtype, v[x.a]); break;
        case ScalarOp::Where: {
          std::string p = w_.reg(1), r = reg(x.dtype);
          w_.op("setp.ne.b32 " + p + ", " + v[x.c] + ", 0");
          w_.op(std::string("selp.") + btype(x.dtype) + " " + r + ", " + v[x.a] + ", " + v[x.b] + ", " + p);
          v[i] = r;
          break;
        }
        default:
          if (is_comparison(x.op)) v[i] = compare(x.op, ir_.body[x.a].dtype, v[x.a], v[x.b]);
          else if (is_fp(x.dtype)) v[i] = float_op(x, v);
          else v[i] = int_op(x, v);
      }
    }
    return v;
  }

  std::string constant(DType t, double value) {
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

  // A parameter (float64 or int64 bits in `raw`) as a value of t.
  std::string param(DType t, const std::string& raw, bool is_int) {
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

  // Note [Casts] in jit/lower/loop_ir.h, as the x86 backend does it.
  std::string cast(DType from, DType to, const std::string& a) {
    if (from == to) return a;
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

  std::string compare(ScalarOp op, DType t, const std::string& a, const std::string& b) {
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

  std::string float_op(const ScalarExpr& x, const std::vector<std::string>& v) {
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

  std::string int_op(const ScalarExpr& x, const std::vector<std::string>& v) {
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
  std::string floor_div_mod(bool want_div, DType t, const std::string& a, const std::string& b) {
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

  // ---- memory ----------------------------------------------------------------------------------

  std::string load(DType t, const std::string& addr) {
    std::string r = reg(t);
    switch (t) {
      case DType::UInt8: w_.op("ld.global.u8 " + r + ", [" + addr + "]"); break;
      case DType::Bool:
        w_.op("ld.global.u8 " + r + ", [" + addr + "]");
        w_.op("min.u32 " + r + ", " + r + ", 1");  // any nonzero byte is true
        break;
      default: w_.op(std::string("ld.global.") + btype(t) + " " + r + ", [" + addr + "]");
    }
    return r;
  }

  void store(DType t, const std::string& addr, const std::string& v) {
    if (t == DType::UInt8 || t == DType::Bool) {
      std::string h = w_.reg(16);
      w_.op("cvt.u16.u32 " + h + ", " + v);
      w_.op("st.global.u8 [" + addr + "], " + h);
      return;
    }
    w_.op(std::string("st.global.") + btype(t) + " [" + addr + "], " + v);
  }

  // Four consecutive elements at `addr` (aligned to 4 elements).
  std::vector<std::string> load4(DType t, const std::string& addr) {
    std::vector<std::string> r(4);
    for (auto& x : r) x = reg(t);
    const int size = rt::dtype_itemsize(t);
    if (size == 4) {
      w_.op("ld.global.v4.b32 {" + r[0] + ", " + r[1] + ", " + r[2] + ", " + r[3] + "}, [" + addr + "]");
    } else if (size == 8) {
      w_.op("ld.global.v2.b64 {" + r[0] + ", " + r[1] + "}, [" + addr + "]");
      w_.op("ld.global.v2.b64 {" + r[2] + ", " + r[3] + "}, [" + addr + "+16]");
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

  void store4(DType t, const std::string& addr, const std::vector<std::string>& v) {
    const int size = rt::dtype_itemsize(t);
    if (size == 4) {
      w_.op("st.global.v4.b32 [" + addr + "], {" + v[0] + ", " + v[1] + ", " + v[2] + ", " + v[3] + "}");
    } else if (size == 8) {
      w_.op("st.global.v2.b64 [" + addr + "], {" + v[0] + ", " + v[1] + "}");
      w_.op("st.global.v2.b64 [" + addr + "+16], {" + v[2] + ", " + v[3] + "}");
    } else {
      std::string word = w_.reg(32);
      w_.op("mov.b32 " + word + ", " + v[0]);
      for (int j = 1; j < 4; ++j) w_.op("bfi.b32 " + word + ", " + v[j] + ", " + word + ", " + std::to_string(8 * j) + ", 8");
      w_.op("st.global.b32 [" + addr + "], " + word);
    }
  }

  const std::string& failed() const { return failed_; }

private:
  const PointwiseKernelIR& ir_;
  PtxWriter w_;
  std::vector<std::string> hoisted_;
  std::string failed_;
};

bool has_math(const PointwiseKernelIR& ir) {
  for (const ScalarExpr& e : ir.body)
    if (scalar_op_is_math(e.op)) return true;
  return false;
}

}  // namespace

bool pointwise_supported(const PointwiseKernelIR& ir) {
  if (!ir.well_formed()) return false;
  for (DType t : ir.input_dtypes)
    if (!pointwise_dtype(t)) return false;
  for (const ScalarExpr& e : ir.body) {
    if (!pointwise_dtype(e.dtype)) return false;
    if (e.op == ScalarOp::Sin || e.op == ScalarOp::Cos || e.op == ScalarOp::Tan) return false;
    if (scalar_op_is_math(e.op) && !is_fp(e.dtype)) return false;
  }
  return true;
}

Expected<std::string> pointwise_ptx(const PointwiseKernelIR& ir, const std::string& name) {
  if (!pointwise_supported(ir)) return Status::unsupported("the PTX generator does not support this kernel");
  namespace abi = rt::cuda;
  Emitter e(ir);
  PtxWriter& w = e.w();
  const std::string args = "args";
  const int nin = static_cast<int>(ir.input_dtypes.size()), nout = static_cast<int>(ir.outputs.size());
  const int nops = nin + nout;
  auto dtype_of = [&](int k) { return k < nin ? ir.input_dtypes[k] : ir.output_dtypes[k - nin]; };
  auto at = [&](int offset) { return "[" + args + "+" + std::to_string(offset) + "]"; };

  // Thread index and count, sizes, pointers and strides (kernel parameters: constant cache).
  std::string tid = w.reg(32), ntid = w.reg(32), ctaid = w.reg(32), nctaid = w.reg(32), gid = w.reg(32), nth = w.reg(32);
  w.op("mov.u32 " + tid + ", %tid.x");
  w.op("mov.u32 " + ntid + ", %ntid.x");
  w.op("mov.u32 " + ctaid + ", %ctaid.x");
  w.op("mov.u32 " + nctaid + ", %nctaid.x");
  w.op("mad.lo.u32 " + gid + ", " + ctaid + ", " + ntid + ", " + tid);
  w.op("mul.lo.u32 " + nth + ", " + nctaid + ", " + ntid);
  std::string n = w.reg(32), rank = w.reg(32), nvec = w.reg(32);
  w.op("ld.param.u32 " + n + ", " + at(abi::kArgsN));
  w.op("ld.param.u32 " + rank + ", " + at(abi::kArgsRank));
  w.op("ld.param.u32 " + nvec + ", " + at(abi::kArgsNvec));
  std::string shape[abi::kLaunchRank];
  for (int d = 0; d < abi::kLaunchRank - 1; ++d) {  // the outermost dim is never divided by
    shape[d] = w.reg(32);
    w.op("ld.param.u32 " + shape[d] + ", " + at(abi::kArgsShape + 4 * d));
  }
  std::vector<std::string> ptr(nops);
  std::vector<std::array<std::string, abi::kLaunchRank>> stride(nops);
  for (int k = 0; k < nops; ++k) {
    ptr[k] = w.reg(64);
    w.op("ld.param.u64 " + ptr[k] + ", " + at(abi::kArgsPtr + 8 * k));
    for (int d = 0; d < abi::kLaunchRank; ++d) {
      stride[k][d] = w.reg(64);
      w.op("ld.param.u64 " + stride[k][d] + ", " + at(abi::kArgsStride + 8 * (abi::kLaunchRank * k + d)));
    }
  }
  std::string rank_is[abi::kLaunchRank];  // rank_is[d]: rank == d + 1
  for (int d = 0; d < abi::kLaunchRank - 1; ++d) {
    rank_is[d] = w.reg(1);
    w.op("setp.eq.u32 " + rank_is[d] + ", " + rank + ", " + std::to_string(d + 1));
  }
  e.hoist(args);

  // Each operand's address of element `idx` (coordinates innermost first; the last used dim
  // takes the remaining quotient).
  auto addresses = [&](const std::string& idx) {
    std::vector<std::string> off(nops);
    for (int k = 0; k < nops; ++k) {
      off[k] = w.reg(64);
      w.op("mov.u64 " + off[k] + ", 0");
    }
    std::string done = w.label();
    std::string q = w.reg(32), wide = w.reg(64);
    w.op("mov.u32 " + q + ", " + idx);
    auto add_coord = [&](const std::string& coord, int d) {
      w.op("cvt.u64.u32 " + wide + ", " + coord);
      for (int k = 0; k < nops; ++k) w.op("mad.lo.s64 " + off[k] + ", " + wide + ", " + stride[k][d] + ", " + off[k]);
    };
    for (int d = 0; d < abi::kLaunchRank - 1; ++d) {
      std::string divide = w.label();
      w.op("@!" + rank_is[d] + " bra.uni " + divide);
      add_coord(q, d);
      w.op("bra.uni " + done);
      w.place(divide);
      std::string nq = w.reg(32), c = w.reg(32);
      w.op("div.u32 " + nq + ", " + q + ", " + shape[d]);
      w.op("mul.lo.u32 " + c + ", " + nq + ", " + shape[d]);
      w.op("sub.u32 " + c + ", " + q + ", " + c);
      add_coord(c, d);
      w.op("mov.u32 " + q + ", " + nq);
    }
    add_coord(q, abi::kLaunchRank - 1);
    w.place(done);
    std::vector<std::string> addr(nops);
    for (int k = 0; k < nops; ++k) {
      addr[k] = w.reg(64);
      w.op("add.s64 " + addr[k] + ", " + ptr[k] + ", " + off[k]);
    }
    return addr;
  };
  auto outputs_of = [&](const std::vector<std::string>& v) {
    std::vector<std::string> out(nout);
    for (int j = 0; j < nout; ++j) out[j] = v[ir.outputs[j]];
    return out;
  };

  // ---- 4-element chunks ---------------------------------------------------------------------------
  std::string p = w.reg(1);
  {
  std::vector<std::string> bcast(nin);  // inputs broadcast along dim 0: one load per chunk
  for (int k = 0; k < nin; ++k) {
    bcast[k] = w.reg(1);
    w.op("setp.eq.s64 " + bcast[k] + ", " + stride[k][0] + ", 0");
  }
  std::string c = w.reg(32), elem = w.reg(32);
  std::string vloop = w.label(), vdone = w.label();
  w.op("mov.u32 " + c + ", " + gid);
  w.place(vloop);
  w.op("setp.ge.u32 " + p + ", " + c + ", " + nvec);
  w.op("@" + p + " bra.uni " + vdone);
  w.op("shl.b32 " + elem + ", " + c + ", 2");
  {
    std::vector<std::string> addr = addresses(elem);
    std::vector<std::vector<std::string>> lanes(nin);
    for (int k = 0; k < nin; ++k) {
      // Both forms into the same registers; the broadcast one replicates lane 0.
      std::string vec_load = w.label(), loaded = w.label();
      w.op("@!" + bcast[k] + " bra.uni " + vec_load);
      std::string one = e.load(ir.input_dtypes[k], addr[k]);
      lanes[k] = {w.reg(reg_bits(ir.input_dtypes[k])), w.reg(reg_bits(ir.input_dtypes[k])),
                  w.reg(reg_bits(ir.input_dtypes[k])), w.reg(reg_bits(ir.input_dtypes[k]))};
      for (int j = 0; j < 4; ++j) w.op(std::string("mov.") + btype(ir.input_dtypes[k]) + " " + lanes[k][j] + ", " + one);
      w.op("bra.uni " + loaded);
      w.place(vec_load);
      std::vector<std::string> v4 = e.load4(ir.input_dtypes[k], addr[k]);
      for (int j = 0; j < 4; ++j) w.op(std::string("mov.") + btype(ir.input_dtypes[k]) + " " + lanes[k][j] + ", " + v4[j]);
      w.place(loaded);
    }
    std::vector<std::vector<std::string>> results(nout, std::vector<std::string>(4));
    if (!has_math(ir)) {
      // Cheap bodies: four copies.
      for (int j = 0; j < 4; ++j) {
        std::vector<std::string> in(nin);
        for (int k = 0; k < nin; ++k) in[k] = lanes[k][j];
        std::vector<std::string> out = outputs_of(e.body(in));
        for (int o = 0; o < nout; ++o) results[o][j] = out[o];
      }
    } else {
      // Math bodies run once per lane in a loop that is kept a loop (Note [PTX size] in
      // jit/cuda/backend.cpp).
      for (int o = 0; o < nout; ++o)
        for (int l = 0; l < 4; ++l) results[o][l] = w.reg(reg_bits(dtype_of(nin + o)));
      std::string j = w.reg(32), lane_loop = w.label();
      std::string is[4];
      w.op("mov.u32 " + j + ", 0");
      w.place(lane_loop);
      w.op(".pragma \"nounroll\"");
      for (int l = 0; l < 4; ++l) {
        is[l] = w.reg(1);
        w.op("setp.eq.u32 " + is[l] + ", " + j + ", " + std::to_string(l));
      }
      std::vector<std::string> in(nin);
      for (int k = 0; k < nin; ++k) {
        const char* bt = btype(ir.input_dtypes[k]);
        in[k] = w.reg(reg_bits(ir.input_dtypes[k]));
        w.op(std::string("mov.") + bt + " " + in[k] + ", " + lanes[k][0]);
        for (int l = 1; l < 4; ++l) w.op("@" + is[l] + " mov." + bt + " " + in[k] + ", " + lanes[k][l]);
      }
      std::vector<std::string> out = outputs_of(e.body(in));
      for (int o = 0; o < nout; ++o)
        for (int l = 0; l < 4; ++l) w.op("@" + is[l] + " mov." + btype(ir.output_dtypes[o]) + " " + results[o][l] + ", " + out[o]);
      std::string more = w.reg(1);
      w.op("add.u32 " + j + ", " + j + ", 1");
      w.op("setp.lt.u32 " + more + ", " + j + ", 4");
      w.op("@" + more + " bra.uni " + lane_loop);
    }
    for (int o = 0; o < nout; ++o) e.store4(ir.output_dtypes[o], addr[nin + o], results[o]);
  }
  w.op("add.u32 " + c + ", " + c + ", " + nth);
  w.op("bra.uni " + vloop);
  w.place(vdone);
  }

  // ---- single elements ---------------------------------------------------------------------------
  std::string i = w.reg(32), sloop = w.label(), sdone = w.label();
  w.op("shl.b32 " + i + ", " + nvec + ", 2");
  w.op("add.u32 " + i + ", " + i + ", " + gid);
  w.place(sloop);
  w.op("setp.ge.u32 " + p + ", " + i + ", " + n);
  w.op("@" + p + " bra.uni " + sdone);
  {
    std::vector<std::string> addr = addresses(i);
    std::vector<std::string> in(nin);
    for (int k = 0; k < nin; ++k) in[k] = e.load(ir.input_dtypes[k], addr[k]);
    std::vector<std::string> out = outputs_of(e.body(in));
    for (int o = 0; o < nout; ++o) e.store(ir.output_dtypes[o], addr[nin + o], out[o]);
  }
  w.op("add.u32 " + i + ", " + i + ", " + nth);
  w.op("bra.uni " + sloop);
  w.place(sdone);
  w.op("ret");
  if (!e.failed().empty()) return Status::unsupported(e.failed());

  std::string ptx = ".version 8.0\n.target sm_80\n.address_size 64\n\n";
  // The loop IR, as comments.
  const std::string text = ir.to_string();
  for (size_t from = 0; from < text.size();) {
    size_t end = text.find('\n', from);
    if (end == std::string::npos) end = text.size();
    ptx += "// " + text.substr(from, end - from) + "\n";
    from = end + 1;
  }
  ptx += "\n.visible .entry " + name + "(\n\t.param .align 8 .b8 " + args + "[" + std::to_string(abi::kArgsSize) + "]\n)\n{\n";
  ptx += w.body();
  ptx += "}\n";
  return ptx;
}

}  // namespace framejit::jit::cuda
