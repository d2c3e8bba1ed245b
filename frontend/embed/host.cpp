// host.cpp — framejit::Host (include/framejit/host.h): CPython embedded in a C++ program, with
// framejit as its frame evaluator, and Tensors crossing as zero-copy NumPy arrays.
//
// This file talks to the embedded interpreter only through the CPython API and Python-level
// calls: framejit itself runs inside the interpreter as the ordinary `framejit` package (its _C
// extension), exactly as under `python -m framejit`.
#include <Python.h>
#include <dlfcn.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include "framejit/host.h"
#include "frontend/interop/numpy_abi.h"
#include "frontend/cpython/pyref.h"
#include "runtime/dtype.h"

#ifndef FRAMEJIT_BUILD_PYTHON_DIR
#define FRAMEJIT_BUILD_PYTHON_DIR ""
#endif

namespace framejit {

using frontend::NdArrayFields;
using frontend::OwnedRef;

namespace {

// Note [Host shutdown]
// Tensors returned by a Host hold a reference to the Python object they view, and may outlive
// the Host (and the interpreter). Dropping such a reference needs the GIL; after Py_FinalizeEx
// there is no interpreter to take it from. So the interpreter state below has an `alive` flag,
// and every release first registers itself (`in_flight`) under `mu` while alive is set. The last
// Host clears `alive`, waits for registered releases to finish, and only then finalizes; a
// release that comes later leaks its reference (the memory stays valid: nothing frees it), which
// is the only safe thing to do once the interpreter is gone.
struct Interpreter {
  std::mutex mu;
  std::condition_variable cv;
  int hosts = 0;
  bool started = false;   // we (or the embedding process) initialized it and set framejit up
  bool owns = false;      // we called Py_Initialize, so the last Host finalizes
  bool finished = false;  // finalized: CPython and NumPy cannot start again in this process
  bool alive = false;
  int in_flight = 0;
  PyThreadState* saved = nullptr;  // the starting thread's state while it does not hold the GIL
  std::thread::id starter;
  Status status;
  // Owned references, valid while alive.
  PyObject* ndarray = nullptr;      // numpy.ndarray
  PyObject* asarray = nullptr;      // numpy.asarray
  PyObject* dtypes[rt::kNumDTypes] = {};
  PyTypeObject* buffer_type = nullptr;  // HostBuffer
};

Interpreter& interp() {
  static Interpreter* i = new Interpreter();  // NB: immortal: Tensors may be released at exit
  return *i;
}

void release_python_object(PyObject* o) {
  Interpreter& I = interp();
  {
    std::lock_guard<std::mutex> lock(I.mu);
    if (!I.alive) return;  // the interpreter is gone or going: leak (Note [Host shutdown])
    ++I.in_flight;
  }
  PyGILState_STATE g = PyGILState_Ensure();
  Py_DECREF(o);
  PyGILState_Release(g);
  {
    std::lock_guard<std::mutex> lock(I.mu);
    --I.in_flight;
  }
  I.cv.notify_all();
}

// ---- Tensor -> NumPy: a buffer object over the tensor's memory, holding the tensor ----------

struct HostBuffer {
  PyObject_HEAD
  Tensor* tensor;  // owned copy: keeps the memory's owner alive while NumPy uses it
  char* start;     // lowest address the tensor touches
  Py_ssize_t len;
};

int host_buffer_get(PyObject* self, Py_buffer* view, int flags) {
  auto* b = reinterpret_cast<HostBuffer*>(self);
  return PyBuffer_FillInfo(view, self, b->start, b->len, /*readonly=*/0, flags);
}

void host_buffer_dealloc(PyObject* self) {
  auto* b = reinterpret_cast<HostBuffer*>(self);
  PyTypeObject* type = Py_TYPE(self);
  delete b->tensor;
  type->tp_free(self);
  Py_DECREF(type);
}

PyTypeObject* make_buffer_type() {
  static PyType_Slot slots[] = {
      {Py_tp_dealloc, reinterpret_cast<void*>(host_buffer_dealloc)},
      {Py_tp_doc, const_cast<char*>("Memory of a framejit::Tensor passed in by a C++ host.")},
      {Py_bf_getbuffer, reinterpret_cast<void*>(host_buffer_get)},
      {0, nullptr},
  };
  static PyType_Spec spec = {"framejit.HostBuffer", sizeof(HostBuffer), 0, Py_TPFLAGS_DEFAULT, slots};
  return reinterpret_cast<PyTypeObject*>(PyType_FromSpec(&spec));
}

// A NumPy array viewing `t` (new ref, or null with a Python error).
PyObject* to_numpy(const Tensor& t) {
  Interpreter& I = interp();
  if (t.device().type != DeviceType::CPU) {
    PyErr_SetString(PyExc_ValueError, "framejit::Host: only CPU tensors can be passed to Python");
    return nullptr;
  }
  const int nd = t.ndim();
  const int64_t item = element_size(t.dtype());
  // The byte range the tensor touches, whatever the signs of its strides.
  int64_t lo = 0, hi = t.numel() == 0 ? 0 : item;
  for (int d = 0; d < nd; ++d) {
    if (t.shape()[d] == 0) {
      lo = hi = 0;
      break;
    }
    int64_t span = (t.shape()[d] - 1) * t.strides()[d];
    if (span < 0) lo += span;
    else hi += span;
  }
  OwnedRef buf = OwnedRef::steal(PyType_GenericAlloc(I.buffer_type, 0));
  if (!buf) return nullptr;
  auto* b = reinterpret_cast<HostBuffer*>(buf.get());
  b->tensor = new Tensor(t);
  b->start = static_cast<char*>(t.data_ptr()) + lo;
  b->len = static_cast<Py_ssize_t>(hi - lo);
  OwnedRef shape = OwnedRef::steal(PyTuple_New(nd)), strides = OwnedRef::steal(PyTuple_New(nd));
  if (!shape || !strides) return nullptr;
  for (int d = 0; d < nd; ++d) {
    PyTuple_SET_ITEM(shape.get(), d, PyLong_FromLongLong(t.shape()[d]));
    PyTuple_SET_ITEM(strides.get(), d, PyLong_FromLongLong(t.strides()[d]));
  }
  OwnedRef offset = OwnedRef::steal(PyLong_FromLongLong(-lo));
  PyObject* dtype = I.dtypes[static_cast<int>(t.dtype())];
  if (!dtype) {
    PyErr_Format(PyExc_TypeError, "framejit::Host: NumPy has no dtype %s", dtype_name(t.dtype()).c_str());
    return nullptr;
  }
  // numpy.ndarray(shape, dtype, buffer, offset, strides): a view, never a copy.
  PyObject* args[6] = {nullptr, shape.get(), dtype, buf.get(), offset.get(), strides.get()};
  return PyObject_Vectorcall(I.ndarray, args + 1, 5 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
}

// ---- NumPy -> Tensor ----------------------------------------------------------------------

// The result as a Tensor that keeps the Python object alive. `obj` borrowed.
Expected<Tensor> from_python(PyObject* obj) {
  Interpreter& I = interp();
  OwnedRef arr;
  if (PyObject_TypeCheck(obj, reinterpret_cast<PyTypeObject*>(I.ndarray))) {
    arr = OwnedRef::borrow(obj);
  } else {
    arr = OwnedRef::steal(PyObject_CallOneArg(I.asarray, obj));  // numbers, NumPy scalars, lists
    if (!arr) return Status::invalid("the result is not an array: " + frontend::fetch_error_text());
  }
  OwnedRef dtype = OwnedRef::steal(PyObject_GetAttrString(arr.get(), "dtype"));
  OwnedRef name = dtype ? OwnedRef::steal(PyObject_GetAttrString(dtype.get(), "name")) : OwnedRef();
  OwnedRef native = dtype ? OwnedRef::steal(PyObject_GetAttrString(dtype.get(), "isnative")) : OwnedRef();
  const char* n = name ? PyUnicode_AsUTF8(name.get()) : nullptr;
  if (!n || !native) return Status::invalid("cannot read the result's dtype: " + frontend::fetch_error_text());
  std::optional<DType> dt = rt::dtype_from_name(n);
  if (!dt || native.get() != Py_True)
    return Status::invalid(std::string("the result's dtype ") + n + (native.get() != Py_True ? " (non-native byte order)" : "") +
                           " has no framejit::DType");
  NdArrayFields* a = frontend::as_ndarray(arr.get());
  std::vector<int64_t> shape(a->dimensions, a->dimensions + a->nd), strides(a->strides, a->strides + a->nd);
  PyObject* keep = arr.release();  // the Tensor's reference
  std::shared_ptr<void> owner(keep, [](void* o) { release_python_object(static_cast<PyObject*>(o)); });
  return Tensor::from_blob(a->data, std::move(shape), *dt, std::move(strides), std::move(owner));
}

// The pending Python exception as text, with its traceback (clears it).
std::string exception_text() {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  OwnedRef t = OwnedRef::steal(type), v = OwnedRef::steal(value), b = OwnedRef::steal(tb);
  if (!t) return "unknown error";
  OwnedRef mod = OwnedRef::steal(PyImport_ImportModule("traceback"));
  OwnedRef lines = mod ? OwnedRef::steal(PyObject_CallMethod(mod.get(), "format_exception", "OOO", t.get(),
                                                              v ? v.get() : Py_None, b ? b.get() : Py_None))
                       : OwnedRef();
  OwnedRef empty = OwnedRef::steal(PyUnicode_FromString(""));
  OwnedRef joined = lines && empty ? OwnedRef::steal(PyUnicode_Join(empty.get(), lines.get())) : OwnedRef();
  const char* s = joined ? PyUnicode_AsUTF8(joined.get()) : nullptr;
  if (s) return s;
  PyErr_Clear();
  OwnedRef str = OwnedRef::steal(PyObject_Str(v ? v.get() : t.get()));
  const char* fallback = str ? PyUnicode_AsUTF8(str.get()) : nullptr;
  PyErr_Clear();
  return fallback ? fallback : "unknown error";
}

Status python_error(const std::string& what) { return Status::invalid(what + exception_text()); }

// Where the framejit package is: see HostOptions::framejit_path.
std::string framejit_python_dir(const HostOptions& o) {
  if (!o.framejit_path.empty()) return o.framejit_path;
  if (const char* env = std::getenv("FRAMEJIT_PYTHONPATH"); env && *env) return env;
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&framejit_python_dir), &info) && info.dli_fname) {
    // Installed layout: <prefix>/lib/libframejit_host.so and <prefix>/lib/framejit/python.
    std::filesystem::path installed = std::filesystem::path(info.dli_fname).parent_path() / "framejit" / "python";
    std::error_code ec;
    if (std::filesystem::exists(installed / "framejit" / "__init__.py", ec)) return installed.string();
  }
  return FRAMEJIT_BUILD_PYTHON_DIR;
}

Status append_sys_path(const std::string& dir) {
  PyObject* path = PySys_GetObject("path");  // borrowed
  OwnedRef item = OwnedRef::steal(PyUnicode_FromString(dir.c_str()));
  if (!path || !item || PyList_Append(path, item.get()) < 0) return python_error("cannot extend sys.path: ");
  return Status::ok();
}

// With the GIL held: NumPy handles, the buffer type, framejit installed.
Status set_up(const HostOptions& o) {
  Interpreter& I = interp();
  std::string dir = framejit_python_dir(o);
  if (!dir.empty()) FJ_PROPAGATE(append_sys_path(dir));
  for (const std::string& p : o.import_paths) FJ_PROPAGATE(append_sys_path(p));
  OwnedRef np = OwnedRef::steal(PyImport_ImportModule("numpy"));
  if (!np) return python_error("cannot import numpy: ");
  I.ndarray = PyObject_GetAttrString(np.get(), "ndarray");
  I.asarray = PyObject_GetAttrString(np.get(), "asarray");
  OwnedRef dtype_fn = OwnedRef::steal(PyObject_GetAttrString(np.get(), "dtype"));
  if (!I.ndarray || !I.asarray || !dtype_fn) return python_error("numpy is incomplete: ");
  for (int k = 0; k < rt::kNumDTypes; ++k) {
    std::string name(rt::dtype_name(static_cast<DType>(k)));
    I.dtypes[k] = PyObject_CallFunction(dtype_fn.get(), "s", name.c_str());
    if (!I.dtypes[k]) PyErr_Clear();  // a dtype this NumPy lacks: tensors of it cannot be passed
  }
  I.buffer_type = make_buffer_type();
  if (!I.buffer_type) return python_error("cannot create the buffer type: ");
  if (o.backend == "none") return Status::ok();
  OwnedRef fj = OwnedRef::steal(PyImport_ImportModule("framejit"));
  if (!fj) return python_error("cannot import framejit (from " + (dir.empty() ? "sys.path" : dir) + "): ");
  OwnedRef r = OwnedRef::steal(PyObject_CallMethod(fj.get(), "install", "s", o.backend.c_str()));
  if (!r) return python_error("framejit.install failed: ");
  return Status::ok();
}

template <typename Fn>
auto with_gil(Fn&& fn) {
  PyGILState_STATE g = PyGILState_Ensure();
  auto r = fn();
  PyGILState_Release(g);
  return r;
}

}  // namespace

struct Host::Impl {
  Status status;
};

Host::Host(HostOptions options) : impl_(std::make_unique<Impl>()) {
  Interpreter& I = interp();
  std::lock_guard<std::mutex> lock(I.mu);
  ++I.hosts;
  if (I.finished) {
    impl_->status = Status::internal(
        "framejit::Host: the embedded interpreter was shut down when the last Host was destroyed, and CPython "
        "with NumPy cannot be started twice in one process; keep one Host alive for the program's lifetime");
    return;
  }
  if (!I.started) {
    I.started = true;
    I.starter = std::this_thread::get_id();
    if (!Py_IsInitialized()) {
      PyConfig config;
      PyConfig_InitPythonConfig(&config);
      config.install_signal_handlers = 0;  // signals belong to the host program
      config.parse_argv = 0;
      PyStatus st = PyStatus_Ok();
      if (!options.python_home.empty()) st = PyConfig_SetBytesString(&config, &config.home, options.python_home.c_str());
      if (!PyStatus_Exception(st)) st = Py_InitializeFromConfig(&config);
      PyConfig_Clear(&config);
      if (PyStatus_Exception(st)) {
        I.status = Status::internal(std::string("framejit::Host: Python did not start: ") +
                                    (st.err_msg ? st.err_msg : "unknown error"));
        impl_->status = I.status;
        return;
      }
      I.owns = true;
      I.status = set_up(options);
      I.saved = PyEval_SaveThread();  // let any thread take the GIL
    } else {
      I.status = with_gil([&] { return set_up(options); });
    }
    I.alive = I.status.is_ok();
    impl_->status = I.status;
    return;
  }
  impl_->status = I.status;
  if (impl_->status.is_ok() && !options.import_paths.empty())
    for (const std::string& p : options.import_paths)
      if (Status s = add_import_path(p); !s) impl_->status = s;
}

Host::~Host() {
  Interpreter& I = interp();
  std::unique_lock<std::mutex> lock(I.mu);
  if (--I.hosts > 0 || !I.owns || I.finished) return;
  if (std::this_thread::get_id() != I.starter) {
    // CPython is finalized by the thread that started it; from any other thread it keeps running
    // until the process exits (still correct, just not torn down early).
    return;
  }
  I.alive = false;
  I.cv.wait(lock, [&] { return I.in_flight == 0; });
  I.finished = true;
  lock.unlock();
  PyEval_RestoreThread(I.saved);
  Py_FinalizeEx();
}

const Status& Host::status() const { return impl_->status; }

Status Host::add_import_path(const std::string& path) {
  if (!impl_->status) return impl_->status;
  return with_gil([&] { return append_sys_path(path); });
}

Expected<std::vector<Tensor>> Host::call_all(const std::string& module, const std::string& function,
                                             const std::vector<Tensor>& args) {
  if (!impl_->status) return impl_->status;
  return with_gil([&]() -> Expected<std::vector<Tensor>> {
    OwnedRef mod = OwnedRef::steal(PyImport_ImportModule(module.c_str()));
    if (!mod) return python_error("cannot import " + module + ": ");
    OwnedRef fn = OwnedRef::steal(PyObject_GetAttrString(mod.get(), function.c_str()));
    if (!fn) return python_error(module + " has no " + function + ": ");
    OwnedRef tuple = OwnedRef::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
    if (!tuple) return python_error("");
    for (size_t i = 0; i < args.size(); ++i) {
      PyObject* a = to_numpy(args[i]);
      if (!a) return python_error("argument " + std::to_string(i) + " (" + args[i].to_string() + "): ");
      PyTuple_SET_ITEM(tuple.get(), static_cast<Py_ssize_t>(i), a);
    }
    OwnedRef result = OwnedRef::steal(PyObject_Call(fn.get(), tuple.get(), nullptr));
    if (!result) return python_error("");
    std::vector<Tensor> out;
    if (PyTuple_Check(result.get()) || PyList_Check(result.get())) {
      OwnedRef seq = OwnedRef::steal(PySequence_Fast(result.get(), "a sequence"));
      for (Py_ssize_t i = 0; seq && i < PySequence_Fast_GET_SIZE(seq.get()); ++i) {
        Expected<Tensor> t = from_python(PySequence_Fast_GET_ITEM(seq.get(), i));
        if (!t) return Status::invalid(module + "." + function + " result " + std::to_string(i) + ": " + t.error().message());
        out.push_back(std::move(*t));
      }
      return out;
    }
    Expected<Tensor> t = from_python(result.get());
    if (!t) return Status::invalid(module + "." + function + ": " + t.error().message());
    out.push_back(std::move(*t));
    return out;
  });
}

Expected<Tensor> Host::call(const std::string& module, const std::string& function, const std::vector<Tensor>& args) {
  Expected<std::vector<Tensor>> all = call_all(module, function, args);
  if (!all) return all.error();
  if (all->size() != 1)
    return Status::invalid(module + "." + function + " returned " + std::to_string(all->size()) +
                           " values; use Host::call_all for tuples");
  return std::move(all->front());
}

int Host::run_script(const std::string& path, const std::vector<std::string>& args) {
  if (!impl_->status) {
    std::fprintf(stderr, "%s\n", impl_->status.message().c_str());
    return 1;
  }
  return with_gil([&] {
    OwnedRef main = OwnedRef::steal(PyImport_ImportModule("framejit.__main__"));
    OwnedRef argv = OwnedRef::steal(PyList_New(0));
    for (const std::string& a : args) {
      OwnedRef s = OwnedRef::steal(PyUnicode_DecodeFSDefault(a.c_str()));
      if (argv && s) PyList_Append(argv.get(), s.get());
    }
    OwnedRef r = main && argv ? OwnedRef::steal(PyObject_CallMethod(main.get(), "run_script", "sO", path.c_str(), argv.get()))
                              : OwnedRef();
    if (!r) {
      PyErr_Print();
      return 1;
    }
    return static_cast<int>(PyLong_AsLong(r.get()));
  });
}

}  // namespace framejit
