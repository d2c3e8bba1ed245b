// tiling.cpp — NumPy's tile, repeat and pad traced as index/broadcast/reshape/concatenate views,
// so they fuse with their readers and keep NumPy's exact dtypes (always a new array, as NumPy's).
#include <functional>

#include "frontend/ops/numpy/compose.h"

namespace framejit::frontend::ops {

namespace {

using rt::DType;

constexpr size_t kMaxRepeatPieces = 64;  // per-element repeats unrolled as that many slices

bool is_int_list(const VarPtr& v) {
  return is_seq(v) || (is_const(v) && (PyTuple_Check(const_value(v)) || PyList_Check(const_value(v))));
}

// Ints of an int or a (nested once) sequence of ints, as given.
std::vector<int64_t> ints_of(Tracer& tx, const VarPtr& v, const char* what) {
  std::vector<int64_t> r;
  if (is_int_list(v))
    for (const VarPtr& x : tx.unpack(v, what)) r.push_back(tx.to_int(x, what));
  else
    r.push_back(tx.to_int(v, what));
  return r;
}

// A copy of `a` unless it is surely a new array already (NumPy's tile/repeat/pad never return a view).
VarPtr fresh(Tracer& tx, const VarPtr& a, bool is_new) {
  return is_new ? a : view_op(tx, "copy", "numpy.copy", {a}, {}, false);
}

// `a` with each axis d grown by `reps[d]` (constant or symbolic, >= 0): the repeated block goes
// outside the axis (tile: [a, a, a]) or inside it (repeat: [a0, a0, a1, a1]). As views: a new
// size-1 axis next to d, broadcast to the count, then merged into d.
VarPtr grow(Tracer& tx, const VarPtr& a, const std::vector<SymInt>& reps, bool outside) {
  const Shape in = tx.meta(a).shape;
  VarPtr none = tx.wrap_const(Py_None), all = slice_of(tx, std::nullopt, std::nullopt);
  std::vector<VarPtr> items;
  Shape wide, merged;
  bool any = false;
  for (size_t d = 0; d < in.size(); ++d) {
    const bool one = reps[d].is_const() && reps[d].const_value() == 1;
    if (one) {
      items.push_back(all);
      wide.push_back(in[d]);
      merged.push_back(in[d]);
      continue;
    }
    any = true;
    if (outside) {
      items.insert(items.end(), {none, all});
      wide.insert(wide.end(), {reps[d], in[d]});
    } else {
      items.insert(items.end(), {all, none});
      wide.insert(wide.end(), {in[d], reps[d]});
    }
    merged.push_back(in[d] * reps[d]);
  }
  if (!any) return a;
  VarPtr e = index_with(tx, a, std::move(items));
  e = view_op(tx, "broadcast_to", "numpy.broadcast_to", {e, shape_value(tx, wide)}, {}, false);
  return reshape_to(tx, e, merged);
}

SymInt count_arg(Tracer& tx, const VarPtr& v, const std::string& user) {
  if (auto s = tx.as_sym(v); s && !s->is_const()) {
    BREAK_IF(!tx.out().decide(*s, CmpOp::Ge, 0, user + " count at " + tx.location()), Raises{PyExc_ValueError},
             "negative dimensions are not allowed");
    return *s;
  }
  const int64_t n = tx.to_int(v, user + " count");
  BREAK_IF(n < 0, Raises{PyExc_ValueError}, "negative dimensions are not allowed");
  return SymInt(n);
}

VarPtr tile(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = bind_args("tile", {"A", "reps"}, args, kwargs);
  BREAK_IF(!b.count("A") || !b.count("reps"), Raises{PyExc_TypeError}, "tile() needs A and reps");
  BREAK_IF(b["A"]->kind != VarKind::Tensor, "numpy.tile of a non-array (it would call numpy.array)");
  VarPtr a = b["A"];
  std::vector<SymInt> reps;
  if (is_int_list(b["reps"]))
    for (const VarPtr& r : tx.unpack(b["reps"], "reps")) reps.push_back(count_arg(tx, r, "numpy.tile"));
  else
    reps.push_back(count_arg(tx, b["reps"], "numpy.tile"));
  // NumPy: A gets leading 1s up to len(reps) dims; reps gets leading 1s up to A's rank.
  const int rank = tx.meta(a).rank();
  if (static_cast<int>(reps.size()) > rank)
    a = reshape_to(tx, a, [&] {
      Shape s(reps.size() - rank, SymInt(1));
      for (const SymInt& d : tx.meta(a).shape) s.push_back(d);
      return s;
    }());
  else
    reps.insert(reps.begin(), rank - reps.size(), SymInt(1));
  VarPtr r = grow(tx, a, reps, true);
  return fresh(tx, r, false);
}

VarPtr repeat(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = bind_args("repeat", {"a", "repeats", "axis"}, args, kwargs);
  BREAK_IF(!b.count("a") || !b.count("repeats"), Raises{PyExc_TypeError}, "repeat() needs a and repeats");
  BREAK_IF(b["a"]->kind != VarKind::Tensor, "numpy.repeat of a non-array (it would call numpy.asarray)");
  VarPtr a = b["a"];
  int axis = 0;
  if (is_absent(b, "axis")) {
    a = view_op(tx, "ravel", "numpy.ravel", {a}, {}, false);
  } else {
    BREAK_IF(tx.meta(a).rank() == 0, Raises{PyExc_ValueError}, "axis out of bounds for a 0-d array");
    axis = normalize_axis(tx, tx.to_int(b["axis"], "axis"), tx.meta(a).rank());
  }
  const VarPtr& rv = b["repeats"];
  BREAK_IF(rv->kind == VarKind::Tensor, "numpy.repeat with an array of repeats (the result's length depends on its data)");
  const int rank = tx.meta(a).rank();
  if (!is_int_list(rv)) {
    std::vector<SymInt> reps(static_cast<size_t>(rank), SymInt(1));
    reps[axis] = count_arg(tx, rv, "numpy.repeat");
    return fresh(tx, grow(tx, a, reps, false), false);
  }
  // Per-element counts: known now, so the length is too; each run of one element is a piece.
  std::vector<int64_t> counts = ints_of(tx, rv, "repeats");
  for (int64_t c : counts) BREAK_IF(c < 0, Raises{PyExc_ValueError}, "repeats may not contain negative values.");
  const SymInt len = tx.meta(a).shape[axis];
  if (counts.size() == 1) {
    std::vector<SymInt> reps(static_cast<size_t>(rank), SymInt(1));
    reps[axis] = SymInt(counts[0]);
    return fresh(tx, grow(tx, a, reps, false), false);
  }
  BREAK_IF(!tx.out().sizes_equal(len, SymInt(static_cast<int64_t>(counts.size())), "repeat at " + tx.location()),
           Raises{PyExc_ValueError}, "operands could not be broadcast together");
  BREAK_IF(counts.size() > kMaxRepeatPieces, "numpy.repeat with more than 64 per-element counts");
  std::vector<VarPtr> pieces;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0) continue;
    const int64_t at = static_cast<int64_t>(i);
    VarPtr one = index_axis(tx, a, axis, slice_of(tx, SymInt(at), SymInt(at + 1)));
    std::vector<SymInt> reps(static_cast<size_t>(rank), SymInt(1));
    reps[axis] = SymInt(counts[i]);
    pieces.push_back(grow(tx, one, reps, false));
  }
  if (pieces.empty()) return fresh(tx, index_axis(tx, a, axis, slice_of(tx, SymInt(0), SymInt(0))), false);
  return fresh(tx, concat(tx, pieces, axis), pieces.size() > 1);
}

// NumPy's _as_pairs: a scalar, (before, after), or one pair per axis, broadcast to rank x 2.
template <typename T>
std::vector<std::pair<T, T>> as_pairs(Tracer& tx, const VarPtr& v, int rank, const std::string& what,
                                      const std::function<T(const VarPtr&)>& item) {
  std::vector<std::vector<VarPtr>> rows;
  if (!is_int_list(v)) {
    rows = {{v}};
  } else {
    std::vector<VarPtr> outer = tx.unpack(v, what);
    bool nested = !outer.empty() && is_int_list(outer[0]);
    if (!nested) {
      rows = {outer};
    } else {
      for (const VarPtr& o : outer) {
        BREAK_IF(!is_int_list(o), what + " with a ragged nesting");
        rows.push_back(tx.unpack(o, what));
      }
    }
  }
  const size_t r = rows.size(), c = rows.empty() ? 0 : rows[0].size();
  for (const auto& row : rows) BREAK_IF(row.size() != c, what + " with ragged rows");
  std::vector<std::pair<T, T>> out;
  if (r * c == 1 || (r * c == 2 && !(r == 2 && c == 1))) {
    const VarPtr& lo = r == 1 ? rows[0][0] : rows[0][0];
    const VarPtr& hi = r * c == 1 ? lo : (r == 1 ? rows[0][1] : rows[1][0]);
    T l = item(lo), h = item(hi);
    out.assign(static_cast<size_t>(rank), {l, h});
    return out;
  }
  // (r, c) broadcast to (rank, 2).
  BREAK_IF(!((r == 1 || static_cast<int>(r) == rank) && (c == 1 || c == 2)), Raises{PyExc_ValueError},
           "operands could not be broadcast together with remapped shapes");
  for (int d = 0; d < rank; ++d) {
    const auto& row = rows[r == 1 ? 0 : d];
    out.emplace_back(item(row[0]), item(row[c == 1 ? 0 : 1]));
  }
  return out;
}

VarPtr pad(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = bind_args("pad", {"array", "pad_width", "mode", "constant_values", "end_values", "reflect_type",
                             "stat_length"}, args, kwargs);
  BREAK_IF(!b.count("array") || !b.count("pad_width"), Raises{PyExc_TypeError}, "pad() needs array and pad_width");
  BREAK_IF(b["array"]->kind != VarKind::Tensor, "numpy.pad of a non-array (it would call numpy.asarray)");
  std::string mode = "constant";
  if (b.count("mode")) {
    OwnedRef m = tx.python_value(b["mode"], "mode");
    BREAK_IF(!PyUnicode_Check(m.get()), "numpy.pad with a callable mode");
    mode = PyUnicode_AsUTF8(m.get());
  }
  BREAK_IF(mode != "constant" && mode != "edge", "numpy.pad(mode='" + mode + "') is not captured yet");
  for (const char* k : {"end_values", "reflect_type", "stat_length"})
    BREAK_IF(b.count(k), Raises{PyExc_ValueError}, std::string("unsupported keyword arguments for mode '") + mode + "': " + k);
  BREAK_IF(mode == "edge" && b.count("constant_values"), Raises{PyExc_ValueError},
           "unsupported keyword arguments for mode 'edge'");
  VarPtr a = b["array"];
  const int rank = tx.meta(a).rank();
  const DType dt = tx.meta(a).dtype;
  std::function<int64_t(const VarPtr&)> width = [&](const VarPtr& w) {
    const int64_t n = tx.to_int(w, "pad width");
    BREAK_IF(n < 0, Raises{PyExc_ValueError}, "index can't contain negative values");
    return n;
  };
  auto widths = as_pairs<int64_t>(tx, b["pad_width"], rank, "pad_width", width);
  std::vector<std::pair<VarPtr, VarPtr>> values;
  if (mode == "constant") {
    std::function<VarPtr(const VarPtr&)> number = [&](const VarPtr& v) {
      BREAK_IF(v->kind != VarKind::Const && v->kind != VarKind::Scalar, "numpy.pad with array constant_values");
      if (is_const(v)) {
        PyObject* c = const_value(v);  // borrowed
        BREAK_IF(!PyLong_Check(c) && !PyFloat_Check(c), "numpy.pad with a non-real constant value");
      }
      return v;
    };
    values = b.count("constant_values") ? as_pairs<VarPtr>(tx, b["constant_values"], rank, "constant_values", number)
                                        : std::vector<std::pair<VarPtr, VarPtr>>(rank, {int_const(tx, 0), int_const(tx, 0)});
  }
  bool padded = false;
  // Axis by axis, as NumPy fills them: a later axis's pads span the earlier axes' pads (the corners).
  for (int d = 0; d < rank; ++d) {
    const auto [lo, hi] = widths[d];
    if (lo == 0 && hi == 0) continue;
    const Shape cur = tx.meta(a).shape;
    auto block = [&](int64_t w, bool before) -> VarPtr {
      Shape s = cur;
      s[d] = SymInt(w);
      if (mode == "constant") {
        const VarPtr& v = before ? values[d].first : values[d].second;
        return creation(tx, "full", {shape_value(tx, s), v}, {{"dtype", dtype_const(tx, dt)}});
      }
      BREAK_IF(!tx.out().decide(cur[d], CmpOp::Gt, 0, "pad at " + tx.location()), Raises{PyExc_ValueError},
               "can't extend empty axis using modes other than 'constant' or 'empty'");
      VarPtr edge = before ? index_axis(tx, a, d, slice_of(tx, SymInt(0), SymInt(1)))
                           : index_axis(tx, a, d, slice_of(tx, cur[d] - SymInt(1), std::nullopt));
      return view_op(tx, "broadcast_to", "numpy.broadcast_to", {edge, shape_value(tx, s)}, {}, false);
    };
    std::vector<VarPtr> parts;
    if (lo) parts.push_back(block(lo, true));
    parts.push_back(a);
    if (hi) parts.push_back(block(hi, false));
    a = concat(tx, parts, d);
    padded = true;
  }
  return fresh(tx, a, padded);
}

}  // namespace

VarPtr tiling(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  if (name == "tile") return tile(tx, args, kwargs);
  if (name == "repeat") return repeat(tx, args, kwargs);
  if (name == "pad") return pad(tx, args, kwargs);
  graph_break(BreakKind::Internal, "internal: no tiling function " + name);
}

}  // namespace framejit::frontend::ops
