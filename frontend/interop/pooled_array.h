// pooled_array.h — NumPy arrays whose memory comes from framejit's pool (rt::pool_alloc), for
// large kernel outputs: a block freed by one call is reused, already mapped, by the next.
#pragma once

#include <Python.h>

#include <cstdint>

#include "runtime/dtype.h"

namespace framejit::frontend {

/// Arrays of at least this many bytes come from the pool. Below it, NumPy's own allocator is as
/// fast (small blocks stay in malloc's free lists).
constexpr int64_t kPooledArrayBytes = int64_t{1} << 20;

/// A new C-contiguous NumPy array of `shape` and `dtype` backed by a pool block. New ref, or null
/// with MemoryError set. See Note [Pooled arrays].
PyObject* new_pooled_array(const int64_t* shape, int rank, rt::DType dtype);

/// Whether `base` (an array's base object) is a pool block no other array shares: the array then
/// owns its memory as much as an array with OWNDATA does.
bool is_private_pool_block(PyObject* base);

}  // namespace framejit::frontend
