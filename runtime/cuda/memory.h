// memory.h — device memory: framejit's stream per device, its caching allocator, and copies
// between host and device memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "framejit/status.h"
#include "runtime/cuda/driver.h"

namespace framejit::rt::cuda {

// Note [One stream per device]
// Everything framejit does on a device for framejit.Tensors (kernels, copies, memsets) runs on
// one stream of its own per device, created non-blocking, so it never waits on or for the
// legacy default stream. Work on one stream runs in the order it was issued, which is what makes
// the caching allocator safe without events: a block freed by the host after the kernels that
// use it were *issued* can be handed to the next allocation at once, because whatever the next
// owner issues runs after those kernels. The price is that memory must not be shared with other
// streams behind framejit's back. A run on torch's CUDA tensors issues its work on torch's
// current stream instead (a StreamScope, Note [Torch tensors on a GPU]), and a block the cache
// hands out is reused only on the stream it was allocated for, which keeps the guarantee per
// stream.

/// The primary context of `device` made current on this thread, and the stream framejit issues
/// work on there: the innermost StreamScope's for that device, else framejit's own stream.
Expected<CUstream> stream(int device);
/// The context made current, and framejit's own stream on `device` (created on first use). Cheap
/// after the first call on a thread.
Expected<CUstream> own_stream(int device);

/// While alive, work for `device` issued on this thread goes to `stream` (another library's, e.g.
/// torch's current stream; null is the legacy default stream). Scopes nest; the previous one is
/// back when this one ends.
class StreamScope {
public:
  StreamScope(int device, CUstream stream);
  ~StreamScope();
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

private:
  int device_;
  CUstream stream_;
};

/// At least `bytes` of device memory on `device` (256-byte aligned; 0 bytes gives a valid unique
/// block), reused from the cache when a block of the same size class was freed. An error (never
/// a crash) when the device is out of memory after the cache was returned to the driver.
Expected<void*> device_alloc(int device, size_t bytes);
/// Returns a block from device_alloc to the cache (see Note [One stream per device]). nullptr is
/// ignored.
void device_free(void* p);
/// Returns every cached block to the driver (framejit.reset(), and before an allocation fails).
void device_trim();

struct DeviceMemoryStats {
  size_t bytes_in_use = 0;
  size_t bytes_cached = 0;
  size_t allocations = 0;  // device_alloc calls
  size_t reuses = 0;       // served from the cache
};
DeviceMemoryStats device_memory_stats();

/// Copies on framejit's stream. To the device: returns once `src` may be reused. To the host:
/// waits for everything issued before it on the stream, so the data is the kernels' results.
Status copy_to_device(int device, void* dst, const void* src, size_t bytes);
Status copy_to_host(int device, void* dst, const void* src, size_t bytes);
Status copy_on_device(int device, void* dst, const void* src, size_t bytes);
/// Sets `count` elements of `itemsize` bytes (1, 2, 4 or 8) at `dst` to the low `itemsize` bytes of
/// `pattern`, on the stream work for `device` goes to (driver memsets: no kernel of framejit's).
Status fill_on_device(int device, void* dst, uint64_t pattern, int itemsize, size_t count);
/// Waits for everything issued on framejit's stream of `device`.
Status synchronize(int device);

}  // namespace framejit::rt::cuda
