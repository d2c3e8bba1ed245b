// arrays.h — what the backends read of an array value and how they allocate one: NumPy arrays for
// NumPy programs, framejit.Tensor for Tensor programs (Note [Program array kind]).
#pragma once

#include <Python.h>

#include <cstdint>

#include "jit/lower/views.h"
#include "runtime/dtype.h"

namespace framejit::frontend {

// Note [Program array kind]
// A traced function works on NumPy arrays or on framejit.Tensors, never both (the tracer breaks
// the graph where they would meet: Note [One array kind per graph] in frontend/builder.cpp). A
// program allocates its results and intermediates as the kind of array its inputs are, so NumPy
// code gets ndarrays back and Tensor code Tensors (Program::set_tensor_results, from the trace).

/// An ndarray's or a framejit.Tensor's memory: data, rank, sizes and byte strides (borrowed from
/// the object, valid while it lives) and element type.
struct ArrayFields {
  char* data = nullptr;
  int nd = 0;
  const int64_t* dims = nullptr;
  const int64_t* strides = nullptr;
  rt::DType dtype = rt::DType::Float32;
  bool ok = false;  // false: neither an ndarray nor a Tensor of a known dtype
};

/// `o`'s fields (borrowed). Needs the GIL only for the type test.
ArrayFields array_fields(PyObject* o);

/// The fields as the layout kernels and view remaps read (sizes and strides copied).
jit::StridedLayout layout_of(const ArrayFields& a);

using rt::copy_to_c_order;

/// A new uninitialized C-ordered array: a framejit.Tensor when `tensors`, else a NumPy array (from
/// the pool when large: Note [Pooled arrays]). New ref, or null with MemoryError set.
PyObject* new_array(const int64_t* shape, int rank, rt::DType dtype, bool tensors);

/// `base` with its axes permuted: axis outer_first[i] of the result is axis i of `base`. The same
/// memory; a framejit.Tensor or an ndarray like `base`. New ref or null.
PyObject* permuted_view(PyObject* base, const int* outer_first, int rank);

}  // namespace framejit::frontend
