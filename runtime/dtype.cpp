// dtype.cpp — names and properties of element types.
#include "runtime/dtype.h"

namespace framejit::rt {
namespace {
struct DTypeInfo {
  std::string_view name;
  std::string_view short_name;
  int itemsize;
};
constexpr DTypeInfo kInfo[kNumDTypes] = {
    {"bool", "b8", 1},      {"int8", "i8", 1},     {"int16", "i16", 2},
    {"int32", "i32", 4},    {"int64", "i64", 8},   {"uint8", "u8", 1},
    {"uint16", "u16", 2},   {"uint32", "u32", 4},  {"uint64", "u64", 8},
    {"float16", "f16", 2},  {"float32", "f32", 4}, {"float64", "f64", 8},
    {"complex64", "c64", 8}, {"complex128", "c128", 16},
};
}  // namespace

std::string_view dtype_name(DType t) { return kInfo[static_cast<int>(t)].name; }
std::string_view dtype_short_name(DType t) { return kInfo[static_cast<int>(t)].short_name; }
int dtype_itemsize(DType t) { return kInfo[static_cast<int>(t)].itemsize; }

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
