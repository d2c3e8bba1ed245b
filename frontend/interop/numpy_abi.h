// numpy_abi.h — NumPy's stable ndarray/dtype struct layout and process-wide NumPy handles.
#pragma once

#include <Python.h>

#include <cstdint>
#include <optional>

#include "runtime/dtype.h"

namespace framejit::frontend {

// Note [NumPy without its headers]
// framejit builds for interpreters that have no NumPy (pyenv's 3.12/3.13) and runs against both
// NumPy 1.x and 2.x, so it does not compile against NumPy's C API. The leading fields of
// PyArrayObject and the first fields of PyArray_Descr up to type_num are the same in NumPy 1 and 2
// (NumPy documents them as ABI-stable); the guard fast path reads them directly. Outputs are made
// through NumPy's C-API table (Note [NumPy's C-API table]); everything else is asked of NumPy
// through Python calls, at trace time only. Checked against NumPy 2.5's
// ndarraytypes.h: PyArrayObject_fields is unchanged through `flags`; NumPy 2 rewrote PyArray_Descr
// after type_num (64-bit flags, npy_intp elsize and alignment, no inline subarray/fields), so
// nothing past type_num is read here, and the char before type_num (NumPy 1's flags) is unused.
// The NPY_ARRAY_* flag bits and the NPY_TYPES numbers framejit maps are the same in both.

struct NdArrayFields {
  PyObject_HEAD
  char* data;
  int nd;
  intptr_t* dimensions;
  intptr_t* strides;
  PyObject* base;
  PyObject* descr;
  int flags;
};

struct DescrFields {
  PyObject_HEAD
  PyTypeObject* typeobj;
  char kind;
  char type;
  char byteorder;
  char flags_or_unused;  // NumPy 1: flags; NumPy 2: unused
  int type_num;
};

constexpr int kNpyCContiguous = 0x0001;
constexpr int kNpyFContiguous = 0x0002;
constexpr int kNpyOwnData = 0x0004;
constexpr int kNpyAligned = 0x0100;
constexpr int kNpyWriteable = 0x0400;

inline NdArrayFields* as_ndarray(PyObject* o) { return reinterpret_cast<NdArrayFields*>(o); }
inline DescrFields* descr_of(PyObject* o) {
  return reinterpret_cast<DescrFields*>(as_ndarray(o)->descr);
}

// Note [NumPy's C-API table]
// NumPy exports its C API as a table of pointers in the `_ARRAY_API` capsule of its multiarray
// module (numpy.core.multiarray on NumPy 1, numpy._core._multiarray_umath on NumPy 2); what
// NumPy's own import_array() reads. A slot's index is NumPy's ABI: numpy_api.py
// (numpy/core/code_generators on 1.x, numpy/_core/code_generators on 2.x) fixes it, retired slots
// stay empty rather than being renumbered, and the slots used here have the same index and
// signature in 1.x and 2.x. framejit takes the few functions it needs by index, without NumPy's
// headers (Note [NumPy without its headers]), and checks slot 0's ABI version first.
struct NumPyCApi {
  /// PyArray_NewFromDescr (slot 94): (subtype, descr (steals), nd, dims, strides, data, flags, obj).
  PyObject* (*new_from_descr)(PyTypeObject*, PyObject*, int, const intptr_t*, const intptr_t*, void*, int,
                              PyObject*) = nullptr;
  /// PyArray_SetBaseObject (slot 282): (array, base (steals)) -> 0, or -1 with an exception set.
  int (*set_base_object)(PyObject*, PyObject*) = nullptr;
  /// PyArray_Scalar (slot 60): (element data, descr (borrowed), base or null) -> the NumPy scalar
  /// of that element (numpy.float64...), a new reference.
  PyObject* (*scalar)(void*, PyObject*, PyObject*) = nullptr;
};

/// Handles to NumPy objects, imported once (new refs held for the life of the process).
struct NumPyHandles {
  PyObject* module = nullptr;       // numpy
  PyTypeObject* ndarray = nullptr;  // numpy.ndarray
  PyTypeObject* generic = nullptr;  // numpy.generic (base of NumPy scalar types)
  PyObject* dtype_fn = nullptr;     // numpy.dtype
  PyObject* empty = nullptr;        // numpy.empty (trace-time probes)
  PyObject* geterr = nullptr;       // numpy.geterr
  PyObject* extobj_var = nullptr;   // NumPy 2's error-state context variable; null on NumPy 1
  PyObject* dtypes[rt::kNumDTypes] = {};  // numpy.dtype('<name>')
  int major = 0;                    // numpy.__version__'s major number
  /// NumPy's C-API functions (Note [NumPy's C-API table]); null when the table could not be read,
  /// and then arrays are made through numpy.empty / numpy.ndarray in Python.
  NumPyCApi capi;
};

/// NumPy's handles, or nullptr when NumPy cannot be imported (then arrays never reach the tracer).
const NumPyHandles* numpy_handles();

/// The DType of NumPy scalar type `type` (numpy.float32 -> Float32), if framejit knows it.
std::optional<rt::DType> numpy_scalar_dtype(const NumPyHandles* np, PyTypeObject* type);

/// Where a NumPy scalar keeps its value: right after the object header, in every numeric scalar
/// type (NumPy's Py<Type>ScalarObject is PyObject_HEAD then `obval`; numpy.float64's layout is
/// also PyFloatObject's). Programs read a NumPy scalar input there as a 0-d array.
inline char* numpy_scalar_data(PyObject* o) { return reinterpret_cast<char*>(o) + sizeof(PyObject); }

/// A NumPy scalar's value as a double (float and bool kinds) or an integer (integer kinds);
/// false when `o` is not a NumPy scalar of a dtype framejit knows, or the kind does not match.
bool numpy_scalar_float(PyObject* o, double* out);
bool numpy_scalar_int(PyObject* o, long long* out);
/// Imports NumPy and fills the handles (see Note [One-time initialization]); false when NumPy is
/// not installed. Called once by initialize_python_env().
bool init_numpy_handles();

/// Whether NumPy's error state (np.seterr / np.errstate) in this thread asks for more than
/// ignoring or warning in some category (raise, call or log). Needs the GIL. See Note [NumPy error
/// state] in numpy_abi.cpp.
bool numpy_errstate_raises();

/// Our DType for a NumPy type number, if framejit knows it.
std::optional<rt::DType> dtype_from_type_num(int type_num);
/// Our DType for a numpy.dtype object (native byte order only).
std::optional<rt::DType> dtype_from_descr(PyObject* descr);  // borrowed

}  // namespace framejit::frontend
