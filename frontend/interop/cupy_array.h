// cupy_array.h — cupy.ndarray as the runtime sees it: memory read through its attributes, results
// allocated by CuPy's memory pool on CuPy's current stream (Note [CuPy arrays]).
#pragma once

#include <Python.h>

#include "framejit/status.h"
#include "frontend/interop/array_adapter.h"

namespace framejit::frontend {

// Note [CuPy arrays]
// framejit links nothing of CuPy: its arrays are read through their Python surface, once per
// value and run, as torch's are (Note [Torch arrays]). `x.data` (a MemoryPointer: `ptr`,
// `device_id`), `x.shape`, `x.strides` (bytes, as NumPy's) and `x.dtype` (a numpy.dtype) are
// attribute loads of CuPy's Cython type, about 0.6 µs an array on the GPU machine, against
// 1.3 µs for `__cuda_array_interface__` (a new dict each time). The sizes and strides read are
// kept, with a reference to the array, in a small per-run table that the outermost
// ArrayRunScope clears.
// Results are cupy.ndarrays that CuPy owns: `cupy.ndarray(shape, dtype)` allocates from CuPy's
// memory pool on CuPy's current device. A program on CuPy arrays issues every launch on CuPy's
// current stream (read per run: cupy.cuda.get_current_stream().ptr; 0 is the legacy default
// stream), so it is ordered with the CuPy kernels before and after it, as torch's current
// stream orders torch code (Note [Torch tensors on a GPU]). CuPy's pool hands a block back for
// reuse on the stream it was freed under; framejit's results are freed by Python like any
// other array of the caller's.
// Nothing imports CuPy: until the program has imported it no cupy.ndarray can exist, and
// cupy_handles() looks for the module in sys.modules.

/// CuPy's objects, once the process has imported cupy; null before (or when it is unreadable).
struct CupyHandles {
  PyObject* module = nullptr;             // cupy
  PyTypeObject* ndarray_base = nullptr;   // cupy._core.core._ndarray_base: every cupy array
  PyObject* ndarray = nullptr;            // cupy.ndarray (its constructor allocates)
  PyObject* current_stream = nullptr;     // cupy.cuda.get_current_stream
  PyObject* get_device = nullptr;         // cupy.cuda.runtime.getDevice
};
const CupyHandles* cupy_handles();

/// Whether `o` (borrowed) is a cupy.ndarray of any subclass. False before cupy is imported.
bool is_cupy_array(PyObject* o);

/// CuPy's current stream (a CUstream; null is the legacy default stream).
Expected<void*> cupy_current_stream();
/// CuPy's current device (cupy.cuda.runtime.getDevice()).
Expected<int> cupy_current_device();

/// Registers the CuPy adapter for ArrayKind::CuPy (module init).
void register_cupy_adapter();

}  // namespace framejit::frontend
