// dtype.h — element types and devices shared by every layer (the runtime knows nothing of NumPy).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace framejit::rt {

/// Element types. `Bool` is one byte (NumPy's layout). Types framejit cannot compute still have a
/// name here so that graphs holding them print and guard correctly.
enum class DType : uint8_t {
  Bool,
  Int8,
  Int16,
  Int32,
  Int64,
  UInt8,
  UInt16,
  UInt32,
  UInt64,
  Float16,
  Float32,
  Float64,
  Complex64,
  Complex128,
};
constexpr int kNumDTypes = 14;

/// NumPy's name ("float32").
std::string_view dtype_name(DType t);
/// The short form used in printed metadata ("f32").
std::string_view dtype_short_name(DType t);
/// Parse NumPy's name; nullopt when it is not one of ours.
std::optional<DType> dtype_from_name(std::string_view name);
int dtype_itemsize(DType t);
bool dtype_is_float(DType t);
bool dtype_is_integer(DType t);  // signed or unsigned, not bool
bool dtype_is_signed(DType t);
bool dtype_is_complex(DType t);

enum class DeviceType : uint8_t { CPU, CUDA };
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
};

}  // namespace framejit::rt
