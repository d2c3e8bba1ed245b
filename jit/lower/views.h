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
#include "runtime/views.h"

namespace framejit::jit {

constexpr int kMaxViewRank = rt::kMaxRank;
using rt::IndexItem;
using rt::IntTerm;
using rt::StridedLayout;
using rt::ViewOp;
using rt::apply_view;

/// The node as a view its consumers can read through, if it is one: the view OpKinds above with
/// constant axes, and index items that are ints, slices, None or Ellipsis (not arrays).
std::optional<ViewOp> lower_view(const Graph& graph, const Node& node);

}  // namespace framejit::jit
