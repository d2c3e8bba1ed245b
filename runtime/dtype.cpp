// dtype.cpp — names and properties of element types.
#include "runtime/dtype.h"

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
    {"complex64", "c64"}, {"complex128", "c128"},
};
}  // namespace
// dtype_itemsize's table (dtype.h) lists the types in this order too.
static_assert(dtype_itemsize(DType::Bool) == 1 && dtype_itemsize(DType::Float16) == 2 &&
              dtype_itemsize(DType::Float32) == 4 && dtype_itemsize(DType::Complex128) == 16 &&
              static_cast<int>(DType::Complex128) == kNumDTypes - 1);

std::string_view dtype_name(DType t) { return kInfo[static_cast<int>(t)].name; }
std::string_view dtype_short_name(DType t) { return kInfo[static_cast<int>(t)].short_name; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kInfo[i].name == name) return static_cast<DType>(i);
  return std::nullopt;
}

bool dtype_is_float(DType t) {
  return t == DType::Float16 || t == DType::Float32 || t == DType::Float64;
}
bool dtype_is_complex(DType t) { return t == DType::Complex64 || t == DType::Complex128; }
bool dtype_is_integer(DType t) { return t >= DType::Int8 && t <= DType::UInt64; }
bool dtype_is_signed(DType t) {
  return (t >= DType::Int8 && t <= DType::Int64) || dtype_is_float(t) || dtype_is_complex(t);
}

}  // namespace framejit::rt
