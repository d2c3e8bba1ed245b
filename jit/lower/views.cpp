// views.cpp — view nodes as index remaps (see views.h).
#include "jit/lower/views.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

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
  // An element read (x[i, j]) hands back the library's scalar, a copy: it folds like a view
  // because its readers run before anything overwrites the element (Note [Scalar steps]).
  const bool element = m.scalar_object && node.op == OpKind::GetItem && m.rank() == 0;
  if (m.kind != ValueKind::Tensor || (m.scalar_object && !element) || in.kind != ValueKind::Tensor ||
      in.scalar_object || in.dtype != m.dtype)
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

namespace {

bool is_int_dtype(DType t) { return t == DType::Int32 || t == DType::Int64 || t == DType::UInt8; }

// The value of an integer constant stored into an array of `t`, when NumPy 1.24 stores it as
// that value (an int out of the type's range is deprecated there and warns, or raises).
bool int_fits(int64_t v, DType t) {
  switch (t) {
    case DType::Int32: return v >= INT32_MIN && v <= INT32_MAX;
    case DType::UInt8: return v >= 0 && v <= 255;
    case DType::Bool: return false;  // bool(v) is not a conversion the trace checked
    default: return std::abs(static_cast<double>(v)) <= 9007199254740992.0;  // exact in a double
  }
}

}  // namespace

std::optional<IndexPutNode> lower_index_put(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call || !node.attrs.described || (!node.kwargs.empty() && node.op != OpKind::CopyInto))
    return std::nullopt;
  if (node.op != OpKind::IndexPut && node.op != OpKind::CopyInto) return std::nullopt;
  const bool copy = node.op == OpKind::CopyInto;
  if (node.args.size() != (copy ? 2u : 3u) || !node.args[0].is_node()) return std::nullopt;
  IndexPutNode w;
  w.base = static_cast<int>(node.args[0].i);
  w.into_base = copy;
  const TensorMeta& base = graph.node(w.base).meta;
  if (base.kind != ValueKind::Tensor || base.scalar_object || !pointwise_dtype(base.dtype) ||
      node.meta.kind != ValueKind::Tensor || node.meta.dtype != base.dtype || node.meta.rank() != base.rank())
    return std::nullopt;
  w.dtype = base.dtype;
  w.region.kind = ViewOp::Kind::Index;
  w.region.source = w.base;
  if (!copy) {
    for (const IndexSpecItem& spec : node.attrs.index) {
      auto it = index_item(graph, spec);
      if (!it) return std::nullopt;
      w.region.index.push_back(*it);
    }
  }
  const Arg& v = node.args[copy ? 1 : 2];
  switch (v.kind) {
    case Arg::Kind::Node: {
      const TensorMeta& m = graph.node(static_cast<int>(v.i)).meta;
      w.value.node = static_cast<int>(v.i);
      if (m.kind == ValueKind::Tensor && !m.scalar_object) {
        if (!pointwise_dtype(m.dtype)) return std::nullopt;
        w.value.kind = StoredValue::Kind::Array;
        w.value.dtype = m.dtype;
        break;
      }
      // A Python number (run-time parameter) or a NumPy scalar, read as a double or an int64:
      // exact for every float32/float64 and int32/int64 value. A Python int into anything but an
      // int64 or float array may be out of the target's range, where NumPy warns or raises.
      w.value.kind = StoredValue::Kind::Number;
      if (m.dtype == DType::Float64 || m.dtype == DType::Float32) {
        // A float into an integer array: NumPy raises on a Python nan or inf, which a value
        // known only at run time may be.
        if (base.dtype != DType::Float64 && base.dtype != DType::Float32) return std::nullopt;
        w.value.dtype = DType::Float64;
      } else if (m.dtype == DType::Int64 || m.dtype == DType::Int32) {
        // A Python int may be past 64 bits, which NumPy converts into a float array (and raises
        // OverflowError for an int64 one, as reading the parameter does); a NumPy integer fits.
        const bool python_int = m.kind == ValueKind::Scalar;
        if (base.dtype != DType::Int64 && (python_int || (base.dtype != DType::Float64 && base.dtype != DType::Float32)))
          return std::nullopt;
        w.value.dtype = DType::Int64;
      } else {
        return std::nullopt;
      }
      if (m.kind == ValueKind::Scalar && m.dtype != DType::Int64 && m.dtype != DType::Float64) return std::nullopt;
      if (m.kind == ValueKind::Tensor) {
        // A NumPy scalar is a 0-d array to the kernel, converted in it as NumPy converts it; one
        // that a kernel computes (Note [Scalar steps]) is then recomputed in the store.
        w.value.kind = StoredValue::Kind::Array;
        w.value.dtype = m.dtype;
      }
      break;
    }
    case Arg::Kind::Float:
      // float -> int truncates (Note [Casts]); inf/nan into an int array raise in NumPy.
      if (!std::isfinite(v.f) && !(base.dtype == DType::Float32 || base.dtype == DType::Float64)) return std::nullopt;
      if (is_int_dtype(base.dtype) && !int_fits(static_cast<int64_t>(std::trunc(std::max(-1e18, std::min(1e18, v.f)))), base.dtype))
        return std::nullopt;
      w.value.value = v.f;
      w.value.dtype = DType::Float64;
      break;
    case Arg::Kind::Int:
      if (!int_fits(v.i, base.dtype)) return std::nullopt;
      w.value.value = static_cast<double>(v.i);
      w.value.dtype = DType::Int64;
      break;
    case Arg::Kind::Bool:
      w.value.value = v.i ? 1.0 : 0.0;
      w.value.dtype = DType::Bool;
      break;
    default: return std::nullopt;
  }
  return w;
}

}  // namespace framejit::jit
