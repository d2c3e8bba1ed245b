// fixed_vector.h — a vector with inline capacity N and no heap: the per-launch dimension lists of
// the executors (bounded by the rank limit), where std::vector would allocate on every call.
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>

namespace framejit::rt {

/// The subset of std::vector the executors use. Pushing past N is a caller bug (ranks and operand
/// counts are bounded before any launch).
template <typename T, size_t N>
class FixedVector {
  // Nothing to destroy, and nothing constructed before it is pushed: a Value's default members
  // are not zeroed N times per launch.
  static_assert(std::is_trivially_destructible_v<T>);

public:
  FixedVector() {}
  void push_back(const T& v) { new (&items_[size_++]) T(v); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  void clear() { size_ = 0; }
  void resize(size_t n) { size_ = n; }  // n <= size(): drops the tail
  T& operator[](size_t i) { return items_[i]; }
  const T& operator[](size_t i) const { return items_[i]; }
  T& back() { return items_[size_ - 1]; }
  const T& back() const { return items_[size_ - 1]; }
  T* begin() { return items_; }
  T* end() { return items_ + size_; }
  const T* begin() const { return items_; }
  const T* end() const { return items_ + size_; }

private:
  union {
    T items_[N];
  };
  size_t size_ = 0;
};

}  // namespace framejit::rt
