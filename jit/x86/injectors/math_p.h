// math_p.h — the math-function emitters behind MathInjector, one family per file, plus the shared
// cores they build on (exp's reduction, log's argument split) and the out-of-line trig reduction.
//
// Each emitter takes lanes of the VecOps element type and returns a new register; none changes
// its inputs. Float32 kernels on the Scalar ISA and float32 pow run the float64 emitters on
// widened lanes (injectors.cpp), so the float32 emitters may assume FMA.
#pragma once

#include <cstdint>

#include "jit/x86/injectors/vec_ops_p.h"

namespace framejit::jit::x86::injectors {

// ---- exp_log.cpp ---------------------------------------------------------------------------
Vec emit_exp(VecOps& o, const Vec& x);
Vec emit_expm1(VecOps& o, const Vec& x);
Vec emit_log(VecOps& o, const Vec& x);
Vec emit_log1p(VecOps& o, const Vec& x);

/// exp's reduction for x already clamped to exp_clamp_limit(): e^x = (1 + em1) * s1 * s2 with
/// s1 = 2^n1, s2 = 2^n2, n1 + n2 = n, each factor a normal number (so subnormal results round
/// once). `x_lo`, when given, is a low-order part added to the reduced argument (pow's
/// double-double). With `one_scale` (for callers whose x keeps 2^n normal: |x| < 87 for float32),
/// s1 = 2^n and s2 is left empty.
struct ExpCore {
  Vec em1;
  Vec s1;
  Vec s2;
};
ExpCore exp_core(VecOps& o, const Vec& x, const Vec* x_lo = nullptr, bool one_scale = false);
/// |x| beyond which exp over/underflows for sure, yet n = round(x/ln2) keeps both halves normal.
double exp_clamp_limit(const VecOps& o);
/// (1 + em1) * s1 * s2
Vec exp_finish(VecOps& o, const ExpCore& e);

/// x = 2^e * (1 + f) with 1 + f in [sqrt(1/2), sqrt(2)), for positive normal x (e as a float).
struct LogSplit {
  Vec e;
  Vec f;
};
LogSplit log_split(VecOps& o, const Vec& x);

// ---- tanh_sigmoid.cpp ----------------------------------------------------------------------
Vec emit_tanh(VecOps& o, const Vec& x);
Vec emit_sigmoid(VecOps& o, const Vec& x);

// ---- erf.cpp -------------------------------------------------------------------------------
Vec emit_erf(VecOps& o, const Vec& x);

// ---- trig.cpp ------------------------------------------------------------------------------
Vec emit_sin(VecOps& o, const Vec& x);
Vec emit_cos(VecOps& o, const Vec& x);
Vec emit_tan(VecOps& o, const Vec& x);

// ---- atan.cpp ------------------------------------------------------------------------------
Vec emit_atan(VecOps& o, const Vec& x);
Vec emit_atan2(VecOps& o, const Vec& y, const Vec& x);

// ---- pow.cpp -------------------------------------------------------------------------------
Vec emit_pow(VecOps& o, const Vec& x, const Vec& y);  // float64 lanes only

// ---- trig_reduce.cpp -----------------------------------------------------------------------
/// Payne–Hanek reduction, called from generated code for lanes too large for the inline
/// Cody–Waite reduction: x = q * pi/2 + r with |r| <= pi/4, q mod 4 in q. float32: r rounded to
/// float; float64: r + r_lo, a double-double. Non-finite x gives r = NaN. Arrays hold n elements.
void reduce_pio2_f32(const float* x, float* r, int32_t* q, int64_t n);
void reduce_pio2_f64(const double* x, double* r, double* r_lo, int64_t* q, int64_t n);

}  // namespace framejit::jit::x86::injectors
