// dlpack_abi.h — the DLPack C ABI (dlpack.h, version 1.x), declared here, and its element types
// as rt::DTypes: framejit.Tensor's __dlpack__/from_dlpack and the torch adapter read it.
#pragma once

#include <cstdint>
#include <optional>

#include "runtime/dtype.h"

namespace framejit::frontend::dlpack {

enum DLDeviceKind : int32_t { kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3 };
enum DLTypeCode : uint8_t { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 };

struct DLDevice {
  int32_t device_type;
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null means C-contiguous
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};
inline constexpr uint64_t kDLFlagReadOnly = uint64_t{1} << 0;
inline constexpr uint64_t kDLFlagIsCopied = uint64_t{1} << 1;

inline constexpr const char* kCapsuleName = "dltensor";
inline constexpr const char* kUsedCapsuleName = "used_dltensor";
inline constexpr const char* kVersionedName = "dltensor_versioned";
inline constexpr const char* kUsedVersionedName = "used_dltensor_versioned";

/// The DLPack type of `dt` (lanes 1).
DLDataType dl_dtype(rt::DType dt);
/// The DType of a DLPack type; none for lanes > 1 and types framejit does not have.
std::optional<rt::DType> dtype_from_dl(DLDataType t);

}  // namespace framejit::frontend::dlpack
