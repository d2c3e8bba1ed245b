// op_table.h — what the tracer asks of an array library: its op table (Note [Op tables]).
#pragma once

#include <Python.h>

#include <string>
#include <vector>

#include "frontend/trace/tracer.h"

namespace framejit::frontend {

// Note [Op tables]
// The tracer knows array libraries only through op tables. A table turns the library's calls,
// array methods, attributes, indexing and Python operators on its arrays into graph nodes, each
// one canonical op (jit::OpKind with typed attributes) decided by the library's own rules. The
// tracer finds the table of a callable by asking each table whether it owns it, and the table of
// an operator or method by the graph's array kind. Tables register at module init (bindings/),
// so trace/ never includes ops/: the dependency points from the libraries to the tracer.
// NumPy's table (ops/numpy) also serves framejit.Tensor graphs, whose ops follow NumPy's
// semantics; the places where Tensor differs are inside that table.
class OpTable {
public:
  virtual ~OpTable() = default;

  /// Whether `callable` (borrowed) is one of this library's functions the table captures.
  virtual bool owns(PyObject* callable) const = 0;
  virtual VarPtr call_function(Tracer& tx, PyObject* callable, std::vector<VarPtr> args, KwArgs kwargs) = 0;
  /// `a.<name>` on an array: an attribute (shape, T, dtype ...) or a bound method.
  virtual VarPtr attr(Tracer& tx, const VarPtr& a, const std::string& name) = 0;
  virtual VarPtr call_method(Tracer& tx, const VarPtr& a, const std::string& name, std::vector<VarPtr> args,
                             KwArgs kwargs) = 0;
  /// `a[index]` (basic indexing).
  virtual VarPtr getitem(Tracer& tx, const VarPtr& a, const VarPtr& index) = 0;
  /// `obj[index]` on one of this library's objects (numpy.mgrid[0:3, 0:4]); null when `obj`
  /// (borrowed) is not indexed that way.
  virtual VarPtr object_getitem(Tracer&, PyObject*, const VarPtr&) { return nullptr; }
  /// `obj(...)` and `obj.<name>` on one of this library's objects the tracer has no rule for (an
  /// nn.Module): null when `obj` is not one, or when the tracer's own rule fits (an attribute in
  /// the instance's dict).
  virtual VarPtr object_call(Tracer&, const VarPtr&, std::vector<VarPtr>&, KwArgs&) { return nullptr; }
  virtual VarPtr object_attr(Tracer&, const VarPtr&, const std::string&) { return nullptr; }
  /// `a[index] = value` (Note [Writes into arrays]); `a` then holds the written array.
  virtual void setitem(Tracer& tx, const VarPtr& a, const VarPtr& index, const VarPtr& value) = 0;
  /// A Python operator with at least one array operand: `op` is the operator module's name
  /// ("add", "matmul", "lt" ...); `inplace` for `x op= y` on a local.
  virtual VarPtr binary(Tracer& tx, const std::string& op, const VarPtr& a, const VarPtr& b, bool inplace) = 0;
  /// "neg", "pos", "invert", "abs" on an array.
  virtual VarPtr unary(Tracer& tx, const std::string& op, const VarPtr& a) = 0;
  /// What the table captures, in the user's terms ("numpy.tanh", "ndarray.sum"), sorted.
  virtual std::vector<std::string> supported() const = 0;
  /// Appends the node for `target` (the traced callable's name) as this library's canonical op.
  virtual int add_call(jit::Graph& graph, const std::string& target, std::vector<jit::Arg> args,
                       std::vector<std::pair<std::string, jit::Arg>> kwargs, jit::TensorMeta meta) = 0;
};

/// Makes `table` (not owned; tables live as long as the process) the table of `kind`'s arrays.
/// A table registered for several kinds is asked once in op_table_owning.
void register_op_table(ArrayKind kind, OpTable* table);
/// The table of a graph whose arrays are of `kind`. Throws a graph break when there is none.
OpTable& array_op_table(ArrayKind kind);
/// The table that owns `callable` (borrowed), or null.
OpTable* op_table_owning(PyObject* callable);
/// Asks every table for its rule for `obj(...)` / `obj.<name>` (OpTable::object_call); null: none.
VarPtr tables_object_call(Tracer& tx, const VarPtr& obj, std::vector<VarPtr>& args, KwArgs& kwargs);
VarPtr tables_object_attr(Tracer& tx, const VarPtr& obj, const std::string& name);
/// Everything the registered tables capture (framejit.supported_ops()), sorted, no duplicates.
std::vector<std::string> supported_ops();

}  // namespace framejit::frontend
