// ptx_ops.cpp — PtxWriter and PtxOps: PTX text for the math library and the kernel generators.
#include "jit/cuda/ptx_ops.h"

#include <bit>
#include <cstdio>

#include "jit/math/trig.h"

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

void PtxWriter::line(const std::string& text) { text_ += "\t" + text + "\n"; }

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

// Note [Payne–Hanek in PTX]
// An element past the inline reduction's range (|x| > 2^16 in float32, 2^20 in float64, and
// infinities) takes a branch that redoes the reduction as x86's out-of-line one does
// (jit/x86/injectors/trig_reduce.cpp), in integer arithmetic: |x| = mant 2^ex with a 53-bit mant,
// and the 192 bits of 2/pi from bit ex - 1 on (kTwoOverPiBits, copied into a block-scoped local
// array on the way in: PTX has no initialized function-scope constants) give x 2/pi mod 4 as
// mant times those bits, whose top two bits are q and whose next 128, as a signed fraction f,
// give r = f pi/2. x86 rounds f pi/2 from a long double; here f is three exact doubles summed
// as a double-double and multiplied by pi/2 as one (about 2^-100 relative), so r (and float32's
// rounding of it) is the same but in rare ties, and float64's r_lo is the more accurate.
// Infinities give NaN with q = 0, as there. The branch is per element: the common case pays one
// compare and a branch not taken.
void PtxOps::reduce_pio2_huge(const Vec& ax, double limit, Vec& r, Vec& r_lo, Vec& q) {
  using math::trig_detail::kTwoOverPiBits;
  using math::trig_detail::kTwoOverPiWords;
  const std::string huge = w_.reg(1), done = w_.label();
  w_.op("setp.gt." + ftype() + " " + huge + ", " + text(ax, ftype()) + ", " + text(c(limit), ftype()));
  w_.op("@!" + huge + " bra " + done);
  // The words a window can reach: k + 3 <= 4 for a float's exponent, <= 18 for a double's.
  const int words_used = f64_ ? 19 : 5;
  static_assert(kTwoOverPiWords >= 19);
  const std::string table = "fj_two_over_pi_" + done.substr(2);
  w_.line("{");
  w_.line(".local .align 8 .b64 " + table + "[" + std::to_string(words_used) + "];");
  auto r64 = [&] { return w_.reg(64); };
  const std::string t = r64(), base = r64();
  w_.op("mov.u64 " + base + ", " + table);
  for (int i = 0; i < words_used; ++i) {
    w_.op("mov.b64 " + t + ", " + std::to_string(kTwoOverPiBits[i]));
    w_.op("st.local.u64 [" + base + "+" + std::to_string(8 * i) + "], " + t);
  }
  // |x| = mant 2^(e - 1075); the first window bit is ex - 1, at 0-based table position p.
  std::string xd = text(ax, "f64");
  if (!f64_) {
    xd = r64();
    w_.op("cvt.f64.f32 " + xd + ", " + text(ax, "f32"));
  }
  const std::string e = r64(), mant = r64(), pos = r64(), k = r64(), off = r64();
  w_.op("shr.u64 " + e + ", " + xd + ", 52");
  w_.op("and.b64 " + mant + ", " + xd + ", 4503599627370495");  // 2^52 - 1
  w_.op("or.b64 " + mant + ", " + mant + ", 4503599627370496");
  w_.op("sub.s64 " + pos + ", " + e + ", 1077");
  w_.op("shr.s64 " + k + ", " + pos + ", 6");  // floor(p / 64)
  w_.op("and.b64 " + off + ", " + pos + ", 63");
  const std::string sh = w_.reg(32), shc = w_.reg(32);
  w_.op("cvt.u32.u64 " + sh + ", " + off);
  w_.op("sub.u32 " + shc + ", 64, " + sh);  // 64 when off = 0: shr.b64 by 64 gives 0
  std::string words[4];
  for (int i = 0; i < 4; ++i) {
    // Word k + i, or 0 for positions before the point (k + i < 0).
    const std::string idx = r64(), at = r64(), neg = w_.reg(1);
    words[i] = r64();
    w_.op("add.s64 " + idx + ", " + k + ", " + std::to_string(i));
    w_.op("setp.lt.s64 " + neg + ", " + idx + ", 0");
    w_.op("max.s64 " + idx + ", " + idx + ", 0");
    w_.op("mad.lo.u64 " + at + ", " + idx + ", 8, " + base);
    w_.op("ld.local.u64 " + words[i] + ", [" + at + "]");
    w_.op("selp.b64 " + words[i] + ", 0, " + words[i] + ", " + neg);
  }
  std::string win[3];
  for (int i = 0; i < 3; ++i) {
    const std::string lo = r64();
    win[i] = r64();
    w_.op("shl.b64 " + win[i] + ", " + words[i] + ", " + sh);
    w_.op("shr.b64 " + lo + ", " + words[i + 1] + ", " + shc);
    w_.op("or.b64 " + win[i] + ", " + win[i] + ", " + lo);
  }
  // The low 192 bits of mant * (win0 win1 win2): p0 p1 p2.
  const std::string p0 = r64(), p1 = r64(), p2 = r64(), hi2 = r64(), lo1 = r64(), hi1 = r64();
  w_.op("mul.lo.u64 " + p2 + ", " + mant + ", " + win[2]);
  w_.op("mul.hi.u64 " + hi2 + ", " + mant + ", " + win[2]);
  w_.op("mul.lo.u64 " + lo1 + ", " + mant + ", " + win[1]);
  w_.op("mul.hi.u64 " + hi1 + ", " + mant + ", " + win[1]);
  w_.op("add.cc.u64 " + p1 + ", " + lo1 + ", " + hi2);
  w_.op("addc.u64 " + hi1 + ", " + hi1 + ", 0");
  w_.op("mad.lo.u64 " + p0 + ", " + mant + ", " + win[0] + ", " + hi1);
  // q = the top two bits; the next 128 (f0 f1) are the fraction, >= 1/2 read as negative.
  const std::string qq = r64(), f0 = r64(), f1 = r64(), tmp = r64(), negf = w_.reg(1);
  w_.op("shr.u64 " + qq + ", " + p0 + ", 62");
  w_.op("shl.b64 " + f0 + ", " + p0 + ", 2");
  w_.op("shr.u64 " + tmp + ", " + p1 + ", 62");
  w_.op("or.b64 " + f0 + ", " + f0 + ", " + tmp);
  w_.op("shl.b64 " + f1 + ", " + p1 + ", 2");
  w_.op("shr.u64 " + tmp + ", " + p2 + ", 62");
  w_.op("or.b64 " + f1 + ", " + f1 + ", " + tmp);
  w_.op("setp.lt.s64 " + negf + ", " + f0 + ", 0");
  w_.op("@" + negf + " add.u64 " + qq + ", " + qq + ", 1");
  // f 2^-128 = a + b + c, each exact: a = (f0 >> 11) 2^-53, b = the next 53 bits 2^-106, c = the
  // last 22 bits 2^-128.
  const std::string a = r64(), b = r64(), cc = r64();
  w_.op("shr.s64 " + tmp + ", " + f0 + ", 11");
  w_.op("cvt.rn.f64.s64 " + a + ", " + tmp);
  w_.op("mul.rn.f64 " + a + ", " + a + ", 0d3CA0000000000000");  // 2^-53
  w_.op("and.b64 " + tmp + ", " + f0 + ", 2047");
  w_.op("shl.b64 " + tmp + ", " + tmp + ", 42");
  w_.op("shr.u64 " + b + ", " + f1 + ", 22");
  w_.op("or.b64 " + tmp + ", " + tmp + ", " + b);
  w_.op("cvt.rn.f64.u64 " + b + ", " + tmp);
  w_.op("mul.rn.f64 " + b + ", " + b + ", 0d3950000000000000");  // 2^-106
  w_.op("and.b64 " + tmp + ", " + f1 + ", 4194303");
  w_.op("cvt.rn.f64.u64 " + cc + ", " + tmp);
  w_.op("mul.rn.f64 " + cc + ", " + cc + ", 0d37F0000000000000");  // 2^-128
  // (s, err) = a + b exactly (two_sum), plus c; then times pi/2 = P1 + P2.
  const std::string s = r64(), err = r64(), bb = r64(), aa = r64();
  w_.op("add.rn.f64 " + s + ", " + a + ", " + b);
  w_.op("sub.rn.f64 " + bb + ", " + s + ", " + a);
  w_.op("sub.rn.f64 " + aa + ", " + s + ", " + bb);
  w_.op("sub.rn.f64 " + aa + ", " + a + ", " + aa);
  w_.op("sub.rn.f64 " + bb + ", " + b + ", " + bb);
  w_.op("add.rn.f64 " + err + ", " + aa + ", " + bb);
  w_.op("add.rn.f64 " + err + ", " + err + ", " + cc);
  const std::string rh = r64(), rl = r64(), rr = r64(), rlo = r64();
  const std::string kP1 = "0d3FF921FB54442D18", kP2 = "0d3C91A62633145C07";
  w_.op("mul.rn.f64 " + rh + ", " + s + ", " + kP1);
  w_.op("neg.f64 " + tmp + ", " + rh);
  w_.op("fma.rn.f64 " + rl + ", " + s + ", " + kP1 + ", " + tmp);
  w_.op("fma.rn.f64 " + rl + ", " + s + ", " + kP2 + ", " + rl);
  w_.op("fma.rn.f64 " + rl + ", " + err + ", " + kP1 + ", " + rl);
  w_.op("add.rn.f64 " + rr + ", " + rh + ", " + rl);
  w_.op("sub.rn.f64 " + tmp + ", " + rr + ", " + rh);
  w_.op("sub.rn.f64 " + rlo + ", " + rl + ", " + tmp);
  // Infinities: NaN, quadrant 0 (and no r_lo).
  const std::string inf = w_.reg(1);
  w_.op("setp.eq.f64 " + inf + ", " + xd + ", 0d7FF0000000000000");
  w_.op("and.b64 " + qq + ", " + qq + ", 3");
  w_.op("selp.b64 " + qq + ", 0, " + qq + ", " + inf);
  w_.op("selp.b64 " + rr + ", 0d7FF8000000000000, " + rr + ", " + inf);
  w_.op("selp.b64 " + rlo + ", 0, " + rlo + ", " + inf);
  if (f64_) {
    w_.op("mov.b64 " + r.reg + ", " + rr);
    w_.op("mov.b64 " + r_lo.reg + ", " + rlo);
    w_.op("mov.b64 " + q.reg + ", " + qq);
  } else {
    w_.op("cvt.rn.f32.f64 " + r.reg + ", " + rr);
    w_.op("cvt.u32.u64 " + q.reg + ", " + qq);
  }
  w_.line("}");
  w_.place(done);
}

}  // namespace framejit::jit::cuda
