// common.h — helpers shared by the op families: NumPy dtype probes, broadcasting, axes, shapes and
// Python-style argument binding.
#pragma once

#include <Python.h>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "frontend/trace/tracer.h"

namespace framejit::frontend::ops {

using jit::SymInt;
using Shape = std::vector<SymInt>;

/// What NumPy says a call returns, asked with stand-in operands (see framejit/_probe.py).
struct DTypeAnswer {
  rt::DType dtype;
  bool scalar_object;
};
/// Resolves the result dtype of `fn(*args, **kwargs)`, the op NumPy calls `op` ("add", "exp",
/// "sum", "matmul" ...). NumPy programs ask the installed NumPy: tensors become stand-ins of their
/// dtype and rank; Python scalars whose value changes the answer are pinned with a guard; a 0-d
/// array whose value would change it is a graph break. framejit.Tensor programs, and any program
/// where NumPy is missing, follow NumPy 2's rules natively (Note [Native promotion]). `kwargs`
/// holds only constants.
/// Which native rule answers for the op (NumPyOnly: none; the op needs NumPy).
enum class DTypeRule : uint8_t { Elementwise, Reduction, Matmul, NumPyOnly };
DTypeAnswer probe_dtype(Tracer& tx, DTypeRule rule, std::string_view op, PyObject* fn,
                        const std::vector<VarPtr>& args, const std::vector<std::pair<std::string, VarPtr>>& kwargs);

/// Whether this trace resolves dtypes natively (framejit.Tensor graphs, or no NumPy installed).
bool uses_native_rules(Tracer& tx);

/// NumPy broadcasting of symbolic shapes; mismatches are a graph break (eager raises the error).
Shape broadcast_shapes(Tracer& tx, const std::vector<Shape>& shapes);
/// Shape of any operand: a tensor's shape, or {} for numbers.
Shape shape_of(Tracer& tx, const VarPtr& v);
SymInt numel(const Shape& s);

/// Normalizes an axis argument (None/int/tuple) against `rank`; nullopt means "all axes".
std::optional<std::vector<int>> normalize_axes(Tracer& tx, const VarPtr& axis, int rank);
int normalize_axis(Tracer& tx, int64_t axis, int rank);

/// A shape argument: an int, a tuple/list of ints or sizes (symbolic sizes stay symbolic).
Shape parse_shape(Tracer& tx, const VarPtr& v);
/// Args after `self` that spell a shape either as one tuple or as separate ints (x.reshape(2, 3)).
Shape parse_shape_args(Tracer& tx, const std::vector<VarPtr>& args);

/// Python-style binding of a call against parameter names (a "*" entry starts keyword-only).
/// Unknown or duplicate arguments are a graph break naming the function.
std::map<std::string, VarPtr> bind_args(const std::string& fn_name, const std::vector<std::string>& params,
                                        const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// True when the bound argument is absent or None.
bool is_absent(const std::map<std::string, VarPtr>& bound, const std::string& name);

/// Graph args for a call exactly as the user wrote it (positional, then keyword).
std::vector<jit::Arg> to_args(Tracer& tx, const std::vector<VarPtr>& args);
std::vector<std::pair<std::string, jit::Arg>> to_kwargs(Tracer& tx, const KwArgs& kwargs);

/// The DType of a dtype-like constant (numpy.float32, "float32", np.dtype(...), float, int).
rt::DType dtype_of(Tracer& tx, const VarPtr& v);

jit::TensorMeta tensor_meta(rt::DType dtype, Shape shape, bool scalar_object = false);

// Note [CuPy through NumPy's table]
// CuPy's API is NumPy's, run on a GPU: CuPy's op table (ops/cupy) traces `cupy.exp(x)` as NumPy's
// table traces `numpy.exp(x)`, with NumPy's dtype rules (CuPy 13 and later promote as NumPy 2
// does, NEP 50 included, on NumPy 1 or 2), inside a CupyCall. The differences are CuPy's table's:
// it claims the graph for CuPy arrays first, and its results are never NumPy scalars (a CuPy
// reduction or index gives a 0-d array). Inside a CupyCall, functions that make arrays make CuPy
// arrays (the program allocates them through CuPy's adapter on the graph's device); outside one,
// a NumPy function in a graph of CuPy arrays breaks it: NumPy would make a host array, or hand
// the call to CuPy through __array_function__, which framejit does not model.

/// Claims the graph for the arrays a NumPy function makes: NumPy arrays, or CuPy arrays inside a
/// CupyCall. Breaks the graph in a graph of framejit.Tensors, and outside a CupyCall in a graph of
/// CuPy arrays. `what` names the call in the break's message.
void claim_numpy_arrays(Tracer& tx, const std::string& what);
/// Whether a CupyCall is on the stack.
bool in_cupy_call();
/// Marks the trace of one CuPy call through NumPy's rules (Note [CuPy through NumPy's table]).
class CupyCall {
public:
  CupyCall();
  ~CupyCall();
  CupyCall(const CupyCall&) = delete;
  CupyCall& operator=(const CupyCall&) = delete;
};

/// numpy.<name>, borrowed (imported once).
PyObject* numpy_attr(const char* name);

/// Imports NumPy's dtype probe (framejit._probe.result_type) once. False with an exception set.
bool init_probe();

}  // namespace framejit::frontend::ops
