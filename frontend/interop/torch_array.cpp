// torch_array.cpp — torch's array adapter and handles (Note [Torch arrays]).
#include "frontend/interop/torch_array.h"

#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/cpython/pyref.h"
#include "frontend/interop/array_adapter.h"
#include "frontend/interop/dlpack_abi.h"
#include "runtime/faults.h"
#include "runtime/memory.h"
#include "runtime/threads.h"
#include "runtime/views.h"

namespace framejit::frontend {

namespace {

using namespace dlpack;  // NOLINT: the ABI's names, as dlpack.h spells them

// The OpenMP runtime torch runs its CPU ops on, found among the loaded libraries once torch is
// imported, for framejit's kernels to share (Note [Sharing an OpenMP team] in runtime/threads.cpp):
// one inside torch's own folder (a wheel's bundled libgomp), else a system libgomp, else another
// runtime that speaks libgomp's ABI (Intel's libiomp5, LLVM's libomp). FRAMEJIT_SHARE_OPENMP=0
// keeps framejit's own pool.
const rt::OpenMpTeam* torch_openmp_team() {
  if (const char* e = std::getenv("FRAMEJIT_SHARE_OPENMP"); e && std::string_view(e) == "0") return nullptr;
  struct Found {
    std::string in_torch, gomp, other;
  } found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto& f = *static_cast<Found*>(data);
        const std::string_view path = info->dlpi_name ? info->dlpi_name : "";
        const std::string_view file = path.substr(path.rfind('/') + 1);
        const bool gomp = file.rfind("libgomp", 0) == 0;
        if (!gomp && file.rfind("libiomp5", 0) != 0 && file.rfind("libomp.", 0) != 0) return 0;
        std::string& slot = path.find("/torch/") != std::string_view::npos ? f.in_torch : gomp ? f.gomp : f.other;
        if (slot.empty()) slot = path;
        return 0;
      },
      &found);
  const std::string& path = !found.in_torch.empty() ? found.in_torch : !found.gomp.empty() ? found.gomp : found.other;
  if (path.empty()) return nullptr;
  // NB: never closed: the runtime stays loaded with torch, and the team keeps its entry points.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
  if (!lib) return nullptr;
  static rt::OpenMpTeam team;
  team.parallel = reinterpret_cast<decltype(team.parallel)>(dlsym(lib, "GOMP_parallel"));
  team.thread_num = reinterpret_cast<decltype(team.thread_num)>(dlsym(lib, "omp_get_thread_num"));
  team.team_size = reinterpret_cast<decltype(team.team_size)>(dlsym(lib, "omp_get_num_threads"));
  return team.parallel && team.thread_num && team.team_size ? &team : nullptr;
}

// Filled once, when torch is first seen in sys.modules; never freed (the references must not be
// dropped after the interpreter finalizes).
TorchHandles* load_handles() {
  PyObject* modules = PyImport_GetModuleDict();                // borrowed
  PyObject* torch = PyDict_GetItemString(modules, "torch");  // borrowed
  if (!torch) return nullptr;
  auto* h = new TorchHandles();
  auto attr = [&](PyObject* o, const char* name) {  // new ref or null, no exception left
    PyObject* r = PyObject_GetAttrString(o, name);
    if (!r) PyErr_Clear();
    return r;
  };
  h->module = Py_NewRef(torch);
  OwnedRef c = OwnedRef::steal(attr(torch, "_C"));
  PyObject* base = c ? attr(c.get(), "_TensorBase") : nullptr;
  if (!base) base = attr(torch, "Tensor");  // torch 2.x renamed the base (TensorBase)
  if (c && !base) base = attr(c.get(), "TensorBase");
  PyObject* tensor = attr(torch, "Tensor");
  h->empty = attr(torch, "empty");
  h->to_dlpack = c ? attr(c.get(), "_to_dlpack") : nullptr;
  h->from_dlpack = c ? attr(c.get(), "_from_dlpack") : nullptr;
  h->strided = attr(torch, "strided");
  OwnedRef device = OwnedRef::steal(attr(torch, "device"));
  h->cpu = device ? PyObject_CallFunction(device.get(), "s", "cpu") : nullptr;
  if (!h->cpu) PyErr_Clear();
  h->current_stream = c ? attr(c.get(), "_cuda_getCurrentRawStream") : nullptr;
  h->get_device = c ? attr(c.get(), "_cuda_getDevice") : nullptr;
  OwnedRef dynamo = OwnedRef::steal(c ? attr(c.get(), "_dynamo") : nullptr);
  OwnedRef guards = OwnedRef::steal(dynamo ? attr(dynamo.get(), "guards") : nullptr);
  h->empty_strided_cuda = guards ? attr(guards.get(), "_empty_strided_cuda") : nullptr;
  if (!base || !PyType_Check(base) || !tensor || !PyType_Check(tensor) || !h->empty || !h->cpu || !h->strided ||
      !h->to_dlpack) {
    // A torch we cannot read: its tensors are no arrays here (they stay opaque objects).
    return nullptr;
  }
  OwnedRef dtype_type = OwnedRef::steal(attr(torch, "dtype"));
  if (!dtype_type || !PyType_Check(dtype_type.get()) || !device || !PyType_Check(device.get())) return nullptr;
  h->dtype_type = reinterpret_cast<PyTypeObject*>(dtype_type.release());
  h->device_type = reinterpret_cast<PyTypeObject*>(device.release());
  h->tensor_base = reinterpret_cast<PyTypeObject*>(base);
  h->no_grad = attr(torch, "no_grad");
  h->enable_grad = attr(torch, "enable_grad");
  h->inference_mode = attr(torch, "inference_mode");
  h->set_grad_enabled = c ? attr(c.get(), "_set_grad_enabled") : nullptr;
  h->tensor = reinterpret_cast<PyTypeObject*>(tensor);
  for (int i = 0; i < rt::kNumDTypes; ++i)
    h->dtypes[i] = attr(torch, std::string(rt::dtype_name(static_cast<rt::DType>(i))).c_str());
  OwnedRef version = OwnedRef::steal(attr(torch, "__version__"));
  const char* v = version && PyUnicode_Check(version.get()) ? PyUnicode_AsUTF8(version.get()) : nullptr;
  if (!v) PyErr_Clear();
  h->major = v ? std::atoi(v) : 0;
  rt::share_openmp_team(torch_openmp_team());
  return h;
}

// One DLPack export kept for the run: the capsule owns the memory the fields point into (data and
// sizes); the byte strides live in a block of the entry's own, which does not move with the table.
// A result the adapter made itself has no capsule: its sizes are in that block too (Note [Torch
// results are known]).
struct Export {
  PyObject* tensor = nullptr;   // strong: its address cannot be reused while the entry lives
  PyObject* capsule = nullptr;  // strong, or null
  std::unique_ptr<int64_t[]> strides;  // byte strides, then (no capsule) the sizes
  ArrayFields fields;
  bool requires_grad = false;
};

struct ExportTable {
  std::vector<Export> entries;
  int scopes = 0;
  int grad_enabled = -1;  // torch.is_grad_enabled() asked once per run; -1: not yet
  int cuda_device = -2;   // torch's current CUDA device asked once per run; -2: not yet
};

ExportTable& table() {
  static thread_local ExportTable t __attribute__((tls_model("initial-exec")));  // cupy_array.cpp says why
  return t;
}

void clear_exports() {
  table().grad_enabled = -1;
  std::vector<Export> dead;
  dead.swap(table().entries);  // NB: the decrefs may run Python code that reads fields again
  for (Export& e : dead) {
    Py_XDECREF(e.capsule);
    Py_DECREF(e.tensor);
  }
}

// An attribute of `o` by an interned name (new ref or null with an exception): PyObject_GetAttrString
// makes a string per call, and a run reads five attributes of every tensor it exports.
PyObject* attr_of(PyObject* o, const char* name, PyObject*& interned) {
  if (!interned) interned = PyUnicode_InternFromString(name);  // NB: immortal
  return interned ? PyObject_GetAttr(o, interned) : nullptr;
}

// The export of a torch tensor `o`, made once per run; null (no exception) when it is not a CPU
// tensor of a strided layout and a dtype framejit has, or the export fails.
const Export* export_of(PyObject* o) {
  ExportTable& t = table();
  for (const Export& e : t.entries)
    if (e.tensor == o) return &e;
  const Export* none = nullptr;
  const TorchHandles* h = torch_handles();
  static PyObject *s_requires_grad, *s_layout, *s_device, *s_type, *s_dtype;
  OwnedRef source = OwnedRef::borrow(o);
  OwnedRef rg = OwnedRef::steal(attr_of(o, "requires_grad", s_requires_grad));  // new ref
  if (!rg) {
    PyErr_Clear();
    return none;
  }
  OwnedRef layout = OwnedRef::steal(attr_of(o, "layout", s_layout));
  OwnedRef device = OwnedRef::steal(attr_of(o, "device", s_device));
  if (!layout || !device || layout.get() != h->strided) {
    PyErr_Clear();
    return none;
  }
  // Only host and CUDA memory is exported: asking another device's tensor (meta, XLA) for a
  // DLPack capsule may raise, or make that device sync.
  const int cpu = PyObject_RichCompareBool(device.get(), h->cpu, Py_EQ);
  if (cpu != 1) {
    OwnedRef type = OwnedRef::steal(cpu == 0 ? attr_of(device.get(), "type", s_type) : nullptr);
    if (!type || !PyUnicode_Check(type.get()) || PyUnicode_CompareWithASCIIString(type.get(), "cuda") != 0) {
      PyErr_Clear();
      return none;
    }
  }
  // torch 1.x exports no bools: the same bytes as uint8 (a view), read back as bool.
  OwnedRef dtype = OwnedRef::steal(attr_of(o, "dtype", s_dtype));
  if (!dtype) {
    PyErr_Clear();
    return none;
  }
  const bool is_bool = dtype.get() == h->dtypes[static_cast<int>(rt::DType::Bool)];
  if (is_bool) {
    source = OwnedRef::steal(PyObject_CallMethod(source.get(), "view", "O", h->dtypes[static_cast<int>(rt::DType::UInt8)]));
    if (!source) {
      PyErr_Clear();
      return none;
    }
  }
  OwnedRef capsule = OwnedRef::steal(PyObject_CallOneArg(h->to_dlpack, source.get()));
  if (!capsule || !PyCapsule_IsValid(capsule.get(), kCapsuleName)) {
    PyErr_Clear();
    return none;
  }
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.get(), kCapsuleName));
  const DLTensor& dl = m->dl_tensor;
  std::optional<rt::DType> dt = is_bool ? std::optional<rt::DType>(rt::DType::Bool) : dtype_from_dl(dl.dtype);
  if (!dt || dl.ndim > rt::kMaxRank) return none;
  if (dl.device.device_type != kDLCPU &&
      (dl.device.device_type != kDLCUDA || dl.device.device_id < 0 || dl.device.device_id >= kMaxTorchDevices))
    return none;
  Export e;
  e.requires_grad = rg.get() == Py_True;
  e.strides = std::make_unique<int64_t[]>(static_cast<size_t>(std::max(dl.ndim, 1)));
  const int64_t item = rt::dtype_itemsize(*dt);
  int64_t contiguous = item;
  for (int d = dl.ndim - 1; d >= 0; --d) {
    e.strides[static_cast<size_t>(d)] = dl.strides ? dl.strides[d] * item : contiguous;
    contiguous *= dl.shape[d];
  }
  e.fields.data = static_cast<char*>(dl.data) + dl.byte_offset;
  e.fields.nd = dl.ndim;
  e.fields.dims = dl.shape;
  e.fields.strides = e.strides.get();
  e.fields.dtype = *dt;
  if (dl.device.device_type == kDLCUDA) e.fields.device = {rt::DeviceType::CUDA, dl.device.device_id};
  e.fields.ok = true;
  e.tensor = Py_NewRef(o);
  e.capsule = capsule.release();
  t.entries.push_back(std::move(e));
  return &t.entries.back();
}

// Note [Torch results are known]
// A result the adapter allocates has the shape, dtype and device it was asked for, in C order:
// only its data pointer is new. So it enters the run's table from those (its data pointer read
// with Tensor.data_ptr(), or known already for a pool block) instead of through a DLPack export,
// which the program's next read of the value would otherwise make (torch 1.13's export makes an
// as_strided view: most of a small call's time on the CPU, and a third of a small CUDA kernel
// step's on the GPU machine). `data` null: read it from the tensor. Returns `t` (a new ref,
// passed through), or null with an exception set (t released). Only inside an ArrayRunScope.
PyObject* known_result(PyObject* t, const int64_t* shape, int rank, rt::DType dtype, rt::Device device, void* data) {
  // Outside a run nothing would drop the entry (and its reference) soon: left to export_of.
  if (!t || table().scopes == 0) return t;
  if (!data) {
    OwnedRef ptr = OwnedRef::steal(PyObject_CallMethod(t, "data_ptr", nullptr));
    const unsigned long long p = ptr ? PyLong_AsUnsignedLongLong(ptr.get()) : 0;
    if (!ptr || PyErr_Occurred()) {
      Py_DECREF(t);
      return nullptr;
    }
    data = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  }
  Export e;
  e.strides = std::make_unique<int64_t[]>(2 * static_cast<size_t>(std::max(rank, 1)));
  int64_t* strides = e.strides.get();
  int64_t* dims = strides + rank;
  int64_t stride = rt::dtype_itemsize(dtype);
  for (int d = rank - 1; d >= 0; --d) {
    dims[d] = shape[d];
    strides[d] = stride;
    stride *= std::max<int64_t>(shape[d], 1);
  }
  e.fields.data = static_cast<char*>(data);
  e.fields.nd = rank;
  e.fields.dims = dims;
  e.fields.strides = strides;
  e.fields.dtype = dtype;
  e.fields.device = device;
  e.fields.ok = true;
  e.tensor = Py_NewRef(t);
  table().entries.push_back(std::move(e));
  return t;
}

// Note [Torch results from the pool]
// A fresh torch tensor of megabytes comes from glibc's malloc, which maps it fresh and unmaps it on
// free once it is past the (moving) mmap threshold, so each call pays a page fault per 4 KiB page
// on first touch. On the 16-core GPU machine that made a 1024x1024 softmax take 1.5 ms instead of
// 0.19 ms (measured with torch 2.11; the same run with glibc's thresholds raised, no other change,
// gave the 0.19 ms), and it is worse when torch's own results churn the same heap. So results of
// kTorchPooledBytes and more (glibc's smallest mmap threshold: below it malloc never maps a block
// of its own) are rt::pool_alloc blocks, whose free lists keep them mapped (the NumPy
// adapter does the same, Note [Pooled arrays]), given to torch through torch._C._from_dlpack: torch
// owns the tensor, and its storage's deleter returns the block to the pool, on whatever thread
// drops it (pool_free needs no interpreter). The visible difference from torch.empty: the storage
// is not resizable (`resize_` to a larger size raises torch's error). Bool results stay with
// torch.empty (torch 1.x imports no DLPack bools).
constexpr int64_t kTorchPooledBytes = int64_t{128} << 10;

struct PooledResult {
  DLManagedTensor managed;  // first: the deleter casts back
  int64_t shape[rt::kMaxRank];
  int64_t strides[rt::kMaxRank];
};

void release_pooled(DLManagedTensor* m) {
  rt::pool_free(m->dl_tensor.data);
  delete reinterpret_cast<PooledResult*>(m);
}

// A capsule torch never consumed (its import failed) still returns the block.
void pooled_capsule_destructor(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, kCapsuleName)) return;  // consumed: renamed "used_dltensor"
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (m && m->deleter) m->deleter(m);
}

PyObject* pooled_tensor(const TorchHandles& h, const int64_t* shape, int rank, rt::DType dtype, int64_t bytes) {  // new ref
  auto r = std::make_unique<PooledResult>();
  void* data = rt::pool_alloc(static_cast<size_t>(bytes));
  if (!data) return PyErr_NoMemory();
  DLTensor& t = r->managed.dl_tensor;
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = rank;
  t.dtype = dl_dtype(dtype);
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    r->shape[d] = shape[d];
    r->strides[d] = stride;  // NB: always given: torch 1.13 reads strides without checking for null
    stride *= std::max<int64_t>(shape[d], 1);
  }
  t.shape = r->shape;
  t.strides = r->strides;
  t.byte_offset = 0;
  r->managed.manager_ctx = nullptr;
  r->managed.deleter = release_pooled;
  PyObject* capsule = PyCapsule_New(&r->managed, kCapsuleName, pooled_capsule_destructor);
  if (!capsule) {
    rt::pool_free(data);
    return nullptr;
  }
  r.release();  // the capsule's (then the tensor's) to free
  OwnedRef owned = OwnedRef::steal(capsule);
  return known_result(PyObject_CallOneArg(h.from_dlpack, capsule), shape, rank, dtype, rt::Device{}, data);
}

// torch's current CUDA device (its allocation entries allocate there), or -1.
// Once per run: a program runs no Python between its allocations that could change it.
int current_cuda_device(const TorchHandles& h) {
  if (!h.get_device) return -1;
  ExportTable& t = table();
  if (t.scopes > 0 && t.cuda_device != -2) return t.cuda_device;
  OwnedRef r = OwnedRef::steal(PyObject_CallNoArgs(h.get_device));
  const long d = r && PyLong_Check(r.get()) ? PyLong_AsLong(r.get()) : -1;
  if (!r || PyErr_Occurred()) PyErr_Clear();
  if (t.scopes > 0) t.cuda_device = static_cast<int>(d);
  return static_cast<int>(d);
}

class TorchAdapter final : public ArrayAdapter {
public:
  ArrayFields fields(PyObject* o) const override {
    if (!is_torch_tensor(o)) return {};
    const Export* e = export_of(o);
    return e ? e->fields : ArrayFields{};
  }

  PyObject* empty(const int64_t* shape, int rank, rt::DType dtype) const override {  // new ref
    if (rt::fault_active(rt::Fault::Alloc)) return PyErr_NoMemory();
    const TorchHandles* h = torch_handles();
    PyObject* dt = h ? h->dtypes[static_cast<int>(dtype)] : nullptr;  // borrowed
    if (!dt) {
      PyErr_Format(PyExc_TypeError, "framejit: torch has no dtype %s", std::string(rt::dtype_name(dtype)).c_str());
      return nullptr;
    }
    int64_t bytes = rt::dtype_itemsize(dtype);
    for (int d = 0; d < rank; ++d) bytes *= shape[d];
    if (bytes >= kTorchPooledBytes && dtype != rt::DType::Bool && h->from_dlpack) return pooled_tensor(*h, shape, rank, dtype, bytes);
    OwnedRef size = int_tuple(shape, rank);
    if (!size) return nullptr;
    OwnedRef args = OwnedRef::steal(PyTuple_Pack(1, size.get()));
    OwnedRef kwargs = OwnedRef::steal(PyDict_New());
    if (!args || !kwargs || PyDict_SetItemString(kwargs.get(), "dtype", dt) < 0) return nullptr;
    PyObject* t = PyObject_Call(h->empty, args.get(), kwargs.get());
    // NB: bools are not registered: torch 1.x exports them as uint8 views (export_of).
    return dtype == rt::DType::Bool ? t : known_result(t, shape, rank, dtype, rt::Device{}, nullptr);
  }

  // On a GPU, torch's allocator (Note [Torch tensors on a GPU]).
  PyObject* empty_on(const int64_t* shape, int rank, rt::DType dtype, rt::Device device) const override {  // new ref
    if (device.type == rt::DeviceType::CPU) return empty(shape, rank, dtype);
    if (rt::fault_active(rt::Fault::Alloc)) return PyErr_NoMemory();
    const TorchHandles* h = torch_handles();
    PyObject* dt = h ? h->dtypes[static_cast<int>(dtype)] : nullptr;  // borrowed
    if (!dt || device.index < 0 || device.index >= kMaxTorchDevices) {
      PyErr_Format(PyExc_TypeError, "framejit: torch has no %s tensors on cuda:%d", std::string(rt::dtype_name(dtype)).c_str(),
                   device.index);
      return nullptr;
    }
    PyObject*& dev = h->cuda[device.index];  // NB: made once, never freed (like the handles)
    if (!dev) {
      dev = PyObject_CallFunction(reinterpret_cast<PyObject*>(h->device_type), "si", "cuda", device.index);
      if (!dev) return nullptr;
    }
    OwnedRef size = int_tuple(shape, rank);
    if (!size) return nullptr;
    PyObject* t = nullptr;
    // torch >= 2.3's allocation entry for generated code: no argument parsing, the current device.
    if (h->empty_strided_cuda && current_cuda_device(*h) == device.index) {
      OwnedRef stride = OwnedRef::steal(PyTuple_New(rank));
      if (!stride) return nullptr;
      int64_t step = 1;
      for (int d = rank - 1; d >= 0; --d) {
        PyObject* n = PyLong_FromLongLong(step);
        if (!n) return nullptr;
        PyTuple_SET_ITEM(stride.get(), d, n);  // steals n
        step *= std::max<int64_t>(shape[d], 1);
      }
      PyObject* argv[] = {nullptr, size.get(), stride.get(), dt};
      t = PyObject_Vectorcall(h->empty_strided_cuda, argv + 1, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
    } else {
      static PyObject* kwnames = Py_BuildValue("(ss)", "dtype", "device");  // NB: immortal
      if (!kwnames) return nullptr;
      PyObject* argv[] = {nullptr, size.get(), dt, dev};
      t = PyObject_Vectorcall(h->empty, argv + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET, kwnames);
    }
    return dtype == rt::DType::Bool ? t : known_result(t, shape, rank, dtype, device, nullptr);
  }

  PyObject* permuted_view(PyObject* base, const int* outer_first, int rank) const override {  // new ref
    OwnedRef order = permutation_axes(outer_first, rank);
    return order ? PyObject_CallMethod(base, "permute", "O", order.get()) : nullptr;
  }

  // torch tensors share storage with views framejit cannot see: never written over.
  bool is_private(PyObject*) const override { return false; }

  void enter_run() const override {
    ++table().scopes;
    table().grad_enabled = -1;  // asked again by each run (a nested one may follow a change of mode)
    table().cuda_device = -2;
  }
  void exit_run() const override {
    if (--table().scopes == 0 && !table().entries.empty()) clear_exports();
  }
};

}  // namespace

const TorchHandles* torch_handles() {
  static TorchHandles* h = nullptr;  // set once torch is loaded and readable
  static bool unreadable = false;    // torch is loaded but its objects are not as expected
  if (!h && !unreadable) {
    h = load_handles();
    // NB: loaded (in sys.modules) yet unreadable is final: not asked again on every call.
    unreadable = !h && PyDict_GetItemString(PyImport_GetModuleDict(), "torch") != nullptr;
  }
  return h;
}

bool is_torch_tensor(PyObject* o) {
  const TorchHandles* h = torch_handles();
  return h && PyObject_TypeCheck(o, h->tensor_base);
}

std::optional<rt::DType> dtype_of_torch(PyObject* dtype) {
  const TorchHandles* h = torch_handles();
  if (!h) return std::nullopt;
  for (int i = 0; i < rt::kNumDTypes; ++i)
    if (h->dtypes[i] && h->dtypes[i] == dtype) return static_cast<rt::DType>(i);
  return std::nullopt;
}

Expected<void*> torch_current_stream(int index) {
  const TorchHandles* h = torch_handles();
  if (!h || !h->current_stream) return Status::unsupported("this torch has no CUDA streams (torch._C._cuda_getCurrentRawStream)");
  OwnedRef index_obj = OwnedRef::steal(PyLong_FromLong(index));
  OwnedRef r = OwnedRef::steal(index_obj ? PyObject_CallOneArg(h->current_stream, index_obj.get()) : nullptr);
  const unsigned long long raw = r && PyLong_Check(r.get()) ? PyLong_AsUnsignedLongLong(r.get()) : 0;
  if (!r || PyErr_Occurred()) {
    PyErr_Clear();
    return Status::internal("torch's current CUDA stream on cuda:" + std::to_string(index) + " could not be read");
  }
  return reinterpret_cast<void*>(static_cast<uintptr_t>(raw));
}

bool torch_grad_enabled() {
  const TorchHandles* h = torch_handles();
  if (!h) return false;
  // Inside a run (the guard checks of a hit) it is asked once: nothing changes it between them.
  ExportTable& t = table();
  if (t.scopes > 0 && t.grad_enabled >= 0) return t.grad_enabled == 1;
  OwnedRef r = OwnedRef::steal(PyObject_CallMethod(h->module, "is_grad_enabled", nullptr));
  if (!r) PyErr_Clear();
  const bool on = r && r.get() == Py_True;
  if (t.scopes > 0) t.grad_enabled = on ? 1 : 0;
  return on;
}

std::optional<TorchTensorFacts> torch_tensor_facts(PyObject* o) {
  if (!is_torch_tensor(o)) return std::nullopt;
  const Export* e = export_of(o);
  if (!e) return std::nullopt;
  return TorchTensorFacts{e->fields, e->requires_grad};
}

TorchGradOff::TorchGradOff() {
  const TorchHandles* h = torch_handles();
  if (!h || !h->set_grad_enabled || !torch_grad_enabled()) return;
  OwnedRef r = OwnedRef::steal(PyObject_CallOneArg(h->set_grad_enabled, Py_False));
  if (!r) PyErr_Clear();
  restore_ = static_cast<bool>(r);
  table().grad_enabled = -1;  // the mode changed under the run's memo
}

TorchGradOff::~TorchGradOff() {
  if (!restore_) return;
  // NB: an exception the run set must survive the call that restores the mode.
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  OwnedRef r = OwnedRef::steal(PyObject_CallOneArg(torch_handles()->set_grad_enabled, Py_True));
  if (!r) PyErr_Clear();
  PyErr_Restore(type, value, tb);
  table().grad_enabled = -1;
}

void register_torch_adapter() {
  static const TorchAdapter adapter;
  register_array_adapter(ArrayKind::Torch, &adapter);
}

}  // namespace framejit::frontend
