// module.cpp — framejit._C: the Python boundary. Converts arguments, validates them with clear
// errors, and exposes the hook, explain, stats and settings to the thin Python package.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "frontend/bytecode/resume.h"
#include "frontend/cache/code_state.h"
#include "frontend/compile/compile_frame.h"
#include "frontend/options/config.h"
#include "frontend/hook/eval_frame.h"
#include "frontend/interop/numpy_abi.h"
#include "frontend/cpython/python_env.h"
#include "frontend/ops/cupy/registry.h"
#include "frontend/ops/torch/registry.h"
#include "frontend/ops/numpy/registry.h"
#include "frontend/ops/tensor/eager.h"
#include "frontend/ops/tensor/native.h"
#include "frontend/tensor/object.h"
#include "frontend/tensor/views.h"
#include "frontend/trace/op_table.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/graph.h"
#include "runtime/cuda/memory.h"
#include "runtime/faults.h"
#include "runtime/kernel_cache.h"
#include "runtime/log.h"
#include "runtime/memory.h"

namespace py = pybind11;
using namespace framejit::frontend;

void bind_promotion(py::module_& m);  // promotion.cpp: test hooks for the native dtype rules
void bind_bytecode(py::module_& m);   // bytecode_hooks.cpp: test hooks for frontend/bytecode

namespace {

std::shared_ptr<CompileConfig> make_config(py::object backend, bool fullgraph, py::object dynamic, py::object mode) {
  if (py::isinstance<py::str>(backend)) {
    std::string name = backend.cast<std::string>();
    if (name != "jit" && name != "eager")
      throw py::value_error("framejit: unknown backend '" + name + "' (expected 'jit', 'eager' or a callable)");
    // One interned object per name, so entries made by different wrappers with the same backend
    // are shared (the cache compares backend identity).
    backend = py::reinterpret_steal<py::object>(PyUnicode_InternFromString(name.c_str()));
  } else if (!PyCallable_Check(backend.ptr())) {
    throw py::type_error("framejit: backend must be 'jit', 'eager' or a callable backend(graph, example_inputs)");
  }
  if (!dynamic.is_none() && !PyBool_Check(dynamic.ptr()))
    throw py::type_error("framejit: dynamic must be None, True or False");
  bool reduce_overhead = false;
  if (!mode.is_none()) {
    if (!py::isinstance<py::str>(mode))
      throw py::type_error("framejit: mode must be None, 'default' or 'reduce-overhead'");
    const std::string m = mode.cast<std::string>();
    if (m != "default" && m != "reduce-overhead")
      throw py::value_error("framejit: unknown mode '" + m + "' (expected None, 'default' or 'reduce-overhead')");
    reduce_overhead = m == "reduce-overhead";
  }
  auto cfg = std::make_shared<CompileConfig>();
  cfg->backend = OwnedRef::borrow(backend.ptr());
  cfg->reduce_overhead = reduce_overhead;
  cfg->fullgraph = fullgraph;
  cfg->dynamic = dynamic.is_none() || dynamic.ptr() == Py_True;
  return cfg;
}

py::dict stats_dict() {
  const Stats& s = stats();
  py::dict d;
  d["frames"] = s.frames;
  d["captured"] = s.captured;
  d["cache_hits"] = s.cache_hits;
  d["cache_misses"] = s.cache_misses;
  d["recompiles"] = s.recompiles;
  d["graph_breaks"] = s.graph_breaks;
  d["unsupported_frames"] = s.unsupported_frames;
  d["skipped_codes"] = s.skipped_codes;
  d["compile_ms"] = s.compile_ms;
  d["trace_ms"] = s.trace_ms;
  d["ops"] = s.ops;
  d["kernels"] = s.kernels;
  d["reductions"] = s.reductions;
  d["gemms"] = s.gemms;
  d["loops"] = s.loops;
  d["extern_calls"] = s.extern_calls;
  d["cache_entries"] = count_cache_entries();
  // Resources, not counters (reset() does not zero them; it frees what it can):
  d["live_kernels"] = framejit::rt::live_kernels();  // executable kernels in memory
  const framejit::rt::PoolStats pool = framejit::rt::pool_stats();
  d["pool_bytes_in_use"] = pool.bytes_in_use;  // pooled arrays alive (Note [Pooled arrays])
  d["pool_bytes_cached"] = pool.bytes_cached;  // freed blocks kept mapped for reuse
  // CUDA: device memory of framejit.Tensors, and the driver's PTX-to-SASS work (Note [PTX size]).
  const framejit::rt::cuda::DeviceMemoryStats dev = framejit::rt::cuda::device_memory_stats();
  d["device_bytes_in_use"] = dev.bytes_in_use;
  d["device_bytes_cached"] = dev.bytes_cached;
  const framejit::rt::cuda::ModuleStats mods = framejit::rt::cuda::module_stats();
  d["cuda_modules_loaded"] = mods.loaded;
  d["cuda_live_modules"] = mods.live;
  d["ptx_jit_ms"] = mods.jit_ms;
  // mode="reduce-overhead" (Note [Replayed launches]).
  const framejit::rt::cuda::GraphStats g = framejit::rt::cuda::graph_stats();
  d["cuda_graphs_built"] = g.built;
  d["cuda_graph_replays"] = g.replays;
  d["cuda_graph_patched_nodes"] = g.patched_nodes;
  d["cuda_graph_flushed_runs"] = g.flushed;
  d["cuda_graph_direct_runs"] = g.direct;
  return d;
}

// tensor_op(fn, *operands): a Tensor op as a one-op graph. METH_FASTCALL, not pybind11: it is
// the per-op overhead of every Tensor operator outside compiled code.
PyObject* tensor_op_fast(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "tensor_op(fn, *operands)");
    return nullptr;
  }
  return run_tensor_op(args[0], args + 1, nargs - 1);
}

PyMethodDef fast_methods[] = {
    {"tensor_op", reinterpret_cast<PyCFunction>(reinterpret_cast<void*>(tensor_op_fast)), METH_FASTCALL,
     "tensor_op(fn, *operands): fn(*operands) as a cached one-op graph (Note [Tensor ops outside compiled code])."},
    {nullptr, nullptr, 0, nullptr},
};

py::object steal_or_throw(PyObject* r) {
  if (!r) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(r);
}

}  // namespace

PYBIND11_MODULE(_C, m) {
  m.doc() = "framejit's C++ core (use the framejit package, not this module)";

  static PyObject* unsupported =
      PyErr_NewExceptionWithDoc("framejit.Unsupported",
                                "Raised with fullgraph=True when a function cannot be captured as one graph.",
                                PyExc_RuntimeError, nullptr);
  unsupported_error() = unsupported;
  m.attr("Unsupported") = py::handle(unsupported);
  if (!init_hook_types(m.ptr())) throw py::error_already_set();
  // framejit._C.TensorBase, tensor(), from_dlpack() and _register_tensor_class().
  if (!init_tensor_type(m.ptr())) throw py::error_already_set();
  if (PyModule_AddFunctions(m.ptr(), fast_methods) < 0) throw py::error_already_set();
  // Views (Note [Tensor views]).
  m.def("tensor_permute", [](py::object t, std::vector<int64_t> perm) {
    return steal_or_throw(tensor_permute(t.ptr(), std::move(perm)));
  });
  m.def("tensor_swapaxes", [](py::object t, int64_t a, int64_t b) {
    return steal_or_throw(tensor_swapaxes(t.ptr(), a, b));
  });
  m.def("tensor_reshape", [](py::object t, std::vector<int64_t> shape) {
    return steal_or_throw(tensor_reshape(t.ptr(), shape));
  });
  m.def("tensor_getitem", [](py::object t, py::object key) { return steal_or_throw(tensor_getitem(t.ptr(), key.ptr())); });
  m.def("tensor_copy", [](py::object t) { return steal_or_throw(tensor_copy(t.ptr())); });
  m.def("tensor_float_divmod", [](py::object a, py::object b, bool floor) {
    return steal_or_throw(tensor_float_divmod(a.ptr(), b.ptr(), floor));
  }, "a // b (floor) or a % b for float Tensors where NumPy is missing (Note [Float divmod without NumPy]).");
  m.def("tensor_store_inplace", [](py::object d, py::object r, const std::string& ufunc) {
    return steal_or_throw(tensor_store_inplace(d.ptr(), r.ptr(), ufunc.c_str()));
  });
  m.def("tensor_int_matmul", [](py::object a, py::object b) { return steal_or_throw(tensor_int_matmul(a.ptr(), b.ptr())); },
        "a @ b for integer Tensors where NumPy is missing (the GEMM is float only).");
  m.def("supported_ops", [] { return supported_ops(); },
        "What framejit captures, in the user's terms (numpy.tanh, ndarray.sum, operator +), sorted.");
  m.def("_registered", [](py::object fn) { return ops::is_registered(fn.ptr()); },
        "Whether the op registry captures this NumPy callable (Tensor.__array_function__ serves those).");

  m.def(
      "compile",
      [](py::object fn, py::object backend, bool fullgraph, py::object dynamic, py::object mode) {
        if (!PyCallable_Check(fn.ptr())) throw py::type_error("framejit.compile: expected a callable");
        PyObject* r = make_compiled_function(fn.ptr(), make_config(backend, fullgraph, dynamic, mode));
        if (!r) throw py::error_already_set();
        return py::reinterpret_steal<py::object>(r);
      },
      py::arg("fn"), py::arg("backend") = "jit", py::arg("fullgraph") = false, py::arg("dynamic") = py::none(),
      py::arg("mode") = py::none());

  m.def("disable", [](py::object fn) {
    if (!PyCallable_Check(fn.ptr())) throw py::type_error("framejit.disable: expected a callable");
    PyObject* r = make_disabled_function(fn.ptr());
    if (!r) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(r);
  });

  m.def(
      "install",
      [](py::object backend, bool fullgraph, py::object dynamic, py::object mode) {
        install(make_config(backend, fullgraph, dynamic, mode));
      },
      py::arg("backend") = "jit", py::arg("fullgraph") = false, py::arg("dynamic") = py::none(),
      py::arg("mode") = py::none());
  m.def("uninstall", &uninstall);
  m.def("installed", &installed);
  m.def("_bare_evaluator", &set_bare_evaluator,
        "Benchmark reference: a PEP 523 evaluator that does nothing but call CPython's.");

  m.def("explain", [](py::object fn, py::tuple args, py::dict kwargs) {
    // explain(compiled_fn) explains the function it wraps (its own config would win otherwise), with
    // its backend; a plain function with compile()'s default, the jit: what it captures depends on
    // the backend (loops compile only there, Note [Element loops]).
    py::object backend = py::str("jit");
    if (PyObject* b = compiled_function_backend(fn.ptr())) backend = py::reinterpret_borrow<py::object>(b);
    if (PyObject* inner = compiled_function_target(fn.ptr())) fn = py::reinterpret_borrow<py::object>(inner);
    ExplainRecord rec;
    auto cfg = make_config(backend, false, py::none(), py::none());
    if (PyFunction_Check(fn.ptr())) cfg->root_code = PyFunction_GET_CODE(fn.ptr());
    cfg->explain = &rec;
    PyObject* r = call_with_config(fn.ptr(), args.ptr(), kwargs.ptr(), cfg.get());
    if (!r) throw py::error_already_set();
    py::dict d;
    d["result"] = py::reinterpret_steal<py::object>(r);
    d["graphs"] = rec.graphs;
    d["break_reasons"] = rec.break_reasons;
    py::list breaks;
    for (const ExplainBreak& b : rec.breaks) {
      py::dict e;
      e["kind"] = b.kind;
      e["reason"] = b.reason;
      e["exc_type"] =
          b.exc_type ? py::reinterpret_borrow<py::object>(b.exc_type.get()) : py::none();
      e["filename"] =
          b.filename ? py::reinterpret_borrow<py::object>(b.filename.get()) : py::none();
      e["lineno"] = b.lineno;
      e["offset"] = b.offset;
      e["stack"] = b.stack;
      e["locals"] = b.locals;
      e["resumed"] = b.resumed;
      e["no_resume"] = b.no_resume;
      breaks.append(std::move(e));
    }
    d["breaks"] = std::move(breaks);
    d["guards"] = rec.guards;
    d["op_count"] = rec.op_count;
    return d;
  });

  m.def("_initialize", [] {
    if (!initialize_python_env()) throw py::error_already_set();
    init_numpy_handles();  // false without NumPy: then only framejit.Tensor graphs are traced
    if (!ops::install_op_table()) throw py::error_already_set();
    if (!ops::torch_ops::install_op_table()) throw py::error_already_set();
    if (!ops::cupy_ops::install_op_table()) throw py::error_already_set();
  }, "Imports what the C++ side needs from Python; called once by framejit/__init__.py.");

  // The run-time steps of Note [Writes into arrays]: graph nodes call these like library functions.
  m.def(
      "_index_put",
      [](py::object base, py::object key, py::object value) {
        // NB: the library's own copy and __setitem__: its casting, broadcasting and warnings
        // (NumPy's copy(); torch's clone()).
        py::object out = py::hasattr(base, "copy") ? base.attr("copy")() : base.attr("clone")();
        if (PyObject_SetItem(out.ptr(), key.ptr(), value.ptr()) < 0) throw py::error_already_set();
        return out;
      },
      "base with base[key] = value, as a new array (framejit's graphs write functionally).");
  m.def(
      "_index_put_inplace",
      [](py::object base, py::object key, py::object value) {
        if (PyObject_SetItem(base.ptr(), key.ptr(), value.ptr()) < 0) throw py::error_already_set();
        return base;
      },
      "_index_put into base itself: a program's array that nothing else holds and no later step reads.");
  m.def(
      "_copy_into",
      [](py::object dst, py::object src, py::object) {
        if (!dst.is(src) && PyObject_SetItem(dst.ptr(), Py_Ellipsis, src.ptr()) < 0) throw py::error_already_set();
        return dst;
      },
      py::arg("dst"), py::arg("src"), py::arg("after") = py::none(),
      "dst[...] = src: a written input gets its final value; `after` only orders the step.");
  m.def("stats", &stats_dict);
  m.def("_event_summary", &event_summary,
        "Graph breaks and recompiles per function and reason, for FRAMEJIT_LOGS=breaks,recompiles.");
  m.def("reset", [] {
    reset_all_code_states();
    bytecode::clear_resume_cache();  // break codes still running hold their own resume codes
    stats() = Stats{};
    // Kernels still used by a program that is running elsewhere live until it is done.
    framejit::rt::kernel_cache_clear();
    framejit::rt::pool_trim();
    framejit::rt::cuda::device_trim();
  });
  m.def("_cuda_device_count", [] {
    // (count, why): 0 and the driver's reason where there is no usable driver.
    auto n = framejit::rt::cuda::device_count();
    // NB: py::tuple, not the two make_tuple types (newer pybind11 types them differently).
    return n ? py::tuple(py::make_tuple(*n, "")) : py::tuple(py::make_tuple(0, n.error().message()));
  });
  m.def("_cuda_device_name", [](int index) {
    auto info = framejit::rt::cuda::device_info(index);
    if (!info) throw std::runtime_error(info.error().message());
    return info->name;
  });
  m.def("_cuda_synchronize", [](int index) {
    framejit::Status st;
    {
      py::gil_scoped_release release;
      st = framejit::rt::cuda::synchronize(index);
    }
    if (!st) throw std::runtime_error("framejit: " + st.message());
  });
  m.def("set_recompile_limit", [](int n) {
    if (n < 0) throw py::value_error("framejit.config.recompile_limit must be >= 0");
    settings().recompile_limit = n;
  });
  m.def("get_recompile_limit", [] { return settings().recompile_limit; });
  m.def("_set_faults", [](const std::string& spec) { framejit::rt::set_faults(spec); },
        "Makes stages fail on purpose for tests: 'codegen', 'alloc' (comma-separated), '' for none.");
  m.def("set_logs", [](const std::string& spec) { framejit::rt::set_log_spec(spec); },
        "Overrides FRAMEJIT_LOGS for this process.");
  bind_promotion(m);
  bind_bytecode(m);
}
