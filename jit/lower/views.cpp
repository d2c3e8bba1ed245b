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

// One item of the op's index spec as a remap item; its integer parts are run-time ints or constants.
std::optional<IndexItem> index_item(const Graph& graph, const IndexSpecItem& spec) {
  IndexItem it;
  switch (spec.kind) {
    case IndexSpecItem::Kind::NewAxis: it.kind = IndexItem::Kind::NewAxis; return it;
    case IndexSpecItem::Kind::Ellipsis: it.kind = IndexItem::Kind::Ellipsis; return it;
    case IndexSpecItem::Kind::Slice: {
      if (spec.parts.size() != 3) return std::nullopt;
      auto s = int_term(graph, spec.parts[0]), e = int_term(graph, spec.parts[1]), st = int_term(graph, spec.parts[2]);
      if (!s || !e || !st) return std::nullopt;
      it.kind = IndexItem::Kind::Slice;
      it.start = *s;
      it.stop = *e;
      it.step = *st;
      return it;
    }
    case IndexSpecItem::Kind::Int: {
      if (spec.parts.size() != 1) return std::nullopt;
      auto v = int_term(graph, spec.parts[0]);
      if (!v || v->kind == IntTerm::Kind::None) return std::nullopt;
      it.kind = IndexItem::Kind::Int;
      it.start = *v;
      return it;
    }
  }
  return std::nullopt;
}

// A shape: ints or run-time int values.
std::optional<std::vector<IntTerm>> shape_terms(const Graph& graph, const std::vector<Arg>& items) {
  std::vector<IntTerm> out;
  for (const Arg& a : items) {
    auto t = int_term(graph, a);
    if (!t || t->kind == IntTerm::Kind::None) return std::nullopt;
    out.push_back(*t);
  }
  return out;
}

}  // namespace

std::optional<ViewOp> lower_view(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call || !is_view(node.op) || !node.attrs.described || node.args.empty() ||
      !node.args[0].is_node())
    return std::nullopt;
  const TensorMeta& m = node.meta;
  const int source = static_cast<int>(node.args[0].i);
  const TensorMeta& in = graph.node(source).meta;
  if (m.kind != ValueKind::Tensor || m.scalar_object || in.kind != ValueKind::Tensor || in.scalar_object ||
      in.dtype != m.dtype)
    return std::nullopt;
  const int rank = in.rank();
  const OpAttrs& attrs = node.attrs;
  ViewOp op;
  op.source = source;
  switch (node.op) {
    case OpKind::Transpose:
    case OpKind::SwapAxes: {
      if (static_cast<int>(attrs.perm.size()) != rank) return std::nullopt;
      std::vector<bool> seen(rank, false);
      for (int d : attrs.perm) {
        if (d < 0 || d >= rank || seen[d]) return std::nullopt;
        seen[d] = true;
      }
      op.kind = ViewOp::Kind::Permute;
      op.perm = attrs.perm;
      break;
    }
    case OpKind::Squeeze:
      // Only size-1 dims can go: the index drops them with a 0.
      for (int d = 0; d < rank && d < static_cast<int>(attrs.index.size()); ++d)
        if (attrs.index[d].kind == IndexSpecItem::Kind::Int &&
            !(in.shape[d].is_const() && in.shape[d].const_value() == 1))
          return std::nullopt;
      [[fallthrough]];
    case OpKind::ExpandDims:
    case OpKind::GetItem:
      op.kind = ViewOp::Kind::Index;
      for (const IndexSpecItem& spec : attrs.index) {
        auto it = index_item(graph, spec);
        if (!it) return std::nullopt;
        op.index.push_back(*it);
      }
      break;
    case OpKind::Reshape:
    case OpKind::Ravel:
    case OpKind::BroadcastTo: {
      auto shape = shape_terms(graph, attrs.shape);
      if (!shape) return std::nullopt;
      op.kind = node.op == OpKind::BroadcastTo ? ViewOp::Kind::BroadcastTo : ViewOp::Kind::Reshape;
      op.shape = *shape;
      break;
    }
    default: return std::nullopt;
  }
  return op;
}

}  // namespace framejit::jit
