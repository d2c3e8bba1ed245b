// dtype.cpp — names and properties of element types.
#include "runtime/dtype.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace framejit::rt {
namespace {
struct DTypeInfo {
  std::string_view name;
  std::string_view short_name;
};
constexpr DTypeInfo kInfo[kNumDTypes] = {
    {"bool", "b8"},       {"int8", "i8"},       {"int16", "i16"},   {"int32", "i32"},
    {"int64", "i64"},     {"uint8", "u8"},      {"uint16", "u16"},  {"uint32", "u32"},
    {"uint64", "u64"},    {"float16", "f16"},   {"float32", "f32"}, {"float64", "f64"},
    {"complex64", "c64"}, {"complex128", "c128"}, {"bfloat16", "bf16"},
};
}  // namespace
// dtype_itemsize's table (dtype.h) lists the types in this order too.
static_assert(dtype_itemsize(DType::Bool) == 1 && dtype_itemsize(DType::Float16) == 2 &&
              dtype_itemsize(DType::Float32) == 4 && dtype_itemsize(DType::Complex128) == 16 &&
              dtype_itemsize(DType::BFloat16) == 2 && static_cast<int>(DType::BFloat16) == kNumDTypes - 1);

std::string_view dtype_name(DType t) { return kInfo[static_cast<int>(t)].name; }
std::string_view dtype_short_name(DType t) { return kInfo[static_cast<int>(t)].short_name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kInfo[i].name == name) return static_cast<DType>(i);
  return std::nullopt;
}

bool dtype_is_float(DType t) {
  return dtype_is_half(t) || t == DType::Float32 || t == DType::Float64;
}
bool dtype_is_complex(DType t) { return t == DType::Complex64 || t == DType::Complex128; }
bool dtype_is_integer(DType t) { return t >= DType::Int8 && t <= DType::UInt64; }
bool dtype_is_signed(DType t) {
  return (t >= DType::Int8 && t <= DType::Int64) || dtype_is_float(t) || dtype_is_complex(t);
}

double half_to_double(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0) v = std::ldexp(mant, -24);  // zero or subnormal
  else if (exp == 31) v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  else v = std::ldexp(mant | 0x400, exp - 25);
  return (h & 0x8000) ? -v : v;
}

// Round to nearest, ties to even, straight from the double (no double rounding through float).
uint16_t double_to_half(double d) {
  const uint64_t b = std::bit_cast<uint64_t>(d);
  const uint16_t sign = static_cast<uint16_t>((b >> 48) & 0x8000);
  const int exp = static_cast<int>((b >> 52) & 0x7ff);
  const uint64_t frac = b & ((uint64_t{1} << 52) - 1);
  if (exp == 0x7ff) return frac ? static_cast<uint16_t>(sign | 0x7e00) : static_cast<uint16_t>(sign | 0x7c00);
  if (exp == 0) return sign;  // double zeros and subnormals are far below half's smallest value
  const int e = exp - 1023 + 15;  // half's biased exponent
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00);
  const uint64_t m = frac | (uint64_t{1} << 52);
  // Normal halves keep 11 significant bits; subnormals (e <= 0) lose 1 - e more.
  const int shift = e >= 1 ? 42 : 43 - e;
  if (shift >= 55) return sign;  // below half the smallest subnormal
  uint64_t bits = m >> shift;
  const uint64_t rest = m & ((uint64_t{1} << shift) - 1), halfway = uint64_t{1} << (shift - 1);
  if (rest > halfway || (rest == halfway && (bits & 1))) ++bits;
  // For normals the implicit bit lands on the exponent field's lowest bit: adding (e - 1) << 10
  // gives the encoding, and a rounding carry moves into the exponent (up to infinity) by itself.
  if (e >= 1) bits += static_cast<uint64_t>(e - 1) << 10;
  return static_cast<uint16_t>(sign | bits);
}

double bfloat16_to_double(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

// Round to nearest, ties to even, from the double in one rounding: the double goes to float
// rounding to odd (an inexact result keeps its last bit set), which carries the sticky bit
// through; float then rounds to bfloat16's 8 significant bits. Float's 24 bits are more than the
// 8 + 2 this needs, subnormals included (both formats share float32's exponent range).
uint16_t double_to_bfloat16(double d) {
  if (std::isnan(d)) return static_cast<uint16_t>((std::signbit(d) ? 0x8000 : 0) | 0x7fc0);
  float f = static_cast<float>(d);
  if (std::isinf(f) && !std::isinf(d)) f = std::copysign(std::numeric_limits<float>::max(), f);
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (static_cast<double>(f) != d && !(u & 1)) u += std::fabs(static_cast<double>(f)) < std::fabs(d) ? 1 : -1;
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

}  // namespace framejit::rt
