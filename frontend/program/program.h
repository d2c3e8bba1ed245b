// program.h — what a backend hands back: something that runs a captured graph on its inputs.
#pragma once

#include <Python.h>

#include <memory>
#include <vector>

#include "framejit/status.h"
#include "frontend/cpython/pyref.h"
#include "frontend/interop/array_adapter.h"
#include "jit/ir/graph.h"

namespace framejit::frontend {

/// A compiled graph. run() is the hot path: inputs are borrowed (graph input order), outputs
/// receive new references (graph output order). On failure it returns false with a Python
/// exception set (the same exception eager NumPy raised).
class Program {
public:
  virtual ~Program() = default;
  virtual bool run(PyObject* const* inputs, PyObject** outputs) = 0;
  /// False when the program cannot give eager semantics under the current process state (see
  /// Note [NumPy error state]); the caller then runs the frame in CPython for this call.
  virtual bool can_run_now() const { return true; }
  int num_inputs() const { return num_inputs_; }
  int num_outputs() const { return num_outputs_; }
  void set_counts(int inputs, int outputs) {
    num_inputs_ = inputs;
    num_outputs_ = outputs;
  }
  /// The kind of array the program makes: its trace's (Note [Program array kind] in
  /// interop/array_adapter.h). NumPy unless set.
  void set_array_kind(ArrayKind kind) { array_kind_ = kind; }
  ArrayKind array_kind() const { return array_kind_; }
  /// Where the program's arrays live (Note [One device per graph]): it allocates its results there.
  rt::Device device() const { return device_; }
  void set_device(rt::Device device) { device_ = device; }
  /// Whether its graph reads torch tensors that require grad, so it runs with torch's grad mode
  /// off (Note [Grad-mode blocks] in frontend/trace/grad_mode.cpp).
  bool grad_off() const { return grad_off_; }
  void set_grad_off(bool off) { grad_off_ = off; }

protected:
  int num_inputs_ = 0;
  int num_outputs_ = 0;
  ArrayKind array_kind_ = ArrayKind::NumPy;
  rt::Device device_;
  bool grad_off_ = false;
};

/// The reference backend: calls the same Python callable per node that the user's code called.
Expected<std::unique_ptr<Program>> build_eager_program(const jit::Graph& graph);

/// The "jit" backend: fused pointwise groups run as generated machine code (jit::compile_graph);
/// every other node runs as in the eager backend.
Expected<std::unique_ptr<Program>> build_jit_program(const jit::Graph& graph, rt::Device device = {});

/// A user backend: `backend(graph_view, example_inputs) -> callable`; the callable takes the graph
/// inputs positionally and returns a tuple or list of the outputs. `backend` borrowed.
Expected<std::unique_ptr<Program>> build_callable_program(PyObject* backend, const jit::Graph& graph,
                                                          const std::vector<PyObject*>& example_inputs);

/// The Python view of a graph handed to user backends (framejit._graph.Graph). New ref or null.
OwnedRef graph_to_python(const jit::Graph& graph);

/// A constant Arg as a Python object (node references are not constants). New ref or null.
OwnedRef const_arg_to_python(const jit::Arg& arg);

}  // namespace framejit::frontend
