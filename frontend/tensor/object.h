// object.h — framejit.Tensor: the Python object over a runtime framejit::Tensor.
#pragma once

#include <Python.h>

#include <cstdint>

#include "framejit/tensor.h"
#include "runtime/dtype.h"

namespace framejit::frontend {

// Note [framejit.Tensor]
// The C type (framejit._C.TensorBase) holds a framejit::Tensor — data pointer, shape, byte strides,
// dtype, device, and the owner that keeps the memory alive — plus mirrors of the fields the hot
// paths read (guard checks, kernel binding), so they cost a load, not a call. Storage is either
// owned (a framejit pool block, freed when the last tensor viewing it dies) or borrowed from a
// Python object (`base`: a NumPy array, a held buffer export, a DLPack import's holder), which
// the tensor keeps alive; see Note [Tensor storage] in object.cpp. The object is written in
// object.cpp (type, buffer protocol, framejit.tensor), data.cpp (casts, tolist,
// repr, Python data) and dlpack.cpp (DLPack both ways).
//
// framejit.Tensor is a Python subclass (framejit/_tensor.py) that adds the operators and methods;
// it has no __dict__, so its instances have exactly this layout. Everything framejit allocates is
// an instance of that registered subclass (tensor_type()).

constexpr int kTensorCContiguous = 0x1;
constexpr int kTensorWriteable = 0x2;
constexpr int kTensorAligned = 0x4;  // data and strides are multiples of the item size

struct TensorObject {
  PyObject_HEAD
  // Mirrors of `tensor`: valid for the object's whole life (a tensor's metadata never changes).
  char* data;
  int nd;
  rt::DType dtype;
  rt::Device device;       // where the data lives (guards read it on every call)
  int flags;               // kTensor* bits
  const int64_t* shape;    // nd sizes, pointing into `tensor`
  const int64_t* strides;  // nd byte strides, pointing into `tensor`
  Tensor tensor;           // framejit::Tensor (placement-constructed; destroyed in tp_dealloc)
  PyObject* base;          // strong, may be null: the Python object whose memory this borrows
  PyObject* weakreflist;
  Py_ssize_t exports;      // live buffer-protocol exports
};

namespace detail {
extern PyTypeObject* g_tensor_type;  // see tensor_type(); set by object.cpp
}
/// The class framejit allocates tensors as: framejit.Tensor once the package registered it
/// (_C._register_tensor_class), else framejit._C.TensorBase. Borrowed, immortal. Inline: guard
/// checks and kernel binding test every array against it.
inline PyTypeObject* tensor_type() { return detail::g_tensor_type; }
/// Exactly a framejit tensor (the registered class or the C base), not an arbitrary subclass.
inline bool is_tensor(PyObject* o) { return Py_TYPE(o) == tensor_type(); }
inline TensorObject* as_tensor(PyObject* o) { return reinterpret_cast<TensorObject*>(o); }

/// A new C-contiguous tensor with uninitialized data from framejit's pool (new ref; null with
/// MemoryError set).
PyObject* tensor_empty(const int64_t* shape, int nd, rt::DType dtype, rt::Device device = {});
/// A view of `parent` (a tensor, borrowed): same storage, `data` inside it, new shape/strides.
PyObject* tensor_view(PyObject* parent, char* data, int nd, const int64_t* shape, const int64_t* strides);
/// Whether nothing but `t` can observe its memory: owned storage used by no other tensor, no base,
/// no exports, one reference. Kernels may then write their output into it (Note [Output buffer
/// reuse] in runtime/program.cpp).
bool tensor_is_private(PyObject* t);

/// A NumPy array viewing `t`'s memory (new ref; needs NumPy; the array keeps `t` alive).
PyObject* tensor_to_ndarray(PyObject* t);
/// `t` on `device`: itself when it is there, else a C-contiguous copy (host <-> device through
/// framejit's stream; reading a device tensor waits for the kernels that write it). New ref.
PyObject* tensor_to_device(PyObject* t, rt::Device device);
/// A tensor viewing a NumPy array's memory (new ref; keeps the array alive). Null with TypeError
/// for dtypes framejit does not know, and for non-native byte order.
PyObject* tensor_from_ndarray(PyObject* arr);

/// Registers framejit._C.TensorBase and the tensor functions; call once from module init.
bool init_tensor_type(PyObject* module);
/// Registers framejit.Tensor's array adapter (Note [Array adapters]); from init_tensor_type.
void register_tensor_adapter();

}  // namespace framejit::frontend
