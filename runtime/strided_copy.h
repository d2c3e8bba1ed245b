// strided_copy.h — copying a strided run of elements into a contiguous buffer and back, for the
// launchers that run strided rows through a kernel's vector loop (Note [Buffered strided rows] in
// runtime/executor.cpp).
#pragma once

#include <cstdint>
#include <cstring>

namespace framejit::rt {

namespace detail {
template <typename T>
void gather(char* dst, const char* src, int64_t stride, int64_t n) {
  T* d = reinterpret_cast<T*>(dst);
  for (int64_t i = 0; i < n; ++i, src += stride) std::memcpy(d + i, src, sizeof(T));
}

template <typename T>
void scatter(char* dst, int64_t stride, const char* src, int64_t n) {
  const T* s = reinterpret_cast<const T*>(src);
  for (int64_t i = 0; i < n; ++i, dst += stride) std::memcpy(dst, s + i, sizeof(T));
}
}  // namespace detail

/// n elements of `itemsize` bytes: from data (stepping `stride` bytes) into buffer when `in`,
/// else from buffer back to data.
inline void copy_strided(bool in, char* buffer, char* data, int64_t stride, int64_t n, int itemsize) {
  auto copy = [&](auto element) {
    using T = decltype(element);
    in ? detail::gather<T>(buffer, data, stride, n) : detail::scatter<T>(data, stride, buffer, n);
  };
  switch (itemsize) {
    case 1: return copy(uint8_t{});
    case 2: return copy(uint16_t{});
    case 4: return copy(uint32_t{});
    default: return copy(uint64_t{});
  }
}

}  // namespace framejit::rt
