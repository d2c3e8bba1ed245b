// memory.cpp — framejit's device stream and caching allocator (Note [One stream per device]).
#include "runtime/cuda/memory.h"

#include <cstring>

#include <map>
#include <mutex>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "runtime/cuda/graph.h"

namespace framejit::rt::cuda {

namespace {

constexpr int kMaxDevices = 64;
constexpr CUresult kOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY
constexpr unsigned kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING

struct Streams {
  std::mutex mu;
  CUstream streams[kMaxDevices] = {};
};
Streams& streams() {
  static auto* s = new Streams;  // NB: immortal: streams live until the process ends
  return *s;
}

// Size classes: 512-byte steps below 1 MiB, 1 MiB steps up to 64 MiB, 8 MiB steps above, so a
// block is at most 12.5% larger than asked for beyond 64 MiB and reuse finds the same size often.
size_t size_class(size_t bytes) {
  auto round_up = [](size_t n, size_t step) { return (n + step - 1) / step * step; };
  if (bytes < (size_t{1} << 20)) return round_up(bytes ? bytes : 1, 512);
  if (bytes < (size_t{64} << 20)) return round_up(bytes, size_t{1} << 20);
  return round_up(bytes, size_t{8} << 20);
}

struct Block {
  int device = 0;
  size_t size = 0;
  CUstream stream = nullptr;  // the stream it was allocated for: reused on that stream only
};

// The stream a StreamScope set on this thread, for its device (-1: none).
struct Scoped {
  int device = -1;
  CUstream stream = nullptr;
};
thread_local Scoped scoped;

struct Allocator {
  std::mutex mu;
  std::unordered_map<CUdeviceptr, Block> live;                  // handed out
  // (device, stream, class) -> blocks
  std::map<std::tuple<int, CUstream, size_t>, std::vector<CUdeviceptr>> free;
  DeviceMemoryStats stats;
};
Allocator& allocator() {
  static auto* a = new Allocator;  // NB: immortal: no driver calls during static destruction
  return *a;
}

// Frees every cached block; the caller holds a.mu and has the context current.
void trim_locked(Allocator& a, const Api& api) {
  for (auto& [key, blocks] : a.free)
    for (CUdeviceptr p : blocks) {
      (void)api.MemFree(p);  // best effort: a failure leaves the block to the process's end
      a.stats.bytes_cached -= std::get<2>(key);
    }
  a.free.clear();
}

}  // namespace

Expected<CUstream> stream(int device) {
  auto own = own_stream(device);
  if (own && scoped.device == device) return scoped.stream;
  return own;
}

StreamScope::StreamScope(int device, CUstream stream) : device_(scoped.device), stream_(scoped.stream) {
  scoped = {device, stream};
}

StreamScope::~StreamScope() { scoped = {device_, stream_}; }

Expected<CUstream> own_stream(int device) {
  if (device < 0 || device >= kMaxDevices) return Status::invalid("CUDA device " + std::to_string(device) + " is out of range");
  // Every launch asks: the last device this thread used, with its context still current (Note
  // [Whose current context] in driver.h) and its stream, answers without a lock. (The context is
  // current per thread; the stream is per process.)
  thread_local int last = -1;
  thread_local CUstream last_stream = nullptr;
  thread_local CUcontext last_ctx = nullptr;
  thread_local const Api* api = nullptr;
  if (device == last) {
    CUcontext current = nullptr;
    if (api->CtxGetCurrent(&current) == kSuccess && current == last_ctx) return last_stream;
  }
  auto ctx = use_device(device);
  if (!ctx) return ctx.error();
  api = *driver();  // loaded: use_device succeeded
  Streams& s = streams();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.streams[device]) {
    auto api = driver();
    if (!api) return api.error();
    CUstream st = nullptr;
    FJ_PROPAGATE(check((*api)->StreamCreate(&st, kStreamNonBlocking), "cuStreamCreate"));
    s.streams[device] = st;
  }
  last = device;
  last_ctx = *ctx;
  last_stream = s.streams[device];
  return last_stream;
}

Expected<void*> device_alloc(int device, size_t bytes) {
  auto st = stream(device);  // the context current for cuMemAlloc
  if (!st) return st.error();
  const Api& api = **driver();
  const size_t size = size_class(bytes);
  Allocator& a = allocator();
  std::lock_guard<std::mutex> lock(a.mu);
  ++a.stats.allocations;
  auto it = a.free.find({device, *st, size});
  if (it != a.free.end() && !it->second.empty()) {
    CUdeviceptr p = it->second.back();
    it->second.pop_back();
    a.live[p] = {device, size, *st};
    a.stats.bytes_cached -= size;
    a.stats.bytes_in_use += size;
    ++a.stats.reuses;
    return reinterpret_cast<void*>(p);
  }
  CUdeviceptr p = 0;
  CUresult r = api.MemAlloc(&p, size);
  if (r == kOutOfMemory) {
    // The cache may hold what this allocation needs: give it back and try once more. A cached
    // block may still be read by an issued kernel; cuMemFree waits for the device first.
    trim_locked(a, api);
    r = api.MemAlloc(&p, size);
  }
  if (r != kSuccess) {
    Status s = check(r, "cuMemAlloc of " + std::to_string(bytes) + " bytes");
    return Status::internal(s.message() + " (framejit holds " + std::to_string(a.stats.bytes_in_use) +
                            " bytes of device memory in arrays)");
  }
  a.live[p] = {device, size, *st};
  a.stats.bytes_in_use += size;
  return reinterpret_cast<void*>(p);
}

void device_free(void* ptr) {
  if (!ptr || defer_free(ptr)) return;  // Note [Replayed launches]: recorded nodes may still use it
  Allocator& a = allocator();
  std::lock_guard<std::mutex> lock(a.mu);
  auto it = a.live.find(reinterpret_cast<CUdeviceptr>(ptr));
  if (it == a.live.end()) return;  // not ours (or freed twice): nothing to do that is safe
  const Block b = it->second;
  a.live.erase(it);
  a.stats.bytes_in_use -= b.size;
  a.stats.bytes_cached += b.size;
  a.free[{b.device, b.stream, b.size}].push_back(reinterpret_cast<CUdeviceptr>(ptr));
}

void device_trim() {
  Allocator& a = allocator();
  std::lock_guard<std::mutex> lock(a.mu);
  if (a.free.empty()) return;
  auto api = driver();
  if (!api) return;
  trim_locked(a, **api);
}

DeviceMemoryStats device_memory_stats() {
  Allocator& a = allocator();
  std::lock_guard<std::mutex> lock(a.mu);
  return a.stats;
}

Status copy_to_device(int device, void* dst, const void* src, size_t bytes) {
  auto st = stream(device);
  if (!st) return st.error();
  if (!bytes) return Status::ok();
  if (records(device, *st)) {
    // A recorded upload of a scalar (Note [Host scalars on a device]) is memsets of its bytes: a
    // graph node holds the value, where a copy node would read the host memory at replay. Always
    // the same nodes for a size, so a new value patches them.
    const auto p = reinterpret_cast<CUdeviceptr>(dst);
    uint64_t v = 0;
    if (bytes == 1 || bytes == 2 || bytes == 4) {
      std::memcpy(&v, src, bytes);
      return record_memset({p, 0, static_cast<unsigned>(v), static_cast<unsigned>(bytes), 1, 1});
    }
    if (bytes == 8) {
      std::memcpy(&v, src, 8);
      FJ_PROPAGATE(record_memset({p, 0, static_cast<unsigned>(v), 4, 1, 1}));
      return record_memset({p + 4, 0, static_cast<unsigned>(v >> 32), 4, 1, 1});
    }
    FJ_PROPAGATE(flush_recording());
  }
  // From pageable memory the driver stages the data before returning: `src` may be reused after.
  return check((*driver())->MemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(dst), src, bytes, *st),
               "cuMemcpyHtoDAsync");
}

Status copy_to_host(int device, void* dst, const void* src, size_t bytes) {
  FJ_PROPAGATE(flush_recording());  // the host is about to read what recorded work writes
  auto st = stream(device);
  if (!st) return st.error();
  const Api& api = **driver();
  if (bytes)
    FJ_PROPAGATE(check(api.MemcpyDtoHAsync(dst, reinterpret_cast<CUdeviceptr>(src), bytes, *st), "cuMemcpyDtoHAsync"));
  return check(api.StreamSynchronize(*st), "cuStreamSynchronize");
}

Status copy_on_device(int device, void* dst, const void* src, size_t bytes) {
  FJ_PROPAGATE(flush_recording());
  auto st = stream(device);
  if (!st) return st.error();
  if (!bytes) return Status::ok();
  return check((*driver())->MemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src),
                                             bytes, *st),
               "cuMemcpyDtoDAsync");
}

Status fill_on_device(int device, void* dst, uint64_t pattern, int itemsize, size_t count) {
  auto st = stream(device);
  if (!st) return st.error();
  if (!count) return Status::ok();
  const auto p = reinterpret_cast<CUdeviceptr>(dst);
  const auto lo = static_cast<unsigned>(pattern), hi = static_cast<unsigned>(pattern >> 32);
  MemsetNodeParams m[2];
  int n = 1;
  switch (itemsize) {
    case 1: m[0] = {p, 0, lo & 0xFF, 1, count, 1}; break;
    case 2: m[0] = {p, 0, lo & 0xFFFF, 2, count, 1}; break;
    case 4: m[0] = {p, 0, lo, 4, count, 1}; break;
    case 8:
      if (lo == hi) {
        m[0] = {p, 0, lo, 4, 2 * count, 1};
        break;
      }
      // Two halves that differ (1.0 is 0x3ff00000 00000000): each half is a column of 4-byte
      // words 8 bytes apart, a 2-D memset of width 1.
      m[0] = {p, 8, lo, 4, 1, count}, m[1] = {p + 4, 8, hi, 4, 1, count}, n = 2;
      break;
    default: return Status::internal("fill_on_device: an element of " + std::to_string(itemsize) + " bytes");
  }
  const bool rec = records(device, *st);  // Note [Replayed launches]: the same memsets as graph nodes
  for (int k = 0; k < n; ++k) FJ_PROPAGATE(rec ? record_memset(m[k]) : issue_memset(m[k], *st));
  return Status::ok();
}

Status synchronize(int device) {
  FJ_PROPAGATE(flush_recording());
  auto st = stream(device);
  if (!st) return st.error();
  return check((*driver())->StreamSynchronize(*st), "cuStreamSynchronize");
}

}  // namespace framejit::rt::cuda
