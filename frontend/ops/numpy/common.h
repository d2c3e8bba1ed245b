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

/// numpy.<name>, borrowed (imported once).
PyObject* numpy_attr(const char* name);

/// Imports NumPy's dtype probe (framejit._probe.result_type) once. False with an exception set.
bool init_probe();

}  // namespace framejit::frontend::ops
