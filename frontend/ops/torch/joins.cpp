// joins.cpp — torch's joins and splits (cat, stack; chunk, split, narrow, unbind as basic-index
// views), masked_fill, and the library steps arange, tril and triu (Note [Torch ops]).
#include <cmath>

#include "frontend/cpython/pyref.h"
#include "frontend/interop/torch_array.h"
#include "frontend/ops/numpy/families.h"
#include "frontend/ops/torch/torch_ops.h"

namespace framejit::frontend::ops::torch_ops {

namespace {


// x[:, ..., start:stop] along `dim` (a view, NumPy's basic indexing).
VarPtr slice_along(Tracer& tx, const VarPtr& x, int dim, const SymInt& start, const SymInt& stop) {
  std::vector<VarPtr> items;
  OwnedRef all = OwnedRef::steal(PySlice_New(nullptr, nullptr, nullptr));
  for (int d = 0; d < dim; ++d) items.push_back(tx.wrap_const(all.get()));
  VarPtr s = tx.sym_value(start), e = tx.sym_value(stop);
  if (is_const(s) && is_const(e)) {
    OwnedRef sl = OwnedRef::steal(PySlice_New(const_value(s), const_value(e), nullptr));
    items.push_back(tx.wrap_const(sl.get()));
  } else {
    BREAK_IF(true, "a split of a torch tensor at run-time offsets is not captured yet");
  }
  return torch_getitem(tx, x, std::make_shared<SeqVar>(VarKind::Tuple, std::move(items)));
}

std::vector<VarPtr> tensors_of(Tracer& tx, const VarPtr& seq, const std::string& user) {
  (void)tx;
  BREAK_IF(!is_seq(seq), user + " of something other than a tuple or list of tensors");
  const auto& items = as<SeqVar>(seq)->items;
  BREAK_IF(items.empty(), Raises{PyExc_RuntimeError}, user + "(): expected a non-empty list of Tensors");
  for (const VarPtr& t : items) BREAK_IF(t->kind != VarKind::Tensor, user + " of a non-tensor");
  return items;
}

}  // namespace

bool is_join_name(const std::string& name) {
  return name_in(name, {"cat", "concat", "stack", "chunk", "split", "narrow", "unbind",
                                       "masked_fill", "arange", "tril", "triu"});
}

VarPtr join_op(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "torch." + name;
  if (name == "cat" || name == "concat" || name == "stack") {
    auto b = bind_args(user, {"tensors", "dim"}, args, kwargs);
    BREAK_IF(!b.count("tensors"), Raises{PyExc_TypeError}, user + "() needs tensors");
    std::vector<VarPtr> ts = tensors_of(tx, b["tensors"], user);
    const Shape first = shape_of(tx, ts[0]);
    const int rank = static_cast<int>(first.size());
    const bool stack = name == "stack";
    const int dim = normalize_axis(tx, b.count("dim") ? tx.to_int(b["dim"], "dim") : 0, stack ? rank + 1 : std::max(rank, 1));
    const Answer r = probe(tx, torch_attr(stack ? "stack" : "cat"), user, {std::make_shared<SeqVar>(VarKind::Tuple, ts)},
                           {{"dim", int_const(tx, dim)}});
    Shape out = first;
    const std::string why = user + " at " + tx.location();
    if (stack) {
      for (const VarPtr& t : ts) {
        const Shape s = shape_of(tx, t);
        bool same = s.size() == first.size();
        for (size_t d = 0; same && d < s.size(); ++d) same = tx.out().sizes_equal(s[d], first[d], why);
        BREAK_IF(!same, Raises{PyExc_RuntimeError}, "stack expects each tensor to be equal size");
      }
      out.insert(out.begin() + dim, SymInt(static_cast<int64_t>(ts.size())));
    } else {
      BREAK_IF(rank == 0, Raises{PyExc_RuntimeError}, "zero-dimensional tensor cannot be concatenated");
      SymInt total(0);
      for (const VarPtr& t : ts) {
        const Shape s = shape_of(tx, t);
        BREAK_IF(s.size() != first.size(), Raises{PyExc_RuntimeError}, "Tensors must have same number of dimensions");
        for (int d = 0; d < rank; ++d)
          if (d != dim)
            BREAK_IF(!tx.out().sizes_equal(s[static_cast<size_t>(d)], first[static_cast<size_t>(d)], why),
                     Raises{PyExc_RuntimeError}, "Sizes of tensors must match except in the concatenated dimension");
        total = total + s[static_cast<size_t>(dim)];
      }
      out[static_cast<size_t>(dim)] = total;
    }
    return add_node(tx, jit::OpKind::Extern, {}, stack ? "torch.stack" : "torch.cat",
                    {std::make_shared<SeqVar>(VarKind::Tuple, ts), int_const(tx, dim)}, {}, tensor_meta(r.dtype, out));
  }
  if (name == "masked_fill") {
    auto b = bind_args(user, {"input", "mask", "value"}, args, kwargs);
    const VarPtr& x = b["input"];
    BREAK_IF(!x || x->kind != VarKind::Tensor || !b.count("mask") || !b.count("value"), user + " with these arguments");
    const VarPtr& mask = b["mask"];
    BREAK_IF(mask->kind != VarKind::Tensor, user + " with a mask that is not a tensor");
    BREAK_IF(tx.meta(mask).dtype != rt::DType::Bool, Raises{PyExc_RuntimeError}, "masked_fill only supports boolean masks");
    VarPtr value = b["value"];
    BREAK_IF(!is_const(value) || !PyNumber_Check(const_value(value)), user + " with a value that is not a constant number");
    // The value takes x's type (masked_fill keeps it); written so, torch.where gives that type too.
    const rt::DType dt = tx.meta(x).dtype;
    if (dt == rt::DType::Bool) {
      value = tx.wrap_const(PyObject_IsTrue(const_value(value)) ? Py_True : Py_False);
    } else if (!rt::dtype_is_float(dt)) {
      OwnedRef i = OwnedRef::steal(PyNumber_Long(const_value(value)));
      if (!i) python_error_break(user + ": ");
      value = tx.wrap_const(i.get());
    }
    const Shape s = broadcast_shapes(tx, {shape_of(tx, x), shape_of(tx, mask)});
    const Shape xs = shape_of(tx, x);
    bool same = s.size() == xs.size();
    for (size_t d = 0; same && d < s.size(); ++d) same = s[d].same_as(xs[d]);
    BREAK_IF(!same, Raises{PyExc_RuntimeError}, "masked_fill: the mask broadcasts beyond the tensor");
    jit::OpAttrs attrs;
    attrs.loop_dtypes = {rt::DType::Bool, dt, dt};
    return add_node(tx, jit::OpKind::Where, std::move(attrs), "torch.where", {mask, value, x}, {}, tensor_meta(dt, xs));
  }
  if (name == "arange") {
    auto b = bind_args(user, {"start", "end", "step", "*", "dtype", "device", "layout", "requires_grad", "out"}, args, kwargs);
    for (const char* k : {"layout", "requires_grad", "out", "device"})
      if (!is_absent(b, k)) BREAK_IF(std::string(k) != "device", user + "(" + k + "=)");
    std::vector<VarPtr> bounds;
    for (const char* k : {"start", "end", "step"})
      if (!is_absent(b, k)) bounds.push_back(b[k]);
    BREAK_IF(bounds.empty(), Raises{PyExc_TypeError}, "arange() needs an end");
    KwArgs probe_kw;
    if (!is_absent(b, "dtype")) probe_kw.emplace_back("dtype", b["dtype"]);
    // The length: ceil((end - start) / step), from the bounds' values (guarded when they vary).
    double v[3] = {0, 0, 1};
    const bool one = bounds.size() == 1;
    for (size_t i = 0; i < bounds.size(); ++i) {
      OwnedRef o = tx.python_value(bounds[i], "arange bound");
      v[one ? 1 : i] = PyFloat_AsDouble(o.get());
      if (PyErr_Occurred()) python_error_break(user + ": ");
    }
    BREAK_IF(v[2] == 0, Raises{PyExc_RuntimeError}, "step must be nonzero");
    const double len = std::ceil((v[1] - v[0]) / v[2]);
    BREAK_IF(!std::isfinite(len) || len < 0, Raises{PyExc_RuntimeError}, "upper bound and larger bound inconsistent with step sign");
    std::vector<VarPtr> probe_bounds;
    for (const VarPtr& x : bounds) probe_bounds.push_back(tx.wrap_const(tx.python_value(x, "arange bound").get()));
    const Answer r = probe(tx, torch_attr("arange"), user, probe_bounds, probe_kw);
    OwnedRef dn = OwnedRef::steal(PyUnicode_FromString(std::string(rt::dtype_name(r.dtype)).c_str()));
    std::vector<VarPtr> call = probe_bounds;
    while (call.size() < 3) call.push_back(call.size() == 1 ? tx.wrap_const(Py_None) : int_const(tx, 1));
    if (one) call = {int_const(tx, 0), probe_bounds[0], int_const(tx, 1)};
    call.push_back(tx.wrap_const(dn.get()));
    return add_node(tx, jit::OpKind::Extern, {}, "framejit._externs.torch_arange", call, {},
                    tensor_meta(r.dtype, {SymInt(static_cast<int64_t>(len))}));
  }
  if (name == "tril" || name == "triu") {
    auto b = bind_args(user, {"input", "diagonal"}, args, kwargs);
    const VarPtr& x = b["input"];
    BREAK_IF(!x || x->kind != VarKind::Tensor, user + " of a non-tensor");
    BREAK_IF(tx.meta(x).rank() < 2, Raises{PyExc_RuntimeError}, user + ": input tensor must have at least 2 dimensions");
    const int64_t k = b.count("diagonal") ? tx.to_int(b["diagonal"], "diagonal") : 0;
    return add_node(tx, jit::OpKind::Extern, {}, user, {x, int_const(tx, k)}, {}, tensor_meta(tx.meta(x).dtype, shape_of(tx, x)));
  }
  // Splits: views of x along dim, returned as a tuple.
  BREAK_IF(args.empty() || args[0]->kind != VarKind::Tensor, user + " of a non-tensor");
  const VarPtr& x = args[0];
  const Shape s = shape_of(tx, x);
  const int rank = static_cast<int>(s.size());
  if (name == "narrow") {
    auto b = bind_args(user, {"input", "dim", "start", "length"}, args, kwargs);
    const int dim = normalize_axis(tx, tx.to_int(b["dim"], "dim"), rank);
    const int64_t start = tx.to_int(b["start"], "start");
    const int64_t length = tx.to_int(b["length"], "length");
    const SymInt n = s[static_cast<size_t>(dim)];
    const std::string why = user + " at " + tx.location();
    BREAK_IF(length < 0, Raises{PyExc_RuntimeError}, "narrow(): length must be non-negative.");
    if (start < 0) {
      // From the end: x[..., start:start + length] (or to the end), which NumPy's slices resolve
      // against the run-time size.
      BREAK_IF(!tx.out().decide(n + SymInt(start), CmpOp::Ge, 0, why), Raises{PyExc_IndexError}, "narrow(): start out of range");
      std::vector<VarPtr> items;
      OwnedRef all = OwnedRef::steal(PySlice_New(nullptr, nullptr, nullptr));
      for (int d = 0; d < dim; ++d) items.push_back(tx.wrap_const(all.get()));
      OwnedRef a = OwnedRef::steal(PyLong_FromLongLong(start));
      OwnedRef e = OwnedRef::steal(start + length < 0 ? PyLong_FromLongLong(start + length) : Py_NewRef(Py_None));
      OwnedRef sl = OwnedRef::steal(PySlice_New(a.get(), e.get(), nullptr));
      BREAK_IF(start + length > 0, Raises{PyExc_RuntimeError}, "start + length exceeds dimension size");
      items.push_back(tx.wrap_const(sl.get()));
      return torch_getitem(tx, x, std::make_shared<SeqVar>(VarKind::Tuple, std::move(items)));
    }
    BREAK_IF(!tx.out().decide(n - SymInt(start + length), CmpOp::Ge, 0, why), Raises{PyExc_RuntimeError},
             "start (" + std::to_string(start) + ") + length (" + std::to_string(length) + ") exceeds dimension size");
    return slice_along(tx, x, dim, SymInt(start), SymInt(start + length));
  }
  std::vector<std::pair<SymInt, SymInt>> pieces;
  int dim = 0;
  if (name == "unbind") {
    auto b = bind_args(user, {"input", "dim"}, args, kwargs);
    dim = normalize_axis(tx, b.count("dim") ? tx.to_int(b["dim"], "dim") : 0, rank);
    const int64_t n = tx.out().specialize(s[static_cast<size_t>(dim)], user + " at " + tx.location());
    std::vector<VarPtr> out;
    OwnedRef all = OwnedRef::steal(PySlice_New(nullptr, nullptr, nullptr));
    for (int64_t i = 0; i < n; ++i) {
      std::vector<VarPtr> items;
      for (int d = 0; d < dim; ++d) items.push_back(tx.wrap_const(all.get()));
      items.push_back(int_const(tx, i));
      out.push_back(torch_getitem(tx, x, std::make_shared<SeqVar>(VarKind::Tuple, std::move(items))));
    }
    return std::make_shared<SeqVar>(VarKind::Tuple, std::move(out));
  }
  if (name == "chunk") {
    auto b = bind_args(user, {"input", "chunks", "dim"}, args, kwargs);
    dim = normalize_axis(tx, b.count("dim") ? tx.to_int(b["dim"], "dim") : 0, rank);
    const int64_t chunks = tx.to_int(b["chunks"], "chunks");
    BREAK_IF(chunks <= 0, Raises{PyExc_RuntimeError}, "chunk expects `chunks` to be greater than 0");
    const int64_t n = tx.out().specialize(s[static_cast<size_t>(dim)], user + " at " + tx.location());
    const int64_t size = (n + chunks - 1) / chunks;
    for (int64_t at = 0; at < n || (n == 0 && at == 0); at += std::max<int64_t>(size, 1)) {
      pieces.emplace_back(SymInt(at), SymInt(std::min(n, at + size)));
      if (n == 0) break;
    }
  } else {  // split
    auto b = bind_args(user, {"input", "split_size_or_sections", "dim"}, args, kwargs);
    dim = normalize_axis(tx, b.count("dim") ? tx.to_int(b["dim"], "dim") : 0, rank);
    const VarPtr& how = b["split_size_or_sections"];
    const SymInt n = s[static_cast<size_t>(dim)];
    if (is_seq(how) || (is_const(how) && (PyTuple_Check(const_value(how)) || PyList_Check(const_value(how))))) {
      SymInt at(0);
      for (const SymInt& len : parse_shape(tx, how)) {
        pieces.emplace_back(at, at + len);
        at = at + len;
      }
      BREAK_IF(!tx.out().sizes_equal(at, n, user + " at " + tx.location()), Raises{PyExc_RuntimeError},
               "split_with_sizes expects split_sizes to sum exactly to the dimension size");
    } else {
      const int64_t size = tx.to_int(how, "split size");
      BREAK_IF(size <= 0, Raises{PyExc_RuntimeError}, "split expects split_size be non-negative");
      const int64_t total = tx.out().specialize(n, user + " at " + tx.location());
      for (int64_t at = 0; at < total; at += size) pieces.emplace_back(SymInt(at), SymInt(std::min(total, at + size)));
      if (total == 0) pieces.emplace_back(SymInt(0), SymInt(0));
    }
  }
  std::vector<VarPtr> out;
  for (const auto& [a, e] : pieces) out.push_back(slice_along(tx, x, dim, a, e));
  return std::make_shared<SeqVar>(VarKind::Tuple, std::move(out));
}

}  // namespace framejit::frontend::ops::torch_ops
