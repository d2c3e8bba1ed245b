// memory.h — the pooled allocator for intermediates: 64-byte aligned blocks, reused by size class.
#pragma once

#include <cstddef>
#include <cstdint>

namespace framejit::rt {

/// Allocates `bytes` (64-byte aligned; 0 bytes gives a valid unique pointer). Reuses freed blocks
/// of the same size class. Returns nullptr when the system is out of memory (callers raise
/// MemoryError). Thread-safe.
///
/// Size classes are four per power of two (a block is at most 25% larger than asked for). Blocks
/// of 1 MiB and more are their own mappings, page-aligned (from 2 MiB: 2 MiB-aligned and backed by
/// transparent huge pages), so the rounding up costs address space, not memory: pages past the
/// requested size are never touched.
void* pool_alloc(size_t bytes);
/// Returns a block from pool_alloc to the pool. nullptr is ignored. A double free is caught (best
/// effort) and aborts with a message.
void pool_free(void* p);
/// Frees every cached block (framejit.reset()).
void pool_trim();

/// Caps the bytes the free lists keep (default: FRAMEJIT_POOL_CACHE_MB, else the smaller of
/// 256 MiB and an eighth of the machine's memory). A block freed past the cap goes back to the
/// system; lowering the cap releases cached blocks down to it.
void pool_set_cache_limit(size_t bytes);
size_t pool_cache_limit();

struct PoolStats {
  size_t bytes_in_use = 0;
  size_t bytes_cached = 0;
  size_t allocations = 0;  // pool_alloc calls
  size_t reuses = 0;       // served from the cache
  // The most bytes_in_use reached since the start or the last pool_reset_peak().
  size_t peak_bytes_in_use = 0;
};
PoolStats pool_stats();
/// Restarts peak_bytes_in_use from the current bytes_in_use.
void pool_reset_peak();

}  // namespace framejit::rt
