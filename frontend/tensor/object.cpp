// object.cpp — framejit._C.TensorBase: the object, its buffer protocol and properties,
// NumPy interop and framejit.tensor(...).
#include "frontend/tensor/object.h"

#include <structmember.h>

#include <cstring>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "frontend/interop/numpy_abi.h"
#include "frontend/cpython/pyref.h"
#include "frontend/tensor/object_p.h"
#include "runtime/cuda/memory.h"
#include "runtime/memory.h"

namespace framejit::frontend {

using rt::DType;
using namespace tensor_detail;

// The buffer protocol hands out our int64_t shape and strides as Py_ssize_t arrays.
static_assert(sizeof(Py_ssize_t) == sizeof(int64_t), "framejit assumes a 64-bit Py_ssize_t");

// Note [Tensor storage]
// A tensor's memory is either
//   owned:    a pool block (rt::pool_alloc) in the framejit::Tensor's owner (a shared_ptr whose
//             deleter is rt::pool_free); views made by tensor_view share that owner, so the block
//             lives until the last tensor over it dies. `base` is null.
//   borrowed: memory of a Python object, kept alive by `base`:
//               a NumPy array                  (tensor_from_ndarray; base = the array)
//               a buffer exporter              (base = a BufferHold holding the Py_buffer, released
//                                               when the tensor dies; the exporter stays locked,
//                                               e.g. a bytearray cannot be resized meanwhile)
//               an __array_interface__ object  (base = the object)
//               a DLPack producer              (base = a DLPackHold that calls the producer's
//                                               deleter when the tensor dies; dlpack.cpp)
//             The framejit::Tensor then has no owner: C++ code that keeps a copy of it must keep
//             the Python object alive too. A view of a borrowed tensor shares its `base`.
// Tensors die with the GIL held (they are Python objects), so `base` and the deleters it runs
// always have it.
//
//   TensorObject ──tensor──► framejit::Tensor ──owner──► pool block      (owned)
//        └───────base──────► ndarray | BufferHold | DLPackHold | object  (borrowed)

namespace detail {
// framejit.Tensor once registered (a strong reference, kept for the process), else g_base_type.
PyTypeObject* g_tensor_type = nullptr;
}  // namespace detail

namespace {

PyTypeObject* g_base_type = nullptr;     // framejit._C.TensorBase (strong, immortal)
PyTypeObject* g_buffer_hold_type = nullptr;

// ---- BufferHold: a Py_buffer held for the life of the tensors over it -------------------------

struct BufferHold {
  PyObject_HEAD
  Py_buffer view;
  bool held;
};

void buffer_hold_dealloc(PyObject* self) {
  auto* h = reinterpret_cast<BufferHold*>(self);
  PyTypeObject* type = Py_TYPE(self);
  if (h->held) PyBuffer_Release(&h->view);
  type->tp_free(self);
  Py_DECREF(type);
}

PyTypeObject* make_buffer_hold_type() {
  static PyType_Slot slots[] = {
      {Py_tp_dealloc, reinterpret_cast<void*>(buffer_hold_dealloc)},
      {Py_tp_doc, const_cast<char*>("A buffer export held by framejit tensors over its memory.")},
      {0, nullptr},
  };
  static PyType_Spec spec = {"framejit._C.BufferHold", sizeof(BufferHold), 0, Py_TPFLAGS_DEFAULT, slots};
  return reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
}

// ---- element formats ------------------------------------------------------------------------

// PEP 3118 format of each dtype (native byte order and size). 'l' rather than 'q' for int64 on
// LP64, so NumPy reads it back as numpy.int64 (its C long), not as longlong.
const char* buffer_format(DType dt) {
  constexpr bool long64 = sizeof(long) == 8;
  switch (dt) {
    case DType::Bool: return "?";
    case DType::Int8: return "b";
    case DType::Int16: return "h";
    case DType::Int32: return "i";
    case DType::Int64: return long64 ? "l" : "q";
    case DType::UInt8: return "B";
    case DType::UInt16: return "H";
    case DType::UInt32: return "I";
    case DType::UInt64: return long64 ? "L" : "Q";
    case DType::Float16: return "e";
    case DType::Float32: return "f";
    case DType::Float64: return "d";
    case DType::Complex64: return "Zf";
    case DType::Complex128: return "Zd";
    case DType::BFloat16: return nullptr;  // PEP 3118 has no letter for it
  }
  return "B";
}

// DType of a single-element PEP 3118 format with the given item size. Null when unsupported
// (non-native byte order, structs, pointers, text).
std::optional<DType> dtype_from_format(const char* fmt, Py_ssize_t itemsize) {
  if (!fmt) fmt = "B";
  if (*fmt == '@' || *fmt == '=' || *fmt == '<') ++fmt;  // '<' is native here (x86-64, aarch64)
  const bool complex = *fmt == 'Z';
  if (complex) ++fmt;
  if (!fmt[0] || fmt[1]) return std::nullopt;
  auto sized = [&](DType dt) -> std::optional<DType> {
    if (rt::dtype_itemsize(dt) != itemsize) return std::nullopt;
    return dt;
  };
  auto sint = [&]() -> std::optional<DType> {
    switch (itemsize) {
      case 1: return DType::Int8;
      case 2: return DType::Int16;
      case 4: return DType::Int32;
      case 8: return DType::Int64;
    }
    return std::nullopt;
  };
  auto uint = [&]() -> std::optional<DType> {
    switch (itemsize) {
      case 1: return DType::UInt8;
      case 2: return DType::UInt16;
      case 4: return DType::UInt32;
      case 8: return DType::UInt64;
    }
    return std::nullopt;
  };
  if (complex) {
    if (*fmt == 'f') return sized(DType::Complex64);
    if (*fmt == 'd') return sized(DType::Complex128);
    return std::nullopt;
  }
  switch (*fmt) {
    case '?': return sized(DType::Bool);
    case 'b': case 'h': case 'i': case 'l': case 'q': case 'n': return sint();
    case 'B': case 'H': case 'I': case 'L': case 'Q': case 'N': return uint();
    case 'e': return sized(DType::Float16);
    case 'f': return sized(DType::Float32);
    case 'd': return sized(DType::Float64);
    default: return std::nullopt;
  }
}

// DType of an __array_interface__ typestr such as "<f4" or "|b1".
std::optional<DType> dtype_from_typestr(const char* s) {
  if (!s || !s[0] || !s[1]) return std::nullopt;
  if (s[0] != '<' && s[0] != '|' && s[0] != '=') return std::nullopt;
  const int size = std::atoi(s + 2);
  const char kind = s[1];
  for (int i = 0; i < rt::kNumDTypes; ++i) {
    const auto dt = static_cast<DType>(i);
    if (rt::dtype_itemsize(dt) != size) continue;
    const char k = dt == DType::Bool ? 'b'
                   : rt::dtype_is_complex(dt) ? 'c'
                   : rt::dtype_is_float(dt) ? 'f'
                   : rt::dtype_is_signed(dt) ? 'i'
                                             : 'u';
    if (k == kind) return dt;
  }
  return std::nullopt;
}

std::string accepted_dtypes() {
  std::string s;
  for (int i = 0; i < rt::kNumDTypes; ++i) s += (i ? ", " : "") + std::string(rt::dtype_name(static_cast<DType>(i)));
  return s;
}

// ---- argument parsing ---------------------------------------------------------------------------

// A dtype argument: a name ("float32"), a Python type (float, int, bool, complex), a NumPy dtype or
// scalar type, a torch dtype (torch.float32), or anything whose str() is one of those names.
bool parse_dtype(PyObject* o, const char* fn, std::optional<DType>& out) {
  out.reset();
  if (!o || o == Py_None) return true;
  std::string name;
  if (o == reinterpret_cast<PyObject*>(&PyFloat_Type)) name = "float64";
  else if (o == reinterpret_cast<PyObject*>(&PyLong_Type)) name = "int64";
  else if (o == reinterpret_cast<PyObject*>(&PyBool_Type)) name = "bool";
  else if (o == reinterpret_cast<PyObject*>(&PyComplex_Type)) name = "complex128";
  if (name.empty()) {
    OwnedRef text;
    if (PyUnicode_Check(o)) text = OwnedRef::borrow(o);
    else if (PyType_Check(o)) text = OwnedRef::steal(PyObject_GetAttrString(o, "__name__"));  // numpy.float32
    else text = OwnedRef::steal(PyObject_Str(o));  // numpy.dtype('float32'), torch.float32
    const char* s = text ? PyUnicode_AsUTF8(text.get()) : nullptr;
    if (!s) return false;
    name = s;
    if (name.rfind("torch.", 0) == 0) name = name.substr(6);
    if (name == "bool_") name = "bool";
    else if (name == "float") name = "float32";  // torch.float
    else if (name == "double") name = "float64";
    else if (name == "half") name = "float16";
    else if (name == "long") name = "int64";
    else if (name == "int") name = "int32";
  }
  if (auto dt = rt::dtype_from_name(name)) {
    out = *dt;
    return true;
  }
  PyErr_Format(PyExc_TypeError, "%s: unknown dtype %R (expected one of: %s)", fn, o, accepted_dtypes().c_str());
  return false;
}

bool parse_device(PyObject* o, const char* fn, rt::Device& out) {
  out = rt::Device{};
  if (!o || o == Py_None) return true;
  OwnedRef text = PyUnicode_Check(o) ? OwnedRef::borrow(o) : OwnedRef::steal(PyObject_Str(o));  // torch.device
  const char* s = text ? PyUnicode_AsUTF8(text.get()) : nullptr;
  if (!s) return false;
  const std::string d = s;
  if (d == "cpu" || d == "cpu:0") return true;
  if (d == "cuda" || d.rfind("cuda:", 0) == 0) {
    int index = 0;
    if (d.size() > 5) {
      char* end = nullptr;
      const long v = std::strtol(d.c_str() + 5, &end, 10);
      if (*end || v < 0 || v > 63 || end == d.c_str() + 5) {
        PyErr_Format(PyExc_ValueError, "%s: unknown device '%s' (expected 'cpu', 'cuda' or 'cuda:N')", fn, s);
        return false;
      }
      index = static_cast<int>(v);
    }
    auto n = rt::cuda::device_count();
    if (!n || index >= *n) {
      const std::string why = !n ? n.error().message() : "the CUDA driver sees " + std::to_string(*n) + " device(s)";
      PyErr_Format(PyExc_RuntimeError, "%s: device '%s' is not available: %s", fn, s, why.c_str());
      return false;
    }
    out = rt::Device{rt::DeviceType::CUDA, index};
    return true;
  }
  PyErr_Format(PyExc_ValueError, "%s: unknown device '%s' (expected 'cpu' or 'cuda')", fn, s);
  return false;
}

// ---- making tensors -------------------------------------------------------------------------

// framejit::Tensor::from_blob, with its C++ exceptions as Python ones. Null `owner` borrows.
std::optional<Tensor> blob(void* data, const int64_t* shape, const int64_t* strides, int nd, DType dtype,
                           std::shared_ptr<void> owner = nullptr, rt::Device device = {}) {
  try {
    std::vector<int64_t> sh(shape, shape + nd), st;
    if (strides) st.assign(strides, strides + nd);
    return Tensor::from_blob(data, std::move(sh), dtype, std::move(st), std::move(owner), device);
  } catch (const std::bad_alloc&) {
    PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_ValueError, "framejit: %s", e.what());
  }
  return std::nullopt;
}

PyObject* from_ndarray_checked(PyObject* arr);

// A tensor over the memory of a buffer exporter (new ref). `copy`: own a converted copy instead.
PyObject* from_buffer(PyObject* obj, bool copy) {
  OwnedRef hold = OwnedRef::steal(PyType_GenericAlloc(g_buffer_hold_type, 0));
  if (!hold) return nullptr;
  auto* h = reinterpret_cast<BufferHold*>(hold.get());
  if (PyObject_GetBuffer(obj, &h->view, PyBUF_RECORDS_RO) < 0) return nullptr;
  h->held = true;
  const Py_buffer& v = h->view;
  std::optional<DType> dt = dtype_from_format(v.format, v.itemsize);
  if (!dt) {
    PyErr_Format(PyExc_TypeError,
                 "framejit.tensor: the buffer of a %.200s has element format '%s' (%zd bytes), which is not "
                 "a framejit dtype in native byte order",
                 Py_TYPE(obj)->tp_name, v.format ? v.format : "B", v.itemsize);
    return nullptr;
  }
  if (v.ndim > kMaxDims) {
    PyErr_Format(PyExc_ValueError, "framejit.tensor: %d dimensions is more than %d", v.ndim, kMaxDims);
    return nullptr;
  }
  int64_t shape[kMaxDims], strides[kMaxDims];
  for (int d = 0; d < v.ndim; ++d) {
    shape[d] = v.shape ? v.shape[d] : v.len / v.itemsize;
    strides[d] = v.strides ? v.strides[d] : 0;
  }
  const int64_t* st = v.strides ? strides : nullptr;
  if (copy) {
    OwnedRef out = OwnedRef::steal(tensor_empty(shape, v.ndim, *dt));
    if (!out) return nullptr;
    std::vector<int64_t> contiguous;
    if (!st) {
      contiguous.assign(v.ndim, 0);
      int64_t s = v.itemsize;
      for (int d = v.ndim; d-- > 0;) {
        contiguous[d] = s;
        s *= shape[d];
      }
      st = contiguous.data();
    }
    copy_convert(static_cast<const char*>(v.buf), *dt, v.ndim, shape, st, as_tensor(out.get())->data, *dt);
    return out.release();
  }
  std::optional<Tensor> t = blob(v.buf, shape, st, v.ndim, *dt);
  return t ? make_tensor(std::move(*t), hold.get(), !v.readonly) : nullptr;
}

// A tensor over the memory an __array_interface__ describes (new ref; keeps `obj` alive).
PyObject* from_array_interface(PyObject* obj, PyObject* iface) {
  if (!PyDict_Check(iface)) {
    PyErr_SetString(PyExc_TypeError, "framejit.tensor: __array_interface__ is not a dict");
    return nullptr;
  }
  PyObject* shape_o = PyDict_GetItemString(iface, "shape");      // borrowed
  PyObject* typestr_o = PyDict_GetItemString(iface, "typestr");  // borrowed
  PyObject* data_o = PyDict_GetItemString(iface, "data");        // borrowed
  PyObject* strides_o = PyDict_GetItemString(iface, "strides");  // borrowed
  PyObject* mask_o = PyDict_GetItemString(iface, "mask");        // borrowed
  if (!shape_o || !PyTuple_Check(shape_o) || !typestr_o || !PyUnicode_Check(typestr_o)) {
    PyErr_SetString(PyExc_TypeError, "framejit.tensor: __array_interface__ needs a 'shape' tuple and a 'typestr'");
    return nullptr;
  }
  if (!data_o || !PyTuple_Check(data_o) || PyTuple_GET_SIZE(data_o) != 2) {
    PyErr_SetString(PyExc_TypeError,
                    "framejit.tensor: only the __array_interface__ form with data=(pointer, read_only) is supported");
    return nullptr;
  }
  if (mask_o && mask_o != Py_None) {
    PyErr_SetString(PyExc_TypeError, "framejit.tensor: masked __array_interface__ data is not supported");
    return nullptr;
  }
  const char* typestr = PyUnicode_AsUTF8(typestr_o);
  std::optional<DType> dt = dtype_from_typestr(typestr);
  if (!dt) {
    PyErr_Format(PyExc_TypeError, "framejit.tensor: __array_interface__ typestr '%s' is not a framejit dtype in "
                 "native byte order", typestr ? typestr : "?");
    return nullptr;
  }
  const Py_ssize_t nd = PyTuple_GET_SIZE(shape_o);
  if (nd > kMaxDims || (strides_o && strides_o != Py_None && (!PyTuple_Check(strides_o) ||
                                                              PyTuple_GET_SIZE(strides_o) != nd))) {
    PyErr_SetString(PyExc_ValueError, "framejit.tensor: bad __array_interface__ shape or strides");
    return nullptr;
  }
  int64_t shape[kMaxDims], strides[kMaxDims];
  for (Py_ssize_t d = 0; d < nd; ++d) {
    shape[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(shape_o, d));
    if (strides_o && strides_o != Py_None) strides[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(strides_o, d));
  }
  void* ptr = PyLong_AsVoidPtr(PyTuple_GET_ITEM(data_o, 0));
  const int readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data_o, 1));
  if (PyErr_Occurred() || readonly < 0) return nullptr;
  std::optional<Tensor> t =
      blob(ptr, shape, strides_o && strides_o != Py_None ? strides : nullptr, static_cast<int>(nd), *dt);
  return t ? make_tensor(std::move(*t), obj, !readonly) : nullptr;
}

// The new tensor framejit.tensor(data) makes before any dtype conversion (new ref), sharing
// memory wherever the source allows it.
PyObject* from_object(PyObject* data, const DType* dtype) {
  if (is_any_tensor(data)) return Py_NewRef(data);
  // Python data first: the protocol probes below cost an AttributeError each for a list.
  if (PyList_CheckExact(data) || PyTuple_CheckExact(data) || PyLong_CheckExact(data) || PyFloat_CheckExact(data) ||
      PyBool_Check(data) || PyComplex_CheckExact(data))
    return tensor_from_python_data(data, dtype);
  const NumPyHandles* np = numpy_handles();
  if (np && PyObject_TypeCheck(data, np->ndarray)) return from_ndarray_checked(data);
  // A NumPy scalar is a value, not memory to share (np.asarray copies it too).
  if (np && PyObject_TypeCheck(data, np->generic)) return from_buffer(data, /*copy=*/true);
  if (PyObject_CheckBuffer(data)) return from_buffer(data, /*copy=*/false);
  if (has_dlpack(data)) return tensor_from_dlpack(data);
  if (!PyUnicode_Check(data)) {
    static PyObject* iface_name = PyUnicode_InternFromString("__array_interface__");  // immortal
    if (PyObject* iface = PyObject_GetAttr(data, iface_name)) {
      OwnedRef hold = OwnedRef::steal(iface);
      return from_array_interface(data, iface);
    }
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
    PyErr_Clear();
  }
  if (PyUnicode_Check(data)) {
    PyErr_SetString(PyExc_TypeError, "framejit.tensor: a str is not numeric data");
    return nullptr;
  }
  return tensor_from_python_data(data, dtype);
}

PyObject* from_ndarray_checked(PyObject* arr) {
  NdArrayFields* a = as_ndarray(arr);
  std::optional<DType> dt = dtype_from_descr(a->descr);
  if (!dt) {
    OwnedRef text = OwnedRef::steal(PyObject_Str(a->descr));
    PyErr_Format(PyExc_TypeError,
                 "framejit.tensor: NumPy dtype %s is not supported (framejit dtypes, in native byte order: %s)",
                 text ? PyUnicode_AsUTF8(text.get()) : "?", accepted_dtypes().c_str());
    return nullptr;
  }
  static_assert(sizeof(intptr_t) == sizeof(int64_t));
  std::optional<Tensor> t = blob(a->data, reinterpret_cast<const int64_t*>(a->dimensions),
                                 reinterpret_cast<const int64_t*>(a->strides), a->nd, *dt);
  return t ? make_tensor(std::move(*t), arr, (a->flags & kNpyWriteable) != 0) : nullptr;
}

// ---- the type's slots -------------------------------------------------------------------------

void tensor_dealloc(PyObject* self) {
  TensorObject* t = as_tensor(self);
  PyTypeObject* type = Py_TYPE(self);
  if (t->weakreflist) PyObject_ClearWeakRefs(self);
  t->tensor.~Tensor();  // owned storage: back to the pool when this was its last tensor
  Py_CLEAR(t->base);    // borrowed storage: release the buffer / run the DLPack deleter / drop the array
  type->tp_free(self);
  Py_DECREF(type);  // instances of heap types own a reference to their type
}

// Owned storage seen by no other tensor, no buffer export, no Python object: nothing but
// references to this object can observe the memory.
bool storage_is_private(TensorObject* t) { return !t->base && t->exports == 0 && t->tensor.sole_owner(); }

PyObject* tensor_new(PyTypeObject*, PyObject*, PyObject*) {
  PyErr_SetString(PyExc_TypeError, "framejit.Tensor cannot be instantiated directly; use framejit.tensor(data)");
  return nullptr;
}

bool is_f_contiguous(const TensorObject* t) {
  int64_t expect = rt::dtype_itemsize(t->dtype);
  for (int d = 0; d < t->nd; ++d) {
    if (t->shape[d] == 0) return true;
    if (t->shape[d] != 1 && t->strides[d] != expect) return false;
    expect *= t->shape[d];
  }
  return true;
}

int tensor_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  TensorObject* t = as_tensor(self);
  auto refuse = [&](const char* why) {
    view->obj = nullptr;
    PyErr_Format(PyExc_BufferError, "framejit.Tensor: %s", why);
    return -1;
  };
  if (t->tensor.device().type != rt::DeviceType::CPU) return refuse("only cpu tensors export their memory as a buffer");
  if (!buffer_format(t->dtype)) return refuse("bfloat16 has no buffer format (PEP 3118)");
  if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && !(t->flags & kTensorWriteable))
    return refuse("the tensor is read-only");
  const bool c_contig = (t->flags & kTensorCContiguous) != 0;
  if ((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS && !c_contig)
    return refuse("the tensor is not C-contiguous");
  if ((flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS && !is_f_contiguous(t))
    return refuse("the tensor is not Fortran-contiguous");
  if ((flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS && !c_contig && !is_f_contiguous(t))
    return refuse("the tensor is not contiguous");
  // Without PyBUF_STRIDES the consumer assumes C order.
  if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !c_contig)
    return refuse("the tensor is not C-contiguous and the consumer did not ask for strides");
  const int64_t itemsize = rt::dtype_itemsize(t->dtype);
  int64_t numel = 1;
  for (int d = 0; d < t->nd; ++d) numel *= t->shape[d];
  view->buf = t->data;
  view->obj = Py_NewRef(self);
  view->len = static_cast<Py_ssize_t>(numel * itemsize);
  view->readonly = !(t->flags & kTensorWriteable);
  view->itemsize = static_cast<Py_ssize_t>(itemsize);
  view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(buffer_format(t->dtype)) : nullptr;
  view->ndim = t->nd;
  auto* shape = reinterpret_cast<Py_ssize_t*>(const_cast<int64_t*>(t->shape));
  auto* strides = reinterpret_cast<Py_ssize_t*>(const_cast<int64_t*>(t->strides));
  view->shape = (flags & PyBUF_ND) == PyBUF_ND ? shape : nullptr;
  view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? strides : nullptr;
  view->suboffsets = nullptr;
  view->internal = nullptr;
  ++t->exports;
  return 0;
}

void tensor_releasebuffer(PyObject* self, Py_buffer*) { --as_tensor(self)->exports; }

Py_ssize_t tensor_len(PyObject* self) {
  TensorObject* t = as_tensor(self);
  if (t->nd == 0) {
    PyErr_SetString(PyExc_TypeError, "len() of a 0-d framejit.Tensor");
    return -1;
  }
  return static_cast<Py_ssize_t>(t->shape[0]);
}

int64_t numel_of(const TensorObject* t) {
  int64_t n = 1;
  for (int d = 0; d < t->nd; ++d) n *= t->shape[d];
  return n;
}

PyObject* get_shape(PyObject* self, void*) { return int_tuple(as_tensor(self)->shape, as_tensor(self)->nd).release(); }
PyObject* get_strides(PyObject* self, void*) {
  return int_tuple(as_tensor(self)->strides, as_tensor(self)->nd).release();
}
PyObject* get_dtype(PyObject* self, void*) {
  static PyObject* names[rt::kNumDTypes] = {};  // interned, immortal
  const int k = static_cast<int>(as_tensor(self)->dtype);
  if (!names[k]) names[k] = PyUnicode_InternFromString(std::string(rt::dtype_name(as_tensor(self)->dtype)).c_str());
  return Py_XNewRef(names[k]);
}
PyObject* get_device(PyObject* self, void*) {
  return PyUnicode_FromString(device_text(as_tensor(self)->tensor.device()).c_str());
}
PyObject* get_ndim(PyObject* self, void*) { return PyLong_FromLong(as_tensor(self)->nd); }
PyObject* get_size(PyObject* self, void*) { return PyLong_FromLongLong(numel_of(as_tensor(self))); }
PyObject* get_itemsize(PyObject* self, void*) { return PyLong_FromLong(rt::dtype_itemsize(as_tensor(self)->dtype)); }
PyObject* get_nbytes(PyObject* self, void*) {
  return PyLong_FromLongLong(numel_of(as_tensor(self)) * rt::dtype_itemsize(as_tensor(self)->dtype));
}
PyObject* get_base(PyObject* self, void*) {
  PyObject* b = as_tensor(self)->base;
  return Py_NewRef(b ? b : Py_None);
}
PyObject* get_flags(PyObject* self, void*) { return PyLong_FromLong(as_tensor(self)->flags); }

// The array interfaces' type string ("<f4").
std::string typestr_of(DType dt) {
  const char kind = dt == DType::Bool ? 'b' : rt::dtype_is_complex(dt) ? 'c' : rt::dtype_is_float(dt) ? 'f'
                    : rt::dtype_is_signed(dt) ? 'i' : 'u';
  const int size = rt::dtype_itemsize(dt);
  return std::string(size == 1 ? "|" : "<") + kind + std::to_string(size);
}

// NumPy's array interface, version 3. The consumer keeps the tensor itself alive (NumPy sets the
// array's base to it).
PyObject* get_array_interface(PyObject* self, void*) {
  TensorObject* t = as_tensor(self);
  if (t->tensor.device().type != rt::DeviceType::CPU) {
    PyErr_SetString(PyExc_AttributeError, "__array_interface__ is only defined for cpu tensors");
    return nullptr;
  }
  const std::string typestr = typestr_of(t->dtype);
  OwnedRef shape = int_tuple(t->shape, t->nd);
  OwnedRef strides = (t->flags & kTensorCContiguous) ? OwnedRef::borrow(Py_None)
                                                      : int_tuple(t->strides, t->nd);
  if (!shape || !strides) return nullptr;
  return Py_BuildValue("{s:O,s:s,s:(N,O),s:O,s:i}", "shape", shape.get(), "typestr", typestr.c_str(), "data",
                       PyLong_FromVoidPtr(t->data), (t->flags & kTensorWriteable) ? Py_False : Py_True, "strides",
                       strides.get(), "version", 3);
}

// __cuda_array_interface__ (version 3) of a device tensor: how CuPy, torch and Numba read it
// without a copy. `stream` is framejit's (Note [One stream per device]): consumers order their
// work after what framejit issued on it. AttributeError for host tensors, as the protocol wants.
PyObject* get_cuda_array_interface(PyObject* self, void*) {
  TensorObject* t = as_tensor(self);
  const rt::Device d = t->tensor.device();
  if (d.type != rt::DeviceType::CUDA) {
    PyErr_SetString(PyExc_AttributeError, "__cuda_array_interface__: a cpu tensor has none (it exports a buffer)");
    return nullptr;
  }
  auto st = rt::cuda::stream(d.index);
  if (!st) {
    PyErr_Format(PyExc_RuntimeError, "framejit: %s", st.error().message().c_str());
    return nullptr;
  }
  OwnedRef shape = int_tuple(t->shape, t->nd), strides = int_tuple(t->strides, t->nd);
  if (!shape || !strides) return nullptr;
  const std::string typestr = typestr_of(t->dtype);
  const bool c = (t->flags & kTensorCContiguous) != 0;
  return Py_BuildValue("{s:O,s:s,s:(K,O),s:i,s:O,s:K}", "shape", shape.get(), "typestr", typestr.c_str(), "data",
                       static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(t->data)),
                       (t->flags & kTensorWriteable) ? Py_False : Py_True, "version", 3, "strides",
                       c ? Py_None : strides.get(), "stream",
                       static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(*st)));
}

PyGetSetDef tensor_getset[] = {
    {"__cuda_array_interface__", get_cuda_array_interface, nullptr,
     "The CUDA array interface (version 3) of a device tensor.", nullptr},
    {"shape", get_shape, nullptr, "Sizes of the dimensions (a tuple).", nullptr},
    {"dtype", get_dtype, nullptr, "Element type, as NumPy names it (\"float32\").", nullptr},
    {"device", get_device, nullptr, "Where the data lives: \"cpu\" (or \"cuda:N\").", nullptr},
    {"ndim", get_ndim, nullptr, "Number of dimensions.", nullptr},
    {"size", get_size, nullptr, "Number of elements.", nullptr},
    {"itemsize", get_itemsize, nullptr, "Bytes per element.", nullptr},
    {"nbytes", get_nbytes, nullptr, "Bytes of all elements (size * itemsize).", nullptr},
    {"strides", get_strides, nullptr, "Byte steps between elements along each dimension, as in NumPy.", nullptr},
    {"_base", get_base, nullptr, "The Python object whose memory this tensor borrows, or None.", nullptr},
    {"_flags", get_flags, nullptr, "Layout flags: 1 C-contiguous, 2 writeable, 4 aligned.", nullptr},
    {"__array_interface__", get_array_interface, nullptr, "NumPy's array interface (version 3).", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

PyObject* m_tolist(PyObject* self, PyObject*) { return tensor_tolist(as_tensor(self)); }

PyObject* m_item(PyObject* self, PyObject*) {
  TensorObject* t = as_tensor(self);
  if (numel_of(t) != 1) {
    PyErr_Format(PyExc_ValueError, "framejit.Tensor.item(): the tensor has %lld elements, not 1",
                 static_cast<long long>(numel_of(t)));
    return nullptr;
  }
  if (t->tensor.device().type != rt::DeviceType::CPU) {
    // As torch's item(): the one element copied to the host (waiting for the work that makes it).
    alignas(16) char element[16];
    Status s = rt::cuda::copy_to_host(t->tensor.device().index, element, t->data,
                                      static_cast<size_t>(rt::dtype_itemsize(t->dtype)));
    if (!s) {
      PyErr_Format(PyExc_RuntimeError, "framejit: %s", s.message().c_str());
      return nullptr;
    }
    return element_to_python(element, t->dtype);
  }
  return element_to_python(t->data, t->dtype);
}

PyObject* m_numpy(PyObject* self, PyObject*) { return tensor_to_ndarray(self); }

PyObject* m_data_ptr(PyObject* self, PyObject*) { return PyLong_FromVoidPtr(as_tensor(self)->data); }

PyObject* m_to(PyObject* self, PyObject* device_o) {
  rt::Device device;
  if (!parse_device(device_o, "framejit.Tensor.to", device)) return nullptr;
  return tensor_to_device(self, device);
}
PyObject* m_cpu(PyObject* self, PyObject*) { return tensor_to_device(self, rt::Device{}); }
PyObject* m_cuda(PyObject* self, PyObject* args) {
  PyObject* index = Py_None;
  if (!PyArg_ParseTuple(args, "|O:cuda", &index)) return nullptr;
  OwnedRef name = OwnedRef::steal(index == Py_None ? PyUnicode_FromString("cuda")
                                                   : PyUnicode_FromFormat("cuda:%S", index));
  if (!name) return nullptr;
  return m_to(self, name.get());
}

// __array__(dtype=None, copy=None): NumPy 1 passes only dtype; NumPy 2 also copy.
PyObject* m_array(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"dtype", "copy", nullptr};
  PyObject *dtype = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:__array__", const_cast<char**>(kwlist), &dtype, &copy))
    return nullptr;
  OwnedRef arr = OwnedRef::steal(tensor_to_ndarray(self));
  if (!arr) return nullptr;
  if (dtype != Py_None) {
    // astype(copy=False) returns the view itself when the dtype already matches.
    OwnedRef astype = OwnedRef::steal(PyObject_GetAttrString(arr.get(), "astype"));
    OwnedRef kw = OwnedRef::steal(Py_BuildValue("{s:O}", "copy", Py_False));
    OwnedRef targs = OwnedRef::steal(PyTuple_Pack(1, dtype));
    if (!astype || !kw || !targs) return nullptr;
    OwnedRef converted = OwnedRef::steal(PyObject_Call(astype.get(), targs.get(), kw.get()));
    if (!converted) return nullptr;
    if (converted.get() != arr.get() && copy == Py_False) {
      PyErr_SetString(PyExc_ValueError,
                      "framejit.Tensor.__array__: a different dtype needs a copy, and copy=False forbids one");
      return nullptr;
    }
    if (converted.get() != arr.get()) return converted.release();
  }
  if (copy != Py_None && PyObject_IsTrue(copy) == 1) return PyObject_CallMethod(arr.get(), "copy", nullptr);
  return arr.release();
}

PyMethodDef tensor_methods[] = {
    {"tolist", m_tolist, METH_NOARGS, "The elements as nested lists of Python numbers (a number for a 0-d tensor)."},
    {"item", m_item, METH_NOARGS, "The only element as a Python number; ValueError unless size == 1."},
    {"to", m_to, METH_O, "to(device): this tensor on `device` ('cpu', 'cuda', 'cuda:N'): itself if it is there, "
                          "else a contiguous copy."},
    {"cpu", m_cpu, METH_NOARGS, "This tensor in host memory (itself, or a copy of a device tensor)."},
    {"cuda", m_cuda, METH_VARARGS, "cuda(index=None): this tensor on CUDA device `index` (default 0)."},
    {"numpy", m_numpy, METH_NOARGS,
     "A NumPy array over the same memory (no copy; the array keeps the tensor alive). Needs NumPy."},
    {"data_ptr", m_data_ptr, METH_NOARGS, "Address of the first element."},
    {"__array__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(m_array)), METH_VARARGS | METH_KEYWORDS,
     "__array__(dtype=None, copy=None): a NumPy view (a converted copy when dtype differs)."},
    {"__dlpack__", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(tensor_dlpack)),
     METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(stream=None, *, max_version=None, dl_device=None, copy=None): a DLPack capsule over this "
     "tensor's memory ('dltensor_versioned' when max_version >= (1, 0), else 'dltensor')."},
    {"__dlpack_device__", tensor_dlpack_device, METH_NOARGS, "(device_type, device_id) in DLPack's numbering."},
    {nullptr, nullptr, 0, nullptr},
};

PyMemberDef tensor_members[] = {
    {"__weaklistoffset__", T_PYSSIZET, offsetof(TensorObject, weakreflist), READONLY, nullptr},
    {nullptr, 0, 0, 0, nullptr},
};

const char* const kTensorDoc =
    "The C base of framejit.Tensor: a strided, typed view of memory that framejit owns or borrows "
    "(see framejit.Tensor).";

PyTypeObject* make_base_type() {
  static PyType_Slot slots[] = {
      {Py_tp_dealloc, reinterpret_cast<void*>(tensor_dealloc)},
      {Py_tp_new, reinterpret_cast<void*>(tensor_new)},
      {Py_tp_repr, reinterpret_cast<void*>(+[](PyObject* self) { return tensor_repr(as_tensor(self)); })},
      {Py_tp_doc, const_cast<char*>(kTensorDoc)},
      {Py_tp_getset, tensor_getset},
      {Py_tp_methods, tensor_methods},
      {Py_tp_members, tensor_members},
      {Py_sq_length, reinterpret_cast<void*>(tensor_len)},
      {Py_bf_getbuffer, reinterpret_cast<void*>(tensor_getbuffer)},
      {Py_bf_releasebuffer, reinterpret_cast<void*>(tensor_releasebuffer)},
      {0, nullptr},
  };
  static PyType_Spec spec = {"framejit._C.TensorBase", sizeof(TensorObject), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, slots};
  return reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
}

// ---- module functions ------------------------------------------------------------------------

PyObject* f_tensor(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"data", "dtype", "device", nullptr};
  PyObject *data, *dtype_o = Py_None, *device_o = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:tensor", const_cast<char**>(kwlist), &data, &dtype_o,
                                   &device_o))
    return nullptr;
  std::optional<DType> dtype;
  rt::Device device;
  if (!parse_dtype(dtype_o, "framejit.tensor", dtype) || !parse_device(device_o, "framejit.tensor", device))
    return nullptr;
  OwnedRef t = OwnedRef::steal(from_object(data, dtype ? &*dtype : nullptr));
  if (!t) return nullptr;
  if (dtype && as_tensor(t.get())->dtype != *dtype) t = OwnedRef::steal(convert_copy(t.get(), *dtype));
  if (!t || device.type == rt::DeviceType::CPU) return t.release();
  return tensor_to_device(t.get(), device);
}

PyObject* f_from_dlpack(PyObject*, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"x", "device", "copy", nullptr};
  PyObject *x, *device_o = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|$OO:from_dlpack", const_cast<char**>(kwlist), &x, &device_o,
                                   &copy))
    return nullptr;
  rt::Device device;
  if (!parse_device(device_o, "framejit.from_dlpack", device)) return nullptr;
  OwnedRef t = OwnedRef::steal(tensor_from_dlpack(x));
  if (!t) return nullptr;
  if (copy != Py_None && PyObject_IsTrue(copy) == 1) return convert_copy(t.get(), as_tensor(t.get())->dtype);
  return t.release();
}

PyObject* f_register(PyObject*, PyObject* cls) {
  if (!PyType_Check(cls) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject*>(cls), g_base_type)) {
    PyErr_SetString(PyExc_TypeError, "_register_tensor_class: expected a subclass of framejit._C.TensorBase");
    return nullptr;
  }
  auto* type = reinterpret_cast<PyTypeObject*>(cls);
  if (type->tp_basicsize != g_base_type->tp_basicsize || type->tp_dictoffset != 0) {
    PyErr_SetString(PyExc_TypeError,
                    "_register_tensor_class: the class must add no instance fields (define __slots__ = ())");
    return nullptr;
  }
  Py_INCREF(cls);  // never released: tensors of this class may live until the process ends
  detail::g_tensor_type = type;
  Py_RETURN_NONE;
}

PyObject* f_is_private(PyObject*, PyObject* t) {
  if (!is_any_tensor(t)) {
    PyErr_SetString(PyExc_TypeError, "_tensor_is_private: expected a framejit.Tensor");
    return nullptr;
  }
  // The caller's own references make the count > 1 here; the rest of the condition is checked.
  return PyBool_FromLong(storage_is_private(as_tensor(t)));
}

PyObject* f_empty(PyObject*, PyObject* args) {
  PyObject *shape_o, *dtype_o;
  if (!PyArg_ParseTuple(args, "OO:_tensor_empty", &shape_o, &dtype_o)) return nullptr;
  std::optional<DType> dtype;
  if (!parse_dtype(dtype_o, "_tensor_empty", dtype)) return nullptr;
  OwnedRef seq = OwnedRef::steal(PySequence_Fast(shape_o, "_tensor_empty: shape must be a sequence"));
  if (!seq) return nullptr;
  const Py_ssize_t nd = PySequence_Fast_GET_SIZE(seq.get());
  if (nd > kMaxDims) return PyErr_Format(PyExc_ValueError, "_tensor_empty: more than %d dimensions", kMaxDims);
  int64_t shape[kMaxDims];
  for (Py_ssize_t d = 0; d < nd; ++d) {
    shape[d] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq.get(), d));
    if (shape[d] < 0) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "_tensor_empty: negative size");
      return nullptr;
    }
  }
  return tensor_empty(shape, static_cast<int>(nd), dtype ? *dtype : DType::Float32);
}

// _tensor_view(t, byte_offset, shape, strides): a view of `t` (tests; bounds are checked).
PyObject* f_view(PyObject*, PyObject* args) {
  PyObject *parent, *shape_o, *strides_o;
  long long offset;
  if (!PyArg_ParseTuple(args, "OLOO:_tensor_view", &parent, &offset, &shape_o, &strides_o)) return nullptr;
  if (!is_any_tensor(parent)) return PyErr_Format(PyExc_TypeError, "_tensor_view: expected a framejit.Tensor");
  TensorObject* p = as_tensor(parent);
  OwnedRef sh = OwnedRef::steal(PySequence_Fast(shape_o, "_tensor_view: shape must be a sequence"));
  OwnedRef st = OwnedRef::steal(PySequence_Fast(strides_o, "_tensor_view: strides must be a sequence"));
  if (!sh || !st) return nullptr;
  const Py_ssize_t nd = PySequence_Fast_GET_SIZE(sh.get());
  if (nd > kMaxDims || PySequence_Fast_GET_SIZE(st.get()) != nd)
    return PyErr_Format(PyExc_ValueError, "_tensor_view: shape and strides must have the same length (<= %d)",
                        kMaxDims);
  int64_t shape[kMaxDims], strides[kMaxDims];
  for (Py_ssize_t d = 0; d < nd; ++d) {
    shape[d] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(sh.get(), d));
    strides[d] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(st.get(), d));
  }
  if (PyErr_Occurred()) return nullptr;
  // The byte ranges both touch: the view's must lie inside the parent's.
  auto extent = [](const int64_t* shape, const int64_t* strides, int nd, int64_t item, int64_t& lo, int64_t& hi) {
    lo = 0;
    hi = item;
    for (int d = 0; d < nd; ++d) {
      if (shape[d] == 0) return false;
      const int64_t span = (shape[d] - 1) * strides[d];
      (span < 0 ? lo : hi) += span;
    }
    return true;
  };
  const int64_t item = rt::dtype_itemsize(p->dtype);
  int64_t plo, phi, vlo, vhi;
  const bool parent_nonempty = extent(p->shape, p->strides, p->nd, item, plo, phi);
  const bool view_nonempty = extent(shape, strides, static_cast<int>(nd), item, vlo, vhi);
  for (Py_ssize_t d = 0; d < nd; ++d)
    if (shape[d] < 0) return PyErr_Format(PyExc_ValueError, "_tensor_view: negative size");
  if (view_nonempty && (!parent_nonempty || offset + vlo < plo || offset + vhi > phi))
    return PyErr_Format(PyExc_ValueError, "_tensor_view: the view reaches outside the tensor's memory");
  return tensor_view(parent, p->data + offset, static_cast<int>(nd), shape, strides);
}

PyMethodDef module_functions[] = {
    {"tensor", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f_tensor)), METH_VARARGS | METH_KEYWORDS,
     "tensor(data, dtype=None, device='cpu') (documented on framejit.tensor)."},
    {"from_dlpack", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f_from_dlpack)),
     METH_VARARGS | METH_KEYWORDS, "from_dlpack(x, *, device=None, copy=None) (documented on framejit.from_dlpack)."},
    {"_register_tensor_class", f_register, METH_O,
     "Makes `cls` (a subclass of TensorBase with __slots__ = ()) the class of every tensor framejit creates."},
    {"_tensor_is_private", f_is_private, METH_O,
     "Whether nothing but the caller's reference can observe the tensor's memory (tests)."},
    {"_tensor_empty", f_empty, METH_VARARGS, "_tensor_empty(shape, dtype): uninitialized pool memory (tests)."},
    {"_tensor_view", f_view, METH_VARARGS, "_tensor_view(t, byte_offset, shape, strides): a view of t (tests)."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

// ---- shared internals (object_p.h) ----------------------------------------------------

namespace tensor_detail {

PyTypeObject* base_type() { return g_base_type; }

std::string device_text(rt::Device d) {
  if (d.type == rt::DeviceType::CPU) return "cpu";
  return "cuda:" + std::to_string(d.index);
}

bool require_cpu(TensorObject* t, const char* what) {
  if (t->tensor.device().type == rt::DeviceType::CPU) return true;
  PyErr_Format(PyExc_RuntimeError, "framejit.Tensor.%s needs a cpu tensor; this one is on %s", what,
               device_text(t->tensor.device()).c_str());
  return false;
}

int compute_flags(const char* data, int nd, const int64_t* shape, const int64_t* strides, DType dtype,
                  bool writeable) {
  const int64_t item = rt::dtype_itemsize(dtype);
  int flags = writeable ? kTensorWriteable : 0;
  // C-contiguous as NumPy defines it: dimensions of size 1 may have any stride; an empty tensor is.
  bool c = true, empty = false;
  int64_t expect = item;
  for (int d = nd; d-- > 0;) {
    if (shape[d] == 0) empty = true;
    if (shape[d] != 1 && strides[d] != expect) c = false;
    expect *= shape[d];
  }
  if (c || empty) flags |= kTensorCContiguous;
  bool aligned = reinterpret_cast<uintptr_t>(data) % static_cast<uintptr_t>(item) == 0;
  for (int d = 0; d < nd; ++d) aligned = aligned && (shape[d] <= 1 || strides[d] % item == 0);
  if (aligned) flags |= kTensorAligned;
  return flags;
}

PyObject* make_tensor(Tensor t, PyObject* base, bool writeable) {
  PyTypeObject* type = tensor_type();
  if (!type) {
    PyErr_SetString(PyExc_RuntimeError, "framejit: the tensor type is not initialized");
    return nullptr;
  }
  PyObject* o = type->tp_alloc(type, 0);  // zero-filled
  if (!o) return nullptr;
  TensorObject* self = as_tensor(o);
  new (&self->tensor) Tensor(std::move(t));
  self->data = static_cast<char*>(self->tensor.data_ptr());
  self->nd = self->tensor.ndim();
  self->dtype = self->tensor.dtype();
  self->device = self->tensor.device();
  self->shape = self->tensor.shape().data();
  self->strides = self->tensor.strides().data();
  self->flags = compute_flags(self->data, self->nd, self->shape, self->strides, self->dtype, writeable);
  self->base = Py_XNewRef(base);
  self->weakreflist = nullptr;
  self->exports = 0;
  return o;
}

PyObject* convert_copy(PyObject* src, DType dtype) {
  TensorObject* s = as_tensor(src);
  if (!require_cpu(s, "conversion")) return nullptr;
  OwnedRef out = OwnedRef::steal(tensor_empty(s->shape, s->nd, dtype, s->tensor.device()));
  if (!out) return nullptr;
  copy_convert(s->data, s->dtype, s->nd, s->shape, s->strides, as_tensor(out.get())->data, dtype);
  return out.release();
}

}  // namespace tensor_detail

// ---- the contract (object.h) ------------------------------------------------------------


PyObject* tensor_empty(const int64_t* shape, int nd, DType dtype, rt::Device device) {
  int64_t bytes = rt::dtype_itemsize(dtype);
  for (int d = 0; d < nd; ++d) {
    if (shape[d] < 0) {
      PyErr_SetString(PyExc_ValueError, "framejit: negative size in a tensor shape");
      return nullptr;
    }
    if (shape[d] != 0 && bytes > INT64_MAX / shape[d]) return PyErr_NoMemory();
    bytes *= shape[d];
  }
  void* mem = nullptr;
  if (device.type == rt::DeviceType::CUDA) {
    auto block = rt::cuda::device_alloc(device.index, static_cast<size_t>(bytes));
    if (!block) {
      PyErr_Format(PyExc_MemoryError, "framejit: %s", block.error().message().c_str());
      return nullptr;
    }
    mem = *block;
  } else {
    mem = rt::pool_alloc(static_cast<size_t>(bytes));
    if (!mem) return PyErr_NoMemory();
  }
  std::shared_ptr<void> owner;
  try {
    owner = device.type == rt::DeviceType::CUDA ? std::shared_ptr<void>(mem, rt::cuda::device_free)
                                                 : std::shared_ptr<void>(mem, rt::pool_free);
  } catch (const std::bad_alloc&) {  // the control block; shared_ptr then frees `mem` itself
    return PyErr_NoMemory();
  }
  std::optional<Tensor> t = blob(mem, shape, nullptr, nd, dtype, std::move(owner), device);
  return t ? make_tensor(std::move(*t), nullptr, true) : nullptr;
}

PyObject* tensor_to_device(PyObject* obj, rt::Device device) {
  TensorObject* t = as_tensor(obj);
  const rt::Device from = t->tensor.device();
  if (from == device) return Py_NewRef(obj);
  const int64_t item = rt::dtype_itemsize(t->dtype);
  if (from.type == rt::DeviceType::CPU) {
    // Host -> device: a contiguous copy of the elements, one transfer.
    OwnedRef src = (t->flags & kTensorCContiguous) ? OwnedRef::borrow(obj) : OwnedRef::steal(convert_copy(obj, t->dtype));
    if (!src) return nullptr;
    OwnedRef out = OwnedRef::steal(tensor_empty(t->shape, t->nd, t->dtype, device));
    if (!out) return nullptr;
    Status s = rt::cuda::copy_to_device(device.index, as_tensor(out.get())->data, as_tensor(src.get())->data,
                                        static_cast<size_t>(numel_of(t) * item));
    if (!s) {
      PyErr_Format(PyExc_RuntimeError, "framejit: %s", s.message().c_str());
      return nullptr;
    }
    return out.release();
  }
  // Device -> host: the bytes the view spans (any strides, negative ones too) in one transfer,
  // then a contiguous copy on the host when the view is not contiguous itself.
  const int64_t n = numel_of(t);
  int64_t lo = 0, hi = n ? item : 0;
  for (int d = 0; d < t->nd && n; ++d) {
    const int64_t ext = (t->shape[d] - 1) * t->strides[d];
    (ext < 0 ? lo : hi) += ext;
  }
  const int64_t span_bytes = hi - lo;
  void* mem = rt::pool_alloc(static_cast<size_t>(span_bytes));
  if (!mem) return PyErr_NoMemory();
  std::shared_ptr<void> owner;
  try {
    owner = std::shared_ptr<void>(mem, rt::pool_free);
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  }
  Status s = rt::cuda::copy_to_host(from.index, mem, t->data + lo, static_cast<size_t>(span_bytes));
  if (!s) {
    PyErr_Format(PyExc_RuntimeError, "framejit: %s", s.message().c_str());
    return nullptr;
  }
  std::optional<Tensor> host = blob(static_cast<char*>(mem) - lo, t->shape, t->strides, t->nd, t->dtype,
                                    std::move(owner), rt::Device{});
  if (!host) return nullptr;
  OwnedRef h = OwnedRef::steal(make_tensor(std::move(*host), nullptr, true));
  if (!h) return nullptr;
  if (device.type == rt::DeviceType::CPU) {
    if (as_tensor(h.get())->flags & kTensorCContiguous) return h.release();
    return convert_copy(h.get(), t->dtype);
  }
  return tensor_to_device(h.get(), device);  // another device: through the host
}

PyObject* tensor_view(PyObject* parent, char* data, int nd, const int64_t* shape, const int64_t* strides) {
  TensorObject* p = as_tensor(parent);
  std::optional<Tensor> t;
  try {
    t = p->tensor.view(data, std::vector<int64_t>(shape, shape + nd), std::vector<int64_t>(strides, strides + nd));
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_ValueError, "framejit: %s", e.what());
    return nullptr;
  }
  // Not `parent` itself as the base: views of views would chain, and the memory's keeper is the
  // owner (shared above) or the parent's base.
  return make_tensor(std::move(*t), p->base, (p->flags & kTensorWriteable) != 0);
}

bool tensor_is_private(PyObject* obj) { return Py_REFCNT(obj) == 1 && storage_is_private(as_tensor(obj)); }

PyObject* tensor_to_ndarray(PyObject* obj) {
  TensorObject* t = as_tensor(obj);
  if (!require_cpu(t, "numpy()")) return nullptr;
  OwnedRef np;
  if (const NumPyHandles* h = numpy_handles()) {
    np = OwnedRef::borrow(h->module);
  } else {
    np = OwnedRef::steal(PyImport_ImportModule("numpy"));
    if (!np) {
      PyErr_Clear();
      PyErr_SetString(PyExc_ImportError, "framejit: converting a tensor to a NumPy array needs NumPy, which cannot "
                                         "be imported");
      return nullptr;
    }
  }
  // Through a memoryview rather than the tensor: numpy.asarray(tensor) would fall back to
  // __array__ if the buffer were refused, and __array__ comes back here.
  OwnedRef view = OwnedRef::steal(PyMemoryView_FromObject(obj));
  if (!view) return nullptr;
  static PyObject* asarray_name = PyUnicode_InternFromString("asarray");  // immortal
  return PyObject_CallMethodOneArg(np.get(), asarray_name, view.get());
}

PyObject* tensor_from_ndarray(PyObject* arr) {
  const NumPyHandles* np = numpy_handles();
  if (!np || !PyObject_TypeCheck(arr, np->ndarray)) {
    PyErr_SetString(PyExc_TypeError, "framejit: expected a numpy.ndarray");
    return nullptr;
  }
  return from_ndarray_checked(arr);
}

bool init_tensor_type(PyObject* module) {
  if (!g_buffer_hold_type) g_buffer_hold_type = make_buffer_hold_type();
  if (!g_base_type) g_base_type = make_base_type();
  if (!detail::g_tensor_type) detail::g_tensor_type = g_base_type;
  if (!g_buffer_hold_type || !g_base_type) return false;
  register_tensor_adapter();
  if (PyModule_AddObjectRef(module, "TensorBase", reinterpret_cast<PyObject*>(g_base_type)) < 0) return false;
  return PyModule_AddFunctions(module, module_functions) == 0;
}

}  // namespace framejit::frontend
