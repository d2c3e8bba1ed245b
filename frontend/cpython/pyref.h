// pyref.h — OwnedRef, the RAII holder for a strong PyObject reference used off the hot path.
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <utility>

namespace framejit::frontend {

/// Holds one strong reference. `OwnedRef::steal(p)` takes a new reference; `OwnedRef::borrow(p)`
/// increments a borrowed one. Null is a valid state (a failed CPython call).
class OwnedRef {
public:
  OwnedRef() = default;
  static OwnedRef steal(PyObject* p) { return OwnedRef(p); }  // steals
  static OwnedRef borrow(PyObject* p) {                       // borrowed -> new ref
    Py_XINCREF(p);
    return OwnedRef(p);
  }
  OwnedRef(const OwnedRef& o) : p_(o.p_) { Py_XINCREF(p_); }
  OwnedRef(OwnedRef&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  OwnedRef& operator=(OwnedRef o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~OwnedRef() { Py_XDECREF(p_); }

  PyObject* get() const { return p_; }  // borrowed
  PyObject* release() { return std::exchange(p_, nullptr); }  // new ref to the caller
  explicit operator bool() const { return p_ != nullptr; }

private:
  explicit OwnedRef(PyObject* p) : p_(p) {}
  PyObject* p_ = nullptr;
};

/// The Python exception currently set, as "TypeError: message"; clears it.
std::string fetch_error_text();

/// A tuple of the `n` ints at `v` (sizes, strides); null with an exception set.
OwnedRef int_tuple(const int64_t* v, int n);

}  // namespace framejit::frontend
