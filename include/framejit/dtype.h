// dtype.h — element types and devices of framejit tensors (public C++ API).
#pragma once

#include <cstdint>

namespace framejit {

/// Element types. `Bool` is one byte (NumPy's layout). Types framejit cannot compute still have a
/// name here so that graphs holding them print and guard correctly. New types go at the end: the
/// values are table indices everywhere.
enum class DType : uint8_t {
  Bool,        // bool
  Int8,        // int8
  Int16,       // int16
  Int32,       // int32
  Int64,       // int64
  UInt8,       // uint8
  UInt16,      // uint16
  UInt32,      // uint32
  UInt64,      // uint64
  Float16,     // float16
  Float32,     // float32
  Float64,     // float64
  Complex64,   // complex64
  Complex128,  // complex128
  BFloat16,    // bfloat16 (torch's; NumPy has none): float32's range, 8 significant bits
};

enum class DeviceType : uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
};

}  // namespace framejit
