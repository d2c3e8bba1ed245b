// math_p.h — the out-of-line pieces of x86's math injectors: the Payne–Hanek reduction that
// generated sin/cos/tan code calls for lanes too large for the inline one.
#pragma once

#include <cstdint>

namespace framejit::jit::x86::injectors {

/// Payne–Hanek reduction, called from generated code for lanes too large for the inline
/// Cody–Waite reduction: x = q * pi/2 + r with |r| <= pi/4, q mod 4 in q. float32: r rounded to
/// float; float64: r + r_lo, a double-double. Non-finite x gives r = NaN. Arrays hold n elements.
void reduce_pio2_f32(const float* x, float* r, int32_t* q, int64_t n);
void reduce_pio2_f64(const double* x, double* r, double* r_lo, int64_t* q, int64_t n);

}  // namespace framejit::jit::x86::injectors
