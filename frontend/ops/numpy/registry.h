// registry.h — the op registry: which NumPy callables, ndarray methods/attributes and Python
// operators become which graph ops, with NumPy's own dtype resolution and symbolic shapes.
#pragma once

#include <Python.h>

#include <string>
#include <utility>
#include <vector>

#include "frontend/trace/tracer.h"

namespace framejit::frontend::ops {

/// Python operator on at least one array. `op` is the operator-module name ("add", "matmul",
/// "lt", ...); `inplace` for `x op= y` on a local.
VarPtr binary(Tracer& tx, const std::string& op, const VarPtr& a, const VarPtr& b, bool inplace);
/// Unary operator on an array: "neg", "pos", "invert".
VarPtr unary(Tracer& tx, const std::string& op, const VarPtr& a);

/// Builds the table from NumPy's objects and registers it with the tracer for NumPy and
/// framejit.Tensor graphs (Note [Op tables]); once, from module init, after
/// initialize_python_env(). False with a Python exception set on failure.
bool install_op_table();

/// Whether the registry knows this callable (numpy.exp, numpy.sum, ...). Borrowed.
bool is_registered(PyObject* callable);
VarPtr call_function(Tracer& tx, PyObject* callable, std::vector<VarPtr> args, KwArgs kwargs);
/// The functions under numpy the table traces as graph ops, by name (numpy.<name>; aliases each
/// under their own names), with their objects (borrowed): what a library with NumPy's API (CuPy)
/// is matched against.
std::vector<std::pair<std::string, PyObject*>> functions_by_name();

/// `x.<name>` for an array: attributes (shape, T, dtype ...) or a bound method.
VarPtr tensor_attr(Tracer& tx, const VarPtr& t, const std::string& name);
VarPtr call_method(Tracer& tx, const VarPtr& t, const std::string& name, std::vector<VarPtr> args,
                   KwArgs kwargs);
/// `x[index]` with ints, slices, None, Ellipsis (basic indexing).
VarPtr getitem(Tracer& tx, const VarPtr& t, const VarPtr& index);
/// `t[index] = value` (ops/numpy/writes.cpp, Note [Writes into arrays]).
void setitem(Tracer& tx, const VarPtr& t, const VarPtr& index, const VarPtr& value);

}  // namespace framejit::frontend::ops
