// views.cpp — view nodes as index remaps (see views.h).
#include "jit/lower/views.h"

#include <algorithm>

namespace framejit::jit {

namespace {

std::optional<IntTerm> int_term(const Graph& graph, const Arg& a) {
  switch (a.kind) {
    case Arg::Kind::Int: return IntTerm{IntTerm::Kind::Const, a.i};
    case Arg::Kind::None: return IntTerm{IntTerm::Kind::None, 0};
    case Arg::Kind::Node: {
      const TensorMeta& m = graph.node(static_cast<int>(a.i)).meta;
      if (m.kind != ValueKind::Scalar || m.dtype != DType::Int64) return std::nullopt;
      return IntTerm{IntTerm::Kind::Node, a.i};
    }
    default: return std::nullopt;  // bools index as masks; floats raise
  }
}

std::optional<int64_t> const_int(const Arg& a) {
  if (a.kind != Arg::Kind::Int) return std::nullopt;
  return a.i;
}

// Constant axes (an int, or a tuple/list of ints), each normalized to [0, rank).
std::optional<std::vector<int>> const_axes(const Arg& a, int rank) {
  std::vector<Arg> items = a.kind == Arg::Kind::Tuple || a.kind == Arg::Kind::List ? a.items : std::vector<Arg>{a};
  std::vector<int> out;
  for (const Arg& x : items) {
    auto v = const_int(x);
    if (!v || *v < -rank || *v >= rank) return std::nullopt;
    out.push_back(static_cast<int>(*v < 0 ? *v + rank : *v));
  }
  return out;
}

std::optional<IndexItem> index_item(const Graph& graph, const Arg& a) {
  IndexItem it;
  switch (a.kind) {
    case Arg::Kind::None: it.kind = IndexItem::Kind::NewAxis; return it;
    case Arg::Kind::Ellipsis: it.kind = IndexItem::Kind::Ellipsis; return it;
    case Arg::Kind::Slice: {
      auto s = int_term(graph, a.items[0]), e = int_term(graph, a.items[1]), st = int_term(graph, a.items[2]);
      if (!s || !e || !st) return std::nullopt;
      it.kind = IndexItem::Kind::Slice;
      it.start = *s;
      it.stop = *e;
      it.step = *st;
      return it;
    }
    default: {
      auto v = int_term(graph, a);
      if (!v || v->kind == IntTerm::Kind::None) return std::nullopt;
      it.kind = IndexItem::Kind::Int;
      it.start = *v;
      return it;
    }
  }
}

IndexItem full_slice() {
  IndexItem it;
  it.kind = IndexItem::Kind::Slice;
  return it;
}

IndexItem new_axis() {
  IndexItem it;
  it.kind = IndexItem::Kind::NewAxis;
  return it;
}

// A shape argument: a tuple/list of ints or int values, or one int.
std::optional<std::vector<IntTerm>> shape_terms(const Graph& graph, const std::vector<Arg>& items) {
  std::vector<IntTerm> out;
  for (const Arg& a : items) {
    auto t = int_term(graph, a);
    if (!t || t->kind == IntTerm::Kind::None) return std::nullopt;
    out.push_back(*t);
  }
  return out;
}

std::vector<Arg> items_of(const Arg& a) {
  return a.kind == Arg::Kind::Tuple || a.kind == Arg::Kind::List ? a.items : std::vector<Arg>{a};
}

const Arg* kwarg(const Node& node, const char* name) {
  for (const auto& [k, v] : node.kwargs)
    if (k == name) return &v;
  return nullptr;
}

// Only the keywords in `allowed`; "order" must be "C".
bool kwargs_ok(const Node& node, std::initializer_list<const char*> allowed) {
  for (const auto& [k, v] : node.kwargs) {
    if (std::none_of(allowed.begin(), allowed.end(), [&](const char* a) { return k == a; })) return false;
    if (k == "order" && (v.kind != Arg::Kind::Str || v.s != "C")) return false;
  }
  return true;
}

}  // namespace

std::optional<ViewOp> lower_view(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call || node.args.empty() || !node.args[0].is_node()) return std::nullopt;
  const TensorMeta& m = node.meta;
  const int source = static_cast<int>(node.args[0].i);
  const TensorMeta& in = graph.node(source).meta;
  if (m.kind != ValueKind::Tensor || m.numpy_scalar || in.kind != ValueKind::Tensor || in.numpy_scalar ||
      in.dtype != m.dtype)
    return std::nullopt;
  const int rank = in.rank();
  const std::string& t = node.target;
  std::vector<Arg> rest(node.args.begin() + 1, node.args.end());
  ViewOp op;
  op.source = source;

  if (t == "method.transpose" || t == "numpy.transpose") {
    if (!kwargs_ok(node, {"axes"})) return std::nullopt;
    if (const Arg* axes = kwarg(node, "axes")) rest = {*axes};
    op.kind = ViewOp::Kind::Permute;
    if (rest.empty() || (rest.size() == 1 && rest[0].kind == Arg::Kind::None)) {
      for (int d = rank - 1; d >= 0; --d) op.perm.push_back(d);
    } else {
      auto axes = const_axes(rest.size() == 1 ? rest[0] : Arg::tuple(rest), rank);
      if (!axes || static_cast<int>(axes->size()) != rank) return std::nullopt;
      op.perm = *axes;
    }
  } else if (t == "method.swapaxes" || t == "numpy.swapaxes") {
    if (!kwargs_ok(node, {"axis1", "axis2"})) return std::nullopt;
    if (const Arg* a = kwarg(node, "axis1")) rest.push_back(*a);
    if (const Arg* a = kwarg(node, "axis2")) rest.push_back(*a);
    if (rest.size() != 2) return std::nullopt;
    auto axes = const_axes(Arg::tuple(rest), rank);
    if (!axes) return std::nullopt;
    op.kind = ViewOp::Kind::Permute;
    for (int d = 0; d < rank; ++d) op.perm.push_back(d);
    std::swap(op.perm[(*axes)[0]], op.perm[(*axes)[1]]);
  } else if (t == "numpy.expand_dims") {
    if (!kwargs_ok(node, {"axis"})) return std::nullopt;
    if (const Arg* a = kwarg(node, "axis")) rest.push_back(*a);
    if (rest.size() != 1) return std::nullopt;
    const int out_rank = m.rank();
    auto axes = const_axes(rest[0], out_rank);
    if (!axes) return std::nullopt;
    op.kind = ViewOp::Kind::Index;
    for (int d = 0; d < out_rank; ++d)
      op.index.push_back(std::count(axes->begin(), axes->end(), d) ? new_axis() : full_slice());
  } else if (t == "method.squeeze" || t == "numpy.squeeze") {
    if (!kwargs_ok(node, {"axis"})) return std::nullopt;
    if (const Arg* a = kwarg(node, "axis")) rest.push_back(*a);
    if (rest.size() > 1) return std::nullopt;
    std::vector<bool> drop(rank, false);
    auto is_one = [&](int d) { return in.shape[d].is_const() && in.shape[d].const_value() == 1; };
    if (rest.empty() || rest[0].kind == Arg::Kind::None) {
      for (int d = 0; d < rank; ++d) drop[d] = is_one(d);
    } else {
      auto axes = const_axes(rest[0], rank);
      if (!axes) return std::nullopt;
      for (int d : *axes) {
        if (!is_one(d)) return std::nullopt;
        drop[d] = true;
      }
    }
    op.kind = ViewOp::Kind::Index;
    for (int d = 0; d < rank; ++d) {
      IndexItem it = full_slice();
      if (drop[d]) it = IndexItem{IndexItem::Kind::Int, {IntTerm::Kind::Const, 0}, {}, {}};
      op.index.push_back(it);
    }
  } else if (t == "getitem") {
    if (node.args.size() != 2 || !node.kwargs.empty()) return std::nullopt;
    op.kind = ViewOp::Kind::Index;
    for (const Arg& a : node.args[1].kind == Arg::Kind::Tuple ? node.args[1].items : std::vector<Arg>{node.args[1]}) {
      auto it = index_item(graph, a);
      if (!it) return std::nullopt;
      op.index.push_back(*it);
    }
  } else if (t == "method.reshape" || t == "numpy.reshape") {
    if (!kwargs_ok(node, {"order", "newshape"})) return std::nullopt;
    if (const Arg* a = kwarg(node, "newshape")) rest.push_back(*a);
    if (rest.empty()) return std::nullopt;
    auto shape = shape_terms(graph, rest.size() == 1 ? items_of(rest[0]) : rest);
    if (!shape) return std::nullopt;
    op.kind = ViewOp::Kind::Reshape;
    op.shape = *shape;
  } else if (t == "method.ravel" || t == "numpy.ravel") {
    if (!kwargs_ok(node, {"order"}) || !rest.empty()) return std::nullopt;
    op.kind = ViewOp::Kind::Reshape;
    op.shape = {IntTerm{IntTerm::Kind::Const, -1}};
  } else if (t == "numpy.broadcast_to") {
    if (!kwargs_ok(node, {"shape"})) return std::nullopt;
    if (const Arg* a = kwarg(node, "shape")) rest.push_back(*a);
    if (rest.size() != 1) return std::nullopt;
    auto shape = shape_terms(graph, items_of(rest[0]));
    if (!shape) return std::nullopt;
    op.kind = ViewOp::Kind::BroadcastTo;
    op.shape = *shape;
  } else {
    return std::nullopt;
  }
  return op;
}

}  // namespace framejit::jit
