// grids.cpp — numpy.mgrid[...] / numpy.ogrid[...] (NumPy's nd_grid.__getitem__ traced as aranges,
// multiplies and adds, stacked or left sparse) and the numpy.ndarray(shape, dtype) constructor.
// The slice bounds are specialized: they decide the sizes and NumPy's result type.
#include <cmath>
#include <complex>

#include "frontend/ops/numpy/compose.h"

namespace framejit::frontend::ops {

namespace {

using rt::DType;

// A grid bound as NumPy's Python code sees it: a Python int, float or complex (complex steps
// count points, as in mgrid[0:1:5j]).
struct Bound {
  bool present = false;
  bool is_int = false, is_complex = false;
  int64_t i = 0;
  double f = 0;
  std::complex<double> c;
};

Bound bound_of(Tracer& tx, const VarPtr& v, const char* what) {
  Bound b;
  if (!v || is_none(v)) return b;
  OwnedRef o = tx.python_value(v, what);
  PyObject* p = o.get();  // borrowed
  b.present = true;
  if (PyLong_CheckExact(p) || PyBool_Check(p)) {
    b.is_int = true;
    b.i = PyLong_AsLongLong(p);
    if (b.i == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      graph_break("numpy grid bound out of range");
    }
    b.f = static_cast<double>(b.i);
  } else if (PyFloat_CheckExact(p)) {
    b.f = PyFloat_AS_DOUBLE(p);
  } else if (PyComplex_CheckExact(p)) {
    b.is_complex = true;
    b.c = {PyComplex_RealAsDouble(p), PyComplex_ImagAsDouble(p)};
  } else {
    graph_break(std::string("numpy grid bound of type ") + Py_TYPE(p)->tp_name);
  }
  return b;
}

VarPtr number(Tracer& tx, const Bound& b) {
  return b.is_int ? int_const(tx, b.i) : tx.wrap_const(OwnedRef::steal(PyFloat_FromDouble(b.f)).get());
}

struct GridSlice {
  Bound start, stop, step;
};

GridSlice slice_bounds(Tracer& tx, const VarPtr& item) {
  GridSlice s;
  if (item->kind == VarKind::Slice) {
    auto* sv = as<SliceVar>(item);
    s = {bound_of(tx, sv->start, "grid start"), bound_of(tx, sv->stop, "grid stop"), bound_of(tx, sv->step, "grid step")};
  } else {
    BREAK_IF(!is_const(item) || !PySlice_Check(const_value(item)), "numpy.mgrid/ogrid indexed with a non-slice");
    auto* sl = reinterpret_cast<PySliceObject*>(const_value(item));  // borrowed
    auto part = [&](PyObject* o, const char* what) { return bound_of(tx, tx.wrap_const(o), what); };
    s = {part(sl->start, "grid start"), part(sl->stop, "grid stop"), part(sl->step, "grid step")};
  }
  BREAK_IF(s.start.is_complex || s.stop.is_complex, "numpy grid with complex start or stop");
  BREAK_IF(!s.stop.present, "numpy grid slice without a stop");
  if (!s.start.present) {
    s.start.present = s.start.is_int = true;
  }
  return s;
}

VarPtr grid(Tracer& tx, bool sparse, const VarPtr& key) {
  const char* user = sparse ? "numpy.ogrid" : "numpy.mgrid";
  const bool tuple = is_seq(key) || (is_const(key) && PyTuple_Check(const_value(key)));
  if (!tuple) {
    // One slice: arange(start, stop, step), or with a complex step that many points.
    GridSlice s = slice_bounds(tx, key);
    if (!s.step.is_complex) {
      std::vector<VarPtr> a{number(tx, s.start), number(tx, s.stop)};
      if (s.step.present) a.push_back(number(tx, s.step));
      return creation(tx, "arange", a, {});
    }
    const int64_t length = static_cast<int64_t>(std::abs(s.step.c));
    Bound step;
    if (length != 1) step.f = (s.stop.f - s.start.f) / static_cast<double>(length - 1);
    else step.is_int = true, step.i = 1;
    VarPtr y = iota(tx, SymInt(length), DType::Float64);
    return ufunc(tx, "add", {ufunc(tx, "multiply", {y, number(tx, step)}), number(tx, s.start)});
  }
  std::vector<VarPtr> items = tx.unpack(key, "grid key");
  BREAK_IF(items.empty(), user + std::string("[()]"));
  std::vector<GridSlice> slices;
  std::vector<int64_t> sizes;
  bool all_int = true;
  for (const VarPtr& it : items) {
    GridSlice s = slice_bounds(tx, it);
    if (!s.step.present) s.step.present = s.step.is_int = true, s.step.i = 1, s.step.f = 1;
    double n;
    if (s.step.is_complex) {
      n = static_cast<double>(static_cast<int64_t>(std::abs(s.step.c)));
      all_int = false;  // NumPy's result_type sees abs(step), a float
    } else {
      n = std::ceil((s.stop.f - s.start.f) / (s.step.f * 1.0));
      BREAK_IF(!std::isfinite(n), "numpy grid with an infinite length");
    }
    all_int &= s.start.is_int && s.stop.is_int && s.step.is_int;
    BREAK_IF(n < 0, user + std::string(" with a negative length"));
    sizes.push_back(static_cast<int64_t>(n));
    slices.push_back(s);
  }
  const DType typ = all_int ? DType::Int64 : DType::Float64;
  const size_t nd = slices.size();
  std::vector<VarPtr> out;
  VarPtr none = tx.wrap_const(Py_None), all = slice_of(tx, std::nullopt, std::nullopt);
  for (size_t k = 0; k < nd; ++k) {
    const GridSlice& s = slices[k];
    Bound step = s.step;
    if (s.step.is_complex) {
      const int64_t n = static_cast<int64_t>(std::abs(s.step.c));
      step = Bound{};
      if (n != 1) step.f = (s.stop.f - s.start.f) / static_cast<double>(n - 1);
      else step.is_int = true, step.i = 1;
    }
    VarPtr v = iota(tx, SymInt(sizes[k]), typ);
    v = ufunc(tx, "add", {ufunc(tx, "multiply", {v, number(tx, step)}), number(tx, s.start)});
    // Along axis k: x[None, ..., :, ..., None].
    std::vector<VarPtr> idx(nd, none);
    idx[k] = all;
    v = index_with(tx, v, std::move(idx));
    if (!sparse) {
      Shape full;
      for (int64_t n : sizes) full.emplace_back(n);
      v = view_op(tx, "broadcast_to", "numpy.broadcast_to", {v, shape_value(tx, full)}, {}, false);
    }
    out.push_back(v);
  }
  if (sparse) return std::make_shared<SeqVar>(VarKind::List, std::move(out));
  return join(tx, "stack", {std::make_shared<SeqVar>(VarKind::List, std::move(out))}, {});
}

}  // namespace

VarPtr grid_getitem(Tracer& tx, const std::string& name, const VarPtr& key) {
  return grid(tx, name == "ogrid", key);
}

VarPtr ndarray_new(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = bind_args("ndarray", {"shape", "dtype", "buffer", "offset", "strides", "order"}, args, kwargs);
  BREAK_IF(!b.count("shape"), Raises{PyExc_TypeError}, "ndarray() needs a shape");
  for (const char* k : {"buffer", "strides"}) BREAK_IF(!is_absent(b, k), std::string("numpy.ndarray(") + k + "=)");
  BREAK_IF(!is_absent(b, "offset") && tx.to_int(b["offset"], "offset") != 0, "numpy.ndarray(offset=)");
  KwArgs kw;
  if (!is_absent(b, "dtype")) kw.emplace_back("dtype", b["dtype"]);
  if (!is_absent(b, "order")) kw.emplace_back("order", b["order"]);
  // Uninitialized memory, as numpy.empty's.
  return creation(tx, "empty", {b["shape"]}, kw);
}

}  // namespace framejit::frontend::ops
