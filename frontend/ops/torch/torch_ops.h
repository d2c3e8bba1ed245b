// torch_ops.h — the torch op table's families (Note [Torch ops]): each turns a torch call into
// canonical ops, with the result dtype asked of the installed torch.
#pragma once

#include <Python.h>

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "frontend/ops/numpy/common.h"

namespace framejit::frontend::ops::torch_ops {

// Note [Torch ops]
// torch functions (torch.tanh, torch.nn.functional.relu), Tensor methods (x.sum(dim=1)) and
// operators on torch tensors become the same canonical ops NumPy's calls do; what differs is the
// library's rules, and those are asked of the installed torch, never tabled: the result dtype of
// every call comes from running the very callable on stand-ins (ones of each operand's dtype, its
// rank kept and every size 1, so broadcasting, reductions and products still type-check; torch's
// promotion depends on dtypes, categories and dimensionality, never on sizes). Python numbers are
// passed as the numbers they are. A call that raises on the stand-ins would raise in eager code
// too: the statement runs in CPython, which raises it. Shapes follow torch's rules, written per
// family with symbolic sizes (broadcasting is NumPy's).
// Each node's target is a torch callable that computes it ("torch.tanh", "torch.sum"), called
// with the node's arguments as recorded: the eager backend and extern steps replay exactly that.
// Ops with no canonical op of their own are traced as the ops they are made of: relu is
// maximum(x, 0) (NaN stays NaN, as in torch), sigmoid 1 / (1 + exp(-x)), softmax
// exp(x - max) / sum, each node a torch call that computes that part.

/// Whether `name` is one of `names` (the families' name lists).
inline bool name_in(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

/// What torch says a call returns: its dtype and (static) shape, from the stand-in call.
struct Answer {
  rt::DType dtype;
  std::vector<int64_t> shape;
};
/// Calls `fn` (borrowed) on stand-ins of `args`/`kwargs`. Breaks with torch's own exception type
/// when torch refuses the call.
Answer probe(Tracer& tx, PyObject* fn, const std::string& user, const std::vector<VarPtr>& args,
             const KwArgs& kwargs = {});

/// torch.<name>, torch.nn.functional.<name> (borrowed; null when torch has none).
PyObject* torch_attr(const char* name);
PyObject* functional_attr(const char* name);

/// The DType of a torch.dtype constant; a break naming `what` otherwise.
rt::DType dtype_arg(Tracer& tx, const VarPtr& v, const std::string& what);

/// The Python int `v` as a constant.
VarPtr int_const(Tracer& tx, int64_t v);

/// A node computing canonical `op` (attrs given) as the torch call `target`.
VarPtr add_node(Tracer& tx, jit::OpKind op, jit::OpAttrs attrs, const std::string& target,
                const std::vector<VarPtr>& args, const KwArgs& kwargs, jit::TensorMeta meta);

/// Pointwise ops (pointwise.cpp): `name` is torch's ("add", "tanh", "relu", "sigmoid" ...),
/// operators included ("mul" for *). Null when `name` is no pointwise op.
VarPtr pointwise(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
/// A Python operator (`name` is the operator module's: "mul", "truediv", "lt", "neg" ...), typed
/// and replayed as operator.<name>, which takes numbers on either side.
VarPtr operator_pointwise(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args);
bool is_pointwise_name(const std::string& name);
/// Note [Composites in float32]: `body` on args whose first is a half-type tensor converted to
/// float32, its result converted back; `body` on args as they are otherwise.
VarPtr in_opmath(Tracer& tx, const std::vector<VarPtr>& args,
                 const std::function<VarPtr(const std::vector<VarPtr>&)>& body);

/// sum mean amax amin prod max min (full), softmax log_softmax (reductions.cpp).
VarPtr reduction(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
bool is_reduction_name(const std::string& name);

/// Shape ops (shapes.cpp): reshape view permute transpose t unsqueeze squeeze flatten contiguous
/// expand, size/dim/numel.
VarPtr shape_op(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
bool is_shape_name(const std::string& name);

/// matmul mm bmm mv linear addmm baddbmm addmv einsum (products.cpp, Note [Torch products]).
VarPtr product_op(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
bool is_product_name(const std::string& name);

/// zeros ones empty full and their *_like forms (creation.cpp).
VarPtr creation(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
bool is_creation_name(const std::string& name);

/// layer_norm dropout embedding (nn.cpp).
VarPtr nn_function(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
bool is_nn_name(const std::string& name);

/// nn.Module calls (inlined forward) and attributes (parameters, buffers, submodules), or null
/// when `obj` is no module or the tracer's own rule fits (modules.cpp, Note [Torch modules]).
VarPtr module_call(Tracer& tx, const VarPtr& obj, std::vector<VarPtr>& args, KwArgs& kwargs);
VarPtr module_attr(Tracer& tx, const VarPtr& obj, const std::string& name);

/// x[index] with ints, slices (positive steps), None and Ellipsis: NumPy's basic indexing, whose
/// rules torch shares, except that an element is a 0-d tensor (a view) and negative steps raise.
VarPtr torch_getitem(Tracer& tx, const VarPtr& x, const VarPtr& index);
/// Breaks with torch's error for an index torch refuses where NumPy would not (negative steps,
/// index tensors other than int64 and bool).
void check_index(Tracer& tx, const VarPtr& index);

/// In place (writes.cpp, Note [Torch writes]): x.add_(y) & co., and `x op= y` on a tensor.
bool is_inplace_method(const std::string& name);
VarPtr inplace_method(Tracer& tx, const VarPtr& x, const std::string& name, const std::vector<VarPtr>& args,
                      const KwArgs& kwargs);
VarPtr inplace_operator(Tracer& tx, const std::string& op, const VarPtr& x, const VarPtr& y);
/// x[index] = value on a torch tensor.
void torch_setitem(Tracer& tx, const VarPtr& x, const VarPtr& index, const VarPtr& value);

/// cat stack chunk split narrow unbind masked_fill arange tril triu (joins.cpp).
VarPtr join_op(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
bool is_join_name(const std::string& name);

/// conv2d, max_pool2d, avg_pool2d: library steps with exact result shapes (conv.cpp).
VarPtr conv_op(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
bool is_conv_name(const std::string& name);

/// lstm gru rnn_tanh rnn_relu: library steps with exact result shapes (rnn.cpp, Note [Recurrent layers]).
VarPtr rnn_op(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs);
bool is_rnn_name(const std::string& name);

/// x.<name> for attributes (shape, dtype, ndim, T, device).
VarPtr tensor_attr(Tracer& tx, const VarPtr& x, const std::string& name);

}  // namespace framejit::frontend::ops::torch_ops
