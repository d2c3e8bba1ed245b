// cupy_array.cpp — CuPy's array adapter and handles (Note [CuPy arrays]).
#include "frontend/interop/cupy_array.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontend/cpython/pyref.h"
#include "frontend/interop/numpy_abi.h"
#include "runtime/faults.h"

namespace framejit::frontend {

namespace {

// Filled once, when cupy is first seen in sys.modules; never freed (the references must not be
// dropped after the interpreter finalizes).
CupyHandles* load_handles() {
  PyObject* cupy = PyDict_GetItemString(PyImport_GetModuleDict(), "cupy");  // borrowed
  if (!cupy) return nullptr;
  auto attr = [](PyObject* o, const char* name) {  // new ref or null, no exception left
    PyObject* r = o ? PyObject_GetAttrString(o, name) : nullptr;
    if (!r) PyErr_Clear();
    return r;
  };
  OwnedRef core = OwnedRef::steal(attr(cupy, "_core"));
  OwnedRef core_core = OwnedRef::steal(attr(core.get(), "core"));
  OwnedRef base = OwnedRef::steal(attr(core_core.get(), "_ndarray_base"));
  OwnedRef ndarray = OwnedRef::steal(attr(cupy, "ndarray"));
  OwnedRef cuda = OwnedRef::steal(attr(cupy, "cuda"));
  OwnedRef runtime = OwnedRef::steal(attr(cuda.get(), "runtime"));
  OwnedRef stream = OwnedRef::steal(attr(cuda.get(), "get_current_stream"));
  OwnedRef device = OwnedRef::steal(attr(runtime.get(), "getDevice"));
  // CuPy 13 and 14 name their base type so; an older one's arrays are all cupy.ndarray.
  if (!base && ndarray) base = OwnedRef::borrow(ndarray.get());
  if (!base || !PyType_Check(base.get()) || !ndarray || !stream || !device || !numpy_handles()) return nullptr;
  auto* h = new CupyHandles();
  h->module = Py_NewRef(cupy);
  h->ndarray_base = reinterpret_cast<PyTypeObject*>(base.release());
  h->ndarray = ndarray.release();
  h->current_stream = stream.release();
  h->get_device = device.release();
  return h;
}

// An attribute of `o` by an interned name (new ref or null with an exception set).
PyObject* attr_of(PyObject* o, const char* name, PyObject*& interned) {
  if (!interned) interned = PyUnicode_InternFromString(name);  // NB: immortal
  return interned ? PyObject_GetAttr(o, interned) : nullptr;
}

// A tuple of Python ints into `out` (rank entries); false with no exception when it is not one.
bool read_ints(PyObject* tuple, int64_t* out, int rank) {
  if (!tuple || !PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != rank) return false;
  for (int d = 0; d < rank; ++d) {
    out[d] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, d));
    if (out[d] == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
  }
  return true;
}

// One array's fields, kept for the run: the array (a strong reference, so its memory and its
// address stay put) and its sizes and byte strides in a block that does not move with the table.
struct Entry {
  PyObject* array = nullptr;
  std::unique_ptr<int64_t[]> dims_strides;
  ArrayFields fields;
};

struct RunTable {
  std::vector<Entry> entries;
  int scopes = 0;
  int device = -2;  // CuPy's current device, asked once per run; -2: not yet
};

RunTable& table() {
  // NB: initial-exec, as numpy_abi.cpp's t_numpy1: every run enters and leaves this table, and the
  // default model for a loaded module calls __tls_get_addr each time (5% of a short call).
  static thread_local RunTable t __attribute__((tls_model("initial-exec")));
  return t;
}

void clear_entries() {
  std::vector<Entry> dead;
  dead.swap(table().entries);  // NB: the decrefs may run Python code that reads fields again
  for (Entry& e : dead) Py_DECREF(e.array);
}

// The fields of a cupy array `o`, read once per run; null (no exception) when it is not an array
// of a dtype framejit has, or an attribute cannot be read.
const Entry* entry_of(PyObject* o) {
  RunTable& t = table();
  for (const Entry& e : t.entries)
    if (e.array == o) return &e;
  static PyObject *s_data, *s_ptr, *s_device_id, *s_shape, *s_strides, *s_dtype;
  auto fail = []() -> const Entry* {
    PyErr_Clear();
    return nullptr;
  };
  OwnedRef data = OwnedRef::steal(attr_of(o, "data", s_data));
  OwnedRef ptr = OwnedRef::steal(data ? attr_of(data.get(), "ptr", s_ptr) : nullptr);
  OwnedRef device = OwnedRef::steal(data ? attr_of(data.get(), "device_id", s_device_id) : nullptr);
  OwnedRef shape = OwnedRef::steal(attr_of(o, "shape", s_shape));
  OwnedRef strides = OwnedRef::steal(attr_of(o, "strides", s_strides));
  OwnedRef dtype = OwnedRef::steal(attr_of(o, "dtype", s_dtype));
  if (!ptr || !device || !shape || !strides || !dtype || !PyTuple_Check(shape.get())) return fail();
  // NB: dtype_from_descr reads a numpy.dtype's fields in place: check the type first.
  const NumPyHandles* np = numpy_handles();
  if (!np || !PyObject_TypeCheck(dtype.get(), reinterpret_cast<PyTypeObject*>(np->dtype_fn))) return fail();
  const std::optional<rt::DType> dt = dtype_from_descr(dtype.get());
  const Py_ssize_t rank = PyTuple_GET_SIZE(shape.get());
  if (!dt || rank > rt::kMaxRank) return fail();
  const unsigned long long address = PyLong_AsUnsignedLongLong(ptr.get());
  const long ordinal = PyLong_AsLong(device.get());
  if (PyErr_Occurred() || ordinal < 0) return fail();
  Entry e;
  const int nd = static_cast<int>(rank);
  e.dims_strides = std::make_unique<int64_t[]>(2 * static_cast<size_t>(std::max(nd, 1)));
  int64_t* dims = e.dims_strides.get();
  int64_t* byte_strides = dims + nd;
  if (!read_ints(shape.get(), dims, nd) || !read_ints(strides.get(), byte_strides, nd)) return fail();
  e.fields.data = reinterpret_cast<char*>(static_cast<uintptr_t>(address));
  e.fields.nd = nd;
  e.fields.dims = dims;
  e.fields.strides = byte_strides;
  e.fields.dtype = *dt;
  e.fields.device = {rt::DeviceType::CUDA, static_cast<int>(ordinal)};
  e.fields.ok = true;
  e.array = Py_NewRef(o);
  t.entries.push_back(std::move(e));
  return &t.entries.back();
}

class CupyAdapter final : public ArrayAdapter {
public:
  ArrayFields fields(PyObject* o) const override {
    if (!is_cupy_array(o)) return {};
    const Entry* e = entry_of(o);
    return e ? e->fields : ArrayFields{};
  }

  // Every CuPy array is on a device: CuPy's current one.
  PyObject* empty(const int64_t* shape, int rank, rt::DType dtype) const override {  // new ref
    if (rt::fault_active(rt::Fault::Alloc)) return PyErr_NoMemory();
    const CupyHandles* h = cupy_handles();
    const NumPyHandles* np = numpy_handles();
    PyObject* dt = h && np ? np->dtypes[static_cast<int>(dtype)] : nullptr;  // borrowed
    if (!dt) {
      PyErr_Format(PyExc_TypeError, "framejit: CuPy has no dtype %s", std::string(rt::dtype_name(dtype)).c_str());
      return nullptr;
    }
    OwnedRef size = int_tuple(shape, rank);
    if (!size) return nullptr;
    PyObject* argv[] = {nullptr, size.get(), dt};
    return PyObject_Vectorcall(h->ndarray, argv + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
  }

  PyObject* empty_on(const int64_t* shape, int rank, rt::DType dtype, rt::Device device) const override {  // new ref
    if (device.type != rt::DeviceType::CUDA) {
      PyErr_SetString(PyExc_RuntimeError, "framejit: CuPy arrays live on CUDA devices only");
      return nullptr;
    }
    // CuPy allocates on its current device: a program whose arrays are on another one would hand
    // back results there (the caller switched devices between calls): say so instead.
    RunTable& t = table();
    if (t.scopes == 0 || t.device == -2) {
      Expected<int> d = cupy_current_device();
      if (!d) {
        PyErr_Format(PyExc_RuntimeError, "framejit: %s", d.error().message().c_str());
        return nullptr;
      }
      if (t.scopes > 0) t.device = *d;
      if (*d != device.index) return wrong_device(*d, device.index);
    } else if (t.device != device.index) {
      return wrong_device(t.device, device.index);
    }
    return empty(shape, rank, dtype);
  }

  PyObject* permuted_view(PyObject* base, const int* outer_first, int rank) const override {  // new ref
    OwnedRef order = permutation_axes(outer_first, rank);
    return order ? PyObject_CallMethod(base, "transpose", "O", order.get()) : nullptr;
  }

  // CuPy arrays share memory with views framejit cannot see: never written over.
  bool is_private(PyObject*) const override { return false; }

  void enter_run() const override {
    if (++table().scopes == 1) table().device = -2;
  }
  void exit_run() const override {
    if (--table().scopes == 0 && !table().entries.empty()) clear_entries();
  }

private:
  static PyObject* wrong_device(int current, int wanted) {
    PyErr_Format(PyExc_RuntimeError,
                 "framejit: CuPy's current device is cuda:%d, and this graph's arrays are on cuda:%d "
                 "(use `with cupy.cuda.Device(%d):` around the call)",
                 current, wanted, wanted);
    return nullptr;
  }
};

}  // namespace

const CupyHandles* cupy_handles() {
  static CupyHandles* h = nullptr;  // set once cupy is loaded and readable
  static bool unreadable = false;   // cupy is loaded but its objects are not as expected
  if (!h && !unreadable) {
    h = load_handles();
    // NB: loaded yet unreadable is final: not asked again on every call.
    unreadable = !h && PyDict_GetItemString(PyImport_GetModuleDict(), "cupy") != nullptr;
  }
  return h;
}

bool is_cupy_array(PyObject* o) {
  const CupyHandles* h = cupy_handles();
  return h && PyObject_TypeCheck(o, h->ndarray_base);
}

Expected<void*> cupy_current_stream() {
  const CupyHandles* h = cupy_handles();
  if (!h) return Status::unsupported("cupy is not imported");
  static PyObject* s_ptr = nullptr;
  OwnedRef stream = OwnedRef::steal(PyObject_CallNoArgs(h->current_stream));
  OwnedRef ptr = OwnedRef::steal(stream ? attr_of(stream.get(), "ptr", s_ptr) : nullptr);
  const unsigned long long raw = ptr && PyLong_Check(ptr.get()) ? PyLong_AsUnsignedLongLong(ptr.get()) : 0;
  if (!ptr || PyErr_Occurred()) {
    PyErr_Clear();
    return Status::internal("CuPy's current stream could not be read");
  }
  return reinterpret_cast<void*>(static_cast<uintptr_t>(raw));
}

Expected<int> cupy_current_device() {
  const CupyHandles* h = cupy_handles();
  if (!h) return Status::unsupported("cupy is not imported");
  OwnedRef r = OwnedRef::steal(PyObject_CallNoArgs(h->get_device));
  const long d = r && PyLong_Check(r.get()) ? PyLong_AsLong(r.get()) : -1;
  if (!r || PyErr_Occurred() || d < 0) {
    PyErr_Clear();
    return Status::internal("CuPy's current device could not be read");
  }
  return static_cast<int>(d);
}

void register_cupy_adapter() {
  static const CupyAdapter adapter;
  register_array_adapter(ArrayKind::CuPy, &adapter);
}

}  // namespace framejit::frontend
