// eager.cpp — framejit.Tensor operations outside compiled code, as single-op graphs.
#include "frontend/ops/tensor/eager.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>

#include "frontend/cache/code_state.h"
#include "frontend/cache/run_hit.h"
#include "frontend/compile/compile_frame.h"
#include "frontend/options/config.h"
#include "frontend/options/thread_state.h"
#include "frontend/interop/numpy_abi.h"
#include "frontend/tensor/object.h"

namespace framejit::frontend {

// Note [Tensor ops outside compiled code]
// `a + b` on framejit.Tensors outside a compiled function calls Tensor.__add__, which hands
// `lambda a, b: a + b` and its operands to run_tensor_op. That traces the lambda like any compiled
// frame (no frame is pushed: the operands are the fast locals), compiles the one-op graph with the
// "jit" backend and caches it on the lambda's code object under its guards: dtype, rank, which
// dims are 0 or 1, and the Python types of scalar operands. The next `a + b` of the same kind is a
// guard check and a kernel launch. So a Tensor op computes exactly what the same op computes
// inside a compiled function, with one implementation of every op.
//
// An op the tracer cannot capture (an op family the JIT lacks, or an error NumPy would raise, such
// as a failed broadcast) runs instead on NumPy views of the operands, when NumPy is present, and
// its arrays come back as Tensor views. Without NumPy, a trace that stopped at an eager error
// raises that error's type, and anything else NotImplementedError naming the op (today: integer
// dtypes other than int32/int64/uint8, which the JIT does not compute; Tensor's float // and %
// then run natively, Note [Float divmod without NumPy]).
// The same fallback catches re-entry: a program step that the JIT runs by calling the Tensor
// method it stands for would otherwise come straight back here.

namespace {

// Operand kinds a single op sees (dtypes x ranks x scalar types): more than a user function's.
// Past it, new kinds are compiled per call (reset() starts over).
constexpr size_t kMaxEntries = 64;

const CompileConfig& op_config() {
  static CompileConfig* cfg = [] {  // NB: immortal; made on the first op, with the GIL held
    auto* c = new CompileConfig();
    c->backend = OwnedRef::steal(PyUnicode_InternFromString("jit"));
    c->fullgraph = true;
    c->dynamic = true;
    c->partial_graphs = false;
    return c;
  }();
  return *cfg;
}

// `v` with `leaf` applied to it, or to each item of a tuple or list, recursively. New ref.
template <typename Leaf>
PyObject* map_items(PyObject* v, Leaf leaf) {
  if (!PyTuple_Check(v) && !PyList_Check(v)) return leaf(v);
  const bool tuple = PyTuple_Check(v);
  Py_ssize_t n = PySequence_Fast_GET_SIZE(v);
  OwnedRef out = OwnedRef::steal(tuple ? PyTuple_New(n) : PyList_New(n));
  if (!out) return nullptr;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* x = map_items(PySequence_Fast_GET_ITEM(v, i), leaf);
    if (!x) return nullptr;
    if (tuple) PyTuple_SET_ITEM(out.get(), i, x);  // steals x
    else PyList_SET_ITEM(out.get(), i, x);         // steals x
  }
  return out.release();
}

// Tensors become NumPy views. New ref.
PyObject* to_numpy(PyObject* v) {
  if (is_tensor(v)) return tensor_to_ndarray(v);
  Py_INCREF(v);
  return v;
}

// NumPy arrays and NumPy scalars become Tensors (scalars as 0-d). New ref.
PyObject* from_numpy(PyObject* v) {
  const NumPyHandles* np = numpy_handles();
  if (np && Py_TYPE(v) == np->ndarray) return tensor_from_ndarray(v);
  if (np && PyObject_TypeCheck(v, np->generic)) {
    OwnedRef arr = OwnedRef::steal(PyObject_CallMethod(np->module, "asarray", "O", v));
    return arr ? tensor_from_ndarray(arr.get()) : nullptr;
  }
  Py_INCREF(v);
  return v;
}

std::string op_name(PyCodeObject* code) {
  const char* s = PyUnicode_AsUTF8(code->co_qualname);
  if (!s) PyErr_Clear();
  return s ? s : "?";
}

// The op on NumPy views of its operands, run by CPython (see the Note). New ref or null. `broke`:
// the graph break that kept the op from being compiled, if that is why it runs here.
// The device of the first device tensor among `v` (recursing into tuples and lists), if any.
bool find_device_tensor(PyObject* v, rt::Device& out) {
  if (PyTuple_Check(v) || PyList_Check(v)) {
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(v); ++i)
      if (find_device_tensor(PySequence_Fast_GET_ITEM(v, i), out)) return true;
    return false;
  }
  if (!is_tensor(v) || as_tensor(v)->tensor.device().type == rt::DeviceType::CPU) return false;
  out = as_tensor(v)->tensor.device();
  return true;
}

PyObject* run_with_numpy(PyObject* fn, PyObject* const* args, Py_ssize_t nargs, const std::string& why,
                         const GraphBreak* broke = nullptr) {
  // Device tensors have no NumPy view: the op is an error, the trace's own where it has one (a
  // failed broadcast), else what keeps it from the device.
  rt::Device device;
  for (Py_ssize_t i = 0; i < nargs; ++i)
    if (find_device_tensor(args[i], device)) {
      if (broke && broke->exc_type) {
        PyErr_SetString(broke->exc_type.get(), broke->message().c_str());
        return nullptr;
      }
      PyErr_Format(PyExc_NotImplementedError, "framejit.Tensor: %s on cuda:%d is not supported yet (%s)",
                   op_name(reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn))).c_str(), device.index,
                   why.c_str());
      return nullptr;
    }
  if (!numpy_handles()) {
    // No NumPy to run it: raise what CPython raises where the trace says the op is an error in
    // eager code (the break carries the exception type), else say the op needs NumPy.
    if (broke && broke->exc_type) {
      PyErr_SetString(broke->exc_type.get(), broke->message().c_str());
      return nullptr;
    }
    PyErr_Format(PyExc_NotImplementedError, "framejit.Tensor: %s is not supported without NumPy (%s)",
                 op_name(reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(fn))).c_str(), why.c_str());
    return nullptr;
  }
  OwnedRef converted = OwnedRef::steal(PyTuple_New(nargs));
  if (!converted) return nullptr;
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    PyObject* x = map_items(args[i], to_numpy);
    if (!x) return nullptr;
    PyTuple_SET_ITEM(converted.get(), i, x);
  }
  HookBusyScope busy;  // CPython runs it: nothing in it is traced
  OwnedRef r = OwnedRef::steal(PyObject_Call(fn, converted.get(), nullptr));
  return r ? map_items(r.get(), from_numpy) : nullptr;
}

}  // namespace

namespace {

// The op's entry for these operands after a miss: compiled, checked against the operands that made
// it, and cached unless the cache is full (then `uncached` owns it for this call). Null with the
// reason in `why` (and the break, when the trace broke, in `broke`) when the op runs on NumPy
// instead.
CacheEntry* compile_op(PyFunctionObject* func, CodeState* cs, const FrameView& view, HitFrame& hit,
                       std::unique_ptr<CacheEntry>& uncached, std::string& why, std::optional<GraphBreak>& broke) {
  std::unique_ptr<CacheEntry> entry;
  GraphBreak fullgraph_break;
  {
    HookBusyScope busy;
    entry = compile_frame(op_config(), func, view, *cs, &fullgraph_break);
  }
  if (!entry) {
    broke = fullgraph_break;
    // fullgraph: the trace broke (framejit.Unsupported is set), or an internal failure.
    why = "not captured";
    if (PyErr_Occurred()) {
      why = fetch_error_text();
      PyErr_Clear();
    }
    return nullptr;
  }
  if (!entry->program || !fits_hit_path(*entry) || !entry->guards.check(view, hit.slots, hit.symbols)) {
    why = entry->break_reason.empty() ? "not captured" : entry->break_reason;
    broke = entry->broke;
    return nullptr;
  }
  // Past the bound the entry is not kept (evicting one could free a program that another
  // thread runs right now, without the GIL).
  if (cs->entries.size() >= kMaxEntries) {
    uncached = std::move(entry);
    return uncached.get();
  }
  cs->entries.insert(cs->entries.begin(), std::move(entry));
  return cs->entries.front().get();
}

}  // namespace

PyObject* run_tensor_op(PyObject* fn, PyObject* const* args, Py_ssize_t nargs) {
  if (!PyFunction_Check(fn)) {
    PyErr_SetString(PyExc_TypeError, "framejit: tensor_op expects a Python function");
    return nullptr;
  }
  auto* func = reinterpret_cast<PyFunctionObject*>(fn);
  auto* code = reinterpret_cast<PyCodeObject*>(func->func_code);
  // The operands are the frame's fast locals: a function of nothing but its parameters (and free
  // variables, which the tracer reads from the closure).
  if (nargs != code->co_argcount || code->co_nlocals != nargs || code->co_ncellvars || code->co_kwonlyargcount ||
      (code->co_flags & (CO_VARARGS | CO_VARKEYWORDS)) || code->co_nlocalsplus > kMaxHitIO) {
    PyErr_SetString(PyExc_TypeError, "framejit: tensor_op expects a function of exactly its positional operands");
    return nullptr;
  }
  PyObject* locals[kMaxHitIO] = {};  // borrowed
  std::copy(args, args + nargs, locals);
  PyObject* code_obj = reinterpret_cast<PyObject*>(code);
  if (op_running(code_obj)) return run_with_numpy(fn, args, nargs, "a step the JIT runs op by op");
  CodeState* cs = code_state(code);
  if (!cs) return run_with_numpy(fn, args, nargs, "no code state");
  FrameView view{locals, func->func_globals, func->func_builtins, func->func_closure};
  HitFrame hit;
  HitRequest request;
  request.running_code = code_obj;
  HitResult r = run_hit(*cs, view, request, hit);
  if (r.kind == HitKind::Answered) return r.value;
  if (r.kind == HitKind::RunInCPython) return run_with_numpy(fn, args, nargs, "NumPy's error state");
  // A miss: compile the op for these operands. Nothing thrown may reach CPython (this is a Tensor
  // method); an internal failure runs the op on NumPy.
  std::unique_ptr<CacheEntry> uncached;
  std::string why;
  std::optional<GraphBreak> broke;
  CacheEntry* entry = nullptr;
  try {
    if (cs->name.empty()) cs->name = "framejit.Tensor op " + op_name(code);
    entry = compile_op(func, cs, view, hit, uncached, why, broke);
  } catch (const std::exception& ex) {
    PyErr_Clear();
    why = std::string("internal error: ") + ex.what();
  }
  if (!entry) return run_with_numpy(fn, args, nargs, why, broke ? &*broke : nullptr);
  r = run_entry(*entry, view, hit, code_obj);
  if (r.kind == HitKind::Answered) return r.value;
  return run_with_numpy(fn, args, nargs, "NumPy's error state");
}

}  // namespace framejit::frontend
