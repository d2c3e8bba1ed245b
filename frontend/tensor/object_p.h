// object_p.h — internals shared by the framejit.Tensor sources: the object itself
// (object.cpp), element data (data.cpp) and DLPack (dlpack.cpp).
#pragma once

#include <Python.h>

#include <cstdint>
#include <optional>
#include <string>

#include "frontend/tensor/object.h"

namespace framejit::frontend::tensor_detail {

constexpr int kMaxDims = 64;  // deeper nesting or higher rank is refused

/// framejit._C.TensorBase (borrowed; null before init_tensor_type).
PyTypeObject* base_type();
/// Any framejit tensor, including instances of Python subclasses of framejit.Tensor.
inline bool is_any_tensor(PyObject* o) { return base_type() && PyObject_TypeCheck(o, base_type()); }

/// The Python object over `t` (new ref; null with an exception set). `base` (borrowed, may be
/// null) is kept alive by the object; `writeable` sets kTensorWriteable.
PyObject* make_tensor(Tensor t, PyObject* base, bool writeable);
/// A new C-contiguous CPU tensor holding `src`'s elements converted to `dtype` (new ref).
PyObject* convert_copy(PyObject* src, rt::DType dtype);
/// The kTensor* flags of a strided array, computed as NumPy computes its flags.
int compute_flags(const char* data, int nd, const int64_t* shape, const int64_t* strides, rt::DType dtype,
                  bool writeable);
/// Raises the error for an operation that needs the data in host memory; false when `t` is not on
/// the CPU (an exception is then set).
bool require_cpu(TensorObject* t, const char* what);
/// "cpu" or "cuda:N".
std::string device_text(rt::Device d);

// ---- element data (data.cpp) ----------------------------------------------------------

/// Converts `nd`-dimensional strided data of `src_dtype` into C-contiguous `dst` of `dst_dtype`
/// (which must not overlap the source). Every pair of dtypes is supported; see Note [Casts].
void copy_convert(const char* src, rt::DType src_dtype, int nd, const int64_t* shape, const int64_t* strides,
                  char* dst, rt::DType dst_dtype);
/// One element as a Python bool/int/float/complex (new ref).
PyObject* element_to_python(const char* p, rt::DType dtype);
/// Nested lists of Python scalars; a 0-d tensor gives its scalar (new ref).
PyObject* tensor_tolist(TensorObject* t);
/// framejit.tensor([...], dtype="...") text, abbreviated for large tensors (new ref).
PyObject* tensor_repr(TensorObject* t);
/// A new tensor from Python scalars and nested sequences of them (new ref). `dtype` null: inferred
/// (Note [Python data]).
PyObject* tensor_from_python_data(PyObject* data, const rt::DType* dtype);

// ---- DLPack (dlpack.cpp) ----------------------------------------------------------------

/// Tensor.__dlpack__(stream=None, *, max_version=None, dl_device=None, copy=None).
PyObject* tensor_dlpack(PyObject* self, PyObject* args, PyObject* kwargs);
/// Tensor.__dlpack_device__() -> (device_type, device_id).
PyObject* tensor_dlpack_device(PyObject* self, PyObject* unused);
/// A tensor over a DLPack producer's memory (an object with __dlpack__, or a capsule). New ref.
PyObject* tensor_from_dlpack(PyObject* obj);
/// Whether `obj` offers __dlpack__ (no exception is left set).
bool has_dlpack(PyObject* obj);

}  // namespace framejit::frontend::tensor_detail
