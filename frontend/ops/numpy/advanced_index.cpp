// advanced_index.cpp — NumPy's advanced indexing (index arrays, sequences,
// boolean masks) read and written, and the functions made of it (nonzero,
// one-argument where, argwhere, flatnonzero, take, take_along_axis): result
// shapes by NumPy's rules, computed by NumPy at run time.
#include <algorithm>

#include "frontend/interop/numpy_abi.h"
#include "frontend/ops/numpy/families.h"

namespace framejit::frontend::ops {

// Note [Advanced indexing]
// An index with an integer array, a sequence of ints or a boolean mask in it
// selects a copy, not a view. framejit computes its shape by NumPy's rules and
// leaves the gather to NumPy's getitem as an extern step (operator.getitem with
// the index as written): NumPy's own bounds checks raise its IndexError at run
// time, repeated indices and negative ones mean what they mean in NumPy, and a
// write (`a[idx] = v`, `a[mask] = 0`, `a[idx] += v`) is the index_put step of
// Note [Writes into arrays] with that key, so NumPy's __setitem__ gives the
// last write to a repeated index. Shapes: every advanced item (an index array;
// a k-d mask, which NumPy reads as its k nonzero arrays; and integers, once any
// array is present) broadcasts to one shape B. When the advanced items are
// adjacent in the index, B replaces the dims they index; when a slice, None or
// Ellipsis separates them, B comes first. A mask selects as many elements as it
// holds true values: a size only the run knows, an unbacked symbol (Note
// [Unbacked sizes] in jit/ir/graph.cpp) bound to the output of the first step
// that makes it, and shared by everything counting the same mask node, so
// data[mask] and labels[mask] meet in one kernel. A NumPy integer scalar (an
// element read from an array) indexes as an integer, which NumPy makes a view:
// its result is a view that writes into the base reach (it is made again from
// the new base), while writing through it breaks.

namespace {

std::string describe(Tracer &tx, const VarPtr &t, const char *fallback);

enum class ItemKind : uint8_t { NewAxis, Ellipsis, Slice, Int, ScalarInt, Array, Mask };

struct Item {
  ItemKind kind = ItemKind::Slice;
  VarPtr var;
  Shape shape;            // Array, Mask: the index's shape
  int mask_node = -1;     // Mask: the node whose true elements it counts (-1: a constant mask)
  int64_t mask_count = 0; // constant masks: how many true elements
  jit::Arg arg;           // the item as the key passes it
};

bool is_integer(rt::DType d) { return rt::dtype_is_integer(d); }

// A constant sequence index (list, tuple inside a tuple index, range): its
// shape and kind as NumPy would convert it, checked against the dim it indexes
// when it is an integer array.
Item const_sequence_item(Tracer &tx, PyObject *seq) {
  Item it;
  OwnedRef list = OwnedRef::steal(PySequence_List(seq)); // a range becomes its list
  if (!list)
    python_error_break("index sequence: ");
  OwnedRef arr = OwnedRef::steal(PyObject_CallFunctionObjArgs(numpy_attr("asarray"), list.get(), nullptr));
  if (!arr)
    python_error_break("index sequence: ");
  OwnedRef kind = OwnedRef::steal(
      PyObject_GetAttrString(OwnedRef::steal(PyObject_GetAttrString(arr.get(), "dtype")).get(), "kind"));
  const std::string k = kind && PyUnicode_Check(kind.get()) ? PyUnicode_AsUTF8(kind.get()) : "";
  OwnedRef shape = OwnedRef::steal(PyObject_GetAttrString(arr.get(), "shape"));
  BREAK_IF(!shape, "index sequence without a shape");
  for (Py_ssize_t d = 0; d < PyTuple_GET_SIZE(shape.get()); ++d)
    it.shape.emplace_back(PyLong_AsLongLong(PyTuple_GET_ITEM(shape.get(), d)));
  const bool empty = PyList_GET_SIZE(list.get()) == 0;
  if (k == "b") {
    it.kind = ItemKind::Mask;
    OwnedRef n = OwnedRef::steal(PyObject_CallMethod(arr.get(), "sum", nullptr));
    it.mask_count = n ? PyLong_AsLongLong(n.get()) : 0;
    PyErr_Clear();
  } else {
    // NumPy reads an empty list as an empty integer index.
    BREAK_IF(!empty && k != "i" && k != "u", Raises{PyExc_IndexError},
             "only integers, slices, ellipsis, numpy.newaxis and integer or "
             "boolean arrays are valid indices");
    it.kind = ItemKind::Array;
  }
  it.arg = tx.to_arg(tx.wrap_const(list.get()));
  return it;
}

Item classify(Tracer &tx, const VarPtr &v) {
  Item it;
  it.var = v;
  switch (v->kind) {
  case VarKind::Slice:
    it.kind = ItemKind::Slice;
    it.arg = tx.to_arg(v);
    return it;
  case VarKind::Tensor: {
    const jit::TensorMeta &m = tx.meta(v);
    it.arg = tx.to_arg(v);
    if (m.scalar_object) {
      BREAK_IF(!is_integer(m.dtype), Raises{PyExc_IndexError},
               "only integers, slices, ellipsis, numpy.newaxis and integer or "
               "boolean arrays are valid indices");
      it.kind = ItemKind::ScalarInt;
      return it;
    }
    if (m.dtype == rt::DType::Bool) {
      BREAK_IF(m.rank() == 0, "a 0-d boolean index is not captured yet");
      it.kind = ItemKind::Mask;
      it.shape = m.shape;
      it.mask_node = as<TensorVar>(v)->node;
      return it;
    }
    BREAK_IF(!is_integer(m.dtype), Raises{PyExc_IndexError},
             "arrays used as indices must be of integer (or boolean) type");
    it.kind = ItemKind::Array;
    it.shape = m.shape;
    return it;
  }
  case VarKind::Scalar: {
    auto *s = as<ScalarVar>(v);
    BREAK_IF(!PyLong_CheckExact(s->hint.get()), "an index that is not an integer");
    it.kind = ItemKind::Int;
    it.arg = tx.to_arg(v);
    return it;
  }
  case VarKind::Tuple:
  case VarKind::List: {
    bool all_const = true;
    for (const VarPtr &x : as<SeqVar>(v)->items)
      all_const &= is_const(x) || x->kind == VarKind::Tuple || x->kind == VarKind::List;
    if (all_const) {
      OwnedRef c = tx.python_value(v, "index"); // nested sequences of constants: no guards
      return const_sequence_item(tx, c.get());
    }
    // A sequence of run-time integers ([i, j]): an integer array of its length.
    for (const VarPtr &x : as<SeqVar>(v)->items) {
      const bool int_const = x->kind == VarKind::Const && PyLong_Check(const_value(x)) && !PyBool_Check(const_value(x));
      const bool int_scalar = x->kind == VarKind::Scalar && PyLong_CheckExact(as<ScalarVar>(x)->hint.get());
      BREAK_IF(!int_const && !int_scalar, "an index sequence of other than integers is not captured yet");
    }
    it.kind = ItemKind::Array;
    it.shape = {SymInt(static_cast<int64_t>(as<SeqVar>(v)->items.size()))};
    it.arg = tx.to_arg(v);
    if (it.arg.kind == jit::Arg::Kind::Tuple)
      it.arg.kind = jit::Arg::Kind::List; // a tuple item would be a multi-index
    return it;
  }
  case VarKind::Const: {
    PyObject *o = const_value(v); // borrowed
    if (o == Py_None) {
      it.kind = ItemKind::NewAxis;
    } else if (o == Py_Ellipsis) {
      it.kind = ItemKind::Ellipsis;
    } else if (PySlice_Check(o)) {
      it.kind = ItemKind::Slice;
    } else if (PyBool_Check(o)) {
      graph_break("boolean scalar indexing is not captured yet");
    } else if (PyList_Check(o) || PyTuple_Check(o) || PyRange_Check(o)) {
      return const_sequence_item(tx, o);
    } else if (PyIndex_Check(o)) {
      it.kind = ItemKind::Int;
    } else {
      graph_break(std::string("index of type ") + Py_TYPE(o)->tp_name);
    }
    it.arg = tx.to_arg(v);
    return it;
  }
  default:
    graph_break(std::string("an index that is ") + var_kind_name(v->kind));
  }
}

std::vector<VarPtr> index_items(Tracer &tx, const VarPtr &index, bool &is_tuple) {
  is_tuple = index->kind == VarKind::Tuple || (is_const(index) && PyTuple_CheckExact(const_value(index)));
  if (index->kind == VarKind::Tuple)
    return as<SeqVar>(index)->items;
  if (is_tuple)
    return tx.unpack(index, "index");
  return {index};
}

bool advanced_item(const VarPtr &v) {
  if (v->kind == VarKind::Tensor || v->kind == VarKind::List || v->kind == VarKind::Tuple)
    return true;
  if (!is_const(v))
    return false;
  PyObject *o = const_value(v);
  return PyList_Check(o) || PyTuple_Check(o) || PyRange_Check(o);
}

// The symbol counting mask `node`'s true elements, made (bound to dim `dim` of
// the node about to be added) when none exists yet.
SymInt count_of(Tracer &tx, int mask_node, const std::string &description) {
  OutputGraph &out = tx.out();
  const int next = static_cast<int>(out.graph.nodes().size());
  int s = out.count_symbol(mask_node);
  if (s < 0) {
    s = out.new_unbacked_symbol(next, 0, description,
                                [](const std::string &reason) { graph_break(BreakKind::DataDependent, reason); });
    out.set_count_symbol(mask_node, s);
  } else if (out.graph.symbols()[s].placeholder < 0) {
    out.graph.symbols()[s].placeholder = next; // bound to nothing yet (a write's region counted it)
  }
  return SymInt::symbol(s);
}

// Binds the unbacked symbols made for the node about to be added (count_of's
// guess at its index) to the dim of `shape` that holds them, once the node
// exists.
void bind_new_symbols(Tracer &tx, int node, const Shape &shape) {
  auto &symbols = tx.out().root_graph().symbols();
  for (jit::SymbolInfo &info : symbols) {
    if (!info.unbacked || info.placeholder != node)
      continue;
    info.dim = -1;
    for (size_t d = 0; d < shape.size(); ++d) {
      const SymInt &e = shape[d];
      if (e.kind() == SymInt::Kind::Symbol && &info == &symbols[e.symbol_id()])
        info.dim = static_cast<int>(d);
    }
    // Not in the output's shape (an empty broadcast): nothing can read it, so
    // it binds to nothing.
    if (info.dim < 0)
      info.placeholder = -1;
  }
}

struct Selection {
  jit::Arg key;
  jit::TensorMeta meta;
  bool view = false; // only NumPy integer scalars index: NumPy makes a view
};

// The key and result meta of t[index]; `what` names t[index] in messages.
Selection select(Tracer &tx, const VarPtr &t, const VarPtr &index, const std::string &what) {
  const jit::TensorMeta m = tx.meta(t);
  BREAK_IF(m.scalar_object, "indexing a NumPy scalar");
  bool is_tuple = false;
  std::vector<Item> items;
  for (const VarPtr &v : index_items(tx, index, is_tuple))
    items.push_back(classify(tx, v));

  bool arrays = false;
  int consuming = 0, ellipses = 0;
  for (const Item &it : items) {
    arrays |= it.kind == ItemKind::Array || it.kind == ItemKind::Mask;
    if (it.kind == ItemKind::Mask)
      consuming += static_cast<int>(it.shape.size());
    else if (it.kind != ItemKind::NewAxis && it.kind != ItemKind::Ellipsis)
      ++consuming;
    ellipses += it.kind == ItemKind::Ellipsis;
  }
  BREAK_IF(ellipses > 1, Raises{PyExc_IndexError}, "an index can only have a single ellipsis ('...')");
  BREAK_IF(consuming > m.rank(), Raises{PyExc_IndexError}, "too many indices for array");
  auto is_advanced = [&](const Item &it) {
    return it.kind == ItemKind::Array || it.kind == ItemKind::Mask || it.kind == ItemKind::ScalarInt ||
           (arrays && it.kind == ItemKind::Int);
  };

  // The basic part: every advanced item becomes full slices over the dims it
  // indexes, so basic indexing checks and sizes the rest (its node is dead once
  // read).
  std::vector<VarPtr> basic;
  std::vector<std::pair<int, int>> spans; // per item: its dims in the basic result [first, count)
  int dim_out = 0;
  const int ellipsis_dims = m.rank() - consuming;
  PyObject *full = PySlice_New(nullptr, nullptr, nullptr); // new ref
  OwnedRef full_ref = OwnedRef::steal(full);
  for (const Item &it : items) {
    int count = 0;
    if (is_advanced(it)) {
      const int k = it.kind == ItemKind::Mask ? static_cast<int>(it.shape.size()) : 1;
      for (int j = 0; j < k; ++j)
        basic.push_back(tx.wrap_const(full));
      count = k;
    } else {
      basic.push_back(it.var);
      count = it.kind == ItemKind::Int ? 0 : it.kind == ItemKind::Ellipsis ? ellipsis_dims : 1;
    }
    spans.emplace_back(dim_out, count);
    dim_out += count;
  }
  Shape view_shape;
  {
    VarPtr view = basic_index(tx, t, std::make_shared<SeqVar>(VarKind::Tuple, basic));
    view_shape = tx.meta(view).shape;
  }

  // The advanced items' shapes, broadcast; masks must match the dims they
  // cover.
  std::vector<Shape> shapes;
  std::vector<int> positions;
  for (size_t i = 0; i < items.size(); ++i) {
    const Item &it = items[i];
    if (!is_advanced(it))
      continue;
    positions.push_back(static_cast<int>(i));
    if (it.kind == ItemKind::Mask) {
      for (size_t j = 0; j < it.shape.size(); ++j) {
        const SymInt &n = view_shape[spans[i].first + j];
        BREAK_IF(!tx.out().sizes_equal(n, it.shape[j], "boolean index at " + tx.location()), Raises{PyExc_IndexError},
                 "boolean index did not match indexed array");
      }
      shapes.push_back({it.mask_node < 0 ? SymInt(it.mask_count) : count_of(tx, it.mask_node, what)});
    } else if (it.kind == ItemKind::Array) {
      shapes.push_back(it.shape);
    } else {
      shapes.push_back({});
    }
  }
  const Shape b = broadcast_shapes(tx, shapes);
  bool adjacent = true;
  for (size_t i = 1; i < positions.size(); ++i)
    adjacent &= positions[i] == positions[i - 1] + 1;

  Shape out;
  bool inserted = false;
  for (size_t i = 0; i < items.size(); ++i) {
    if (is_advanced(items[i])) {
      if (!inserted && adjacent)
        out.insert(out.end(), b.begin(), b.end());
      inserted = true;
      continue;
    }
    for (int d = 0; d < spans[i].second; ++d)
      out.push_back(view_shape[spans[i].first + d]);
  }
  for (int d = dim_out; d < static_cast<int>(view_shape.size()); ++d)
    out.push_back(view_shape[d]);
  if (!adjacent)
    out.insert(out.begin(), b.begin(), b.end());

  Selection s;
  std::vector<jit::Arg> key;
  for (const Item &it : items)
    key.push_back(it.arg);
  s.key = is_tuple ? jit::Arg::tuple(std::move(key)) : key.at(0);
  s.meta = tensor_meta(m.dtype, out, out.empty() && ellipses == 0);
  s.meta.layout = jit::Layout::Strided; // NumPy keeps the source's order around
                                        // the gathered dims
  s.view = !arrays && !s.meta.scalar_object;
  return s;
}

// A node made by `target` whose shape may hold unbacked symbols made for it.
VarPtr add_counted(Tracer &tx, const std::string &target, std::vector<jit::Arg> args, jit::TensorMeta meta,
                   std::vector<std::pair<std::string, jit::Arg>> kwargs = {}) {
  const int expected = static_cast<int>(tx.out().graph.nodes().size());
  Shape shape = meta.shape;
  VarPtr r = tx.add_tensor(target, std::move(args), std::move(meta), std::move(kwargs));
  BREAK_IF(as<TensorVar>(r)->node != expected, BreakKind::Internal, "internal: an indexing node was not added last");
  bind_new_symbols(tx, expected, shape);
  return r;
}

// How messages name an array: its source (L['x']) or its graph node.
std::string describe(Tracer &tx, const VarPtr &t, const char *fallback) {
  if (t->source)
    return t->source->to_string();
  if (t->kind == VarKind::Tensor)
    return tx.node_of(t).name;
  return fallback;
}

} // namespace

bool is_advanced_index(const VarPtr &index) {
  if (advanced_item(index)) {
    // A constant tuple is a multi-index, not a sequence.
    if (!(is_const(index) && PyTuple_CheckExact(const_value(index))) && index->kind != VarKind::Tuple)
      return true;
  }
  std::vector<VarPtr> items;
  if (index->kind == VarKind::Tuple)
    items = as<SeqVar>(index)->items;
  else if (is_const(index) && PyTuple_CheckExact(const_value(index))) {
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(const_value(index)); ++i) {
      PyObject *o = PyTuple_GET_ITEM(const_value(index), i);
      if (PyList_Check(o) || PyTuple_Check(o) || PyRange_Check(o))
        return true;
    }
    return false;
  }
  for (const VarPtr &v : items)
    if (advanced_item(v))
      return true;
  return false;
}

VarPtr advanced_index(Tracer &tx, const VarPtr &t, const VarPtr &index) {
  const std::string what = describe(tx, t, "x") + "[mask]";
  Selection s = select(tx, t, index, what);
  VarPtr r = add_counted(tx, "operator.getitem", {tx.to_arg(t), s.key}, s.meta);
  if (s.view) {
    // Note [Advanced indexing]: NumPy's view through an integer scalar, made
    // again after writes.
    link_view(r, t, false);
  }
  return r;
}

void advanced_setitem_key(Tracer &tx, const VarPtr &t, const VarPtr &index, jit::Arg &key, jit::TensorMeta &region) {
  // The region's node is never made: index_put takes the key; its symbols bind
  // to nothing.
  const int next = static_cast<int>(tx.out().graph.nodes().size());
  Selection s = select(tx, t, index, describe(tx, t, "x") + "[mask]");
  auto &symbols = tx.out().root_graph().symbols();
  for (jit::SymbolInfo &info : symbols)
    if (info.unbacked && info.placeholder == next)
      info.placeholder = -1;
  key = std::move(s.key);
  region = std::move(s.meta);
}

namespace {

// The indices of a's true elements as (count, rank) int64: numpy.argwhere(a).
VarPtr argwhere_of(Tracer &tx, const VarPtr &a, const std::string &target) {
  const jit::TensorMeta m = tx.meta(a);
  BREAK_IF(m.rank() == 0, "nonzero of a 0-d array");
  SymInt n = count_of(tx, as<TensorVar>(a)->node, "numpy.nonzero(" + describe(tx, a, "x") + ")");
  return add_counted(tx, target, {tx.to_arg(a)}, tensor_meta(rt::DType::Int64, {n, SymInt(m.rank())}));
}

VarPtr as_array(Tracer &tx, const VarPtr &v, const std::string &name) {
  BREAK_IF(v->kind != VarKind::Tensor || tx.meta(v).scalar_object,
           "numpy." + name + " of a non-array (it would call numpy.asarray)");
  return v;
}

} // namespace

VarPtr indexing(Tracer &tx, const std::string &name, const std::vector<VarPtr> &args, const KwArgs &kwargs) {
  if (name == "nonzero" || name == "where") {
    BREAK_IF(args.size() != 1 || !kwargs.empty(), "numpy." + name + " with other than one array argument");
    VarPtr a = as_array(tx, args[0], name);
    const int rank = tx.meta(a).rank();
    BREAK_IF(rank == 0, "nonzero of a 0-d array");
    if (rank == 1) {
      SymInt n = count_of(tx, as<TensorVar>(a)->node, "numpy.nonzero(" + describe(tx, a, "x") + ")");
      VarPtr r = add_counted(tx, "numpy.flatnonzero", {tx.to_arg(a)}, tensor_meta(rt::DType::Int64, {n}));
      return std::make_shared<SeqVar>(VarKind::Tuple, std::vector<VarPtr>{r});
    }
    // NumPy's nonzero is argwhere's columns (views of one (count, rank) array),
    // as here.
    VarPtr w = argwhere_of(tx, a, "numpy.argwhere");
    std::vector<VarPtr> cols;
    OwnedRef full = OwnedRef::steal(PySlice_New(nullptr, nullptr, nullptr));
    for (int d = 0; d < rank; ++d) {
      OwnedRef i = OwnedRef::steal(PyLong_FromLong(d));
      cols.push_back(
          basic_index(tx, w,
                      std::make_shared<SeqVar>(
                          VarKind::Tuple, std::vector<VarPtr>{tx.wrap_const(full.get()), tx.wrap_const(i.get())})));
    }
    return std::make_shared<SeqVar>(VarKind::Tuple, std::move(cols));
  }
  if (name == "argwhere") {
    BREAK_IF(args.size() != 1 || !kwargs.empty(), "numpy.argwhere with other than one array argument");
    return argwhere_of(tx, as_array(tx, args[0], name), "numpy.argwhere");
  }
  if (name == "flatnonzero") {
    BREAK_IF(args.size() != 1 || !kwargs.empty(), "numpy.flatnonzero with other than one array argument");
    VarPtr a = as_array(tx, args[0], name);
    SymInt n = count_of(tx, as<TensorVar>(a)->node, "numpy.flatnonzero(" + describe(tx, a, "x") + ")");
    return add_counted(tx, "numpy.flatnonzero", {tx.to_arg(a)}, tensor_meta(rt::DType::Int64, {n}));
  }
  if (name == "take") {
    auto b = bind_args(name, {"a", "indices", "axis", "out", "mode"}, args, kwargs);
    BREAK_IF(!b.count("a") || !b.count("indices"), "take() needs an array and indices");
    BREAK_IF(!is_absent(b, "out"), "take(out=)");
    if (!is_absent(b, "mode")) {
      OwnedRef mode = tx.python_value(b["mode"], "take mode");
      BREAK_IF(!PyUnicode_Check(mode.get()) || PyUnicode_CompareWithASCIIString(mode.get(), "raise") != 0,
               "take() with a mode other than 'raise'");
    }
    VarPtr a = as_array(tx, b["a"], name);
    const jit::TensorMeta m = tx.meta(a);
    Item idx = classify(tx, b["indices"]);
    BREAK_IF(idx.kind != ItemKind::Array && idx.kind != ItemKind::Int && idx.kind != ItemKind::ScalarInt,
             "take() with indices other than integers");
    Shape out;
    if (is_absent(b, "axis")) {
      out = idx.shape;
    } else {
      const int axis = normalize_axis(tx, tx.to_int(b["axis"], "axis"), m.rank());
      out.assign(m.shape.begin(), m.shape.begin() + axis);
      out.insert(out.end(), idx.shape.begin(), idx.shape.end());
      out.insert(out.end(), m.shape.begin() + axis + 1, m.shape.end());
    }
    std::vector<jit::Arg> call_args = {tx.to_arg(a), idx.arg};
    std::vector<std::pair<std::string, jit::Arg>> kw;
    if (!is_absent(b, "axis"))
      kw.emplace_back("axis", tx.to_arg(b["axis"]));
    jit::TensorMeta meta = tensor_meta(m.dtype, out, out.empty());
    meta.layout = jit::Layout::Strided;
    return tx.add_tensor("numpy.take", std::move(call_args), std::move(meta), std::move(kw));
  }
  if (name == "take_along_axis") {
    auto b = bind_args(name, {"arr", "indices", "axis"}, args, kwargs);
    BREAK_IF(!b.count("arr") || !b.count("indices") || !b.count("axis"), "take_along_axis() needs arr, indices, axis");
    VarPtr a = as_array(tx, b["arr"], name);
    VarPtr i = as_array(tx, b["indices"], name);
    const jit::TensorMeta m = tx.meta(a);
    const jit::TensorMeta im = tx.meta(i);
    BREAK_IF(!is_integer(im.dtype), Raises{PyExc_IndexError}, "`indices` must be an integer array");
    Shape out;
    if (is_absent(b, "axis")) {
      BREAK_IF(im.rank() != 1, Raises{PyExc_ValueError}, "when axis=None, `indices` must have a single dimension.");
      out = im.shape;
    } else {
      BREAK_IF(im.rank() != m.rank(), Raises{PyExc_ValueError},
               "`indices` and `arr` must have the same number of dimensions");
      const int axis = normalize_axis(tx, tx.to_int(b["axis"], "axis"), m.rank());
      Shape sa = m.shape, si = im.shape;
      sa[axis] = SymInt(1);
      si[axis] = SymInt(1);
      out = broadcast_shapes(tx, {sa, si});
      out[axis] = im.shape[axis];
    }
    std::vector<jit::Arg> call_args = {tx.to_arg(a), tx.to_arg(i), tx.to_arg(b["axis"])};
    jit::TensorMeta meta = tensor_meta(m.dtype, out);
    meta.layout = jit::Layout::Strided;
    return tx.add_tensor("numpy.take_along_axis", std::move(call_args), std::move(meta));
  }
  graph_break("numpy." + name + " is not captured yet");
}

} // namespace framejit::frontend::ops
