// user_backend.cpp — user backends: `backend(graph, example_inputs) -> callable`, and the Python view
// of a Graph they receive (framejit._graph.Graph).
#include <Python.h>

#include "frontend/program/program.h"
#include "frontend/cpython/python_env.h"

namespace framejit::frontend {

namespace {

PyObject* graph_module() { return python_env().graph_module; }  // borrowed

OwnedRef arg_to_python(const jit::Arg& a, PyObject* ref_type) {
  using K = jit::Arg::Kind;
  if (a.kind == K::Node) return OwnedRef::steal(PyObject_CallFunction(ref_type, "i", static_cast<int>(a.i)));
  if (a.kind == K::Tuple || a.kind == K::List || a.kind == K::Slice) {
    OwnedRef items = OwnedRef::steal(PyList_New(0));
    for (const jit::Arg& x : a.items) {
      OwnedRef v = arg_to_python(x, ref_type);
      if (!v) return {};
      PyList_Append(items.get(), v.get());
    }
    if (a.kind == K::List) return items;
    OwnedRef t = OwnedRef::steal(PyList_AsTuple(items.get()));
    if (a.kind == K::Tuple) return t;
    return OwnedRef::steal(PySlice_New(PyTuple_GET_ITEM(t.get(), 0), PyTuple_GET_ITEM(t.get(), 1),
                                       PyTuple_GET_ITEM(t.get(), 2)));
  }
  return const_arg_to_python(a);
}

OwnedRef meta_to_python(const jit::TensorMeta& m) {
  OwnedRef shape = OwnedRef::steal(PyList_New(0));
  for (const jit::SymInt& d : m.shape) {
    OwnedRef v = OwnedRef::steal(d.is_const() ? PyLong_FromLongLong(d.const_value())
                                              : PyUnicode_FromString(d.to_string().c_str()));
    PyList_Append(shape.get(), v.get());
  }
  std::string_view dt = rt::dtype_name(m.dtype);
  return OwnedRef::steal(Py_BuildValue("{s:s,s:s#,s:N,s:O,s:s}", "kind",
                                       m.kind == jit::ValueKind::Tensor ? "tensor" : "scalar", "dtype", dt.data(),
                                       (Py_ssize_t)dt.size(), "shape", PyList_AsTuple(shape.get()), "scalar_object",
                                       m.scalar_object ? Py_True : Py_False, "text", m.to_string().c_str()));
}

class CallableProgram final : public Program {
public:
  OwnedRef fn;
  bool run(PyObject* const* inputs, PyObject** out) override {
    OwnedRef r = OwnedRef::steal(PyObject_Vectorcall(fn.get(), inputs, num_inputs(), nullptr));
    if (!r) return false;
    OwnedRef seq = OwnedRef::steal(PySequence_Fast(r.get(), "a backend's compiled function must return a tuple or list"));
    if (!seq) return false;
    if (PySequence_Fast_GET_SIZE(seq.get()) != num_outputs()) {
      PyErr_Format(PyExc_RuntimeError, "framejit: backend returned %zd outputs, the graph has %d",
                   PySequence_Fast_GET_SIZE(seq.get()), num_outputs());
      return false;
    }
    for (int i = 0; i < num_outputs(); ++i) {
      out[i] = PySequence_Fast_GET_ITEM(seq.get(), i);
      Py_INCREF(out[i]);
    }
    return true;
  }
};

}  // namespace

OwnedRef graph_to_python(const jit::Graph& graph) {
  PyObject* mod = graph_module();
  if (!mod) return {};
  OwnedRef ref_type = OwnedRef::steal(PyObject_GetAttrString(mod, "Ref"));
  OwnedRef raw = OwnedRef::steal(PyList_New(0));
  if (!ref_type || !raw) return {};
  for (const jit::Node& n : graph.nodes()) {
    const char* op = n.kind == jit::NodeKind::Placeholder ? "placeholder"
                     : n.kind == jit::NodeKind::Output    ? "output"
                                                          : "call_function";
    OwnedRef args = OwnedRef::steal(PyList_New(0));
    for (const jit::Arg& a : n.args) {
      OwnedRef v = arg_to_python(a, ref_type.get());
      if (!v) return {};
      PyList_Append(args.get(), v.get());
    }
    OwnedRef kwargs = OwnedRef::steal(PyDict_New());
    for (auto& [k, a] : n.kwargs) {
      OwnedRef v = arg_to_python(a, ref_type.get());
      if (!v) return {};
      PyDict_SetItemString(kwargs.get(), k.c_str(), v.get());
    }
    OwnedRef meta = n.kind == jit::NodeKind::Output ? OwnedRef::borrow(Py_None) : meta_to_python(n.meta);
    OwnedRef item = OwnedRef::steal(Py_BuildValue("(sssNOO)", op, n.name.c_str(), n.target.c_str(),
                                                  PyList_AsTuple(args.get()), kwargs.get(), meta.get()));
    PyList_Append(raw.get(), item.get());
  }
  std::string code = graph.to_string();
  return OwnedRef::steal(PyObject_CallMethod(mod, "_from_raw", "Os", raw.get(), code.c_str()));
}

Expected<std::unique_ptr<Program>> build_callable_program(PyObject* backend, const jit::Graph& graph,
                                                          const std::vector<PyObject*>& example_inputs) {
  OwnedRef view = graph_to_python(graph);
  if (!view) return Status::internal("cannot build the graph view: " + fetch_error_text());
  OwnedRef examples = OwnedRef::steal(PyList_New(0));
  for (PyObject* x : example_inputs) PyList_Append(examples.get(), x);
  OwnedRef fn = OwnedRef::steal(PyObject_CallFunctionObjArgs(backend, view.get(), examples.get(), nullptr));
  if (!fn) return Status::internal("the backend raised " + fetch_error_text());
  if (!PyCallable_Check(fn.get())) return Status::internal("the backend did not return a callable");
  auto p = std::make_unique<CallableProgram>();
  p->fn = fn;
  p->set_counts(static_cast<int>(graph.placeholders().size()), static_cast<int>(graph.outputs().size()));
  return std::unique_ptr<Program>(std::move(p));
}

}  // namespace framejit::frontend
