// array_adapter.h — one array library as the runtime sees it: an array's memory read without a
// Python call, outputs allocated through the library's own C entry points (Note [Array adapters]).
#pragma once

#include <Python.h>

#include <cstdint>

#include "frontend/cpython/pyref.h"
#include "jit/lower/views.h"
#include "runtime/dtype.h"

namespace framejit::frontend {

// Note [Array adapters]
// Everything a compiled program does with a library's arrays goes through that library's adapter:
// reading a value's data, sizes and strides (borrowed from the object, on every call), making the
// program's results and intermediates, permuted views for results laid out axis-permuted, and the
// "may this buffer be written over" test for in-place reuse. A program makes its arrays with the
// adapter of its trace's array kind (Note [Program array kind]). Adding an array library is one
// adapter (registered at module init) plus one op table (Note [Op tables]).
//
// Note [Program array kind]
// A traced function works on NumPy arrays, framejit.Tensors, torch tensors or CuPy arrays, one
// kind per graph (the tracer breaks the graph where they would meet: Note [One array kind per
// graph] in builder/builder.cpp). So NumPy code gets ndarrays back, Tensor code Tensors, torch
// code torch tensors, CuPy code CuPy arrays.

/// What a graph's arrays are; also the key of the adapter registry.
enum class ArrayKind : uint8_t { None, NumPy, Tensor, Torch, CuPy };
constexpr int kArrayKinds = 5;

/// An array's memory: data, rank, sizes and byte strides (borrowed from the object, valid while
/// it lives) and element type.
struct ArrayFields {
  char* data = nullptr;
  int nd = 0;
  const int64_t* dims = nullptr;
  const int64_t* strides = nullptr;
  rt::DType dtype = rt::DType::Float32;
  rt::Device device;  // where `data` points: host memory, or a CUDA device's
  bool ok = false;  // false: not this library's array, or of a dtype framejit does not know
};

class ArrayAdapter {
public:
  virtual ~ArrayAdapter() = default;
  /// `o`'s fields (borrowed): a type test and loads, no Python call.
  virtual ArrayFields fields(PyObject* o) const = 0;
  /// A new uninitialized C-ordered array. New ref, or null with an exception set.
  virtual PyObject* empty(const int64_t* shape, int rank, rt::DType dtype) const = 0;
  /// The same on `device`; libraries without device arrays raise for anything but the CPU.
  virtual PyObject* empty_on(const int64_t* shape, int rank, rt::DType dtype, rt::Device device) const {
    if (device.type == rt::DeviceType::CPU) return empty(shape, rank, dtype);
    PyErr_SetString(PyExc_RuntimeError, "framejit: this array library has no arrays on CUDA devices here");
    return nullptr;
  }
  /// `base` (one of this library's arrays) with its axes permuted: axis outer_first[i] of the
  /// result is axis i of `base`; the same memory. New ref, or null with an exception set.
  virtual PyObject* permuted_view(PyObject* base, const int* outer_first, int rank) const = 0;
  /// Whether a program may write over `o`, which the caller already knows it holds the only
  /// reference to: `o` owns its memory (no view shares it) and is aligned, writeable and C-ordered.
  virtual bool is_private(PyObject* o) const = 0;
  /// Whether the library's reductions allocate their result in the input's memory order over the
  /// kept axes (NumPy's order='K') rather than in C order (torch, CuPy).
  virtual bool reductions_in_input_order() const { return false; }
  /// A run (an ArrayRunScope, nested or not) begins and ends: adapters that read an array's
  /// fields through Python keep what they read until the outermost run ends.
  virtual void enter_run() const {}
  virtual void exit_run() const {}
};

/// Brackets a run, a trace or a guard check that reads arrays' fields: every registered adapter's
/// enter_run() on the way in, exit_run() on the way out (Note [Torch arrays], [CuPy arrays]).
class ArrayRunScope {
public:
  ArrayRunScope();
  ~ArrayRunScope();
  ArrayRunScope(const ArrayRunScope&) = delete;
  ArrayRunScope& operator=(const ArrayRunScope&) = delete;
};

/// The adapter of `kind`'s arrays (null for None, and for Tensor before module init registers it).
const ArrayAdapter* array_adapter(ArrayKind kind);
/// Registers the adapter of `kind` (not owned: adapters live as long as the process). NumPy's is
/// built in; framejit.Tensor's registers with its type.
void register_array_adapter(ArrayKind kind, const ArrayAdapter* adapter);

/// `o`'s fields under whichever adapter knows it (ok=false: none does), asking `first` (when
/// given: the caller's likely library) before the others, and each adapter once.
ArrayFields array_fields(PyObject* o, const ArrayAdapter* first = nullptr);

/// For permuted_view's `outer_first`: the axes tuple that torch's permute and NumPy's and CuPy's
/// transpose take (per result axis, the base axis it is). Null with an exception set.
OwnedRef permutation_axes(const int* outer_first, int rank);

/// "NumPy arrays", "framejit.Tensors", "torch tensors", "CuPy arrays" (messages).
const char* array_kind_name(ArrayKind kind);

/// Whether the fields describe a C-ordered array (NumPy's rule: dims of size 1 have any stride; an
/// empty array is contiguous).
bool fields_c_contiguous(const ArrayFields& a);

/// The fields as the layout kernels and view remaps read (sizes and strides copied).
jit::StridedLayout layout_of(const ArrayFields& a);

}  // namespace framejit::frontend
