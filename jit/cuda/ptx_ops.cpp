// ptx_ops.cpp — PtxWriter and PtxOps: PTX text for the math library and the kernel generators.
#include "jit/cuda/ptx_ops.h"

#include <bit>
#include <cstdio>

namespace framejit::jit::cuda {

std::string PtxWriter::reg(int bits) {
  switch (bits) {
    case 1: return "%p" + std::to_string(preds_++);
    case 16: return "%h" + std::to_string(r16_++);
    case 32: return "%r" + std::to_string(r32_++);
    default: return "%rd" + std::to_string(r64_++);
  }
}

std::string PtxWriter::label() { return "$L" + std::to_string(labels_++); }

void PtxWriter::op(const std::string& text) {
  text_ += '\t';
  text_ += text;
  text_ += ";\n";
}

void PtxWriter::place(const std::string& label) { text_ += label + ":\n"; }

void PtxWriter::comment(const std::string& text) { text_ += "\t// " + text + "\n"; }

std::string PtxWriter::body() const {
  std::string decl;
  auto declare = [&](const char* type, const char* prefix, int n) {
    if (n) decl += std::string("\t.reg .") + type + " " + prefix + "<" + std::to_string(n) + ">;\n";
  };
  declare("pred", "%p", preds_);
  declare("b16", "%h", r16_);
  declare("b32", "%r", r32_);
  declare("b64", "%rd", r64_);
  return decl + text_;
}

std::string imm_text(const PtxVal& v, const std::string& type) {
  char buf[32];
  if (type == "f32") std::snprintf(buf, sizeof buf, "0f%08X", static_cast<unsigned>(v.imm));
  else if (type == "f64") std::snprintf(buf, sizeof buf, "0d%016llX", static_cast<unsigned long long>(v.imm));
  else if (type.size() >= 3 && type.substr(1) == "64")
    std::snprintf(buf, sizeof buf, "0x%016llX", static_cast<unsigned long long>(v.imm));
  else std::snprintf(buf, sizeof buf, "0x%08X", static_cast<unsigned>(v.imm));
  return buf;
}

PtxVal PtxOps::c(double v) const {
  PtxVal r;
  r.imm = f64_ ? std::bit_cast<uint64_t>(v) : std::bit_cast<uint32_t>(static_cast<float>(v));
  return r;
}

PtxVal PtxOps::bits(uint64_t b) const {
  PtxVal r;
  r.imm = f64_ ? b : (b & 0xFFFFFFFFull);
  return r;
}

PtxVal PtxOps::load(const Vec& v) {
  Vec r = fresh();
  w_.op("mov." + btype() + " " + r.reg + ", " + text(v, btype()));
  if (!v.is_reg()) {
    const double x = f64_ ? std::bit_cast<double>(v.imm) : std::bit_cast<float>(static_cast<uint32_t>(v.imm));
    r.nonzero_const = x == x && x != 0;
  } else {
    r.nonzero_const = v.nonzero_const;
  }
  return r;
}

PtxVal PtxOps::arith(const char* op, const Vec& a, const Vec& b) {
  // NB: .rn everywhere: without a rounding modifier ptxas may contract a mul and an add into an
  // fma, and the routines' error analysis counts every rounding.
  Vec r = fresh();
  const std::string t = ftype();
  w_.op(std::string(op) + "." + t + " " + r.reg + ", " + text(a, t) + ", " + text(b, t));
  return r;
}

// x86's rule is the second operand when either is NaN. Against a constant first operand that is
// a nonzero number, that is "NaN when b is NaN" — what min.NaN/max.NaN do in one instruction
// (float32, sm_80) — and the zeros' order, where PTX's min/max and the rule part, cannot arise.
PtxVal PtxOps::min(const Vec& a, const Vec& b) {
  if (!f64_ && a.nonzero_const) {
    Vec r = fresh();
    w_.op("min.NaN.f32 " + r.reg + ", " + text(b, "f32") + ", " + a.reg);
    return r;
  }
  Mask lt = cmp(a, b, math::Cmp::kLt);
  return blend(lt, b, a);
}

PtxVal PtxOps::max(const Vec& a, const Vec& b) {
  if (!f64_ && a.nonzero_const) {
    Vec r = fresh();
    w_.op("max.NaN.f32 " + r.reg + ", " + text(b, "f32") + ", " + a.reg);
    return r;
  }
  Mask gt = cmp(a, b, math::Cmp::kGt);
  return blend(gt, b, a);
}

PtxVal PtxOps::clamp(const Vec& x, double lo, double hi) {
  // x in the second operand: a NaN x is what min/max return.
  Vec t = min(load(c(hi)), x);
  return max(load(c(lo)), t);
}

PtxVal PtxOps::sqrt(const Vec& a) {
  Vec r = fresh();
  w_.op("sqrt.rn." + ftype() + " " + r.reg + ", " + text(a, ftype()));
  return r;
}

PtxVal PtxOps::fma(const Vec& a, const Vec& b, const Vec& c) {
  Vec r = fresh();
  const std::string t = ftype();
  w_.op("fma.rn." + t + " " + r.reg + ", " + text(a, t) + ", " + text(b, t) + ", " + text(c, t));
  return r;
}

PtxVal PtxOps::poly(const Vec& x, std::span<const double> coef) {
  const size_t n = coef.size() - 1;
  Vec p = load(c(coef[n]));
  for (size_t k = n; k-- > 0;) p = fma(p, x, c(coef[k]));
  return p;
}

PtxVal PtxOps::bitop(const char* op, const Vec& a, const Vec& b) {
  // Two immediates fold here (sigmoid's bor of two constants); PTX wants a register operand.
  if (!a.is_reg() && !b.is_reg()) return load(bits(op[0] == 'a' ? a.imm & b.imm : op[0] == 'o' ? a.imm | b.imm : a.imm ^ b.imm));
  Vec r = fresh();
  const std::string t = btype();
  w_.op(std::string(op) + "." + t + " " + r.reg + ", " + text(a, t) + ", " + text(b, t));
  return r;
}

PtxVal PtxOps::bandn(const Vec& a, const Vec& b) {
  Vec na = fresh();
  w_.op("not." + btype() + " " + na.reg + ", " + text(load(a), btype()));
  return band(na, b);
}

PtxVal PtxOps::fneg(const Vec& a) {
  if (!a.is_reg()) return neg(a);
  Vec r = fresh();
  w_.op("neg." + ftype() + " " + r.reg + ", " + a.reg);
  return r;
}

PtxVal PtxOps::div_normal(const Vec& a, const Vec& b) {
  if (f64_) return div(a, b);
  // q = a * rcp(b) is within about 1.5 ulp; the residual a - b*q is exact in an fma, and
  // q + residual * rcp(b) lands within 0.5 ulp plus a term of order 2^-46 relative. The divisor's
  // range keeps rcp.approx.ftz away from subnormals and infinities.
  Vec r = fresh(), q = fresh();
  w_.op("rcp.approx.ftz.f32 " + r.reg + ", " + text(b, "f32"));
  w_.op("mul.rn.f32 " + q.reg + ", " + text(a, "f32") + ", " + r.reg);
  Vec e = fnma(b, q, a);
  return fma(e, r, q);
}

PtxVal PtxOps::exp2_approx(const Vec& f) {
  Vec r = fresh();
  w_.op("ex2.approx.ftz.f32 " + r.reg + ", " + text(f, "f32"));
  return r;
}

PtxVal PtxOps::neg(const Vec& a) {
  if (!a.is_reg()) return bits(a.imm ^ sign_bit());  // an immediate stays one
  return bxor(a, bits(sign_bit()));
}

PtxVal PtxOps::ishl(const Vec& a, int n) {
  Vec r = fresh();
  w_.op("shl." + btype() + " " + r.reg + ", " + text(a, btype()) + ", " + std::to_string(n));
  return r;
}

PtxVal PtxOps::ishr(const Vec& a, int n) {
  Vec r = fresh();
  const std::string t = f64_ ? "u64" : "u32";
  w_.op("shr." + t + " " + r.reg + ", " + text(a, t) + ", " + std::to_string(n));
  return r;
}

PtxVal PtxOps::intop(const char* op, const Vec& a, const Vec& b) {
  Vec r = fresh();
  const std::string t = f64_ ? "s64" : "s32";
  w_.op(std::string(op) + "." + t + " " + r.reg + ", " + text(a, t) + ", " + text(b, t));
  return r;
}

PtxOps::Mask PtxOps::cmp(const Vec& a, const Vec& b, math::Cmp p) {
  const char* op = "eq";
  switch (p) {
    case math::Cmp::kEq: op = "eq"; break;
    case math::Cmp::kLt: op = "lt"; break;
    case math::Cmp::kLe: op = "le"; break;
    case math::Cmp::kUnord: op = "nan"; break;
    case math::Cmp::kNe: op = "neu"; break;
    case math::Cmp::kNlt: op = "geu"; break;
    case math::Cmp::kNle: op = "gtu"; break;
    case math::Cmp::kOrd: op = "num"; break;
    case math::Cmp::kNge: op = "ltu"; break;
    case math::Cmp::kNgt: op = "leu"; break;
    case math::Cmp::kGe: op = "ge"; break;
    case math::Cmp::kGt: op = "gt"; break;
  }
  Mask m = w_.reg(1);
  const std::string t = ftype();
  // NB: the first operand of setp must be a register.
  w_.op(std::string("setp.") + op + "." + t + " " + m + ", " + text(a.is_reg() ? a : load(a), t) + ", " + text(b, t));
  return m;
}

PtxOps::Mask PtxOps::predop(const char* op, const Mask& a, const Mask& b) {
  Mask m = w_.reg(1);
  w_.op(std::string(op) + ".pred " + m + ", " + a + ", " + b);
  return m;
}

PtxOps::Mask PtxOps::mandnot(const Mask& a, const Mask& b) {
  Mask nb = w_.reg(1);
  w_.op("not.pred " + nb + ", " + b);
  return mand(a, nb);
}

PtxOps::Mask PtxOps::bit_set(const Vec& a, int bit) {
  Vec t = band(a, bits(uint64_t{1} << bit));
  Mask m = w_.reg(1);
  w_.op("setp.ne." + btype() + " " + m + ", " + t.reg + ", 0");
  return m;
}

PtxVal PtxOps::blend(const Mask& m, const Vec& f, const Vec& t) {
  Vec r = fresh();
  const std::string b = btype();
  w_.op("selp." + b + " " + r.reg + ", " + text(t, b) + ", " + text(f, b) + ", " + m);
  return r;
}

PtxOps::Pair PtxOps::two_prod(const Vec& a, const Vec& b) {
  Vec hi = mul(a, b);
  return {hi, fms(a, b, hi)};
}

PtxOps::Pair PtxOps::fast_two_sum(const Vec& a, const Vec& b) {
  Vec s = add(a, b);
  Vec z = sub(s, a);
  return {s, sub(b, z)};
}

PtxOps::Pair PtxOps::two_sum(const Vec& a, const Vec& b) {
  Vec s = add(a, b);
  Vec bb = sub(s, a);
  Vec aa = sub(s, bb);
  Vec e = add(sub(a, aa), sub(b, bb));
  return {s, e};
}

void PtxOps::reduce_pio2_huge(const Vec&, double, Vec&, Vec&, Vec&) {
  // Payne–Hanek in PTX is not written yet: the backend declines sin/cos/tan (so this is never
  // reached from a kernel it accepted).
  unsupported_ = "sin/cos/tan of arguments beyond the inline reduction";
}

}  // namespace framejit::jit::cuda
