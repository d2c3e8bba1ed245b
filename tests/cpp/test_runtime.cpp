// test_runtime.cpp — the runtime's plumbing: parallel_for and its pool (coverage, chunking,
// inline paths, nesting, concurrency, fork, exit), the pooled allocator, the kernel cache.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/kernel_cache.h"
#include "runtime/memory.h"
#include "runtime/threads.h"

namespace framejit::rt {
namespace {

// Note [fork under ASan]
// GCC 12's AddressSanitizer runtime does not lock its allocator around fork() (glibc's malloc
// does). A child forked while another thread is inside ASan's malloc -- a pool worker that is still
// starting up allocates there -- inherits that lock held and hangs at its first allocation of the
// same size class. That is the sanitizer runtime, not the pool, so the fork tests do not run in
// the sanitized build (`make test-asan`); `make test` runs them.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kForkIsSafe = false;
#else
constexpr bool kForkIsSafe = true;
#endif

// Restores the default thread count when a test ends, whatever it set.
struct ThreadCount {
  explicit ThreadCount(int n) { set_num_threads(n); }
  ~ThreadCount() { set_num_threads(0); }
};

struct Chunk {
  int64_t begin, end;
  std::thread::id thread;
};

// Runs parallel_for and returns its chunks, sorted, after checking every index was seen once.
std::vector<Chunk> run_and_check(int64_t n, int64_t grain) {
  std::vector<std::atomic<int>> seen(static_cast<size_t>(std::max<int64_t>(n, 0)));
  std::mutex mu;
  std::vector<Chunk> chunks;
  parallel_for(n, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) seen[i].fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu);
    chunks.push_back({b, e, std::this_thread::get_id()});
  });
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[i].load(), 1) << "index " << i;
  std::sort(chunks.begin(), chunks.end(),
            [](const Chunk& a, const Chunk& b) { return a.begin < b.begin; });
  return chunks;
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 4, 8}) {
    ThreadCount tc(threads);
    for (int64_t n : {0, 1, 2, 3, 7, 64, 1000, 4097}) {
      for (int64_t grain : {-1, 0, 1, 2, 3, 7, 64, 1000, 5000}) {
        SCOPED_TRACE(testing::Message()
                     << "threads=" << threads << " n=" << n << " grain=" << grain);
        std::vector<Chunk> chunks = run_and_check(n, grain);
        if (n == 0) {
          EXPECT_TRUE(chunks.empty());
          continue;
        }
        const int64_t g = std::max<int64_t>(grain, 1);
        const int64_t k = n <= g ? 1 : std::min<int64_t>(threads, n / g);
        ASSERT_EQ(static_cast<int64_t>(chunks.size()), k);
        int64_t expect_begin = 0, smallest = n, largest = 0;
        for (const Chunk& c : chunks) {
          EXPECT_EQ(c.begin, expect_begin);
          expect_begin = c.end;
          smallest = std::min(smallest, c.end - c.begin);
          largest = std::max(largest, c.end - c.begin);
        }
        EXPECT_EQ(expect_begin, n);
        if (k > 1) {
          EXPECT_GE(smallest, g);
        }
        EXPECT_LE(largest - smallest, 1);  // balanced
      }
    }
  }
}

TEST(ThreadPool, ZeroAndNegativeSizesDoNotCallTheBody) {
  ThreadCount tc(4);
  int calls = 0;
  parallel_for(0, 1, [&](int64_t, int64_t) { ++calls; });
  parallel_for(-5, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(ThreadPool, SmallProblemsRunInlineOnTheCaller) {
  ThreadCount tc(4);
  for (auto [n, grain] : {std::pair<int64_t, int64_t>{1, 1}, {5, 5}, {10, 100}, {3, 0x7fffffff}}) {
    std::vector<Chunk> chunks = run_and_check(n, grain);
    ASSERT_EQ(chunks.size(), 1u);
    EXPECT_EQ(chunks[0].begin, 0);
    EXPECT_EQ(chunks[0].end, n);
    EXPECT_EQ(chunks[0].thread, std::this_thread::get_id());
  }
}

TEST(ThreadPool, OneThreadRunsInlineOnTheCaller) {
  ThreadCount tc(1);
  EXPECT_EQ(num_threads(), 1);
  std::vector<Chunk> chunks = run_and_check(1 << 20, 1);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].end, 1 << 20);
  EXPECT_EQ(chunks[0].thread, std::this_thread::get_id());
  EXPECT_FALSE(in_parallel_region());
}

TEST(ThreadPool, SetNumThreadsOverridesAndRestores) {
  const int def = num_threads();
  EXPECT_GE(def, 1);
  set_num_threads(3);
  EXPECT_EQ(num_threads(), 3);
  set_num_threads(0);
  EXPECT_EQ(num_threads(), def);
}

// Two chunks that each wait until both have started: passes only if they really run at the same
// time on two threads (the caller could otherwise steal both).
TEST(ThreadPool, ChunksRunConcurrentlyOnDistinctThreads) {
  ThreadCount tc(2);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> started{0};
    std::atomic<bool> timed_out{false};
    std::thread::id ids[2];
    parallel_for(2, 1, [&](int64_t b, int64_t) {
      ids[b] = std::this_thread::get_id();
      EXPECT_TRUE(in_parallel_region());
      started.fetch_add(1);
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      while (started.load() < 2) {
        if (std::chrono::steady_clock::now() > deadline) {
          timed_out = true;
          break;
        }
        std::this_thread::yield();
      }
    });
    ASSERT_FALSE(timed_out);
    EXPECT_NE(ids[0], ids[1]);
    // Round 0 starts the pool; later rounds exercise both the warm and (after the sleep) the
    // sleeping-worker wake-up paths.
    if (round % 5 == 4) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_FALSE(in_parallel_region());
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadCount tc(4);
  const int64_t outer = 64, inner = 100;
  std::vector<std::atomic<int>> seen(outer * inner);
  std::atomic<int> inner_calls{0}, wrong_thread{0};
  parallel_for(outer, 1, [&](int64_t b, int64_t e) {
    const std::thread::id me = std::this_thread::get_id();
    for (int64_t i = b; i < e; ++i) {
      parallel_for(inner, 1, [&](int64_t ib, int64_t ie) {
        inner_calls.fetch_add(1);
        if (std::this_thread::get_id() != me) wrong_thread.fetch_add(1);
        EXPECT_EQ(ib, 0);
        EXPECT_EQ(ie, inner);
        for (int64_t j = ib; j < ie; ++j) seen[i * inner + j].fetch_add(1);
      });
    }
  });
  EXPECT_EQ(inner_calls.load(), outer);  // one inline call per outer index
  EXPECT_EQ(wrong_thread.load(), 0);
  for (auto& s : seen) ASSERT_EQ(s.load(), 1);
}

// Several application threads at once: one gets the pool, the others run inline; all correct.
TEST(ThreadPool, ConcurrentCallersAreAllCorrect) {
  ThreadCount tc(4);
  std::atomic<int> errors{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int it = 0; it < 50; ++it) {
        const int64_t n = 1000 + 37 * t + it;
        std::vector<std::atomic<int>> seen(n);
        parallel_for(n, 16, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) seen[i].fetch_add(1);
        });
        for (auto& s : seen)
          if (s.load() != 1) errors.fetch_add(1);
      }
    });
  }
  for (auto& c : callers) c.join();
  EXPECT_EQ(errors.load(), 0);
}

TEST(ThreadPool, ResultsVisibleToTheCaller) {
  ThreadCount tc(4);
  std::vector<int64_t> out(100000);  // plain stores, no atomics: parallel_for must order them
  for (int rep = 0; rep < 20; ++rep) {
    parallel_for(static_cast<int64_t>(out.size()), 1000, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) out[i] = i * rep;
    });
    for (size_t i = 0; i < out.size(); i += 997) ASSERT_EQ(out[i], static_cast<int64_t>(i) * rep);
  }
}

// Waits for a child for at most `seconds`; returns its exit code, or -1 if it hung or crashed.
int wait_child(pid_t pid, int seconds) {
  for (int i = 0; i < seconds * 1000; ++i) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

int64_t parallel_sum(int64_t n) {
  std::atomic<int64_t> sum{0};
  parallel_for(n, 8, [&](int64_t b, int64_t e) {
    int64_t s = 0;
    for (int64_t i = b; i < e; ++i) s += i;
    sum.fetch_add(s);
  });
  return sum.load();
}

TEST(ThreadPool, ForkChildGetsAWorkingPool) {
  if (!kForkIsSafe) GTEST_SKIP() << "fork() under ASan: see Note [fork under ASan]";
  ThreadCount tc(2);
  ASSERT_EQ(parallel_sum(1000), 999 * 1000 / 2);  // the parent's pool is running
  std::fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(10);
    bool ok = true;
    std::atomic<int> off_caller{0};
    for (int i = 0; i < 50; ++i) {
      ok = ok && parallel_sum(1000) == 999 * 1000 / 2;
      parallel_for(2, 1, [&](int64_t, int64_t) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        // (no gtest macros in the child)
      });
    }
    // The child has workers of its own: a chunk that waits for its sibling must see it start.
    std::atomic<int> started{0};
    const std::thread::id caller = std::this_thread::get_id();
    parallel_for(2, 1, [&](int64_t, int64_t) {
      started.fetch_add(1);
      if (std::this_thread::get_id() != caller) off_caller.fetch_add(1);
      while (started.load() < 2) std::this_thread::yield();
    });
    _exit(ok && off_caller.load() == 1 ? 0 : 1);
  }
  EXPECT_EQ(wait_child(pid, 10), 0);
  EXPECT_EQ(parallel_sum(1000), 999 * 1000 / 2);  // and the parent's still works
}

// exit() with workers started — sleeping, spinning, or (in another thread) still busy — returns.
TEST(ThreadPool, ExitDoesNotHang) {
  if (!kForkIsSafe) GTEST_SKIP() << "fork() under ASan: see Note [fork under ASan]";
  for (int mode = 0; mode < 3; ++mode) {
    std::fflush(nullptr);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(10);
      set_num_threads(2);
      parallel_sum(100000);
      if (mode == 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));  // workers asleep
      if (mode == 2) {  // a busy pool at exit: exit must not wait for it to finish
        std::thread([] {
          parallel_for(2, 1, [](int64_t, int64_t) {
            std::this_thread::sleep_for(std::chrono::seconds(30));
          });
        }).detach();
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      std::exit(0);  // static destructors run: the pool's exit hook
    }
    EXPECT_EQ(wait_child(pid, 5), 0) << "mode " << mode;
  }
}

TEST(ThreadPoolDeathTest, ThrowingBodyTerminates) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  set_num_threads(2);
  EXPECT_DEATH(parallel_for(100, 1,
                            [](int64_t b, int64_t) {
                              if (b == 0) throw std::runtime_error("boom");
                            }),
               "exception escaped a parallel_for body: boom");
  set_num_threads(0);
}

// A stand-in for an OpenMP runtime's GOMP_parallel: runs fn on `num_threads` fresh threads (a team
// of fewer than asked when kTeamCap says so), each knowing its number, as a team would.
namespace fake_omp {
thread_local int tl_num = 0, tl_size = 1;
int team_cap = 64;
std::atomic<int> teams{0};
std::atomic<unsigned> last_asked{0};
void parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned) {
  ++teams;
  last_asked = num_threads;
  const int size = std::min<int>(static_cast<int>(num_threads), team_cap);
  std::vector<std::thread> threads;
  for (int t = 1; t < size; ++t)
    threads.emplace_back([=] {
      tl_num = t, tl_size = size;
      fn(data);
    });
  tl_num = 0, tl_size = size;
  fn(data);
  tl_size = 1;
  for (auto& t : threads) t.join();
}
int thread_num() { return tl_num; }
int team_size() { return tl_size; }
}  // namespace fake_omp

TEST(ThreadPool, ASharedOpenMpTeamRunsEveryChunkOnce) {
  static const OpenMpTeam team{fake_omp::parallel, fake_omp::thread_num, fake_omp::team_size};
  share_openmp_team(&team);
  for (int cap : {64, 2}) {  // a full team, and one smaller than asked for
    fake_omp::team_cap = cap;
    ThreadCount tc(4);
    const int before = fake_omp::teams.load();
    std::vector<Chunk> chunks = run_and_check(1000, 10);
    EXPECT_EQ(fake_omp::teams.load(), before + 1) << "one team per call";
    EXPECT_EQ(fake_omp::last_asked.load(), 4u) << "every region asks for num_threads() threads";
    ASSERT_EQ(chunks.size(), 4u);
    for (size_t i = 0; i < chunks.size(); ++i) EXPECT_EQ(chunks[i].end - chunks[i].begin, 250);
    // A job of fewer chunks than threads still asks for the whole team (Note [One team size]).
    EXPECT_EQ(run_and_check(20, 10).size(), 2u);
    EXPECT_EQ(fake_omp::last_asked.load(), 4u);
    // Nested calls from a body run inline on its thread.
    std::atomic<int> nested_teams{0};
    const int mid = fake_omp::teams.load();
    parallel_for(8, 1, [&](int64_t, int64_t) {
      EXPECT_TRUE(in_parallel_region());
      parallel_for(100, 1, [&](int64_t b, int64_t e) { nested_teams += b == 0 && e == 100; });
    });
    EXPECT_EQ(fake_omp::teams.load(), mid + 1);
    EXPECT_EQ(nested_teams.load(), 4);  // each of the 4 chunks ran its nested call whole
    EXPECT_FALSE(in_parallel_region());
  }
  share_openmp_team(nullptr);
  const int after = fake_omp::teams.load();
  run_and_check(1000, 10);
  EXPECT_EQ(fake_omp::teams.load(), after) << "back on the own pool";
}

// ---- pooled allocator -------------------------------------------------------------------------

TEST(MemoryPool, BlocksAre64ByteAlignedAndWritable) {
  std::vector<std::pair<void*, size_t>> blocks;
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{100},
                       size_t{4096}, size_t{1} << 20, (size_t{3} << 20) + 5, size_t{10} << 20}) {
    void* p = pool_alloc(bytes);
    ASSERT_NE(p, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    if (bytes >= (size_t{1} << 20)) {
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 4096, 0u) << bytes;
    }
    std::memset(p, 0xab, bytes);
    blocks.push_back({p, bytes});
  }
  for (auto [p, bytes] : blocks) pool_free(p);
  pool_free(nullptr);  // ignored
}

TEST(MemoryPool, ZeroBytesGivesUniquePointers) {
  void* a = pool_alloc(0);
  void* b = pool_alloc(0);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_NE(a, b);
  pool_free(a);
  pool_free(b);
}

TEST(MemoryPool, ReusesFreedBlocksOfTheSameClass) {
  pool_trim();
  const PoolStats s0 = pool_stats();
  EXPECT_EQ(s0.bytes_cached, 0u);
  void* a = pool_alloc(1000);
  PoolStats s1 = pool_stats();
  EXPECT_EQ(s1.allocations, s0.allocations + 1);
  EXPECT_EQ(s1.reuses, s0.reuses);
  EXPECT_EQ(s1.bytes_in_use, s0.bytes_in_use + 1000);
  pool_free(a);
  s1 = pool_stats();
  EXPECT_EQ(s1.bytes_in_use, s0.bytes_in_use);
  EXPECT_EQ(s1.bytes_cached, 1024u);  // 1000 rounds up to the 1024 class
  void* b = pool_alloc(1000);
  EXPECT_EQ(b, a);
  pool_free(b);
  void* c = pool_alloc(1010);  // same class
  EXPECT_EQ(c, a);
  const PoolStats s2 = pool_stats();
  EXPECT_EQ(s2.reuses, s0.reuses + 2);
  EXPECT_EQ(s2.allocations, s0.allocations + 3);
  void* d = pool_alloc(5000);  // another class: fresh
  EXPECT_NE(d, a);
  EXPECT_EQ(pool_stats().reuses, s0.reuses + 2);
  pool_free(c);
  pool_free(d);
  // Big blocks (own mappings) are reused the same way.
  void* big = pool_alloc(size_t{5} << 20);
  pool_free(big);
  EXPECT_EQ(pool_alloc((size_t{5} << 20) - 100), big);
  pool_free(big);
}

TEST(MemoryPool, TrimEmptiesTheCache) {
  std::vector<void*> blocks;
  for (size_t bytes = 64; bytes <= (size_t{4} << 20); bytes *= 3)
    blocks.push_back(pool_alloc(bytes));
  for (void* p : blocks) pool_free(p);
  EXPECT_GT(pool_stats().bytes_cached, 0u);
  pool_trim();
  EXPECT_EQ(pool_stats().bytes_cached, 0u);
  const size_t reuses = pool_stats().reuses;
  void* p = pool_alloc(64);
  EXPECT_EQ(pool_stats().reuses, reuses);  // nothing left to reuse
  pool_free(p);
}

TEST(MemoryPool, CacheLimitIsRespected) {
  const size_t old_limit = pool_cache_limit();
  EXPECT_GT(old_limit, 0u);
  pool_trim();
  pool_set_cache_limit(size_t{1} << 20);
  std::vector<void*> blocks;
  for (int i = 0; i < 10; ++i) blocks.push_back(pool_alloc(300 << 10));  // 320 KiB class
  for (void* p : blocks) pool_free(p);
  EXPECT_LE(pool_stats().bytes_cached, size_t{1} << 20);
  EXPECT_EQ(pool_stats().bytes_cached, 3u * (320 << 10));
  pool_set_cache_limit(400 << 10);  // lowering it releases down to the new cap
  EXPECT_EQ(pool_stats().bytes_cached, 320u << 10);
  pool_set_cache_limit(old_limit);
  pool_trim();
}

TEST(MemoryPool, HugeRequestsFailWithNull) {
  const PoolStats s0 = pool_stats();
  EXPECT_EQ(pool_alloc(size_t{1} << 62), nullptr);
  EXPECT_EQ(pool_alloc(SIZE_MAX), nullptr);
  EXPECT_EQ(pool_alloc(SIZE_MAX - 63), nullptr);
  const PoolStats s1 = pool_stats();
  EXPECT_EQ(s1.bytes_in_use, s0.bytes_in_use);
  EXPECT_EQ(s1.allocations, s0.allocations + 3);
}

TEST(MemoryPool, PeakTracksTheHighWaterMark) {
  pool_reset_peak();
  const size_t base = pool_stats().bytes_in_use;
  void* a = pool_alloc(10000);
  void* b = pool_alloc(20000);
  pool_free(a);
  pool_free(b);
  EXPECT_EQ(pool_stats().peak_bytes_in_use, base + 30000);
  pool_reset_peak();
  EXPECT_EQ(pool_stats().peak_bytes_in_use, base);
}

TEST(MemoryPool, ThreadSafe) {
  const size_t in_use0 = pool_stats().bytes_in_use;
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      std::vector<std::pair<unsigned char*, size_t>> live;
      for (int i = 0; i < 5000; ++i) {
        if (live.size() < 32 && (live.empty() || rng() % 2)) {
          size_t bytes = rng() % 3 == 0 ? rng() % 70000 : rng() % 300;
          auto* p = static_cast<unsigned char*>(pool_alloc(bytes));
          if (!p || reinterpret_cast<uintptr_t>(p) % 64) errors.fetch_add(1);
          std::memset(p, t, bytes);
          live.push_back({p, bytes});
        } else {
          size_t k = rng() % live.size();
          auto [p, bytes] = live[k];
          for (size_t j = 0; j < bytes; j += 61)
            if (p[j] != static_cast<unsigned char>(t)) errors.fetch_add(1);
          pool_free(p);
          live[k] = live.back();
          live.pop_back();
        }
      }
      for (auto [p, bytes] : live) pool_free(p);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(pool_stats().bytes_in_use, in_use0);
}

TEST(MemoryPoolDeathTest, DoubleFreeAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        void* p = pool_alloc(100);
        pool_free(p);
        pool_free(p);
      },
      "double free");
}

// ---- kernel cache -----------------------------------------------------------------------------

KernelPtr make_kernel(const std::string& name, std::atomic<int>* released = nullptr) {
  auto k = std::make_shared<Kernel>();
  k->name = name;
  k->entry = reinterpret_cast<void*>(0x1000);
  if (released) k->release = [released] { released->fetch_add(1); };
  return k;
}

TEST(KernelCache, HitsAndMisses) {
  kernel_cache_clear();
  const KernelCacheStats s0 = kernel_cache_stats();
  int builds = 0;
  auto build = [&] {
    ++builds;
    return make_kernel("k");
  };
  KernelPtr a = kernel_cache_get("add f32", build);
  KernelPtr b = kernel_cache_get("add f32", build);
  KernelPtr c = kernel_cache_get("mul f32", build);
  EXPECT_EQ(builds, 2);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(kernel_cache_size(), 2u);
  const KernelCacheStats s1 = kernel_cache_stats();
  EXPECT_EQ(s1.hits, s0.hits + 1);
  EXPECT_EQ(s1.builds, s0.builds + 2);
  kernel_cache_clear();
  EXPECT_EQ(kernel_cache_size(), 0u);
  KernelPtr d = kernel_cache_get("add f32", build);  // rebuilt after a clear
  EXPECT_EQ(builds, 3);
  EXPECT_NE(d, a);
  kernel_cache_clear();
}

TEST(KernelCache, FailuresAreNotCached) {
  kernel_cache_clear();
  int builds = 0;
  KernelPtr k = kernel_cache_get("bad", [&]() -> KernelPtr {
    ++builds;
    return nullptr;
  });
  EXPECT_EQ(k, nullptr);
  EXPECT_EQ(kernel_cache_size(), 0u);
  k = kernel_cache_get("bad", [&] {
    ++builds;
    return make_kernel("good now");
  });
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(builds, 2);
  EXPECT_EQ(kernel_cache_size(), 1u);
  // A throwing build propagates, caches nothing, and the next call builds again.
  EXPECT_THROW(kernel_cache_get("throws", []() -> KernelPtr { throw std::runtime_error("x"); }),
               std::runtime_error);
  EXPECT_EQ(kernel_cache_size(), 1u);
  EXPECT_NE(kernel_cache_get("throws", [] { return make_kernel("ok"); }), nullptr);
  kernel_cache_clear();
}

// Note [Kernel lifetime]: the cache holds kernels weakly; the last user releases a kernel, and a
// later get of its key builds it again.
TEST(KernelCache, ReleaseRunsWhenTheLastUserDrops) {
  kernel_cache_clear();
  std::atomic<int> released{0}, builds{0};
  auto build = [&](const char* name) {
    return [&, name] {
      builds.fetch_add(1);
      return make_kernel(name, &released);
    };
  };
  KernelPtr held = kernel_cache_get("held", build("held"));
  kernel_cache_get("unheld", build("unheld"));
  EXPECT_EQ(released.load(), 1) << "nobody holds \"unheld\": the cache does not keep it";
  EXPECT_EQ(kernel_cache_get("held", build("held")), held) << "a live kernel is shared";
  kernel_cache_clear();
  EXPECT_EQ(released.load(), 1);
  EXPECT_EQ(held->name, "held");  // still usable by its program
  held.reset();
  EXPECT_EQ(released.load(), 2);
  KernelPtr again = kernel_cache_get("unheld", build("unheld"));
  EXPECT_EQ(builds.load(), 3) << "an expired key is built again";
  EXPECT_EQ(kernel_cache_size(), 1u);
}

// Threads asking for one key at once: exactly one build, every thread gets that kernel.
TEST(KernelCache, ConcurrentGetsBuildOnce) {
  kernel_cache_clear();
  std::atomic<int> builds{0}, ready{0};
  constexpr int kThreads = 8;
  std::vector<KernelPtr> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      got[t] = kernel_cache_get("shared", [&] {
        builds.fetch_add(1);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));  // others arrive meanwhile
        return make_kernel("shared");
      });
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(builds.load(), 1);
  for (const KernelPtr& k : got) EXPECT_EQ(k, got[0]);
  ASSERT_NE(got[0], nullptr);
  kernel_cache_clear();
}

TEST(KernelCache, WaitersShareAFailedBuild) {
  kernel_cache_clear();
  std::atomic<bool> building{false};
  std::atomic<int> builds{0};
  KernelPtr waiter_got = make_kernel("sentinel");
  std::thread builder([&] {
    kernel_cache_get("fails", [&]() -> KernelPtr {
      builds.fetch_add(1);
      building = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      return nullptr;
    });
  });
  while (!building) std::this_thread::yield();
  waiter_got = kernel_cache_get("fails", [&] {
    builds.fetch_add(1);
    return make_kernel("waiter built");
  });
  builder.join();
  EXPECT_EQ(builds.load(), 1);
  EXPECT_EQ(waiter_got, nullptr);
  EXPECT_EQ(kernel_cache_size(), 0u);
}

TEST(KernelCache, BuildMayUseTheCache) {
  kernel_cache_clear();
  KernelPtr outer = kernel_cache_get("outer", [] {
    KernelPtr inner = kernel_cache_get("inner", [] { return make_kernel("inner"); });
    KernelPtr self = kernel_cache_get("outer", [] { return make_kernel("outer-uncached"); });
    EXPECT_EQ(self->name, "outer-uncached");
    return make_kernel("outer:" + inner->name);
  });
  EXPECT_EQ(outer->name, "outer:inner");
  EXPECT_EQ(kernel_cache_get("outer", [] { return make_kernel("rebuilt"); }), outer);
  // "inner" died with the build that used it (nobody kept it); "outer" is alive.
  EXPECT_EQ(kernel_cache_size(), 1u);
  kernel_cache_clear();
}

TEST(KernelCache, ClearDuringABuildDoesNotCacheIt) {
  kernel_cache_clear();
  KernelPtr k = kernel_cache_get("racy", [] {
    kernel_cache_clear();  // framejit.reset() from another thread, say
    return make_kernel("racy");
  });
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(kernel_cache_size(), 0u);
}

TEST(KernelCache, ContentHashIsFnv1a64) {
  EXPECT_EQ(content_hash(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(content_hash("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(content_hash("foobar"), 0x85944171f73967e8ull);
  EXPECT_NE(content_hash("ab"), content_hash("ba"));
}

}  // namespace
}  // namespace framejit::rt
