// numpy_abi.cpp — importing NumPy once and mapping its type numbers to framejit's DType.
#include "frontend/interop/numpy_abi.h"

#include "frontend/cpython/dict_version.h"

#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

namespace framejit::frontend {

using rt::DType;

std::optional<DType> dtype_from_type_num(int type_num) {
  // NumPy's NPY_TYPES numbering; LONG and LONGLONG are both 64-bit on LP64 Linux.
  switch (type_num) {
    case 0: return DType::Bool;
    case 1: return DType::Int8;
    case 2: return DType::UInt8;
    case 3: return DType::Int16;
    case 4: return DType::UInt16;
    case 5: return DType::Int32;
    case 6: return DType::UInt32;
    case 7: return sizeof(long) == 8 ? DType::Int64 : DType::Int32;
    case 8: return sizeof(long) == 8 ? DType::UInt64 : DType::UInt32;
    case 9: return DType::Int64;
    case 10: return DType::UInt64;
    case 11: return DType::Float32;
    case 12: return DType::Float64;
    case 14: return DType::Complex64;
    case 15: return DType::Complex128;
    case 23: return DType::Float16;
    default: return std::nullopt;
  }
}

std::optional<DType> dtype_from_descr(PyObject* descr) {
  auto* d = reinterpret_cast<DescrFields*>(descr);
  if (d->byteorder == '>') return std::nullopt;  // NumPy spells native order '=' or '|'
  return dtype_from_type_num(d->type_num);
}

namespace {
NumPyHandles* g_handles = nullptr;

// NumPy's C-API table (Note [NumPy's C-API table]). Indices and signatures from numpy_api.py and
// the generated __multiarray_api.h of NumPy 1.24 and 2.x.
constexpr int kSlotGetNDArrayCVersion = 0;  // unsigned int PyArray_GetNDArrayCVersion(void)
constexpr int kSlotScalar = 60;              // PyArray_Scalar(data, descr, base)
constexpr int kSlotNewFromDescr = 94;        // PyArray_NewFromDescr, StealRef(2)
constexpr int kSlotSetBaseObject = 282;      // PyArray_SetBaseObject, StealRef(2)
// NPY_ABI_VERSION's major byte: 0x01000009 for every NumPy 1.x, 0x02000000 for 2.x.
constexpr unsigned kAbiMajorShift = 24;

NumPyCApi load_capi(int major) {
  NumPyCApi api;
  // FRAMEJIT_NUMPY_CAPI=0 keeps the Python allocation path (tests compare both).
  if (const char* env = std::getenv("FRAMEJIT_NUMPY_CAPI"); env && std::string_view(env) == "0") return api;
  const char* module = major >= 2 ? "numpy._core._multiarray_umath" : "numpy.core.multiarray";
  PyObject* m = PyImport_ImportModule(module);  // new ref
  if (!m) {
    PyErr_Clear();
    return api;
  }
  PyObject* capsule = PyObject_GetAttrString(m, "_ARRAY_API");  // new ref
  Py_DECREF(m);
  if (!capsule || !PyCapsule_CheckExact(capsule)) {
    Py_XDECREF(capsule);
    PyErr_Clear();
    return api;
  }
  // NB: the capsule lives as long as the module, which NumPy never unloads.
  auto** table = static_cast<void**>(PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule)));
  Py_DECREF(capsule);
  if (!table) {
    PyErr_Clear();
    return api;
  }
  auto abi_version = reinterpret_cast<unsigned (*)()>(table[kSlotGetNDArrayCVersion]);
  unsigned abi_major = abi_version ? abi_version() >> kAbiMajorShift : 0;
  if (abi_major != 1 && abi_major != 2) return api;  // a table layout this file was not written for
  api.new_from_descr = reinterpret_cast<decltype(api.new_from_descr)>(table[kSlotNewFromDescr]);
  api.set_base_object = reinterpret_cast<decltype(api.set_base_object)>(table[kSlotSetBaseObject]);
  api.scalar = reinterpret_cast<decltype(api.scalar)>(table[kSlotScalar]);
  return api;
}
}  // namespace

const NumPyHandles* numpy_handles() { return g_handles; }

bool init_numpy_handles() {
  if (g_handles) return true;
  PyObject* np = PyImport_ImportModule("numpy");  // new ref, kept forever
  if (!np) {
    PyErr_Clear();
    return false;
  }
  auto* h = new NumPyHandles();  // NB: intentionally immortal, like the module itself
  h->module = np;
  h->ndarray = reinterpret_cast<PyTypeObject*>(PyObject_GetAttrString(np, "ndarray"));
  h->generic = reinterpret_cast<PyTypeObject*>(PyObject_GetAttrString(np, "generic"));
  h->dtype_fn = PyObject_GetAttrString(np, "dtype");
  h->empty = PyObject_GetAttrString(np, "empty");
  h->geterr = PyObject_GetAttrString(np, "geterr");
  // NumPy 2 only (see Note [NumPy error state]); NumPy 1 has no numpy._core.
  if (PyObject* umath = PyImport_ImportModule("numpy._core._multiarray_umath")) {  // new ref
    h->extobj_var = PyObject_GetAttrString(umath, "_extobj_contextvar");
    if (h->extobj_var && !PyContextVar_CheckExact(h->extobj_var)) Py_CLEAR(h->extobj_var);
    Py_DECREF(umath);
  }
  PyErr_Clear();
  for (int i = 0; i < rt::kNumDTypes; ++i) {
    std::string_view name = rt::dtype_name(static_cast<DType>(i));
    h->dtypes[i] = PyObject_CallFunction(h->dtype_fn, "s#", name.data(), (Py_ssize_t)name.size());
    if (!h->dtypes[i]) PyErr_Clear();  // bfloat16: NumPy has none, and no array of it arrives
  }
  if (PyObject* v = PyObject_GetAttrString(np, "__version__")) {
    if (const char* s = PyUnicode_AsUTF8(v)) h->major = std::atoi(s);
    Py_DECREF(v);
  }
  if (PyErr_Occurred()) PyErr_Clear();
  h->capi = load_capi(h->major);
  g_handles = h;
  return true;
}

// Note [NumPy error state]
// Generated kernels compute what NumPy computes but do not report floating-point events: with
// np.errstate(divide="raise") NumPy raises FloatingPointError where a kernel just returns inf. So a
// jit program checks the thread's error state before each run and, when any category asks for
// raise, call or log, lets CPython run that call (the eager result, exception included). Warnings
// are not reproduced (the results are the same). The check runs on every compiled call, so it must
// cost next to nothing in the common case (nobody touched the error state).
//
// NumPy 1.x keeps the state in the thread's dict under "UFUNC_PYVALS" as [bufsize, errmask,
// callback]; errmask holds 3 bits per category (divide, over, under, invalid): 0 ignore, 1 warn,
// 2 raise, 3 call, 4 print, 5 log. No entry means the default (warn, warn, ignore, warn).
//
// NumPy 2 keeps it in a context variable, numpy._core._multiarray_umath._extobj_contextvar, so it
// follows threads, asyncio tasks and contextvars.Context.run. Its value is an immutable capsule:
// np.seterr and every entry into np.errstate set a new one, and the default is one capsule made at
// import. The struct inside the capsule is private to NumPy, so the answer for a capsule comes from
// np.geterr() (public), and is remembered per capsule *object*: the steady state, inside or outside
// an errstate block, is one context-variable read and a pointer comparison. The cache holds a
// reference to each capsule it remembers, so a freed capsule's address cannot come back as a
// different state. Two entries: the default plus the errstate block a loop keeps entering.
namespace {

bool mode_raises(long mode) { return mode == 2 || mode == 3 || mode == 5; }

// The mask's answer, read from the list.
bool mask_raises(PyObject* vals) {
  if (!PyList_Check(vals) || PyList_GET_SIZE(vals) < 2) return true;  // unknown form: be safe
  long mask = PyLong_AsLong(PyList_GET_ITEM(vals, 1));
  if (mask == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return true;
  }
  for (int shift = 0; shift <= 9; shift += 3)
    if (mode_raises((mask >> shift) & 7)) return true;
  return false;
}

// Note [NumPy 1 error state, cached]
// Reading UFUNC_PYVALS is a dict lookup and an int conversion per compiled call. The answer is
// remembered per thread for one (thread dict, dict version, mask object): CPython gives a dict a
// new version tag, unique in the process, on creation and on every change of an entry, so an
// unchanged (address, version) pair is the same live dict with the same list under the key. The
// list itself is mutable and np.seterr does mutate it in place (pyvals[1] = mask, then stores the
// same list again, which leaves the version alone), so its mask item is compared by identity too;
// the cache holds a reference to that int so its address cannot be reused by another value.
// Steady state: a few loads and compares, no lookup. (The dict is not referenced: a dead thread's
// dict address may come back, but not with the same version: Note [Dict version tags].)
#ifdef FRAMEJIT_HAVE_DICT_VERSION
struct Numpy1Seen {
  PyObject* dict = nullptr;  // identity only
  uint64_t version = 0;
  PyObject* vals = nullptr;  // borrowed: alive while the dict is unchanged; null: no entry
  PyObject* mask = nullptr;  // new ref (leaks one int per thread at exit)
  bool raises = false;
};
thread_local Numpy1Seen t_numpy1 __attribute__((tls_model("initial-exec")));
#endif

bool errstate_raises_numpy1() {
  PyObject* dict = PyThreadState_GetDict();  // borrowed
  if (!dict) return false;
#ifdef FRAMEJIT_HAVE_DICT_VERSION
  Numpy1Seen& seen = t_numpy1;
  if (dict == seen.dict && dict_version_tag(dict) == seen.version &&
      (!seen.vals || (PyList_Check(seen.vals) && PyList_GET_SIZE(seen.vals) >= 2 &&
                      PyList_GET_ITEM(seen.vals, 1) == seen.mask)))
    return seen.raises;
#endif
  static PyObject* key = PyUnicode_InternFromString("UFUNC_PYVALS");  // immortal
  PyObject* vals = PyDict_GetItemWithError(dict, key);  // borrowed
  bool raises = false;
  if (!vals) {
    PyErr_Clear();
  } else {
    raises = mask_raises(vals);
  }
#ifdef FRAMEJIT_HAVE_DICT_VERSION
  PyObject* mask = vals && PyList_Check(vals) && PyList_GET_SIZE(vals) >= 2 ? PyList_GET_ITEM(vals, 1) : nullptr;
  if (!vals || mask) {  // an unknown form is not cached
    Py_XINCREF(mask);
    PyObject* old = seen.mask;
    seen = {dict, dict_version_tag(dict), vals, mask, raises};
    Py_XDECREF(old);  // an int: no finalizer runs Python code
  } else {
    seen.dict = nullptr;
  }
#endif
  return raises;
}

// What np.geterr() says of the current state; true (be safe) if it cannot be read.
bool geterr_raises(const NumPyHandles* np) {
  PyObject* modes = PyObject_CallNoArgs(np->geterr);  // new ref: {"divide": "warn", ...}
  if (!modes || !PyDict_Check(modes)) {
    Py_XDECREF(modes);
    PyErr_Clear();
    return true;
  }
  bool raises = false;
  Py_ssize_t pos = 0;
  PyObject* mode;  // borrowed
  PyObject* category;  // borrowed
  while (!raises && PyDict_Next(modes, &pos, &category, &mode)) {
    const char* m = PyUnicode_Check(mode) ? PyUnicode_AsUTF8(mode) : nullptr;
    if (!m) {
      PyErr_Clear();
      raises = true;
    } else {
      std::string_view v = m;
      raises = v == "raise" || v == "call" || v == "log";
    }
  }
  Py_DECREF(modes);
  return raises;
}

struct ErrstateSeen {
  PyObject* state = nullptr;  // new ref (keeps the address from being reused)
  bool raises = false;
};
ErrstateSeen g_seen[2];  // most recent first; guarded by the GIL

bool errstate_raises_numpy2(const NumPyHandles* np) {
  PyObject* state = nullptr;
  if (PyContextVar_Get(np->extobj_var, nullptr, &state) < 0 || !state) {  // state: new ref
    PyErr_Clear();
    return true;
  }
  if (state == g_seen[0].state) {
    Py_DECREF(state);
    return g_seen[0].raises;
  }
  if (state == g_seen[1].state) {
    std::swap(g_seen[0], g_seen[1]);
    Py_DECREF(state);
    return g_seen[0].raises;
  }
  ErrstateSeen fresh{state, geterr_raises(np)};  // takes the reference
  ErrstateSeen evicted = g_seen[1];
  g_seen[1] = g_seen[0];
  g_seen[0] = fresh;
  // NB: last, once the cache is consistent: dropping a capsule drops its error callback, whose
  // destructor may run Python code that lands here again.
  Py_XDECREF(evicted.state);
  return fresh.raises;
}

}  // namespace

bool numpy_errstate_raises() {
  const NumPyHandles* np = numpy_handles();
  if (!np) return false;
  if (np->extobj_var && np->geterr) return errstate_raises_numpy2(np);
  if (np->major == 1) return errstate_raises_numpy1();
  return true;  // a NumPy whose error state we cannot read: never skip its checks
}

std::optional<rt::DType> numpy_scalar_dtype(const NumPyHandles* np, PyTypeObject* type) {
  for (int i = 0; i < rt::kNumDTypes; ++i) {
    auto* d = reinterpret_cast<DescrFields*>(np->dtypes[i]);
    if (d && d->typeobj == type) return static_cast<rt::DType>(i);
  }
  return std::nullopt;
}

namespace {

std::optional<rt::DType> scalar_dtype_of(PyObject* o) {
  const NumPyHandles* np = numpy_handles();
  if (!np || !PyObject_TypeCheck(o, np->generic)) return std::nullopt;
  return numpy_scalar_dtype(np, Py_TYPE(o));
}

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

bool numpy_scalar_float(PyObject* o, double* out) {
  std::optional<rt::DType> dt = scalar_dtype_of(o);
  if (!dt) return false;
  const char* p = numpy_scalar_data(o);
  switch (*dt) {
    case rt::DType::Float32: *out = load<float>(p); return true;
    case rt::DType::Float64: *out = load<double>(p); return true;
    default: return false;  // float16 is read nowhere else: its guards fail and recompile
  }
}

bool numpy_scalar_int(PyObject* o, long long* out) {
  std::optional<rt::DType> dt = scalar_dtype_of(o);
  if (!dt) return false;
  const char* p = numpy_scalar_data(o);
  switch (*dt) {
    case rt::DType::Bool: *out = load<uint8_t>(p) != 0; return true;
    case rt::DType::Int8: *out = load<int8_t>(p); return true;
    case rt::DType::Int16: *out = load<int16_t>(p); return true;
    case rt::DType::Int32: *out = load<int32_t>(p); return true;
    case rt::DType::Int64: *out = load<int64_t>(p); return true;
    case rt::DType::UInt8: *out = load<uint8_t>(p); return true;
    case rt::DType::UInt16: *out = load<uint16_t>(p); return true;
    case rt::DType::UInt32: *out = load<uint32_t>(p); return true;
    case rt::DType::UInt64: {
      uint64_t u = load<uint64_t>(p);
      if (u > static_cast<uint64_t>(INT64_MAX)) return false;
      *out = static_cast<long long>(u);
      return true;
    }
    default: return false;
  }
}

}  // namespace framejit::frontend
