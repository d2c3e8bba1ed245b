// pooled_array.cpp — pool blocks as buffer objects under NumPy arrays.
#include "frontend/interop/pooled_array.h"

#include <dlfcn.h>

#include "frontend/interop/numpy_abi.h"
#include "frontend/cpython/pyref.h"
#include "runtime/memory.h"

namespace framejit::frontend {

// Note [Pooled arrays]
// A fresh NumPy array of many megabytes costs its size in page faults: the kernel maps and zeroes
// every page on first touch, about as long as computing a memory-bound kernel over it. glibc gives
// such blocks back to the system on free, so a program that allocates a large result per call
// (every NumPy program) pays that on every call. Large kernel outputs therefore come from
// rt::pool_alloc, whose free lists keep recently freed blocks mapped (up to its cache limit), and
// reach Python as ordinary ndarrays whose `base` is a PoolBlock: a buffer object that returns the
// block to the pool when the last array using it dies. The block is reported to tracemalloc in
// NumPy's own domain, so memory accounting (and tracemalloc-based tests) see exactly what NumPy
// would allocate. The one visible difference: `arr.base` is a PoolBlock instead of None.

namespace {

constexpr unsigned int kNumPyTraceDomain = 389047;  // NumPy's tracemalloc domain for array data

// CPython 3.11's tracemalloc.h declares these without extern "C", so a C++ caller would link
// against mangled names that libpython does not have: look the C symbols up once instead.
struct TraceMalloc {
  int (*track)(unsigned int, uintptr_t, size_t) = nullptr;
  int (*untrack)(unsigned int, uintptr_t) = nullptr;
};
const TraceMalloc& tracemalloc() {
  static const TraceMalloc t = [] {
    TraceMalloc r;
    r.track = reinterpret_cast<int (*)(unsigned int, uintptr_t, size_t)>(dlsym(RTLD_DEFAULT, "PyTraceMalloc_Track"));
    r.untrack = reinterpret_cast<int (*)(unsigned int, uintptr_t)>(dlsym(RTLD_DEFAULT, "PyTraceMalloc_Untrack"));
    return r;
  }();
  return t;
}

struct PoolBlock {
  PyObject_HEAD
  void* data;
  Py_ssize_t size;
};

int block_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  auto* b = reinterpret_cast<PoolBlock*>(self);
  return PyBuffer_FillInfo(view, self, b->data, b->size, /*readonly=*/0, flags);
}

void block_dealloc(PyObject* self) {
  auto* b = reinterpret_cast<PoolBlock*>(self);
  PyTypeObject* type = Py_TYPE(self);
  if (b->data) {
    if (tracemalloc().untrack) tracemalloc().untrack(kNumPyTraceDomain, reinterpret_cast<uintptr_t>(b->data));
    rt::pool_free(b->data);
  }
  type->tp_free(self);
  Py_DECREF(type);  // heap type instances own a reference to their type
}

PyTypeObject* block_type() {  // created on first use, immortal; needs the GIL
  static PyTypeObject* type = [] {
    static PyType_Slot slots[] = {
        {Py_tp_dealloc, reinterpret_cast<void*>(block_dealloc)},
        {Py_tp_doc, const_cast<char*>("Memory of a framejit result, reused by later results once freed.")},
        {Py_bf_getbuffer, reinterpret_cast<void*>(block_getbuffer)},
        {0, nullptr},
    };
    static PyType_Spec spec = {"framejit.PoolBlock", sizeof(PoolBlock), 0, Py_TPFLAGS_DEFAULT, slots};
    return reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
  }();
  return type;
}

}  // namespace

PyObject* new_pooled_array(const int64_t* shape, int rank, rt::DType dtype) {
  PyTypeObject* type = block_type();
  if (!type) return nullptr;
  int64_t bytes = rt::dtype_itemsize(dtype);
  for (int d = 0; d < rank; ++d) bytes *= shape[d];
  OwnedRef block = OwnedRef::steal(PyType_GenericAlloc(type, 0));
  if (!block) return nullptr;
  auto* b = reinterpret_cast<PoolBlock*>(block.get());
  b->data = rt::pool_alloc(static_cast<size_t>(bytes));
  if (!b->data) return PyErr_NoMemory();
  b->size = static_cast<Py_ssize_t>(bytes);
  if (tracemalloc().track)
    tracemalloc().track(kNumPyTraceDomain, reinterpret_cast<uintptr_t>(b->data), static_cast<size_t>(bytes));

  const NumPyHandles* np = numpy_handles();
  PyObject* descr = np->dtypes[static_cast<int>(dtype)];  // borrowed
  if (np->capi.new_from_descr && np->capi.set_base_object) {
    Py_INCREF(descr);  // PyArray_NewFromDescr steals it, on failure too
    OwnedRef arr = OwnedRef::steal(np->capi.new_from_descr(np->ndarray, descr, rank, shape, /*strides=*/nullptr,
                                                           b->data, kNpyCContiguous | kNpyAligned | kNpyWriteable,
                                                           /*obj=*/nullptr));
    if (!arr) return nullptr;
    // The array's base is the block, as with ndarray(buffer=block) below.
    if (np->capi.set_base_object(arr.get(), block.release()) < 0) return nullptr;  // steals the block
    return arr.release();
  }
  OwnedRef dims = OwnedRef::steal(PyTuple_New(rank));
  if (!dims) return nullptr;
  for (int d = 0; d < rank; ++d) PyTuple_SET_ITEM(dims.get(), d, PyLong_FromLongLong(shape[d]));  // steals
  static PyObject* kwnames = Py_BuildValue("(s)", "buffer");  // immortal
  PyObject* args[4] = {nullptr, dims.get(), descr, block.get()};
  return PyObject_Vectorcall(reinterpret_cast<PyObject*>(np->ndarray), args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                             kwnames);
}

bool is_private_pool_block(PyObject* base) {
  // One reference: the array's. (A view of the array refers to the array, not to the block.)
  return base && Py_TYPE(base) == block_type() && Py_REFCNT(base) == 1;
}

}  // namespace framejit::frontend
