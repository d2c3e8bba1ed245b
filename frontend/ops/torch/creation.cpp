// creation.cpp — torch.zeros/ones/empty/full and their *_like forms, as library steps with
// torch's result dtype (Note [Torch ops]).
#include "frontend/cpython/pyref.h"
#include "frontend/interop/torch_array.h"
#include "frontend/ops/torch/torch_ops.h"

namespace framejit::frontend::ops::torch_ops {

bool is_creation_name(const std::string& name) {
  return name_in(name, {"zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like",
                        "randn_like", "rand_like"});
}

VarPtr creation(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "torch." + name;
  if (name == "randn_like" || name == "rand_like") {
    // A draw from torch's generator: a Mutate step (never dropped or merged, in program order),
    // in x's dtype and shape. NB: no probe: a stand-in call would draw numbers too.
    BREAK_IF(!kwargs.empty() || args.size() != 1 || args[0]->kind != VarKind::Tensor, user + " with these arguments");
    const jit::TensorMeta m = tx.meta(args[0]);
    BREAK_IF(!rt::dtype_is_float(m.dtype), Raises{PyExc_RuntimeError}, user + " of a " + std::string(rt::dtype_name(m.dtype)) + " tensor");
    return add_node(tx, jit::OpKind::Mutate, {}, user, {args[0]}, {}, tensor_meta(m.dtype, m.shape));
  }
  const bool like = name.size() > 5 && name.compare(name.size() - 5, 5, "_like") == 0;
  const bool full = name == "full" || name == "full_like";
  std::vector<VarPtr> positional = args;
  KwArgs rest;
  VarPtr dtype;
  for (const auto& [k, v] : kwargs) {
    if (k == "dtype") {
      dtype = v;
    } else if (k == "device" || k == "layout" || k == "requires_grad" || k == "pin_memory" || k == "memory_format") {
      // Only what this build makes anyway: CPU, strided, no grad.
      PyObject* c = is_const(v) ? const_value(v) : nullptr;
      const TorchHandles* h = torch_handles();
      const bool fine = c && (c == Py_None || c == Py_False || (k == "device" && PyObject_RichCompareBool(c, h->cpu, Py_EQ) == 1) ||
                              (k == "device" && PyUnicode_Check(c) && std::string(PyUnicode_AsUTF8(c)) == "cpu") ||
                              (k == "layout" && c == h->strided));
      if (PyErr_Occurred()) PyErr_Clear();
      BREAK_IF(!fine, user + "(" + k + "=...) is not captured");
    } else {
      rest.emplace_back(k, v);
    }
  }
  VarPtr fill;
  VarPtr source;  // *_like: the tensor whose shape (and dtype) it takes
  Shape shape;
  if (like) {
    auto b = bind_args(user, full ? std::vector<std::string>{"input", "fill_value"} : std::vector<std::string>{"input"},
                       positional, rest);
    source = b["input"];
    BREAK_IF(!source || source->kind != VarKind::Tensor, user + " of a non-tensor");
    shape = shape_of(tx, source);
    if (full) fill = b["fill_value"];
  } else if (full) {
    auto b = bind_args(user, {"size", "fill_value"}, positional, rest);
    BREAK_IF(!b.count("size") || !b.count("fill_value"), Raises{PyExc_TypeError}, user + "() needs size and fill_value");
    shape = parse_shape(tx, b["size"]);
    fill = b["fill_value"];
  } else {
    BREAK_IF(!rest.empty(), user + " with keyword " + rest[0].first);
    BREAK_IF(positional.empty(), Raises{PyExc_TypeError}, user + "() needs a size");
    shape = positional.size() == 1 ? parse_shape(tx, positional[0])
                                   : parse_shape(tx, std::make_shared<SeqVar>(VarKind::Tuple, positional));
  }
  if (fill) BREAK_IF(fill->kind != VarKind::Const && fill->kind != VarKind::Scalar, user + " with a fill value that is not a number");
  for (const SymInt& d : shape)
    BREAK_IF(d.is_const() && d.const_value() < 0, Raises{PyExc_RuntimeError}, "Trying to create tensor with negative dimension");
  // torch's result type: asked of the very function on a 0-d stand-in (no memory of the real size).
  OwnedRef empty_size = OwnedRef::steal(PyTuple_New(0));
  std::vector<VarPtr> probe_args;
  if (like) probe_args.push_back(source);
  else probe_args.push_back(tx.wrap_const(empty_size.get()));
  if (fill) probe_args.push_back(fill);
  KwArgs probe_kw;
  if (dtype) probe_kw.emplace_back("dtype", dtype);
  const Answer r = probe(tx, torch_attr(name.c_str()), user, probe_args, probe_kw);
  OwnedRef fill_number = OwnedRef::steal(PyLong_FromLong(name.rfind("ones", 0) == 0 ? 1 : 0));
  VarPtr value = fill ? fill : tx.wrap_const(fill_number.get());
  OwnedRef dtype_name = OwnedRef::steal(PyUnicode_FromString(std::string(rt::dtype_name(r.dtype)).c_str()));
  VarPtr dn = tx.wrap_const(dtype_name.get());
  if (like)
    return add_node(tx, jit::OpKind::Extern, {}, "framejit._externs.torch_full_like", {source, value, dn}, {},
                    tensor_meta(r.dtype, std::move(shape)));
  std::vector<VarPtr> sizes;
  for (const SymInt& d : shape) sizes.push_back(tx.sym_value(d));
  return add_node(tx, jit::OpKind::Extern, {}, "framejit._externs.torch_full",
                  {std::make_shared<SeqVar>(VarKind::Tuple, std::move(sizes)), value, dn}, {},
                  tensor_meta(r.dtype, std::move(shape)));
}

}  // namespace framejit::frontend::ops::torch_ops
