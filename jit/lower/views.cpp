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

bool resolve(const IntTerm& t, const std::function<bool(int, int64_t&)>& value, int64_t& out) {
  if (t.kind == IntTerm::Kind::Const) {
    out = t.value;
    return true;
  }
  return t.kind == IntTerm::Kind::Node && value(static_cast<int>(t.value), out);
}

// Python's slice.indices(): clamps start/stop into the dimension and counts the elements.
bool slice_bounds(const IndexItem& it, int64_t len, const std::function<bool(int, int64_t&)>& value, int64_t& start,
                  int64_t& step, int64_t& count) {
  step = 1;
  if (it.step.kind != IntTerm::Kind::None && !resolve(it.step, value, step)) return false;
  if (step == 0) return false;  // ValueError in Python: let it raise there
  auto adjust = [&](const IntTerm& t, int64_t dflt, int64_t& out) {
    if (t.kind == IntTerm::Kind::None) {
      out = dflt;
      return true;
    }
    if (!resolve(t, value, out)) return false;
    if (out < 0) {
      out += len;
      if (out < 0) out = step < 0 ? -1 : 0;
    } else if (out >= len) {
      out = step < 0 ? len - 1 : len;
    }
    return true;
  };
  int64_t stop;
  if (!adjust(it.start, step < 0 ? len - 1 : 0, start) || !adjust(it.stop, step < 0 ? -1 : len, stop)) return false;
  if (step > 0)
    count = stop > start ? (stop - start - 1) / step + 1 : 0;
  else
    count = start > stop ? (start - stop - 1) / (-step) + 1 : 0;
  return true;
}

bool apply_index(const ViewOp& op, const StridedLayout& in, const std::function<bool(int, int64_t&)>& value,
                 StridedLayout& out) {
  int consumed = 0, ellipses = 0;
  for (const IndexItem& it : op.index) {
    consumed += it.kind == IndexItem::Kind::Int || it.kind == IndexItem::Kind::Slice;
    ellipses += it.kind == IndexItem::Kind::Ellipsis;
  }
  if (consumed > in.nd || ellipses > 1) return false;  // IndexError in NumPy
  out.data = in.data;
  out.nd = 0;
  int d = 0;
  auto push = [&](int64_t dim, int64_t stride) {
    if (out.nd == kMaxViewRank) return false;
    out.dims[out.nd] = dim;
    out.strides[out.nd++] = stride;
    return true;
  };
  for (const IndexItem& it : op.index) {
    switch (it.kind) {
      case IndexItem::Kind::Ellipsis:
        for (int k = 0; k < in.nd - consumed; ++k, ++d)
          if (!push(in.dims[d], in.strides[d])) return false;
        break;
      case IndexItem::Kind::NewAxis:
        if (!push(1, 0)) return false;
        break;
      case IndexItem::Kind::Int: {
        int64_t i;
        if (!resolve(it.start, value, i)) return false;
        if (i < 0) i += in.dims[d];
        if (i < 0 || i >= in.dims[d]) return false;  // IndexError in NumPy
        out.data += i * in.strides[d];
        ++d;
        break;
      }
      case IndexItem::Kind::Slice: {
        int64_t start, step, count;
        if (!slice_bounds(it, in.dims[d], value, start, step, count)) return false;
        if (count > 0) out.data += start * in.strides[d];
        if (!push(count, in.strides[d] * step)) return false;
        ++d;
        break;
      }
    }
  }
  for (; d < in.nd; ++d)
    if (!push(in.dims[d], in.strides[d])) return false;
  return true;
}

// Note [Reshape without copying]
// NumPy reshapes without a copy whenever it can, not only for contiguous arrays: the old and new
// dims split into groups of equal products (e.g. (4, 768) sliced to (4, 256) and reshaped to
// (4, 8, 32): groups {4}->{4} and {256}->{8, 32}), and each group works as a view when its old
// dims step through memory as one (stride[k] == stride[k+1] * dim[k+1]); the new dims of a group
// then take strides from the group's innermost old stride. Size-1 dims never matter. When some
// group is not such a chain NumPy copies, and so do we (by letting NumPy do it).
bool reshape_strides(const StridedLayout& in, int64_t itemsize, int64_t total, StridedLayout& out) {
  if (total == 0) {  // nothing to address: C strides
    int64_t stride = itemsize;
    for (int d = out.nd - 1; d >= 0; --d) {
      out.strides[d] = stride;
      stride *= std::max<int64_t>(out.dims[d], 1);
    }
    return true;
  }
  int64_t od[kMaxViewRank], os[kMaxViewRank];
  int on = 0;
  for (int d = 0; d < in.nd; ++d)
    if (in.dims[d] != 1) {
      od[on] = in.dims[d];
      os[on++] = in.strides[d];
    }
  int oi = 0, ni = 0;
  while (oi < on && ni < out.nd) {
    int64_t op = od[oi], np = out.dims[ni];
    int oj = oi + 1, nj = ni + 1;
    while (op != np) {
      if (np < op) {
        if (nj == out.nd) return false;
        np *= out.dims[nj++];
      } else {
        if (oj == on) return false;
        op *= od[oj++];
      }
    }
    for (int k = oi; k + 1 < oj; ++k)
      if (os[k] != os[k + 1] * od[k + 1]) return false;
    out.strides[nj - 1] = os[oj - 1];
    for (int k = nj - 1; k > ni; --k) out.strides[k - 1] = out.strides[k] * out.dims[k];
    oi = oj;
    ni = nj;
  }
  for (; ni < out.nd; ++ni) out.strides[ni] = itemsize;  // trailing size-1 dims
  return oi == on;
}

}  // namespace

std::optional<ViewOp> lower_view(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call || !is_view(node.op) || !node.attrs.described || node.args.empty() ||
      !node.args[0].is_node())
    return std::nullopt;
  const TensorMeta& m = node.meta;
  const int source = static_cast<int>(node.args[0].i);
  const TensorMeta& in = graph.node(source).meta;
  if (m.kind != ValueKind::Tensor || m.numpy_scalar || in.kind != ValueKind::Tensor || in.numpy_scalar ||
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

bool apply_view(const ViewOp& op, const StridedLayout& in, int64_t itemsize,
                const std::function<bool(int node, int64_t& v)>& value, StridedLayout& out) {
  switch (op.kind) {
    case ViewOp::Kind::Permute:
      if (static_cast<int>(op.perm.size()) != in.nd) return false;
      out.data = in.data;
      out.nd = in.nd;
      for (int d = 0; d < in.nd; ++d) {
        out.dims[d] = in.dims[op.perm[d]];
        out.strides[d] = in.strides[op.perm[d]];
      }
      return true;
    case ViewOp::Kind::Index: return apply_index(op, in, value, out);
    case ViewOp::Kind::Reshape: {
      if (op.shape.size() > static_cast<size_t>(kMaxViewRank)) return false;
      int64_t total = 1;
      for (int d = 0; d < in.nd; ++d) total *= in.dims[d];
      int64_t known = 1;
      int infer = -1;
      out.nd = static_cast<int>(op.shape.size());
      for (int d = 0; d < out.nd; ++d) {
        if (!resolve(op.shape[d], value, out.dims[d])) return false;
        if (out.dims[d] == -1 && infer < 0) {
          infer = d;
          continue;
        }
        if (out.dims[d] < 0) return false;
        known *= out.dims[d];
      }
      if (infer >= 0) {
        if (known == 0 || total % known != 0) return false;
        out.dims[infer] = total / known;
      } else if (known != total) {
        return false;
      }
      out.data = in.data;
      return reshape_strides(in, itemsize, total, out);
    }
    case ViewOp::Kind::BroadcastTo: {
      const int nd = static_cast<int>(op.shape.size());
      if (nd < in.nd || nd > kMaxViewRank) return false;
      out.data = in.data;
      out.nd = nd;
      for (int d = 0; d < nd; ++d) {
        if (!resolve(op.shape[d], value, out.dims[d]) || out.dims[d] < 0) return false;
        const int s = d - (nd - in.nd);
        if (s < 0) {
          out.strides[d] = 0;
        } else if (in.dims[s] == out.dims[d]) {
          out.strides[d] = in.strides[s];
        } else if (in.dims[s] == 1) {
          out.strides[d] = 0;
        } else {
          return false;
        }
      }
      return true;
    }
  }
  return false;
}

std::string ViewOp::to_string() const {
  auto term = [](const IntTerm& t) {
    switch (t.kind) {
      case IntTerm::Kind::Const: return std::to_string(t.value);
      case IntTerm::Kind::None: return std::string();
      case IntTerm::Kind::Node: return "%" + std::to_string(t.value);
    }
    return std::string();
  };
  std::string s;
  switch (kind) {
    case Kind::Permute:
      s = "permute(";
      for (size_t i = 0; i < perm.size(); ++i) s += (i ? ", " : "") + std::to_string(perm[i]);
      break;
    case Kind::Index:
      s = "index(";
      for (size_t i = 0; i < index.size(); ++i) {
        const IndexItem& it = index[i];
        s += i ? ", " : "";
        switch (it.kind) {
          case IndexItem::Kind::Int: s += term(it.start); break;
          case IndexItem::Kind::Slice:
            s += term(it.start) + ":" + term(it.stop) + (it.step.kind == IntTerm::Kind::None ? "" : ":" + term(it.step));
            break;
          case IndexItem::Kind::NewAxis: s += "None"; break;
          case IndexItem::Kind::Ellipsis: s += "..."; break;
        }
      }
      break;
    case Kind::Reshape:
    case Kind::BroadcastTo:
      s = kind == Kind::Reshape ? "reshape(" : "broadcast_to(";
      for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + term(shape[i]);
      break;
  }
  return s + ")";
}

}  // namespace framejit::jit
