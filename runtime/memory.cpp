// memory.cpp — the pooled allocator: size classes, one free list per class under one mutex,
// a cap on cached bytes, big blocks as their own (huge-page) mappings.
#include "runtime/memory.h"

#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <type_traits>

namespace framejit::rt {

// Note [Pool block layout]
//
//   small (< 1 MiB, posix_memalign):   base ─► [Header 64 B][data ... capacity]
//   big (>= 1 MiB, own mapping):       base ─► [page: ... Header 64 B][data ... capacity]
//                                                                     ^ page-aligned (2 MiB-aligned
//                                                                       from 2 MiB, THP-advised)
// The header sits right before the data in both cases, so pool_free finds it without a lookup.
// Free blocks are chained through Header::next: the free lists never allocate. The header page of
// a big block is the only page the pool itself touches; the data pages are first touched by the
// kernel that writes them.

namespace {

constexpr size_t kAlign = 64;
constexpr size_t kPage = 4096;
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kMapThreshold = size_t{1} << 20;
constexpr size_t kMaxBytes = size_t{1} << 46;  // 64 TiB: past any machine, and no overflow below
constexpr int kClassesPerDoubling = 4;
constexpr int kNumClasses = 1 + (45 - 6 + 1) * kClassesPerDoubling;  // 64 B, then 2^6 .. 2^46
constexpr uint64_t kLiveMagic = 0x6576696c2d6a6621;                  // "!fj-live"
constexpr uint64_t kFreeMagic = 0x656572662d6a6621;                  // "!fj-free"

struct alignas(kAlign) Header {
  uint64_t magic;
  size_t capacity;   // the size class: usable bytes
  size_t requested;  // what pool_alloc was asked for (stats)
  Header* next;      // free-list link
  void* base;        // what goes back to the system
  size_t mapped;     // 0: posix_memalign'ed; else the length of the mapping at base
  uint32_t cls;
};
static_assert(sizeof(Header) == kAlign);

struct SizeClass {
  int index;
  size_t capacity;
};

// 64 B, then four classes per power of two: 80, 96, 112, 128, 160, 192, 224, 256, 320, ...
SizeClass size_class(size_t bytes) {
  if (bytes <= 64) return {0, 64};
  const int p = 63 - __builtin_clzll(bytes - 1);  // 2^p < bytes <= 2^(p+1), p >= 6
  const size_t step = size_t{1} << (p - 2);
  const size_t sub = (bytes - (size_t{1} << p) + step - 1) / step;  // 1..4
  return {(p - 6) * kClassesPerDoubling + static_cast<int>(sub), (size_t{1} << p) + sub * step};
}

void* data_of(Header* h) { return h + 1; }
Header* header_of(void* p) { return static_cast<Header*>(p) - 1; }

Header* system_alloc(size_t capacity) {
  if (capacity < kMapThreshold) {
    void* base = nullptr;
    if (posix_memalign(&base, kAlign, sizeof(Header) + capacity) != 0) return nullptr;
    Header* h = static_cast<Header*>(base);
    h->base = base;
    h->mapped = 0;
    return h;
  }
  // Big: capacity is a multiple of 256 KiB here. Map `align` extra, put the data on an `align`
  // boundary at least one page in, and unmap the slack on both sides.
  const size_t align = capacity >= kHugePage ? kHugePage : kPage;
  const size_t len = capacity + align;
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(m);
  const uintptr_t data = (base + kPage + align - 1) & ~(align - 1);
  const uintptr_t start = data - kPage, end = data + capacity;
  if (start > base) munmap(m, start - base);
  if (base + len > end) munmap(reinterpret_cast<void*>(end), base + len - end);
  // NB: huge pages: one fault per 2 MiB instead of 512, and fewer TLB misses when a kernel
  // streams through the block; the process must have asked (THP "madvise" mode is common).
  if (align == kHugePage) madvise(reinterpret_cast<void*>(data), capacity, MADV_HUGEPAGE);
  Header* h = header_of(reinterpret_cast<void*>(data));
  h->base = reinterpret_cast<void*>(start);
  h->mapped = end - start;
  return h;
}

void system_free(Header* h) {
  if (h->mapped)
    munmap(h->base, h->mapped);
  else
    std::free(h->base);
}

void system_free_list(Header* h) {
  while (h) {
    Header* next = h->next;
    system_free(h);
    h = next;
  }
}

size_t default_cache_limit() {
  static const size_t limit = [] {
    if (const char* e = std::getenv("FRAMEJIT_POOL_CACHE_MB")) {
      char* end = nullptr;
      unsigned long long mb = std::strtoull(e, &end, 10);
      if (end != e && *end == '\0') return static_cast<size_t>(mb) << 20;
    }
    size_t limit = size_t{256} << 20;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) limit = std::min(limit, static_cast<size_t>(pages) * page / 8);
    return limit;
  }();
  return limit;
}

// NB: constant-initialized and trivially destructible, so blocks freed by static destructors at
// exit (after this file's statics would have been destroyed) still find a working pool.
struct State {
  std::mutex mu;
  Header* free_lists[kNumClasses] = {};
  bool limit_set = false;
  size_t limit = 0;
  PoolStats stats;
};
constinit State g;
static_assert(std::is_trivially_destructible_v<State>);

size_t limit_locked() {
  if (!g.limit_set) {
    g.limit = default_cache_limit();
    g.limit_set = true;
  }
  return g.limit;
}

// Unlinks cached blocks, biggest classes first, until at most `keep` bytes stay cached. Returns
// them as a list for the caller to free outside the lock.
Header* evict_locked(size_t keep) {
  Header* out = nullptr;
  for (int c = kNumClasses - 1; c >= 0 && g.stats.bytes_cached > keep; --c) {
    while (g.free_lists[c] && g.stats.bytes_cached > keep) {
      Header* h = g.free_lists[c];
      g.free_lists[c] = h->next;
      g.stats.bytes_cached -= h->capacity;
      h->next = out;
      out = h;
    }
  }
  return out;
}

// fork(): hold the lock across it so the child inherits consistent free lists, then release it
// in both processes (in the child, the thread that forked is the owner).
void atfork_prepare() { g.mu.lock(); }
void atfork_release() { g.mu.unlock(); }
[[maybe_unused]] const int g_atfork =
    pthread_atfork(atfork_prepare, atfork_release, atfork_release);

void note_in_use_locked(size_t bytes) {
  g.stats.bytes_in_use += bytes;
  g.stats.peak_bytes_in_use = std::max(g.stats.peak_bytes_in_use, g.stats.bytes_in_use);
}

}  // namespace

void* pool_alloc(size_t bytes) {
  const SizeClass sc = bytes <= kMaxBytes ? size_class(bytes) : SizeClass{-1, 0};
  Header* h = nullptr;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    ++g.stats.allocations;
    if (sc.index < 0) return nullptr;
    if ((h = g.free_lists[sc.index])) {
      g.free_lists[sc.index] = h->next;
      g.stats.bytes_cached -= h->capacity;
      ++g.stats.reuses;
      note_in_use_locked(bytes);
    }
  }
  if (!h) {
    h = system_alloc(sc.capacity);
    if (!h) {  // out of memory: give the cache back and try once more
      pool_trim();
      h = system_alloc(sc.capacity);
      if (!h) return nullptr;
    }
    h->capacity = sc.capacity;
    h->cls = static_cast<uint32_t>(sc.index);
    std::lock_guard<std::mutex> lock(g.mu);
    note_in_use_locked(bytes);
  }
  h->magic = kLiveMagic;
  h->requested = bytes;
  h->next = nullptr;
  return data_of(h);
}

void pool_free(void* p) {
  if (!p) return;
  Header* h = header_of(p);
  {
    std::lock_guard<std::mutex> lock(g.mu);
    if (h->magic != kLiveMagic) {
      std::fprintf(stderr, "framejit: pool_free(%p): %s\n", p,
                   h->magic == kFreeMagic ? "double free" : "not a pool block");
      std::abort();
    }
    h->magic = kFreeMagic;
    g.stats.bytes_in_use -= h->requested;
    if (g.stats.bytes_cached + h->capacity <= limit_locked()) {
      h->next = g.free_lists[h->cls];
      g.free_lists[h->cls] = h;
      g.stats.bytes_cached += h->capacity;
      return;
    }
  }
  // NB: past the cap the block being freed goes back, not an older cached one: cheaper, and the
  // cached blocks are the ones the running programs keep asking for.
  system_free(h);
}

void pool_trim() {
  Header* out;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    out = evict_locked(0);
  }
  system_free_list(out);
}

void pool_set_cache_limit(size_t bytes) {
  Header* out;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    g.limit = bytes;
    g.limit_set = true;
    out = evict_locked(bytes);
  }
  system_free_list(out);
}

size_t pool_cache_limit() {
  std::lock_guard<std::mutex> lock(g.mu);
  return limit_locked();
}

PoolStats pool_stats() {
  std::lock_guard<std::mutex> lock(g.mu);
  return g.stats;
}

void pool_reset_peak() {
  std::lock_guard<std::mutex> lock(g.mu);
  g.stats.peak_bytes_in_use = g.stats.bytes_in_use;
}

}  // namespace framejit::rt
