// kernel_cache.cpp — the process-wide map from kernel content to compiled kernel, with one build
// per key at a time.
#include "runtime/kernel_cache.h"

#include <atomic>

#include <pthread.h>

#include <climits>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>

#include "runtime/futex_p.h"

namespace framejit::rt {

namespace {

// A build in progress. Threads that want the same key hold a reference and sleep on `done`.
struct Pending {
  std::thread::id builder = std::this_thread::get_id();
  KernelPtr result;  // set before done becomes 1
  std::atomic<uint32_t> done{0};
};

// Note [Kernel lifetime]
// The cache does not own kernels: it maps keys to weak references, and the programs that use a
// kernel own it. A kernel (and its executable memory) is released when the last compiled function
// using it is garbage collected or reset() drops the caches; an entry whose kernel is gone is
// built again on its next use, and such dead entries are swept from the map now and then.
//
// Exactly one of the two is set: a (possibly expired) cached kernel, or the build that will
// produce it.
struct Entry {
  std::weak_ptr<const Kernel> kernel;
  std::shared_ptr<Pending> pending;
};

// Sweep dead entries after this many insertions.
constexpr size_t kSweepEvery = 256;

struct State {
  std::mutex mu;
  std::unordered_map<std::string, Entry> map;
  KernelCacheStats stats;
  size_t inserts_since_sweep = 0;
};

// Drops entries whose kernel died (not builds in flight). Called with mu held.
void sweep(State& s) {
  for (auto it = s.map.begin(); it != s.map.end();) {
    if (!it->second.pending && it->second.kernel.expired())
      it = s.map.erase(it);
    else
      ++it;
  }
  s.inserts_since_sweep = 0;
}

// fork(): the map must be consistent in the child, and builds that other threads had in flight
// will never finish there — drop them (nobody in the child waits on them).
void atfork_prepare();
void atfork_parent();
void atfork_child();

// NB: never destroyed. Destroying it at exit would run Kernel::release for every cached kernel
// during static destruction, after the code generator's runtime may already be gone; the
// executable memory goes away with the process anyway.
State& state() {
  static State* s = [] {
    State* st = new State;
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    return st;
  }();
  return *s;
}

void atfork_prepare() { state().mu.lock(); }
void atfork_parent() { state().mu.unlock(); }
void atfork_child() {
  State& s = state();
  for (auto it = s.map.begin(); it != s.map.end();) {
    if (it->second.pending && it->second.pending->builder != std::this_thread::get_id())
      it = s.map.erase(it);
    else
      ++it;
  }
  s.mu.unlock();
}

// Ends our build: caches the result (unless clear() dropped our entry meanwhile, or it failed),
// then hands it to the threads waiting on it.
void finish(const std::string& key, const std::shared_ptr<Pending>& mine, KernelPtr k) {
  State& s = state();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (!k) ++s.stats.failures;
    auto it = s.map.find(key);
    if (it != s.map.end() && it->second.pending == mine) {
      if (k) {
        it->second.kernel = k;
        it->second.pending.reset();
      } else {
        s.map.erase(it);
      }
    }
  }
  mine->result = std::move(k);
  mine->done.store(1, std::memory_order_release);
  detail::futex_wake(&mine->done, INT_MAX);
}

}  // namespace

KernelPtr kernel_cache_get(const std::string& key, const std::function<KernelPtr()>& build) {
  State& s = state();
  std::shared_ptr<Pending> theirs, mine;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto [it, inserted] = s.map.try_emplace(key);
    if (!inserted && !it->second.pending) {
      if (KernelPtr alive = it->second.kernel.lock()) {
        ++s.stats.hits;
        return alive;
      }
      inserted = true;  // its kernel died with the last program using it: build it again
    }
    if (!inserted && it->second.pending->builder != std::this_thread::get_id()) {
      theirs = it->second.pending;
    } else if (inserted) {
      mine = std::make_shared<Pending>();
      it->second.pending = mine;
      if (++s.inserts_since_sweep >= kSweepEvery) sweep(s);
    }
    // Else: `build` asks for its own key; waiting would deadlock, so build again, uncached.
    if (!theirs) ++s.stats.builds;
  }

  if (theirs) {
    while (theirs->done.load(std::memory_order_acquire) == 0) detail::futex_wait(&theirs->done, 0);
    if (theirs->result) {
      std::lock_guard<std::mutex> lock(s.mu);
      ++s.stats.hits;
    }
    return theirs->result;
  }

  KernelPtr k;
  try {
    k = build();
  } catch (...) {
    if (mine) finish(key, mine, nullptr);
    throw;
  }
  if (mine) {
    finish(key, mine, k);
  } else if (!k) {
    std::lock_guard<std::mutex> lock(s.mu);
    ++s.stats.failures;
  }
  return k;
}

namespace {
std::atomic<long long> g_live_kernels{0};
}  // namespace

Kernel::Kernel() { g_live_kernels.fetch_add(1, std::memory_order_relaxed); }

Kernel::~Kernel() {
  if (release) release();
  g_live_kernels.fetch_sub(1, std::memory_order_relaxed);
}

Status Kernel::ready() const {
  if (!load) return Status::ok();
  std::call_once(load_once_, [this] { load_status_ = load(const_cast<Kernel&>(*this)); });
  return load_status_;
}

long long live_kernels() { return g_live_kernels.load(std::memory_order_relaxed); }

void kernel_cache_clear() {
  State& s = state();
  std::unordered_map<std::string, Entry> dropped;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    dropped.swap(s.map);
  }
  // `dropped` dies here, outside the lock: Kernel::release may call back into the runtime.
}

size_t kernel_cache_size() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  size_t n = 0;
  for (const auto& [key, entry] : s.map) n += !entry.pending && !entry.kernel.expired();
  return n;
}

KernelCacheStats kernel_cache_stats() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.stats;
}

uint64_t content_hash(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 offset basis
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ull;  // FNV-1a 64 prime
  }
  return h;
}

}  // namespace framejit::rt
