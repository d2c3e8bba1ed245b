// dtype.h — element types and devices shared by every layer (the runtime knows nothing of NumPy).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "framejit/dtype.h"

namespace framejit::rt {

/// Element types: the public framejit::DType (include/framejit/dtype.h).
using DType = ::framejit::DType;
constexpr int kNumDTypes = 15;

/// NumPy's name ("float32").
std::string_view dtype_name(DType t);
/// The short form used in printed metadata ("f32").
std::string_view dtype_short_name(DType t);
/// Parse NumPy's name; nullopt when it is not one of ours.
std::optional<DType> dtype_from_name(std::string_view name);
/// Bytes per element, in DType order. NB: at namespace scope: a table local to the function
/// below would be rebuilt on the stack at every call.
inline constexpr int8_t kDTypeItemsize[kNumDTypes] = {1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 8, 16, 2};
/// Bytes per element. Inline: every operand of every launch reads it.
constexpr int dtype_itemsize(DType t) { return kDTypeItemsize[static_cast<int>(t)]; }
bool dtype_is_float(DType t);
bool dtype_is_integer(DType t);  // signed or unsigned, not bool
bool dtype_is_signed(DType t);
bool dtype_is_complex(DType t);
/// float16 and bfloat16: stored in two bytes, computed in float32 (Note [Half types] in
/// jit/lower/loop_ir.h).
constexpr bool dtype_is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }

/// The half types' bits as doubles (exact) and doubles rounded to them (to nearest, ties to even,
/// in one rounding; NaN stays NaN).
double half_to_double(uint16_t h);
uint16_t double_to_half(double d);
double bfloat16_to_double(uint16_t b);
uint16_t double_to_bfloat16(double d);

using DeviceType = ::framejit::DeviceType;
using Device = ::framejit::Device;

}  // namespace framejit::rt
