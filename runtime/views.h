// views.h — views as index remaps (transpose, basic indexing, expand_dims, squeeze, reshape,
// ravel, broadcast_to): how a view's layout follows from its source's, computed at run time so
// that kernels, reductions and GEMMs read the source directly and the view never exists.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/function_ref.h"

namespace framejit::rt {

constexpr int kMaxRank = 32;  // NumPy's limit, and every array a program touches

/// An integer argument of a view: a constant, None, or a program value (an integer at run time,
/// e.g. a size computed from x.shape).
struct IntTerm {
  enum class Kind : uint8_t { Const, None, Node } kind = Kind::None;
  int64_t value = 0;  // Const: the value; Node: the value id
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
  int64_t dims[kMaxRank];
  int64_t strides[kMaxRank];
};

/// Reads run-time integer `id` into `v`; false when it is not an integer that fits.
using ValueReader = FunctionRef<bool(int id, int64_t& v)>;

/// `out` = the view of `in`. False when the view cannot be expressed over `in` (an index out of
/// range, a reshape that NumPy would copy, sizes that do not match, a zero slice step): the caller
/// then makes the view the library's way, which raises or copies exactly as eager code does.
bool apply_view(const ViewOp& op, const StridedLayout& in, int64_t itemsize, ValueReader value, StridedLayout& out);

/// Copies the elements of `src` (any strides) to `dst` in C order.
void copy_to_c_order(const StridedLayout& src, int64_t itemsize, char* dst);

}  // namespace framejit::rt
