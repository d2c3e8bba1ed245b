// registry.cpp — torch's op table (Note [Op tables], Note [Torch ops]): which torch callables,
// Tensor methods and attributes and Python operators on torch tensors it captures.
#include "frontend/ops/torch/registry.h"

#include <unordered_map>
#include <unordered_set>

#include "frontend/cpython/pyref.h"
#include "frontend/interop/torch_array.h"
#include "frontend/ops/numpy/canonical.h"
#include "frontend/ops/torch/torch_ops.h"
#include "frontend/trace/op_table.h"

namespace framejit::frontend::ops::torch_ops {

namespace {

// Every name the families capture, as torch functions (torch.<name>), functional ones
// (torch.nn.functional.<name>) and Tensor methods.
bool family_knows(const std::string& name) {
  return is_pointwise_name(name) || is_reduction_name(name) || is_shape_name(name) || is_product_name(name) || is_creation_name(name) ||
         is_nn_name(name) || is_join_name(name) || is_conv_name(name) || is_rnn_name(name);
}

VarPtr dispatch(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  if (is_reduction_name(name)) return reduction(tx, name, args, kwargs);
  if (is_shape_name(name)) return shape_op(tx, name, args, kwargs);
  if (is_product_name(name)) return product_op(tx, name, args, kwargs);
  if (is_creation_name(name)) return creation(tx, name, args, kwargs);
  if (is_nn_name(name)) return nn_function(tx, name, args, kwargs);
  if (is_join_name(name)) return join_op(tx, name, args, kwargs);
  if (is_conv_name(name)) return conv_op(tx, name, args, kwargs);
  if (is_rnn_name(name)) return rnn_op(tx, name, args, kwargs);
  return pointwise(tx, name, args, kwargs);
}

// The torch functions (torch.<name>) the families capture.
const char* const kCandidates[] = {
    // pointwise
    "neg", "negative", "abs", "absolute", "sqrt", "square", "reciprocal", "exp", "exp2", "expm1", "log", "log2",
    "log10", "log1p", "sin", "cos", "tan", "asin", "arcsin", "acos", "arccos", "atan", "arctan", "sinh", "cosh",
    "tanh", "asinh", "arcsinh", "acosh", "arccosh", "atanh", "arctanh", "erf", "sign", "floor", "ceil", "trunc", "round",
    "isnan", "isinf", "isfinite", "signbit", "logical_not", "bitwise_not", "add", "sub", "subtract", "mul",
    "multiply", "div", "divide", "true_divide", "floor_divide", "remainder", "fmod", "pow", "maximum", "minimum",
    "fmax", "fmin", "atan2", "arctan2", "hypot", "copysign", "eq", "ne", "lt", "le", "gt", "ge", "less", "greater",
    "less_equal", "greater_equal", "not_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and",
    "bitwise_or", "bitwise_xor", "where", "relu", "sigmoid", "clamp", "clip", "clamp_min", "clamp_max", "rsqrt",
    // reductions
    "sum", "mean", "amax", "amin", "prod", "max", "min", "argmax", "argmin", "var", "std", "softmax",
    "log_softmax", "any", "all", "logsumexp", "norm",
    // shapes and products
    "reshape", "permute", "transpose", "t", "unsqueeze", "squeeze", "flatten", "numel", "swapaxes", "matmul", "mm",
    "bmm", "mv", "addmm", "baddbmm", "addmv", "einsum",
    // creation
    "zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like", "randn_like", "rand_like",
    // joins and splits
    "cat", "concat", "stack", "chunk", "split", "narrow", "unbind", "masked_fill", "arange", "tril", "triu",
    // recurrent layers (what nn.LSTM, nn.GRU and nn.RNN call)
    "lstm", "gru", "rnn_tanh", "rnn_relu"};
const char* const kFunctional[] = {"relu",  "sigmoid", "silu",       "gelu",     "softplus", "elu",
                                  "leaky_relu", "hardtanh", "relu6", "softmax", "log_softmax", "linear",
                                  "tanh", "layer_norm", "dropout", "embedding", "normalize", "cross_entropy",
                                  "nll_loss", "binary_cross_entropy", "conv2d", "max_pool2d", "avg_pool2d"};
// Tensor methods with no torch function of the same name.
const char* const kMethodsOnly[] = {"float", "double", "half", "bfloat16", "int", "long", "short", "bool", "byte",
                                    "char", "to", "type_as", "view", "contiguous", "size", "dim", "ndimension",
                                    "expand", "expand_as", "clamp", "clip", "softmax", "log_softmax"};

// Questions torch's Python code asks about how it runs (library modules branch on them): traced
// code is neither TorchScript nor torch.jit tracing, so each is a constant False.
const char* const kNotScripting[][2] = {{"torch.jit", "is_scripting"}, {"torch._jit_internal", "is_scripting"},
                                        {"torch.jit", "is_tracing"}, {"torch._jit_internal", "is_tracing"}};
// The callables this table owns, by identity: filled when torch is first seen.
struct Callables {
  std::unordered_map<PyObject*, std::string> names;  // borrowed: the modules keep them
  std::unordered_set<PyObject*> not_scripting;        // kNotScripting's, borrowed likewise
  bool filled = false;
};

Callables& callables() {
  static Callables c;
  if (!c.filled && torch_handles()) {
    c.filled = true;
    for (const char* n : kCandidates)
      if (PyObject* f = torch_attr(n)) c.names.emplace(f, n);
    for (const char* n : kFunctional)
      if (PyObject* f = functional_attr(n)) c.names.emplace(f, n);
    for (const auto& [module, name] : kNotScripting) {
      OwnedRef m = OwnedRef::steal(PyImport_ImportModule(module));
      OwnedRef f = m ? OwnedRef::steal(PyObject_GetAttrString(m.get(), name)) : OwnedRef();
      if (!f) PyErr_Clear();
      if (f) c.not_scripting.insert(f.get());  // NB: borrowed: the module keeps its function
    }
  }
  return c;
}

// Tensor methods captured (x.<name>(...)); x.<name> for these is a bound method. Only what
// torch.Tensor has: x.gelu() raises in eager code, so it must here too.
bool is_method_name(const std::string& name) {
  if (!family_knows(name)) return false;
  const TorchHandles* h = torch_handles();
  if (!h || !PyObject_HasAttrString(reinterpret_cast<PyObject*>(h->tensor), name.c_str())) return false;
  // torch.where(cond, a, b) (Tensor.where(cond, other) differs); creation and nn have no methods.
  return name != "linear" && name != "where" && !is_creation_name(name) && !is_nn_name(name) && !is_rnn_name(name) &&
         name != "cat" &&
         name != "concat" && name != "stack" && name != "arange";
}

// The operator module's names for Python's binary operators on torch tensors.
bool is_operator_name(const std::string& op) {
  static const char* const kOps[] = {"add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lt", "le",
                                     "eq", "ne", "gt", "ge", "and_", "or_", "xor"};
  for (const char* n : kOps)
    if (op == n) return true;
  return false;
}

class TorchOpTable final : public OpTable {
public:
  bool owns(PyObject* callable) const override {
    if (!torch_handles()) return false;
    return callables().names.count(callable) != 0 || callables().not_scripting.count(callable) != 0;
  }

  VarPtr call_function(Tracer& tx, PyObject* callable, std::vector<VarPtr> args, KwArgs kwargs) override {
    if (callables().not_scripting.count(callable)) return tx.wrap_const(Py_False);
    const std::string& name = callables().names.at(callable);
    claim(tx, "torch." + name);
    return dispatch(tx, name, args, kwargs);
  }

  VarPtr attr(Tracer& tx, const VarPtr& a, const std::string& name) override {
    if (VarPtr v = tensor_attr(tx, a, name)) return v;
    if (is_inplace_method(name)) return std::make_shared<AttrMethodVar>(a, name);
    BREAK_IF(name.size() > 1 && name.back() == '_' && name[name.size() - 2] != '_',
             "torch.Tensor." + name + " (in place) is not captured yet");
    if (is_method_name(name)) return std::make_shared<AttrMethodVar>(a, name);
    graph_break("torch.Tensor attribute '" + name + "' is not captured yet");
  }

  VarPtr call_method(Tracer& tx, const VarPtr& a, const std::string& name, std::vector<VarPtr> args,
                     KwArgs kwargs) override {
    if (is_inplace_method(name)) return inplace_method(tx, a, name, args, kwargs);
    args.insert(args.begin(), a);
    return dispatch(tx, name, args, kwargs);
  }

  VarPtr object_call(Tracer& tx, const VarPtr& obj, std::vector<VarPtr>& args, KwArgs& kwargs) override {
    if (!torch_handles()) return nullptr;
    return module_call(tx, obj, args, kwargs);
  }

  VarPtr object_attr(Tracer& tx, const VarPtr& obj, const std::string& name) override {
    if (!torch_handles()) return nullptr;
    return module_attr(tx, obj, name);
  }

  VarPtr getitem(Tracer& tx, const VarPtr& a, const VarPtr& index) override { return torch_getitem(tx, a, index); }

  void setitem(Tracer& tx, const VarPtr& a, const VarPtr& index, const VarPtr& value) override {
    torch_setitem(tx, a, index, value);
  }

  VarPtr binary(Tracer& tx, const std::string& op, const VarPtr& a, const VarPtr& b, bool inplace) override {
    if (op == "matmul") {
      BREAK_IF(inplace, "in-place matmul (@=)");
      return product_op(tx, "matmul", {a, b}, {});
    }
    BREAK_IF(!is_operator_name(op), "operator " + op + " on torch tensors is not captured yet");
    if (inplace && a->kind == VarKind::Tensor) return inplace_operator(tx, op, a, b);
    return operator_pointwise(tx, op, {a, b});
  }

  VarPtr unary(Tracer& tx, const std::string& op, const VarPtr& a) override {
    if (op == "abs") return pointwise(tx, "abs", {a}, {});
    BREAK_IF(op != "neg" && op != "pos" && op != "invert", "operator " + op + " on a torch tensor");
    return operator_pointwise(tx, op, {a});
  }

  std::vector<std::string> supported() const override {
    std::vector<std::string> out;
    const TorchHandles* h = torch_handles();
    if (!h) return out;  // torch not loaded: nothing of it can be traced
    for (const auto& [module, name] : kNotScripting) out.push_back(std::string(module) + "." + name);
    for (const auto& [f, n] : callables().names)
      out.push_back(functional_attr(n.c_str()) == f ? "torch.nn.functional." + n : "torch." + n);
    auto method = [&](const char* n) {
      if (is_method_name(n) && PyObject_HasAttrString(reinterpret_cast<PyObject*>(h->tensor), n))
        out.push_back(std::string("torch.Tensor.") + n);
    };
    for (const char* n : kCandidates) method(n);
    for (const char* n : kMethodsOnly) method(n);
    for (const char* n : {"shape", "ndim", "dtype", "device", "T", "mT"}) out.push_back(std::string("torch.Tensor.") + n);
    return out;
  }

  int add_call(jit::Graph& graph, const std::string& target, std::vector<jit::Arg> args,
               std::vector<std::pair<std::string, jit::Arg>> kwargs, jit::TensorMeta meta) override {
    // The table's own nodes are added with their canonical op (add_node); what comes here is the
    // tracer's: Python numbers, sizes, and NumPy's generic steps, named as NumPy's table names them.
    // The final write into a torch input is torch's own `dst[...] = src` (Note [Torch writes]).
    if (target == "framejit._C._copy_into")
      return graph.add_call(jit::OpKind::Mutate, {}, target, std::move(args), std::move(kwargs), std::move(meta));
    return add_canonical_call(graph, target, std::move(args), std::move(kwargs), std::move(meta));
  }

private:
  static void claim(Tracer& tx, const std::string& what) {
    ArrayKind& k = tx.out().array_kind;
    BREAK_IF(k != ArrayKind::None && k != ArrayKind::Torch,
             what + " in a graph of " + array_kind_name(k));
    k = ArrayKind::Torch;
  }
};

}  // namespace

bool install_op_table() {
  static TorchOpTable* table = new TorchOpTable();  // NB: immortal, like the tracer's table list
  register_op_table(ArrayKind::Torch, table);
  register_torch_adapter();
  return true;
}

}  // namespace framejit::frontend::ops::torch_ops
