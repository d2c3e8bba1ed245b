// shapes.cpp — torch's views and shape ops (view reshape permute transpose t unsqueeze squeeze
// flatten expand contiguous) and shape queries, as canonical ops (Note [Torch ops]).
#include <algorithm>
#include <numeric>

#include "frontend/cpython/pyref.h"
#include "frontend/interop/torch_array.h"
#include "frontend/ops/numpy/families.h"
#include "frontend/ops/torch/torch_ops.h"

namespace framejit::frontend::ops::torch_ops {

namespace {

using jit::IndexSpecItem;
using jit::OpKind;
using rt::DType;

IndexSpecItem full_slice() {
  return {IndexSpecItem::Kind::Slice, {jit::Arg::none(), jit::Arg::none(), jit::Arg::none()}};
}


// A shape as a tuple Var whose sizes are ints or run-time sizes, for a node's arguments.
VarPtr shape_var(Tracer& tx, const Shape& s) {
  std::vector<VarPtr> items;
  for (const SymInt& d : s) items.push_back(tx.sym_value(d));
  return std::make_shared<SeqVar>(VarKind::Tuple, std::move(items));
}

// A view of x: is_view set and linked to its base, as NumPy's views are (writes come later).
VarPtr view_node(Tracer& tx, OpKind op, jit::OpAttrs attrs, const std::string& target, const VarPtr& x,
                 const std::vector<VarPtr>& rest, Shape shape, bool contiguous) {
  jit::TensorMeta m = tensor_meta(tx.meta(x).dtype, std::move(shape));
  m.layout = contiguous && tx.meta(x).layout == jit::Layout::Contiguous ? jit::Layout::Contiguous : jit::Layout::Strided;
  std::vector<VarPtr> args{x};
  args.insert(args.end(), rest.begin(), rest.end());
  VarPtr r = add_node(tx, op, std::move(attrs), target, args, {}, std::move(m));
  link_view(r, x, false);
  return r;
}

VarPtr permute(Tracer& tx, const VarPtr& x, const std::vector<int>& perm, const std::string& target,
               const std::vector<VarPtr>& rest) {
  const Shape in = shape_of(tx, x);
  Shape out;
  for (int p : perm) out.push_back(in[static_cast<size_t>(p)]);
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int>(i);
  jit::OpAttrs attrs;
  attrs.perm = perm;
  return view_node(tx, OpKind::Transpose, std::move(attrs), target, x, rest, std::move(out), identity);
}

// reshape/view/flatten to `shape` (one -1 allowed), by reshape's shared size rules.
VarPtr reshape(Tracer& tx, const VarPtr& x, Shape shape, const std::string& target) {
  shape = reshape_shape(tx, shape_of(tx, x), std::move(shape));
  jit::OpAttrs attrs;
  VarPtr sv = shape_var(tx, shape);
  for (const VarPtr& d : as<SeqVar>(sv)->items) attrs.shape.push_back(tx.to_arg(d));
  VarPtr r = view_node(tx, OpKind::Reshape, std::move(attrs), target, x, {sv}, std::move(shape), true);
  // A reshape of a non-contiguous tensor copies in torch (view() refuses): sharing unknown here.
  as<TensorVar>(r)->maybe_copy = tx.meta(x).layout != jit::Layout::Contiguous;
  return r;
}

// Whether `out` only splits dims of `in` (each input dim is the product of consecutive output
// dims; size-1 dims come and go): a view torch makes from any strides, so x.view(...) of a
// non-contiguous x (a slice, a transpose's rows) is one.
bool only_splits(Tracer& tx, const Shape& in, const Shape& out, const std::string& why) {
  size_t j = 0;
  auto is_one = [](const SymInt& s) { return s.is_const() && s.const_value() == 1; };
  for (const SymInt& d : in) {
    if (is_one(d)) continue;
    SymInt prod(1);
    bool matched = false;
    while (j < out.size() && !matched) {
      prod = prod * out[j++];
      matched = prod.same_as(d) || tx.out().sizes_equal(prod, d, why);
    }
    if (!matched) return false;
  }
  for (; j < out.size(); ++j)
    if (!is_one(out[j])) return false;
  return true;
}

// Sizes spelled as separate ints or one tuple/list/torch.Size (x.view(2, 3), x.view((2, 3))).
Shape sizes_arg(Tracer& tx, const std::vector<VarPtr>& rest) {
  if (rest.size() == 1 && (is_seq(rest[0]) || (is_const(rest[0]) && PyTuple_Check(const_value(rest[0])))))
    return parse_shape(tx, rest[0]);
  return parse_shape(tx, std::make_shared<SeqVar>(VarKind::Tuple, rest));
}

}  // namespace

bool is_shape_name(const std::string& name) {
  return name_in(name, {"reshape", "view",   "permute", "transpose", "t",     "unsqueeze", "squeeze",
                                       "flatten", "expand", "expand_as", "contiguous",
                                       "size",    "dim",    "numel",   "ndimension", "swapaxes"});
}

VarPtr shape_op(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "torch." + name;
  BREAK_IF(args.empty() || args[0]->kind != VarKind::Tensor, user + " of a non-tensor");
  const VarPtr& x = args[0];
  const Shape in = shape_of(tx, x);
  const int rank = static_cast<int>(in.size());
  std::vector<VarPtr> rest(args.begin() + 1, args.end());
  if (name == "size") {
    auto b = bind_args(user, {"self", "dim"}, args, kwargs);
    if (is_absent(b, "dim")) return tensor_attr(tx, x, "shape");
    const int d = normalize_axis(tx, tx.to_int(b["dim"], "size dim"), rank);
    return tx.sym_value(in[static_cast<size_t>(d)]);
  }
  if (name == "dim" || name == "ndimension") return int_const(tx, rank);
  if (name == "numel") return tx.sym_value(numel(in));
  BREAK_IF(!kwargs.empty() && name != "flatten" && name != "transpose" && name != "squeeze" && name != "unsqueeze",
           user + " with keyword arguments");
  if (name == "contiguous") {
    if (tx.meta(x).layout == jit::Layout::Contiguous) return x;  // torch returns self
    jit::TensorMeta m = tensor_meta(tx.meta(x).dtype, in);
    return add_node(tx, OpKind::Copy, {}, "method.contiguous", {x}, {}, std::move(m));
  }
  if (name == "reshape" || name == "view") {
    BREAK_IF(rest.empty(), Raises{PyExc_TypeError}, user + "() missing the shape");
    BREAK_IF(rest.size() == 1 && is_const(rest[0]) && !PyTuple_Check(const_value(rest[0])) &&
                 !PyLong_Check(const_value(rest[0])),
             user + "(dtype) reinterprets memory (not captured)");
    Shape shape = sizes_arg(tx, rest);
    if (name == "view" && tx.meta(x).layout != jit::Layout::Contiguous) {
      const Shape resolved = reshape_shape(tx, in, shape);
      BREAK_IF(!only_splits(tx, in, resolved, user + " at " + tx.location()),
               user + " that merges dims of a tensor that may not be contiguous");
    }
    return reshape(tx, x, std::move(shape), "torch.reshape");
  }
  if (name == "flatten") {
    auto b = bind_args(user, {"input", "start_dim", "end_dim"}, args, kwargs);
    if (rank == 0) return reshape(tx, x, Shape{SymInt(1)}, "torch.reshape");
    const int s = normalize_axis(tx, b.count("start_dim") ? tx.to_int(b["start_dim"], "start_dim") : 0, rank);
    const int e = normalize_axis(tx, b.count("end_dim") ? tx.to_int(b["end_dim"], "end_dim") : -1, rank);
    BREAK_IF(s > e, Raises{PyExc_RuntimeError}, "flatten() has invalid args: start_dim cannot come after end_dim");
    Shape shape(in.begin(), in.begin() + s);
    SymInt n(1);
    for (int d = s; d <= e; ++d) n = n * in[static_cast<size_t>(d)];
    shape.push_back(n);
    shape.insert(shape.end(), in.begin() + e + 1, in.end());
    if (s == e) return x;  // torch returns self
    return reshape(tx, x, std::move(shape), "torch.reshape");
  }
  if (name == "permute") {
    Shape dims = sizes_arg(tx, rest);
    std::vector<int> perm;
    for (const SymInt& d : dims) {
      BREAK_IF(!d.is_const(), user + " with run-time dims");
      perm.push_back(normalize_axis(tx, d.const_value(), rank));
    }
    std::vector<int> sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    BREAK_IF(static_cast<int>(perm.size()) != rank || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end(),
             Raises{PyExc_RuntimeError}, "permute(): dims do not match the tensor's dims");
    return permute(tx, x, perm, "torch.permute", {std::make_shared<SeqVar>(VarKind::Tuple, std::vector<VarPtr>(
                                                                              [&] {
                                                                                std::vector<VarPtr> v;
                                                                                for (int p : perm) v.push_back(int_const(tx, p));
                                                                                return v;
                                                                              }()))});
  }
  if (name == "transpose" || name == "swapaxes") {
    auto b = bind_args(user, {"input", "dim0", "dim1"}, args, kwargs);
    BREAK_IF(!b.count("dim0") || !b.count("dim1"), Raises{PyExc_TypeError}, user + "() needs two dims");
    const int d0 = normalize_axis(tx, tx.to_int(b["dim0"], "dim0"), std::max(rank, 1));
    const int d1 = normalize_axis(tx, tx.to_int(b["dim1"], "dim1"), std::max(rank, 1));
    if (rank < 2) return x;
    std::vector<int> perm(static_cast<size_t>(rank));
    std::iota(perm.begin(), perm.end(), 0);
    std::swap(perm[static_cast<size_t>(d0)], perm[static_cast<size_t>(d1)]);
    return permute(tx, x, perm, "torch.transpose", {int_const(tx, d0), int_const(tx, d1)});
  }
  if (name == "t") {
    BREAK_IF(rank > 2, Raises{PyExc_RuntimeError}, "t() expects a tensor with <= 2 dimensions");
    if (rank < 2) return x;
    return permute(tx, x, {1, 0}, "torch.t", {});
  }
  if (name == "unsqueeze") {
    auto b = bind_args(user, {"input", "dim"}, args, kwargs);
    BREAK_IF(!b.count("dim"), Raises{PyExc_TypeError}, "unsqueeze() needs dim");
    const int d = normalize_axis(tx, tx.to_int(b["dim"], "dim"), rank + 1);
    jit::OpAttrs attrs;
    Shape out = in;
    out.insert(out.begin() + d, SymInt(1));
    for (int i = 0; i <= rank; ++i)
      attrs.index.push_back(i == d ? IndexSpecItem{IndexSpecItem::Kind::NewAxis, {}} : full_slice());
    return view_node(tx, OpKind::ExpandDims, std::move(attrs), "torch.unsqueeze", x, {int_const(tx, d)}, std::move(out), true);
  }
  if (name == "squeeze") {
    auto b = bind_args(user, {"input", "dim"}, args, kwargs);
    std::vector<bool> drop(static_cast<size_t>(rank), false);
    auto is_one = [&](int d) { return in[static_cast<size_t>(d)].is_const() && in[static_cast<size_t>(d)].const_value() == 1; };
    std::vector<VarPtr> rest_args;
    if (is_absent(b, "dim")) {
      for (int d = 0; d < rank; ++d) drop[static_cast<size_t>(d)] = is_one(d);
    } else {
      const int d = normalize_axis(tx, tx.to_int(b["dim"], "dim"), std::max(rank, 1));
      if (rank > 0) drop[static_cast<size_t>(d)] = is_one(d);  // torch: a dim that is not 1 stays
      rest_args.push_back(int_const(tx, d));
    }
    if (std::none_of(drop.begin(), drop.end(), [](bool v) { return v; })) return x;
    jit::OpAttrs attrs;
    Shape out;
    for (int d = 0; d < rank; ++d) {
      attrs.index.push_back(drop[static_cast<size_t>(d)] ? IndexSpecItem{IndexSpecItem::Kind::Int, {jit::Arg::integer(0)}}
                                                         : full_slice());
      if (!drop[static_cast<size_t>(d)]) out.push_back(in[static_cast<size_t>(d)]);
    }
    return view_node(tx, OpKind::Squeeze, std::move(attrs), "torch.squeeze", x, rest_args, std::move(out), true);
  }
  if (name == "expand" || name == "expand_as") {
    Shape sizes = name == "expand_as" ? (rest.size() == 1 && rest[0]->kind == VarKind::Tensor ? shape_of(tx, rest[0])
                                                                                            : Shape{})
                                      : sizes_arg(tx, rest);
    BREAK_IF(name == "expand_as" && (rest.size() != 1 || rest[0]->kind != VarKind::Tensor), user + " of a non-tensor");
    BREAK_IF(sizes.size() < in.size(), Raises{PyExc_RuntimeError},
             "expand: the number of sizes provided must be greater or equal to the number of dimensions");
    const size_t lead = sizes.size() - in.size();
    for (size_t d = 0; d < in.size(); ++d) {
      SymInt& s = sizes[lead + d];
      if (s.is_const() && s.const_value() == -1) s = in[d];
      else if (!(in[d].is_const() && in[d].const_value() == 1))
        BREAK_IF(!tx.out().sizes_equal(s, in[d], user + " at " + tx.location()), Raises{PyExc_RuntimeError},
                 "expand: the expanded size must match the existing size at a non-singleton dimension");
    }
    jit::OpAttrs attrs;
    VarPtr sv = shape_var(tx, sizes);
    for (const VarPtr& d : as<SeqVar>(sv)->items) attrs.shape.push_back(tx.to_arg(d));
    VarPtr r = view_node(tx, OpKind::BroadcastTo, std::move(attrs), "torch.broadcast_to", x, {sv}, std::move(sizes), false);
    return r;
  }
  graph_break(user + " is not captured yet");
}

void check_index(Tracer& tx, const VarPtr& index) {
  if (is_advanced_index(index)) {
    // Index tensors must be int64 or bool here (torch 1.x refuses int32; a 0-d one is an integer).
    std::vector<VarPtr> items = is_seq(index) ? as<SeqVar>(index)->items : std::vector<VarPtr>{index};
    for (const VarPtr& it : items) {
      if (it->kind != VarKind::Tensor) continue;
      const jit::TensorMeta& m = tx.meta(it);
      BREAK_IF(m.dtype != rt::DType::Int64 && m.dtype != rt::DType::Bool,
               "indexing a torch tensor with a " + std::string(rt::dtype_name(m.dtype)) + " index tensor");
      BREAK_IF(m.rank() == 0, "indexing a torch tensor with a 0-d index tensor");
    }
    return;
  }
  std::vector<VarPtr> items = is_seq(index) ? as<SeqVar>(index)->items : std::vector<VarPtr>{index};
  if (is_const(index) && PyTuple_Check(const_value(index)))
    items.assign(1, index);  // a constant tuple: its slices are checked below as Python objects
  for (const VarPtr& it : items) {
    PyObject* c = is_const(it) ? const_value(it) : nullptr;
    auto negative_step = [](PyObject* s) {
      if (!PySlice_Check(s)) return false;
      PyObject* step = reinterpret_cast<PySliceObject*>(s)->step;  // borrowed
      return step != Py_None && PyLong_Check(step) && PyLong_AsLong(step) <= 0;
    };
    bool bad = c && negative_step(c);
    if (c && PyTuple_Check(c))
      for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c); ++i) bad |= negative_step(PyTuple_GET_ITEM(c, i));
    BREAK_IF(bad, Raises{PyExc_ValueError}, "step must be greater than zero");
  }
}

VarPtr torch_getitem(Tracer& tx, const VarPtr& x, const VarPtr& index) {
  check_index(tx, index);
  // Index tensors and masks follow NumPy's advanced indexing, whose result shapes torch shares
  // (a mask's count is known only at run time); the gather is torch's own getitem.
  if (is_advanced_index(index)) return advanced_index(tx, x, index);
  VarPtr r = basic_index(tx, x, index);
  if (r->kind != VarKind::Tensor) return r;
  jit::Node& n = tx.out().graph.mutable_node(as<TensorVar>(r)->node);
  if (n.meta.scalar_object) {
    // torch: an element is a 0-d tensor that views it.
    n.meta.scalar_object = false;
    link_view(r, x, true);
  }
  return r;
}

VarPtr tensor_attr(Tracer& tx, const VarPtr& x, const std::string& name) {
  const jit::TensorMeta& m = tx.meta(x);
  if (name == "shape") {
    std::vector<VarPtr> items;
    const Shape s = m.shape;  // NB: a copy: sym_value may add nodes
    for (const SymInt& d : s) items.push_back(tx.sym_value(d));
    auto size = std::make_shared<SeqVar>(VarKind::Tuple, std::move(items));
    if (PyObject* t = torch_attr("Size")) size->named_type = OwnedRef::borrow(t);  // torch.Size, a tuple
    return size;
  }
  if (name == "ndim") return int_const(tx, m.rank());
  if (name == "dtype") {
    const TorchHandles* h = torch_handles();
    PyObject* dt = h ? h->dtypes[static_cast<int>(m.dtype)] : nullptr;
    BREAK_IF(!dt, BreakKind::Internal, "no torch dtype for " + std::string(rt::dtype_name(m.dtype)));
    return tx.wrap_const(dt);
  }
  if (name == "device") return tx.wrap_const(torch_handles()->cpu);
  if (name == "is_cuda") return tx.wrap_const(Py_False);
  if (name == "requires_grad") {
    // Inputs that require grad arrive only under no_grad (the builder breaks otherwise); what the
    // graph computes from them does not require grad, as under no_grad in eager code.
    const auto& rg = tx.out().requires_grad_inputs;
    const bool input_rg = x->kind == VarKind::Tensor && std::find(rg.begin(), rg.end(), as<TensorVar>(x)->node) != rg.end();
    return tx.wrap_const(input_rg ? Py_True : Py_False);
  }
  // Facts of every CPU tensor of the strided layout (the only torch values that are arrays here).
  if (name == "is_nested" || name == "is_sparse" || name == "is_quantized" || name == "is_mkldnn" ||
      name == "is_meta" || name == "is_complex")
    return tx.wrap_const(Py_False);
  if (name == "is_cpu") return tx.wrap_const(Py_True);
  if (name == "layout") return tx.wrap_const(torch_handles()->strided);
  if (name == "T" || name == "mT") {
    std::vector<int> perm(static_cast<size_t>(m.rank()));
    std::iota(perm.begin(), perm.end(), 0);
    if (name == "T") std::reverse(perm.begin(), perm.end());
    else if (m.rank() >= 2) std::swap(perm[perm.size() - 1], perm[perm.size() - 2]);
    return permute(tx, x, perm, "torch.permute", {std::make_shared<SeqVar>(VarKind::Tuple, [&] {
                     std::vector<VarPtr> v;
                     for (int p : perm) v.push_back(int_const(tx, p));
                     return v;
                   }())});
  }
  return nullptr;
}

}  // namespace framejit::frontend::ops::torch_ops
