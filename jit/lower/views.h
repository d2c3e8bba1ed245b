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
#include "jit/lower/lowering.h"
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

/// What an index_put's value is, as the store kernel reads it.
struct StoredValue {
  enum class Kind : uint8_t { Array, Number, Const } kind = Kind::Const;
  int node = -1;     // Array: an array value; Number: a Python number or a library scalar object
  DType dtype = DType::Float64;  // Array: its dtype; Number: how it is read (Float64 or Int64)
  double value = 0;  // Const
};

/// A write the code generators run (Note [Lowered writes] in jit/schedule/program.cpp): base with
/// base[index] = value, where `region` (an Index view of base) is the strided view the basic
/// index selects and the value, converted to the base's dtype as NumPy's __setitem__ converts,
/// is broadcast to it. copy_into(input, final) is the same store with the whole input as the
/// region and `into_base`: it writes the input's own memory.
struct IndexPutNode {
  int base = -1;
  ViewOp region;
  StoredValue value;
  DType dtype = DType::Float64;  // the base's
  bool into_base = false;        // copy_into
};

/// The node as a lowered write, if it is one the code generators run: an index_put with a basic
/// index of ints (constant or run-time), slices, None and Ellipsis, or a copy_into, of an array
/// of a kernel dtype, whose value is an array of a kernel dtype, a Python number that converts
/// exactly as NumPy would convert it, or a NumPy float/int scalar. nullopt otherwise (it runs as
/// a call).
std::optional<IndexPutNode> lower_index_put(const Graph& graph, const Node& node);

}  // namespace framejit::jit
