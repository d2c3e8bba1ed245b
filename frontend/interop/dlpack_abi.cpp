// dlpack_abi.cpp — DLPack element types as rt::DTypes.
#include "frontend/interop/dlpack_abi.h"

namespace framejit::frontend::dlpack {

using rt::DType;

DLDataType dl_dtype(DType dt) {
  const uint8_t bits = static_cast<uint8_t>(rt::dtype_itemsize(dt) * 8);
  uint8_t code = kDLFloat;
  if (dt == DType::Bool) code = kDLBool;
  else if (dt == DType::BFloat16) code = kDLBfloat;
  else if (rt::dtype_is_complex(dt)) code = kDLComplex;
  else if (rt::dtype_is_integer(dt)) code = rt::dtype_is_signed(dt) ? kDLInt : kDLUInt;
  return DLDataType{code, bits, 1};
}

std::optional<DType> dtype_from_dl(DLDataType t) {
  if (t.lanes != 1) return std::nullopt;
  for (int i = 0; i < rt::kNumDTypes; ++i) {
    const auto dt = static_cast<DType>(i);
    const DLDataType d = dl_dtype(dt);
    if (d.code == t.code && d.bits == t.bits) return dt;
  }
  return std::nullopt;
}

}  // namespace framejit::frontend::dlpack
