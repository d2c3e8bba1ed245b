// memory.h — the pooled allocator for intermediates: 64-byte aligned blocks, reused by size class.
#pragma once

#include <cstddef>
#include <cstdint>

namespace framejit::rt {

/// Allocates `bytes` (64-byte aligned; 0 bytes gives a valid unique pointer). Reuses freed blocks
/// of the same size class. Returns nullptr when the system is out of memory (callers raise
/// MemoryError). Thread-safe.
void* pool_alloc(size_t bytes);
/// Returns a block from pool_alloc to the pool. nullptr is ignored.
void pool_free(void* p);
/// Frees every cached block (framejit.reset()).
void pool_trim();

struct PoolStats {
  size_t bytes_in_use = 0;
  size_t bytes_cached = 0;
  size_t allocations = 0;  // pool_alloc calls
  size_t reuses = 0;       // served from the cache
};
PoolStats pool_stats();

}  // namespace framejit::rt
