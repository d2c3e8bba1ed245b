// tensor.h — framejit::Tensor: a strided, typed view of memory that keeps its owner alive
// (public C++ API).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framejit/api.h"
#include "framejit/dtype.h"

namespace framejit {

/// Bytes per element of `dtype`.
FRAMEJIT_API int element_size(DType dtype);
/// NumPy's name of `dtype` ("float32").
FRAMEJIT_API std::string dtype_name(DType dtype);

/// The DType of C++ element type T (float -> Float32, ...), for Tensor::data<T>().
template <typename T>
constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<int8_t>() { return DType::Int8; }
template <> constexpr DType dtype_of<int16_t>() { return DType::Int16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::UInt8; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::UInt16; }
template <> constexpr DType dtype_of<uint32_t>() { return DType::UInt32; }
template <> constexpr DType dtype_of<uint64_t>() { return DType::UInt64; }
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }

/// An n-dimensional array: a data pointer, shape, byte strides, element type and device, plus
/// whatever keeps the memory alive (the owner). Copies are cheap and share the memory; a Tensor
/// never copies data by itself.
///
/// Tensors made by from_blob borrow the caller's memory (which must outlive every copy, unless an
/// owner is given); tensors returned by framejit::Host keep the Python result they view alive,
/// also after the Host is gone.
class FRAMEJIT_API Tensor {
public:
  Tensor() = default;  // undefined: defined() is false

  /// A tensor over `data`, which must stay valid while the tensor (or a copy) lives, or be kept
  /// alive by `owner`. `strides` are in bytes; empty means C-contiguous. Throws
  /// std::invalid_argument for a negative size or a strides vector of the wrong length.
  static Tensor from_blob(void* data, std::vector<int64_t> shape, DType dtype, std::vector<int64_t> strides = {},
                          std::shared_ptr<void> owner = nullptr, Device device = {});

  bool defined() const { return impl_ != nullptr; }
  void* data_ptr() const;
  /// The data as T*. Throws std::invalid_argument when T is not the tensor's dtype.
  template <typename T>
  T* data() const {
    check_dtype(dtype_of<T>());
    return static_cast<T*>(data_ptr());
  }
  const std::vector<int64_t>& shape() const;
  const std::vector<int64_t>& strides() const;  // bytes
  DType dtype() const;
  Device device() const;
  int ndim() const { return static_cast<int>(shape().size()); }
  int64_t numel() const;
  int64_t nbytes() const { return numel() * element_size(dtype()); }
  bool is_contiguous() const;  // C order
  /// A tensor over the same memory with the same owner (a view): `data` must point into this
  /// tensor's storage, `strides` are in bytes (one per dimension). Throws std::invalid_argument
  /// like from_blob.
  Tensor view(void* data, std::vector<int64_t> shape, std::vector<int64_t> strides) const;
  /// Whether this Tensor is the only one keeping its owner alive: it has an owner, no copy of it
  /// exists, and no other tensor (no view) shares the owner. False for borrowed memory.
  bool sole_owner() const;
  /// "float32[8, 16]".
  std::string to_string() const;

private:
  struct Impl;
  void check_dtype(DType asked) const;
  std::shared_ptr<const Impl> impl_;
};

}  // namespace framejit
