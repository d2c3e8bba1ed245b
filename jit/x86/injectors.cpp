// injectors.cpp — MathInjector: picks the emitter for each MathFn and widens float32 lanes to
// float64 where the float64 emitter is used (the SSE2 scalar path, and pow).
#include "jit/x86/injectors.h"

#include "jit/math/atan.h"
#include "jit/math/erf.h"
#include "jit/math/exp_log.h"
#include "jit/math/pow.h"
#include "jit/math/tanh_sigmoid.h"
#include "jit/math/trig.h"
#include "jit/x86/injectors/vec_ops_p.h"

// Note [Math injector design]
// Each function is written once, in jit/math (Note [One math library]), against VecOps
// (injectors/vec_ops_p.h), which lowers it to SSE2 scalar, AVX2+FMA or AVX-512. Techniques: range reduction
// (Cody–Waite with split constants, Payne–Hanek out of line for huge trig arguments), minimax
// polynomials fitted for this code, exponents built with integer ops, special values by blends.
//  * float32 on the Scalar ISA runs the float64 emitter on widened lanes: the SSE2 path has no
//    FMA, and the float64 algorithms do not need one. pow widens at every ISA (it needs log|x| to
//    ~2^-64 either way). sqrt is always the IEEE instruction.
//  * Measured max error against the correctly rounded result (tests/cpp/test_math_injectors.cpp):
//    1-3 ulp; every float32 input checked for the unary functions, sampled float64 over the whole
//    range. NaN, ±inf, ±0 and overflow follow C99/NumPy; a NaN result need not keep the payload.
//  * Assumes the default MXCSR (round to nearest, no FTZ/DAZ), as NumPy does.
//  * The Scalar ISA emits legacy-SSE encodings so it runs without AVX. Inside a kernel that uses
//    ymm/zmm, prefer the vector injector for the tail too (masked loads, or one element loaded
//    with vmovss/vmovsd, which zeroes the other lanes): legacy SSE after 256-bit code pays an
//    AVX/SSE transition on some Intel cores, and the Scalar float32 path (computed in float64)
//    rounds differently from the vector one, so a value's result would depend on its position.
//  * sin/cos/tan call injectors::reduce_pio2_* (VecOps::reduce_pio2_huge) when a lane exceeds the inline reduction's range
//    (2^16 float32, 2^20 float64); the Compiler spills live vector registers around that call.

namespace framejit::jit::x86 {

namespace {

using asmjit::x86::Vec;
using injectors::VecOps;

Vec apply(VecOps& o, MathFn fn, const Vec& a, const Vec& b) {
  switch (fn) {
    case MathFn::Exp: return math::emit_exp(o, a);
    case MathFn::Log: return math::emit_log(o, a);
    case MathFn::Log1p: return math::emit_log1p(o, a);
    case MathFn::Expm1: return math::emit_expm1(o, a);
    case MathFn::Tanh: return math::emit_tanh(o, a);
    case MathFn::Sigmoid: return math::emit_sigmoid(o, a);
    case MathFn::Erf: return math::emit_erf(o, a);
    case MathFn::Sin: return math::emit_sin(o, a);
    case MathFn::Cos: return math::emit_cos(o, a);
    case MathFn::Tan: return math::emit_tan(o, a);
    case MathFn::Atan: return math::emit_atan(o, a);
    case MathFn::Atan2: return math::emit_atan2(o, a, b);
    case MathFn::Sqrt: return o.sqrt(a);
    case MathFn::Pow: return math::emit_pow(o, a, b);
  }
  return a;
}

}  // namespace

const char* math_fn_name(MathFn fn) {
  switch (fn) {
    case MathFn::Exp: return "exp";
    case MathFn::Log: return "log";
    case MathFn::Log1p: return "log1p";
    case MathFn::Expm1: return "expm1";
    case MathFn::Tanh: return "tanh";
    case MathFn::Sigmoid: return "sigmoid";
    case MathFn::Erf: return "erf";
    case MathFn::Sin: return "sin";
    case MathFn::Cos: return "cos";
    case MathFn::Tan: return "tan";
    case MathFn::Atan: return "arctan";
    case MathFn::Atan2: return "arctan2";
    case MathFn::Sqrt: return "sqrt";
    case MathFn::Pow: return "power";
  }
  return "?";
}

bool math_fn_is_binary(MathFn fn) { return fn == MathFn::Atan2 || fn == MathFn::Pow; }

MathInjector::MathInjector(asmjit::x86::Compiler& cc, Isa isa, rt::DType dtype)
    : cc_(cc), isa_(isa), dtype_(dtype), pool_(std::make_unique<injectors::RegPool>()) {}
MathInjector::~MathInjector() = default;
MathInjector::MathInjector(MathInjector&&) noexcept = default;

asmjit::x86::Vec MathInjector::new_vec(const char* name) {
  switch (isa_) {
    case Isa::Scalar: return name ? cc_.newXmm(name) : cc_.newXmm();
    case Isa::Avx2: return name ? cc_.newYmm(name) : cc_.newYmm();
    case Isa::Avx512: return name ? cc_.newZmm(name) : cc_.newZmm();
  }
  return cc_.newXmm();
}

void MathInjector::emit(MathFn fn, const asmjit::x86::Vec& dst, const asmjit::x86::Vec& a,
                        const asmjit::x86::Vec& b) {
  const bool f32 = dtype_ == rt::DType::Float32;
  // NB: sqrt never widens — it is the correctly rounded IEEE instruction at every width.
  const bool widen = f32 && fn != MathFn::Sqrt && (isa_ == Isa::Scalar || fn == MathFn::Pow);
  // Every temporary of this call is dead once its result is in dst (Note [Recycled injector
  // registers]).
  pool_->release_all();
  if (!widen) {
    VecOps o(cc_, isa_, f32 ? injectors::Elem::F32 : injectors::Elem::F64, pool_.get());
    o.mov(dst, apply(o, fn, a, b));
    return;
  }
  VecOps o(cc_, isa_, injectors::Elem::F64, pool_.get());
  const bool binary = math_fn_is_binary(fn);
  switch (isa_) {
    case Isa::Scalar: {
      // NB: cvtss2sd/cvtsd2ss merge into their destination; zeroing it first breaks the false
      // dependency on whatever the register held (a loop-carried chain otherwise).
      Vec wa = cc_.newXmm(), wb = cc_.newXmm();
      cc_.xorps(wa.xmm(), wa.xmm());
      cc_.cvtss2sd(wa.xmm(), a.xmm());
      if (binary) {
        cc_.xorps(wb.xmm(), wb.xmm());
        cc_.cvtss2sd(wb.xmm(), b.xmm());
      }
      Vec r = apply(o, fn, wa, wb);
      cc_.xorps(dst.xmm(), dst.xmm());
      cc_.cvtsd2ss(dst.xmm(), r.xmm());
      return;
    }
    case Isa::Avx2: {
      // 8 floats -> two ymm of 4 doubles each, and back.
      auto widen2 = [&](const Vec& v, Vec& lo, Vec& hi) {
        lo = cc_.newYmm();
        hi = cc_.newYmm();
        Vec top = cc_.newXmm();
        cc_.vcvtps2pd(lo.ymm(), v.xmm());
        cc_.vextractf128(top.xmm(), v.ymm(), 1);
        cc_.vcvtps2pd(hi.ymm(), top.xmm());
      };
      Vec alo, ahi, blo, bhi;
      widen2(a, alo, ahi);
      if (binary) widen2(b, blo, bhi);
      Vec rlo = apply(o, fn, alo, blo);
      Vec rhi = apply(o, fn, ahi, bhi);
      Vec nlo = cc_.newYmm(), nhi = cc_.newXmm();
      cc_.vcvtpd2ps(nlo.xmm(), rlo.ymm());
      cc_.vcvtpd2ps(nhi.xmm(), rhi.ymm());
      cc_.vinsertf128(dst.ymm(), nlo.ymm(), nhi.xmm(), 1);
      return;
    }
    case Isa::Avx512: {
      auto widen2 = [&](const Vec& v, Vec& lo, Vec& hi) {
        lo = cc_.newZmm();
        hi = cc_.newZmm();
        Vec top = cc_.newYmm();
        cc_.vcvtps2pd(lo.zmm(), v.ymm());
        cc_.vextractf64x4(top.ymm(), v.zmm(), 1);
        cc_.vcvtps2pd(hi.zmm(), top.ymm());
      };
      Vec alo, ahi, blo, bhi;
      widen2(a, alo, ahi);
      if (binary) widen2(b, blo, bhi);
      Vec rlo = apply(o, fn, alo, blo);
      Vec rhi = apply(o, fn, ahi, bhi);
      Vec nlo = cc_.newZmm(), nhi = cc_.newYmm();
      cc_.vcvtpd2ps(nlo.ymm(), rlo.zmm());
      cc_.vcvtpd2ps(nhi.ymm(), rhi.zmm());
      cc_.vinsertf64x4(dst.zmm(), nlo.zmm(), nhi.ymm(), 1);
      return;
    }
  }
}

}  // namespace framejit::jit::x86
