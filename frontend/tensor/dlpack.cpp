// dlpack.cpp — DLPack for framejit.Tensor: __dlpack__/__dlpack_device__ (producer) and
// from_dlpack (consumer), per the DLPack C ABI and its Python specification.
#include <cstdlib>
#include <cstring>

#include "frontend/cpython/pyref.h"
#include "frontend/interop/dlpack_abi.h"
#include "frontend/tensor/object_p.h"

namespace framejit::frontend::tensor_detail {

using rt::DType;

namespace {

using namespace dlpack;  // NOLINT: the ABI's names, as dlpack.h spells them

// Note [DLPack lifetimes]
// Export: __dlpack__ mallocs one block holding the managed struct followed by its shape and
// strides, with manager_ctx a strong reference to the tensor. The consumer renames the capsule
// ("used_dltensor...") and calls the deleter when done; a capsule nobody consumed calls the
// deleter from its destructor. Either way the deleter runs exactly once, drops the reference (with
// the GIL: consumers may release from any thread) and frees the block.
// Import: from_dlpack renames the producer's capsule and hands the managed struct to a DLPackHold,
// the new tensor's base; when the tensor (and its views) die, the hold calls the producer's
// deleter, with the GIL held as tensors die with it.

template <class Managed>
void release_export(Managed* m) {
  if (!m) return;
  if (Py_IsInitialized()) {  // at exit the reference no longer matters
    PyGILState_STATE g = PyGILState_Ensure();
    Py_XDECREF(static_cast<PyObject*>(m->manager_ctx));
    PyGILState_Release(g);
  }
  std::free(m);
}
void deleter_legacy(DLManagedTensor* m) { release_export(m); }
void deleter_versioned(DLManagedTensorVersioned* m) { release_export(m); }

// Runs the deleter of a capsule nobody consumed.
// NB: PyCapsule_GetPointer cannot fail after PyCapsule_IsValid, so an exception in flight while
// the capsule dies is left alone.
void capsule_destructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kVersionedName)) {
    auto* m = static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule, kVersionedName));
    if (m && m->deleter) m->deleter(m);
  } else if (PyCapsule_IsValid(capsule, kCapsuleName)) {
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
    if (m && m->deleter) m->deleter(m);
  }
}

// Fills the DLTensor of an export of `t`; shape and strides go to `dims` (2 * nd slots).
bool fill_dl_tensor(TensorObject* t, DLTensor& dl, int64_t* dims) {
  const int64_t item = rt::dtype_itemsize(t->dtype);
  dl.data = t->data;
  dl.device = DLDevice{kDLCPU, 0};
  dl.ndim = t->nd;
  dl.dtype = dl_dtype(t->dtype);
  dl.shape = dims;
  dl.strides = dims + t->nd;
  dl.byte_offset = 0;
  for (int d = 0; d < t->nd; ++d) {
    if (t->strides[d] % item != 0 && t->shape[d] > 1) {
      PyErr_SetString(PyExc_BufferError,
                      "framejit.Tensor.__dlpack__: a stride is not a multiple of the item size, which DLPack "
                      "cannot describe");
      return false;
    }
    dims[d] = t->shape[d];
    dims[t->nd + d] = t->strides[d] / item;
  }
  return true;
}

template <class Managed>
Managed* new_managed(TensorObject* t) {
  const size_t bytes = sizeof(Managed) + 2 * sizeof(int64_t) * static_cast<size_t>(t->nd);
  auto* m = static_cast<Managed*>(std::calloc(1, bytes));
  if (!m) {
    PyErr_NoMemory();
    return nullptr;
  }
  if (!fill_dl_tensor(t, m->dl_tensor, reinterpret_cast<int64_t*>(m + 1))) {
    std::free(m);
    return nullptr;
  }
  return m;
}

// (device_type, device_id) from a Python tuple; false with an exception on a malformed one.
bool parse_device_tuple(PyObject* o, const char* what, int& type, int& id) {
  if (!PyTuple_Check(o) || PyTuple_GET_SIZE(o) != 2) {
    PyErr_Format(PyExc_TypeError, "%s must be a (device_type, device_id) tuple", what);
    return false;
  }
  type = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(o, 0)));
  id = static_cast<int>(PyLong_AsLong(PyTuple_GET_ITEM(o, 1)));
  return !PyErr_Occurred();
}

// ---- import -----------------------------------------------------------------------------------

struct DLPackHold {
  PyObject_HEAD
  void* managed;  // DLManagedTensor* or DLManagedTensorVersioned*
  bool versioned;
};

void hold_dealloc(PyObject* self) {
  auto* h = reinterpret_cast<DLPackHold*>(self);
  PyTypeObject* type = Py_TYPE(self);
  if (h->managed) {
    if (h->versioned) {
      auto* m = static_cast<DLManagedTensorVersioned*>(h->managed);
      if (m->deleter) m->deleter(m);
    } else {
      auto* m = static_cast<DLManagedTensor*>(h->managed);
      if (m->deleter) m->deleter(m);
    }
  }
  type->tp_free(self);
  Py_DECREF(type);
}

PyTypeObject* hold_type() {  // created on the first import, under the GIL; immortal
  static PyTypeObject* type = nullptr;
  if (!type) {
    static PyType_Slot slots[] = {
        {Py_tp_dealloc, reinterpret_cast<void*>(hold_dealloc)},
        {Py_tp_doc, const_cast<char*>("A DLPack tensor imported by framejit; calls its deleter when released.")},
        {0, nullptr},
    };
    static PyType_Spec spec = {"framejit._C.DLPackHold", sizeof(DLPackHold), 0, Py_TPFLAGS_DEFAULT, slots};
    type = reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  }
  return type;
}

PyObject* import_capsule(PyObject* capsule) {
  const bool versioned = PyCapsule_IsValid(capsule, kVersionedName);
  if (!versioned && !PyCapsule_IsValid(capsule, kCapsuleName)) {
    PyErr_SetString(PyExc_TypeError,
                    "framejit.from_dlpack: expected a DLPack capsule named 'dltensor' or 'dltensor_versioned' "
                    "(a capsule can be consumed only once)");
    return nullptr;
  }
  PyTypeObject* type = hold_type();
  if (!type) return nullptr;
  OwnedRef hold = OwnedRef::steal(PyType_GenericAlloc(type, 0));
  if (!hold) return nullptr;
  void* managed = PyCapsule_GetPointer(capsule, versioned ? kVersionedName : kCapsuleName);
  if (!managed || PyCapsule_SetName(capsule, versioned ? kUsedVersionedName : kUsedCapsuleName) < 0) return nullptr;
  // From here the hold owns the managed tensor: every exit releases it through the deleter.
  auto* h = reinterpret_cast<DLPackHold*>(hold.get());
  h->managed = managed;
  h->versioned = versioned;
  DLTensor* dl;
  bool writeable = true;
  if (versioned) {
    auto* m = static_cast<DLManagedTensorVersioned*>(managed);
    if (m->version.major != 1) {
      PyErr_Format(PyExc_BufferError, "framejit.from_dlpack: DLPack version %u.%u is not supported (1.x is)",
                   m->version.major, m->version.minor);
      return nullptr;
    }
    dl = &m->dl_tensor;
    writeable = !(m->flags & kDLFlagReadOnly);
  } else {
    dl = &static_cast<DLManagedTensor*>(managed)->dl_tensor;
  }
  // Pinned host memory (kDLCUDAHost) is ordinary CPU memory to a reader.
  if (dl->device.device_type != kDLCPU && dl->device.device_type != kDLCUDAHost) {
    PyErr_Format(PyExc_BufferError,
                 "framejit.from_dlpack: the tensor is on DLPack device type %d; framejit supports cpu tensors only "
                 "in this build",
                 static_cast<int>(dl->device.device_type));
    return nullptr;
  }
  std::optional<DType> dt = dtype_from_dl(dl->dtype);
  if (!dt) {
    PyErr_Format(PyExc_TypeError,
                 "framejit.from_dlpack: DLPack dtype (code %d, %d bits, %d lanes) has no framejit dtype",
                 dl->dtype.code, dl->dtype.bits, dl->dtype.lanes);
    return nullptr;
  }
  if (dl->ndim < 0 || dl->ndim > kMaxDims || (dl->ndim > 0 && !dl->shape)) {
    PyErr_Format(PyExc_ValueError, "framejit.from_dlpack: bad rank %d", static_cast<int>(dl->ndim));
    return nullptr;
  }
  const int64_t item = rt::dtype_itemsize(*dt);
  int64_t strides[kMaxDims];
  int64_t step = item;
  for (int d = dl->ndim; d-- > 0;) {
    strides[d] = dl->strides ? dl->strides[d] * item : step;
    step *= dl->shape[d];
  }
  char* data = static_cast<char*>(dl->data) + dl->byte_offset;
  Tensor t;
  try {
    t = Tensor::from_blob(data, std::vector<int64_t>(dl->shape, dl->shape + dl->ndim), *dt,
                          std::vector<int64_t>(strides, strides + dl->ndim));
  } catch (const std::bad_alloc&) {
    return PyErr_NoMemory();
  } catch (const std::exception& e) {
    PyErr_Format(PyExc_ValueError, "framejit.from_dlpack: %s", e.what());
    return nullptr;
  }
  return make_tensor(std::move(t), hold.get(), writeable);
}

}  // namespace

// ---- export -------------------------------------------------------------------------------------

PyObject* tensor_dlpack(PyObject* self, PyObject* args, PyObject* kwargs) {
  static const char* kwlist[] = {"stream", "max_version", "dl_device", "copy", nullptr};
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O$OOO:__dlpack__", const_cast<char**>(kwlist), &stream,
                                   &max_version, &dl_device, &copy))
    return nullptr;
  TensorObject* t = as_tensor(self);
  if (t->tensor.device().type != rt::DeviceType::CPU) {
    PyErr_SetString(PyExc_BufferError, "framejit.Tensor.__dlpack__: only cpu tensors can be exported yet");
    return nullptr;
  }
  if (stream != Py_None) {
    PyErr_SetString(PyExc_ValueError, "framejit.Tensor.__dlpack__: stream must be None for a cpu tensor");
    return nullptr;
  }
  if (dl_device != Py_None) {
    int type = 0, id = 0;
    if (!parse_device_tuple(dl_device, "__dlpack__'s dl_device", type, id)) return nullptr;
    if (type != kDLCPU) {
      PyErr_Format(PyExc_BufferError, "framejit.Tensor.__dlpack__: cannot export a cpu tensor to device type %d",
                   type);
      return nullptr;
    }
  }
  bool versioned = false;
  if (max_version != Py_None) {
    if (!PyTuple_Check(max_version) || PyTuple_GET_SIZE(max_version) < 1) {
      PyErr_SetString(PyExc_TypeError, "__dlpack__: max_version must be a (major, minor) tuple");
      return nullptr;
    }
    const long major = PyLong_AsLong(PyTuple_GET_ITEM(max_version, 0));
    if (major == -1 && PyErr_Occurred()) return nullptr;
    versioned = major >= 1;
  }
  const int want_copy = copy == Py_None ? 0 : PyObject_IsTrue(copy);
  if (want_copy < 0) return nullptr;
  OwnedRef source = OwnedRef::borrow(self);
  if (want_copy) {
    source = OwnedRef::steal(convert_copy(self, t->dtype));
    if (!source) return nullptr;
  }
  TensorObject* s = as_tensor(source.get());
  const bool readonly = !(s->flags & kTensorWriteable);
  if (versioned) {
    auto* m = new_managed<DLManagedTensorVersioned>(s);
    if (!m) return nullptr;
    m->version = DLPackVersion{1, 0};
    m->flags = (readonly ? kDLFlagReadOnly : 0) | (want_copy ? kDLFlagIsCopied : 0);
    m->manager_ctx = Py_NewRef(source.get());
    m->deleter = deleter_versioned;
    PyObject* capsule = PyCapsule_New(m, kVersionedName, capsule_destructor);
    if (!capsule) m->deleter(m);
    return capsule;
  }
  // The unversioned struct cannot say "read-only", and a consumer would write into it.
  if (readonly) {
    PyErr_SetString(PyExc_BufferError,
                    "framejit.Tensor.__dlpack__: a read-only tensor can only be exported with max_version >= (1, 0)");
    return nullptr;
  }
  auto* m = new_managed<DLManagedTensor>(s);
  if (!m) return nullptr;
  m->manager_ctx = Py_NewRef(source.get());
  m->deleter = deleter_legacy;
  PyObject* capsule = PyCapsule_New(m, kCapsuleName, capsule_destructor);
  if (!capsule) m->deleter(m);
  return capsule;
}

PyObject* tensor_dlpack_device(PyObject* self, PyObject*) {
  const rt::Device d = as_tensor(self)->tensor.device();
  return Py_BuildValue("(ii)", d.type == rt::DeviceType::CPU ? kDLCPU : kDLCUDA,
                       d.type == rt::DeviceType::CPU ? 0 : d.index);
}

// ---- import -----------------------------------------------------------------------------------

bool has_dlpack(PyObject* obj) {
  static PyObject* name = PyUnicode_InternFromString("__dlpack__");  // immortal
  // Looked up on the type: an instance attribute does not make an object a producer.
  PyObject* attr = PyObject_GetAttr(reinterpret_cast<PyObject*>(Py_TYPE(obj)), name);  // new ref
  if (!attr) {
    PyErr_Clear();
    return false;
  }
  Py_DECREF(attr);
  return true;
}

PyObject* tensor_from_dlpack(PyObject* obj) {
  if (PyCapsule_CheckExact(obj)) return import_capsule(obj);
  if (!has_dlpack(obj)) {
    PyErr_Format(PyExc_TypeError, "framejit.from_dlpack: a %.200s has no __dlpack__ method", Py_TYPE(obj)->tp_name);
    return nullptr;
  }
  // Ask where the data is first, so that a tensor framejit cannot read is never exported.
  OwnedRef dev = OwnedRef::steal(PyObject_CallMethod(obj, "__dlpack_device__", nullptr));
  if (dev) {
    int type = 0, id = 0;
    if (!parse_device_tuple(dev.get(), "__dlpack_device__()", type, id)) return nullptr;
    if (type != kDLCPU && type != kDLCUDAHost) {
      PyErr_Format(PyExc_BufferError,
                   "framejit.from_dlpack: the %.200s is on DLPack device type %d (2 is cuda); framejit supports cpu "
                   "tensors only in this build",
                   Py_TYPE(obj)->tp_name, type);
      return nullptr;
    }
  } else if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
    PyErr_Clear();  // an old producer without __dlpack_device__: the capsule says where the data is
  } else {
    return nullptr;
  }
  // The versioned protocol first; producers that predate it reject the keyword with TypeError.
  OwnedRef kwargs = OwnedRef::steal(Py_BuildValue("{s:(ii)}", "max_version", 1, 0));
  OwnedRef method = OwnedRef::steal(PyObject_GetAttrString(obj, "__dlpack__"));
  if (!kwargs || !method) return nullptr;
  OwnedRef empty = OwnedRef::steal(PyTuple_New(0));
  if (!empty) return nullptr;
  OwnedRef capsule = OwnedRef::steal(PyObject_Call(method.get(), empty.get(), kwargs.get()));
  if (!capsule && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    capsule = OwnedRef::steal(PyObject_CallNoArgs(method.get()));
  }
  if (!capsule) return nullptr;
  if (!PyCapsule_CheckExact(capsule.get())) {
    PyErr_Format(PyExc_TypeError, "framejit.from_dlpack: __dlpack__ returned a %.200s, not a capsule",
                 Py_TYPE(capsule.get())->tp_name);
    return nullptr;
  }
  return import_capsule(capsule.get());
}

}  // namespace framejit::frontend::tensor_detail
