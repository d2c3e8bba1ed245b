// trig_reduce.cpp — Payne–Hanek reduction modulo pi/2 for arguments too large for the inline
// Cody–Waite reduction; generated code calls it out of line when any lane needs it.
#include <cmath>
#include <cstdint>

#include "jit/math/trig.h"
#include "jit/x86/injectors/math_p.h"

namespace framejit::jit::x86::injectors {

namespace {

using math::trig_detail::kTwoOverPiBits;
constexpr int kWords = math::trig_detail::kTwoOverPiWords;
constexpr long double kPiOver2 = 1.57079632679489661923132169163975144L;

uint64_t table_word(int k) { return k >= 0 && k < kWords ? kTwoOverPiBits[k] : 0; }

/// Bits s .. s+63 of 2/pi (bit 1 is the first after the point; bits <= 0 are zero).
uint64_t bits_at(int s) {
  const int p = s - 1;                                // 0-based position in the table
  const int k = p >= 0 ? p / 64 : -((-p + 63) / 64);  // floor(p / 64)
  const int off = p - 64 * k;
  if (off == 0) return table_word(k);
  return (table_word(k) << off) | (table_word(k + 1) >> (64 - off));
}

/// x = q pi/2 + r, |r| <= pi/4, for any double (r is NaN for non-finite x).
long double reduce(double x, int64_t* q_out) {
  *q_out = 0;
  if (!std::isfinite(x)) return x - x;
  const double ax = std::fabs(x);
  if (ax <= 0.785398163397448279) return x;
  int e;
  const double m = std::frexp(ax, &e);
  const uint64_t mant = static_cast<uint64_t>(std::ldexp(m, 53));  // ax = mant * 2^(e-53)
  const int ex = e - 53;
  // x * 2/pi = mant * sum_i b_i 2^(ex-i). Bits with ex - i >= 2 add multiples of 4 (q mod 4 is
  // all that matters), so the window starts at bit ex - 1: with 192 bits W, the rest is
  // mant * W * 2^-190 mod 4, i.e. the low 192 bits of mant * W.
  const int j0 = ex - 1;
  const uint64_t w0 = bits_at(j0), w1 = bits_at(j0 + 64), w2 = bits_at(j0 + 128);
  using u128 = unsigned __int128;
  const u128 t2 = static_cast<u128>(mant) * w2;
  const u128 t1 = static_cast<u128>(mant) * w1 + static_cast<uint64_t>(t2 >> 64);
  const uint64_t p2 = static_cast<uint64_t>(t2);
  const uint64_t p1 = static_cast<uint64_t>(t1);
  const uint64_t p0 = mant * w0 + static_cast<uint64_t>(t1 >> 64);
  // Integer part (mod 4) is the top two bits; the fraction's top 128 bits, as a signed number
  // once rounded to the nearest integer q, give r / (pi/2).
  int64_t q = static_cast<int64_t>(p0 >> 62);
  const uint64_t f0 = (p0 << 2) | (p1 >> 62);
  const uint64_t f1 = (p1 << 2) | (p2 >> 62);
  __int128 frac =
      static_cast<__int128>((static_cast<u128>(f0) << 64) | f1);  // wraps: >= 1/2 is negative
  if (frac < 0) q += 1;
  const long double r = static_cast<long double>(frac) * 0x1p-128L * kPiOver2;
  *q_out = x < 0 ? -q : q;
  return x < 0 ? -r : r;
}

}  // namespace

void reduce_pio2_f32(const float* x, float* r, int32_t* q, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t qq;
    r[i] = static_cast<float>(reduce(x[i], &qq));
    q[i] = static_cast<int32_t>(qq & 3);
  }
}

void reduce_pio2_f64(const double* x, double* r, double* r_lo, int64_t* q, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t qq;
    const long double v = reduce(x[i], &qq);
    r[i] = static_cast<double>(v);
    r_lo[i] = std::isfinite(r[i]) ? static_cast<double>(v - r[i]) : 0.0;
    q[i] = qq & 3;
  }
}

}  // namespace framejit::jit::x86::injectors
