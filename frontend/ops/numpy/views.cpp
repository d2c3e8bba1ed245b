// views.cpp — reshape transpose swapaxes expand_dims squeeze broadcast_to ravel/flatten astype copy
// split and basic indexing: shape bookkeeping on symbolic sizes.
#include <algorithm>
#include <optional>

#include "frontend/ops/numpy/families.h"

namespace framejit::frontend::ops {

namespace {

bool is_str(Tracer& tx, const VarPtr& v, const char* expected) {
  OwnedRef o = tx.python_value(v, "string argument");
  return PyUnicode_Check(o.get()) && PyUnicode_CompareWithASCIIString(o.get(), expected) == 0;
}

// Splits a product into its constant coefficient and its other factors.
void factors(const SymInt& e, int64_t& coeff, std::vector<SymInt>& out) {
  if (e.is_const()) {
    coeff *= e.const_value();
  } else if (e.kind() == SymInt::Kind::Mul) {
    factors(e.lhs(), coeff, out);
    factors(e.rhs(), coeff, out);
  } else {
    out.push_back(e);
  }
}

// Both products with their common factors cancelled: coefficient and the factors left.
struct Cancelled {
  int64_t ca = 1, cb = 1;
  std::vector<SymInt> fa, fb;
};
Cancelled cancel_common_factors(const SymInt& a, const SymInt& b) {
  Cancelled c;
  factors(a, c.ca, c.fa);
  factors(b, c.cb, c.fb);
  for (auto it = c.fb.begin(); it != c.fb.end();) {
    auto match = std::find_if(c.fa.begin(), c.fa.end(), [&](const SymInt& x) { return x.same_as(*it); });
    if (match == c.fa.end()) {
      ++it;
      continue;
    }
    c.fa.erase(match);
    it = c.fb.erase(it);
  }
  return c;
}

// total / known, where NumPy requires an exact division (reshape's -1).
SymInt divide_exact(Tracer& tx, const SymInt& total, const SymInt& known) {
  BREAK_IF(known.is_const() && known.const_value() == 0, "cannot reshape an array with a zero-size dimension and -1");
  const Cancelled c = cancel_common_factors(total, known);
  if (c.fb.empty() && c.cb != 0 && c.ca % c.cb == 0) {
    SymInt r(c.ca / c.cb);
    for (const SymInt& f : c.fa) r = r * f;
    return r;
  }
  std::string why = "reshape at " + tx.location();
  BREAK_IF(!tx.out().decide(mod(total, known), CmpOp::Eq, 0, why), "cannot reshape: sizes do not divide");
  return floordiv(total, known);
}

// a == b for two products of sizes: common factors cancel first, so x.reshape(b, t, h, d // h)
// guards d % h == 0 instead of pinning every size to its value.
bool products_equal(Tracer& tx, const SymInt& a, const SymInt& b, const std::string& why) {
  const Cancelled c = cancel_common_factors(a, b);
  SymInt ra(c.ca), rb(c.cb);
  for (const SymInt& f : c.fa) ra = ra * f;
  for (const SymInt& f : c.fb) rb = rb * f;
  return tx.out().sizes_equal(ra, rb, why);
}

}  // namespace

Shape reshape_shape(Tracer& tx, const Shape& in, Shape req) {
  int infer = -1;
  SymInt known(1);
  for (size_t i = 0; i < req.size(); ++i) {
    if (req[i].is_const() && req[i].const_value() == -1) {
      BREAK_IF(infer >= 0, "can only specify one unknown dimension");
      infer = static_cast<int>(i);
    } else {
      BREAK_IF(req[i].is_const() && req[i].const_value() < 0, "negative dimensions are not allowed");
      known = known * req[i];
    }
  }
  SymInt total = numel(in);
  if (infer >= 0) {
    req[infer] = divide_exact(tx, total, known);
  } else {
    BREAK_IF(!products_equal(tx, total, known, "reshape at " + tx.location()), "cannot reshape array: sizes differ");
  }
  return req;
}

namespace {

// Whether NumPy's array for `v` is C-contiguous on every call: a graph input whose guard pins it.
// The layout NumPy gives a result follows its operands' (K order), which metas do not track, so
// nothing else is sure.
bool surely_c_contiguous(Tracer& tx, const VarPtr& v) {
  if (v->kind != VarKind::Tensor) return false;
  const jit::Node& n = tx.node_of(v);
  return n.kind == jit::NodeKind::Placeholder && n.meta.layout == jit::Layout::Contiguous;
}

VarPtr view_result(Tracer& tx, const VarPtr& self, const std::string& target, const std::vector<VarPtr>& args,
                   const KwArgs& kwargs, Shape shape, bool contiguous_if_input_is, rt::DType dtype) {
  const jit::TensorMeta& m = tx.meta(self);
  jit::TensorMeta out = tensor_meta(dtype, std::move(shape));
  out.layout = contiguous_if_input_is && m.layout == jit::Layout::Contiguous ? jit::Layout::Contiguous
                                                                            : jit::Layout::Strided;
  VarPtr r = tx.add_tensor(target, to_args(tx, args), std::move(out), to_kwargs(tx, kwargs));
  as<TensorVar>(r)->is_view = true;
  if (self->kind == VarKind::Tensor) link_view(r, self, false);
  return r;
}

std::vector<int> parse_axes_list(Tracer& tx, const std::vector<VarPtr>& args, int rank) {
  std::vector<VarPtr> items = args.size() == 1 ? tx.unpack(args[0], "axes") : args;
  std::vector<int> axes;
  for (auto& a : items) axes.push_back(normalize_axis(tx, tx.to_int(a, "axis"), rank));
  std::vector<int> sorted = axes;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < static_cast<int>(sorted.size()); ++i)
    BREAK_IF(sorted[i] != i, "axes don't match array");
  BREAK_IF(static_cast<int>(axes.size()) != rank, "axes don't match array");
  return axes;
}

}  // namespace

VarPtr view_op(Tracer& tx, const std::string& name, const std::string& target, const std::vector<VarPtr>& args,
               const KwArgs& kwargs, bool is_method) {
  BREAK_IF(args.empty(), name + "() missing its array argument");
  const VarPtr& self = args[0];
  BREAK_IF(self->kind != VarKind::Tensor, "numpy." + name + " of a non-array (it would call numpy.asarray)");
  const jit::TensorMeta& m = tx.meta(self);
  const Shape in = m.shape;
  int rank = m.rank();
  std::vector<VarPtr> rest(args.begin() + 1, args.end());

  if (name == "reshape") {
    for (auto& [k, v] : kwargs) {
      BREAK_IF(k != "order" && k != "newshape", "reshape() keyword " + k);
      if (k == "order") BREAK_IF(!is_str(tx, v, "C"), "reshape with order other than 'C'");
      if (k == "newshape") rest.push_back(v);
    }
    BREAK_IF(rest.empty(), "reshape() needs a shape");
    Shape req = is_method ? parse_shape_args(tx, rest) : parse_shape(tx, rest[0]);
    VarPtr r = view_result(tx, self, target, args, kwargs, reshape_shape(tx, in, req), true, m.dtype);
    as<TensorVar>(r)->maybe_copy = !surely_c_contiguous(tx, self);
    return r;
  }
  if (name == "ravel" || name == "flatten") {
    for (auto& [k, v] : kwargs)
      BREAK_IF(k != "order" || !is_str(tx, v, "C"),
               name + "() with order other than 'C'");
    VarPtr r = view_result(tx, self, target, args, kwargs, {numel(in)}, true, m.dtype);
    as<TensorVar>(r)->maybe_copy = !surely_c_contiguous(tx, self);
    if (name == "flatten") {  // flatten always copies
      as<TensorVar>(r)->is_view = false;
      as<TensorVar>(r)->base = nullptr;
    }
    return r;
  }
  if (name == "transpose" || name == "T") {
    std::vector<int> perm;
    std::vector<VarPtr> axes_args = rest;
    for (auto& [k, v] : kwargs) {
      BREAK_IF(k != "axes", "transpose() keyword " + k);
      axes_args = {v};
    }
    bool none = axes_args.empty() ||
                (axes_args.size() == 1 && axes_args[0]->kind == VarKind::Const && const_value(axes_args[0]) == Py_None);
    if (none) {
      for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
    } else {
      perm = parse_axes_list(tx, axes_args, rank);
    }
    Shape out;
    for (int p : perm) out.push_back(in[p]);
    return view_result(tx, self, target, args, kwargs, out, rank <= 1, m.dtype);
  }
  if (name == "swapaxes") {
    auto b = bind_args(name, {"axis1", "axis2"}, rest, kwargs);
    BREAK_IF(!b.count("axis1") || !b.count("axis2"), "swapaxes() needs two axes");
    int a1 = normalize_axis(tx, tx.to_int(b["axis1"], "axis"), rank);
    int a2 = normalize_axis(tx, tx.to_int(b["axis2"], "axis"), rank);
    Shape out = in;
    std::swap(out[a1], out[a2]);
    return view_result(tx, self, target, args, kwargs, out, a1 == a2, m.dtype);
  }
  if (name == "expand_dims") {
    auto b = bind_args(name, {"axis"}, rest, kwargs);
    BREAK_IF(!b.count("axis"), "expand_dims() needs an axis");
    int out_rank = rank;
    std::vector<VarPtr> items = is_seq(b["axis"]) || (is_const(b["axis"]) && PyTuple_Check(const_value(b["axis"])))
                                    ? tx.unpack(b["axis"], "axis")
                                    : std::vector<VarPtr>{b["axis"]};
    out_rank += static_cast<int>(items.size());
    std::vector<bool> is_new(out_rank, false);
    for (auto& a : items) {
      int ax = normalize_axis(tx, tx.to_int(a, "axis"), out_rank);
      BREAK_IF(is_new[ax], Raises{PyExc_ValueError}, "repeated axis");
      is_new[ax] = true;
    }
    Shape out;
    size_t j = 0;
    for (int i = 0; i < out_rank; ++i) out.push_back(is_new[i] ? SymInt(1) : in[j++]);
    return view_result(tx, self, target, args, kwargs, out, true, m.dtype);
  }
  if (name == "squeeze") {
    auto b = bind_args(name, {"axis"}, rest, kwargs);
    auto axes = normalize_axes(tx, b.count("axis") ? b["axis"] : nullptr, rank);
    Shape out;
    for (int d = 0; d < rank; ++d) {
      bool one = in[d].is_const() && in[d].const_value() == 1;
      bool selected = !axes || std::find(axes->begin(), axes->end(), d) != axes->end();
      BREAK_IF(axes && selected && !one, "cannot select an axis to squeeze out which has size not equal to one");
      if (!(selected && one)) out.push_back(in[d]);
    }
    return view_result(tx, self, target, args, kwargs, out, true, m.dtype);
  }
  if (name == "broadcast_to") {
    auto b = bind_args(name, {"shape", "subok"}, rest, kwargs);
    BREAK_IF(!b.count("shape"), "broadcast_to() needs a shape");
    Shape target_shape = parse_shape(tx, b["shape"]);
    BREAK_IF(target_shape.size() < in.size(), "input operand has more dimensions than allowed by the axis remapping");
    size_t off = target_shape.size() - in.size();
    for (size_t i = 0; i < in.size(); ++i) {
      if (in[i].is_const() && in[i].const_value() == 1) continue;
      BREAK_IF(!tx.out().sizes_equal(in[i], target_shape[off + i], "broadcast_to at " + tx.location()), Raises{PyExc_ValueError},
               "operands could not be broadcast to the requested shape");
    }
    return view_result(tx, self, target, args, kwargs, target_shape, false, m.dtype);
  }
  if (name == "astype" || name == "copy") {
    rt::DType dt = m.dtype;
    if (name == "astype") {
      auto b = bind_args(name, {"dtype", "order", "casting", "subok", "copy"}, rest, kwargs);
      BREAK_IF(!b.count("dtype"), "astype() needs a dtype");
      dt = dtype_of(tx, b["dtype"]);
      if (!is_absent(b, "casting"))
        BREAK_IF(!is_str(tx, b["casting"], "unsafe"),
                 "astype() with a casting rule other than 'unsafe'");
      if (!is_absent(b, "copy")) BREAK_IF(!tx.truth(b["copy"], "copy"), "astype(copy=False) may return its input");
    } else {
      auto b = bind_args(name, {"order"}, rest, kwargs);
      (void)b;
    }
    jit::TensorMeta out = tensor_meta(dt, in, m.scalar_object);
    return tx.add_tensor(target, to_args(tx, args), std::move(out), to_kwargs(tx, kwargs));
  }
  if (name == "split") {
    auto b = bind_args(name, {"indices_or_sections", "axis"}, rest, kwargs);
    BREAK_IF(!b.count("indices_or_sections"), "split() needs indices_or_sections");
    int axis = normalize_axis(tx, b.count("axis") ? tx.to_int(b["axis"], "axis") : 0, rank);
    SymInt n = in[axis];
    std::vector<std::pair<SymInt, SymInt>> bounds;
    VarPtr ios = b["indices_or_sections"];
    if (auto sections = tx.as_sym(ios); sections && ios->kind != VarKind::Tuple && ios->kind != VarKind::List &&
                                        !(is_const(ios) && !PyLong_Check(const_value(ios)))) {
      int64_t k = sections->is_const() ? sections->const_value() : tx.to_int(ios, "sections");
      BREAK_IF(k <= 0, "number sections must be larger than 0");
      BREAK_IF(!tx.out().decide(mod(n, SymInt(k)), CmpOp::Eq, 0, "split at " + tx.location()),
               "array split does not result in an equal division");
      SymInt piece = floordiv(n, SymInt(k));
      for (int64_t i = 0; i < k; ++i) bounds.emplace_back(piece * SymInt(i), piece * SymInt(i + 1));
    } else {
      // Explicit split points: pieces [0:i0], [i0:i1], ..., [ik:]; NumPy clamps like slicing.
      std::vector<VarPtr> idx = tx.unpack(ios, "split indices");
      SymInt prev(0);
      for (auto& v : idx) {
        int64_t i = tx.to_int(v, "split index");
        BREAK_IF(i < 0, "negative split indices are not captured yet");
        SymInt cur(i);
        if (!n.is_const() || i > n.const_value()) cur = tx.out().decide(n - SymInt(i), CmpOp::Ge, 0, "split") ? SymInt(i) : n;
        bounds.emplace_back(prev, cur);
        prev = cur;
      }
      bounds.emplace_back(prev, n);
    }
    std::vector<VarPtr> pieces;
    for (auto& [lo, hi] : bounds) {
      std::vector<VarPtr> index_items;
      for (int d = 0; d < axis; ++d)
        index_items.push_back(tx.wrap_const(OwnedRef::steal(PySlice_New(nullptr, nullptr, nullptr)).get()));
      VarPtr lo_v = tx.sym_value(lo), hi_v = tx.sym_value(hi);
      if (lo.is_const() && hi.is_const()) {
        OwnedRef lo_o = tx.python_value(lo_v, "split bound"), hi_o = tx.python_value(hi_v, "split bound");
        index_items.push_back(tx.wrap_const(OwnedRef::steal(PySlice_New(lo_o.get(), hi_o.get(), nullptr)).get()));
      } else {
        index_items.push_back(std::make_shared<SliceVar>(lo_v, hi_v, tx.wrap_const(Py_None)));
      }
      VarPtr index = std::make_shared<SeqVar>(VarKind::Tuple, index_items);
      pieces.push_back(basic_index(tx, self, index));
    }
    return std::make_shared<SeqVar>(VarKind::List, std::move(pieces));
  }
  graph_break("numpy." + name + " is not captured yet");
}

namespace {

// min/max of two sizes, deciding (and guarding) which one it is.
SymInt smin(Tracer& tx, const SymInt& a, const SymInt& b) {
  if (a.is_const() && b.is_const()) return SymInt(std::min(a.const_value(), b.const_value()));
  return tx.out().decide(b - a, CmpOp::Ge, 0, "slice bound at " + tx.location()) ? a : b;
}
SymInt smax(Tracer& tx, const SymInt& a, const SymInt& b) {
  if (a.is_const() && b.is_const()) return SymInt(std::max(a.const_value(), b.const_value()));
  return tx.out().decide(a - b, CmpOp::Ge, 0, "slice bound at " + tx.location()) ? a : b;
}

// Length of x[start:stop:step] along a dim of size n (Python's slice.indices, symbolically).
// A missing bound is nullopt; bounds may be symbolic (decided against the hints, with guards).
SymInt slice_length(Tracer& tx, const SymInt& n, const std::optional<SymInt>& start_b,
                    const std::optional<SymInt>& stop_b, int64_t step) {
  const std::string why = "slice bound at " + tx.location();
  // A full slice keeps the dim as it is, decided or not (an unbacked size has nothing to decide).
  if (!start_b && !stop_b && (step == 1 || step == -1)) return n;
  auto non_negative = [&](const SymInt& v) {
    return v.is_const() ? v.const_value() >= 0 : tx.out().decide(v, CmpOp::Ge, 0, why);
  };
  auto bound = [&](const std::optional<SymInt>& b, bool is_start) -> SymInt {
    if (!b) {
      if (step > 0) return is_start ? SymInt(0) : n;
      return is_start ? n - SymInt(1) : SymInt(-1);
    }
    const SymInt& v = *b;
    if (step > 0) return non_negative(v) ? smin(tx, v, n) : smax(tx, n + v, SymInt(0));
    return non_negative(v) ? smin(tx, v, n - SymInt(1)) : smax(tx, n + v, SymInt(-1));
  };
  SymInt start = bound(start_b, true), stop = bound(stop_b, false);
  SymInt len = step > 0 ? floordiv(stop - start + SymInt(step - 1), SymInt(step))
                        : floordiv(start - stop + SymInt(-step - 1), SymInt(-step));
  return smax(tx, len, SymInt(0));
}

}  // namespace

// Note [Run-time indices]
// An integer index that is a run-time int of the graph (an argument, arithmetic on one) stays
// one: x[i] and x[i, j] = v are views and stores whose offset the run computes (IndexItem::Int
// with a value id, runtime/views.cpp), so a new i does not recompile, as a new size does not. Its
// sign and range are checked by the run: in range, the view applies (a negative i counts from
// the end); out of range, the step runs the library's own call, which raises NumPy's IndexError.
// Before, each index value was a guarded constant: eight values, eight compiles, then CPython.
namespace {

bool run_time_int(Tracer& tx, const VarPtr& v) {
  if (v->kind != VarKind::Scalar) return false;
  const jit::TensorMeta& m = tx.meta(v);
  return m.kind == jit::ValueKind::Scalar && m.dtype == rt::DType::Int64;
}

}  // namespace

VarPtr basic_index(Tracer& tx, const VarPtr& t, const VarPtr& index) {
  const jit::TensorMeta& m = tx.meta(t);
  std::vector<VarPtr> items;
  if (is_seq(index) && index->kind == VarKind::Tuple) {
    items = as<SeqVar>(index)->items;
  } else if (is_const(index) && PyTuple_CheckExact(const_value(index))) {
    items = tx.unpack(index, "index");
  } else {
    items = {index};
  }
  std::vector<OwnedRef> values;
  std::vector<VarPtr> sym_slices;  // per item: the SliceVar when its bounds are symbolic
  int consuming = 0;
  bool has_ellipsis = false;
  for (auto& it : items) {
    if (it->kind == VarKind::Slice) {
      sym_slices.push_back(it);
      values.push_back(OwnedRef::borrow(Py_None));  // placeholder; the SliceVar is used below
      ++consuming;
      continue;
    }
    if (run_time_int(tx, it)) {
      // Note [Run-time indices]
      sym_slices.push_back(it);
      values.push_back(OwnedRef::borrow(Py_None));  // placeholder; the int is used below
      ++consuming;
      continue;
    }
    sym_slices.push_back(nullptr);
    BREAK_IF(it->kind == VarKind::Tensor || it->kind == VarKind::List ||
                 (is_const(it) && (PyList_Check(const_value(it)) || PyTuple_Check(const_value(it)))),
             "advanced (array) indexing is not captured yet");
    OwnedRef v = tx.python_value(it, "index");
    PyObject* o = v.get();
    BREAK_IF(PyBool_Check(o), "boolean scalar indexing is not captured yet");
    if (o == Py_Ellipsis) {
      BREAK_IF(has_ellipsis, "an index can only have a single ellipsis");
      has_ellipsis = true;
    } else if (o != Py_None) {
      BREAK_IF(!PySlice_Check(o) && !PyIndex_Check(o), std::string("index of type ") + Py_TYPE(o)->tp_name);
      ++consuming;
    }
    values.push_back(std::move(v));
  }
  int rank = m.rank();
  BREAK_IF(consuming > rank, "too many indices for array");

  Shape out;
  std::vector<jit::Arg> index_args;
  int dim = 0;
  for (size_t k = 0; k < values.size(); ++k) {
    PyObject* o = values[k].get();
    if (sym_slices[k] && sym_slices[k]->kind != VarKind::Slice) {
      // A run-time int: the run checks it against the dim (apply_view), and out of range the
      // library's own call raises NumPy's IndexError.
      ++dim;
      index_args.push_back(tx.to_arg(sym_slices[k]));
      continue;
    }
    if (sym_slices[k]) {
      auto* sl = as<SliceVar>(sym_slices[k]);
      auto bound_of = [&](const VarPtr& b) -> std::optional<SymInt> {
        if (b->kind == VarKind::Const && const_value(b) == Py_None) return std::nullopt;
        auto s = tx.as_sym(b);
        BREAK_IF(!s, "slice bounds must be integers");
        return s;
      };
      int64_t step = sl->step->kind == VarKind::Const && const_value(sl->step) == Py_None ? 1 : tx.to_int(sl->step, "slice step");
      BREAK_IF(step == 0, "slice step cannot be zero");
      out.push_back(slice_length(tx, m.shape[dim++], bound_of(sl->start), bound_of(sl->stop), step));
      index_args.push_back(tx.to_arg(sym_slices[k]));
      continue;
    }
    if (o == Py_None) {
      out.emplace_back(1);
      index_args.push_back(jit::Arg::none());
    } else if (o == Py_Ellipsis) {
      for (int k = 0; k < rank - consuming; ++k) out.push_back(m.shape[dim++]);
      index_args.push_back(jit::Arg::ellipsis());
    } else if (PySlice_Check(o)) {
      auto* s = reinterpret_cast<PySliceObject*>(o);
      for (PyObject* part : {s->start, s->stop, s->step})
        BREAK_IF(part != Py_None && !PyLong_Check(part), "slice bounds must be integers");
      int64_t step = s->step == Py_None ? 1 : PyLong_AsLongLong(s->step);
      BREAK_IF(step == 0, "slice step cannot be zero");
      auto bound_of = [](PyObject* b) -> std::optional<SymInt> {
        if (b == Py_None) return std::nullopt;
        return SymInt(PyLong_AsLongLong(b));
      };
      out.push_back(slice_length(tx, m.shape[dim++], bound_of(s->start), bound_of(s->stop), step));
      auto part = [](PyObject* p) { return p == Py_None ? jit::Arg::none() : jit::Arg::integer(PyLong_AsLongLong(p)); };
      index_args.push_back(jit::Arg::slice(part(s->start), part(s->stop), part(s->step)));
    } else {
      int64_t i = PyNumber_AsSsize_t(o, PyExc_IndexError);
      if (i == -1 && PyErr_Occurred()) graph_break(fetch_error_text());
      const SymInt& n = m.shape[dim++];
      bool in_bounds = i >= 0 ? tx.out().decide(n - SymInt(i), CmpOp::Gt, 0, "index at " + tx.location())
                              : tx.out().decide(n + SymInt(i), CmpOp::Ge, 0, "index at " + tx.location());
      BREAK_IF(!in_bounds, "index " + std::to_string(i) + " is out of bounds");
      index_args.push_back(jit::Arg::integer(i));
    }
  }
  for (; dim < rank; ++dim) out.push_back(m.shape[dim]);
  bool scalar = out.empty() && !has_ellipsis;
  jit::Arg idx = index_args.size() == 1 && !(is_seq(index) || (is_const(index) && PyTuple_CheckExact(const_value(index))))
                     ? index_args[0]
                     : jit::Arg::tuple(index_args);
  jit::TensorMeta meta = tensor_meta(m.dtype, out, scalar);
  meta.layout = jit::Layout::Strided;
  VarPtr r = tx.add_tensor("getitem", {tx.to_arg(t), idx}, std::move(meta));
  if (!scalar) link_view(r, t, true);
  return r;
}

}  // namespace framejit::frontend::ops
