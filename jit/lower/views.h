// views.h — GraphLowering of view nodes (transpose, swapaxes, basic indexing, expand_dims,
// squeeze, reshape, ravel, broadcast_to) into index remaps: how a view's layout follows from its
// source's layout, computed at run time so that kernels, reductions and GEMMs read the source
// directly and the view never exists as an object.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "jit/ir/graph.h"  // and jit/ir/ops.h: the canonical view ops this lowers

namespace framejit::jit {

constexpr int kMaxViewRank = 32;  // NumPy's limit

/// An integer argument of a view: a constant, None, or a graph value (a Python int at run time,
/// e.g. a size computed from x.shape).
struct IntTerm {
  enum class Kind : uint8_t { Const, None, Node } kind = Kind::None;
  int64_t value = 0;  // Const: the value; Node: the node index
};

/// One item of a basic index (x[1:, None, ..., 2]).
struct IndexItem {
  enum class Kind : uint8_t { Int, Slice, NewAxis, Ellipsis } kind = Kind::Int;
  IntTerm start, stop, step;  // Int: start is the index
};

/// A view as an index remap of its source.
struct ViewOp {
  enum class Kind : uint8_t { Permute, Index, Reshape, BroadcastTo } kind = Kind::Permute;
  int source = -1;
  std::vector<int> perm;          // Permute: output dim d is source dim perm[d]
  std::vector<IndexItem> index;   // Index (expand_dims and squeeze are indexes too)
  std::vector<IntTerm> shape;     // Reshape (one entry may be -1), BroadcastTo
  std::string to_string() const;  // for the fusion plan's text
};

/// A strided array: base pointer, dims and byte strides.
struct StridedLayout {
  char* data = nullptr;
  int nd = 0;
  int64_t dims[kMaxViewRank];
  int64_t strides[kMaxViewRank];
};

/// The node as a view its consumers can read through, if it is one: the view OpKinds above with
/// constant axes, and index items that are ints, slices, None or Ellipsis (not arrays).
std::optional<ViewOp> lower_view(const Graph& graph, const Node& node);

/// `out` = the view of `in`. `value(node, v)` reads a run-time integer. False when the view
/// cannot be expressed over `in` (an index out of range, a reshape that NumPy would copy, sizes
/// that do not match, a zero slice step): the caller then runs the node itself, which raises or
/// copies exactly as NumPy does.
bool apply_view(const ViewOp& op, const StridedLayout& in, int64_t itemsize,
                const std::function<bool(int node, int64_t& v)>& value, StridedLayout& out);

}  // namespace framejit::jit
