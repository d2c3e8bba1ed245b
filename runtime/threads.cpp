// threads.cpp — the persistent worker pool behind parallel_for: lazy start, chunk claiming with
// stealing, spin-then-futex waits, and the inline, fork-child and process-exit paths.
#include "runtime/threads.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <system_error>
#include <thread>

#include "runtime/futex_p.h"

namespace framejit::rt {

// Note [parallel_for protocol]
//
//   caller (holds dispatch_mu)                       worker w (participant w+1)
//   ──────────────────────────                       ──────────────────────────
//   fn_, n_ = ...; unfinished_ = k                   spin on job_ (kWorkerSpinNs), then futex on
//   job_ = seq << 16 | k            (publishes) ──►  wake_; sees job_ change
//   ++wake_; futex_wake(k-1) if sleepers_            claims chunk w+1, runs it, steals the rest
//   claims chunk 0, runs it, steals the rest         --unfinished_ per finished chunk; the last
//   waits unfinished_ == 0 (spin, then futex)   ◄──  one wakes the caller if it sleeps
//
// A chunk is claimed by CAS-ing its slot claimed_[c] from an older job word to the current one.
// Job words only grow (the sequence number sits in the high bits; 48 bits do not wrap), so a slot
// that still holds the value we read has not been claimed since. Between reading the slot and the
// CAS the claimant checks that job_ is still its job. Hence a worker that woke for an old job and
// races with the next one never claims anything, and once a CAS succeeds the job cannot complete
// (one of its chunks is ours) and its fields fn_ and n_ stay valid until our --unfinished_.
// Nothing of a job is read outside a claim. The caller steals every chunk no worker took, so a
// job never waits for a sleeping worker to wake up — only for chunks already running. A chunk's
// preferred owner is fixed (chunk i → participant i), so with warm workers consecutive kernels
// over the same data find their part of it in the same core's cache.

namespace {

using Body = FunctionRef<void(int64_t, int64_t)>;

constexpr int kMaxThreads = 1024;
// How long a worker spins for the next job before sleeping: long enough to bridge the gaps
// between the kernels of one program and between quick successive calls from Python, short
// enough not to burn a core when the program goes off to do something else.
constexpr int64_t kWorkerSpinNs = 200'000;
// How long the caller spins for the last running chunks before sleeping. Chunks are equal, so
// the wait is normally short; a long one means a worker was preempted.
constexpr int64_t kCallerSpinNs = 500'000;
// How long process exit waits for the workers to leave.
constexpr int64_t kExitWaitNs = 100'000'000;

constexpr uint64_t kChunkBits = 16;
constexpr uint64_t kChunkMask = (uint64_t{1} << kChunkBits) - 1;
static_assert(kMaxThreads <= static_cast<int>(kChunkMask));

thread_local bool tl_in_parallel = false;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void run_body(const Body& fn, int64_t begin, int64_t end) noexcept {
  try {
    fn(begin, end);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "framejit: exception escaped a parallel_for body: %s\n", e.what());
    std::terminate();
  } catch (...) {
    std::fprintf(stderr, "framejit: exception escaped a parallel_for body\n");
    std::terminate();
  }
}

struct Pool {
  // The current job; written by the dispatching caller before publishing job_.
  const Body* fn_ = nullptr;
  int64_t n_ = 0;

  alignas(64) std::atomic<uint64_t> job_{0};         // seq << 16 | number of chunks
  alignas(64) std::atomic<uint32_t> wake_{0};        // futex word the idle workers sleep on
  std::atomic<uint32_t> sleepers_{0};                // workers in (or entering) that sleep
  alignas(64) std::atomic<uint32_t> unfinished_{0};  // chunks of the current job not yet done
  std::atomic<uint32_t> caller_sleeping_{0};
  std::atomic<int> caller_cpu_{-1};  // where the caller of the current job runs (Note [Worker placement])
  // The last job word that claimed each chunk. One cache line each: participants CAS their own
  // chunk's slot at the same moment.
  struct alignas(64) Slot {
    std::atomic<uint64_t> job{0};
  };
  Slot claimed_[kMaxThreads];

  alignas(64) std::mutex dispatch_mu_;  // one job at a time; also serializes spawning and stop
  std::atomic<int> workers_{0};         // started workers (participants 1..workers_)
  std::atomic<uint32_t> live_{0};       // workers that have not left their loop yet
  std::atomic<bool> stop_{false};
  Pool* retired_next_ = nullptr;  // see retire()
};

// Note [Sharing an OpenMP team]
// Another library in the process may keep its own pool of as many threads as there are CPUs, as
// an OpenMP team whose threads spin for milliseconds after each of its parallel regions. A
// framejit kernel started then had twice as many runnable threads as CPUs, and its chunks waited
// for time slices: a 512x1024 layer norm took 366 us right after such a library's op against 92 us
// alone (16 cores). Kernels compiled against that library's own OpenMP runtime do not pay this. So
// the frontend may hand parallel_for such a team (share_openmp_team), and parallel_for then runs
// its chunks there, through the runtime's GOMP_parallel: one team for both libraries, its threads
// already awake, and framejit's own workers idle. A call asks for as many threads as the own pool
// would use, whatever its chunk count (Note [One team size]; the other library may run on fewer);
// chunks are split as in the own pool, thread t of the team running chunks t, t + size, ... A
// fork() child goes back to the own pool: an OpenMP runtime's threads do not survive a fork, and
// not every runtime recovers from one.
std::atomic<const OpenMpTeam*> g_team{nullptr};
std::atomic<int> g_team_pid{0};

std::atomic<int> g_override{0};
std::atomic<Pool*> g_pool{nullptr};
std::atomic<bool> g_shutdown{false};
std::atomic<bool> g_atfork_registered{false};
// Pools given up on (in a fork child, or at exit) are never freed: threads may still read them, or
// their mutex may be held by a thread that no longer exists. Listing them keeps them reachable, so
// leak checkers do not report them.
std::atomic<Pool*> g_retired{nullptr};

void retire(Pool* p) {
  p->retired_next_ = g_retired.load(std::memory_order_relaxed);
  while (!g_retired.compare_exchange_weak(p->retired_next_, p, std::memory_order_release)) {
  }
}

int available_cpus() {
  static const int cpus = [] {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
      int c = CPU_COUNT(&set);
      if (c > 0) return c;
    }
    unsigned h = std::thread::hardware_concurrency();
    return h > 0 ? static_cast<int>(h) : 1;
  }();
  return cpus;
}

int default_threads() {
  static const int n = [] {
    if (const char* e = std::getenv("FRAMEJIT_NUM_THREADS")) {
      char* end = nullptr;
      long v = std::strtol(e, &end, 10);
      if (end != e && *end == '\0' && v > 0)
        return static_cast<int>(std::min<long>(v, kMaxThreads));
    }
    // NB: the CPUs this process may run on (taskset, cpusets), not every CPU of the machine:
    // more threads than that only preempt each other.
    return std::min(available_cpus(), kMaxThreads);
  }();
  return n;
}

// Spinning only pays when every participant has a core; oversubscribed, a spinner steals the
// time slice of the thread it is waiting for.
bool may_spin(const Pool* p) {
  return p->workers_.load(std::memory_order_relaxed) + 1 <= available_cpus();
}

// Chunk c of [0, n) cut into k chunks whose sizes differ by at most one.
void run_chunk_of(const Body& fn, int64_t n, int64_t k, int64_t c) {
  const int64_t base = n / k, rem = n % k;
  const int64_t begin = c * base + std::min<int64_t>(c, rem);
  run_body(fn, begin, begin + base + (c < rem ? 1 : 0));
}

void run_chunk(Pool* p, uint64_t job, uint32_t c) {
  run_chunk_of(*p->fn_, p->n_, static_cast<int64_t>(job & kChunkMask), c);
  if (p->unfinished_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
      p->caller_sleeping_.load(std::memory_order_seq_cst))
    detail::futex_wake(&p->unfinished_, 1);
}

bool claim(Pool* p, uint64_t job, uint32_t c) {
  uint64_t seen = p->claimed_[c].job.load(std::memory_order_acquire);
  if (seen >= job) return false;
  if (p->job_.load(std::memory_order_seq_cst) != job) return false;
  return p->claimed_[c].job.compare_exchange_strong(seen, job, std::memory_order_seq_cst);
}

// Runs the participant's own chunk, then steals the others in round-robin order from there.
void run_chunks(Pool* p, uint64_t job, uint32_t participant) {
  const uint32_t k = static_cast<uint32_t>(job & kChunkMask);
  if (k == 0) return;
  const uint32_t first = participant % k;
  for (uint32_t i = 0; i < k; ++i) {
    uint32_t c = first + i < k ? first + i : first + i - k;
    if (claim(p, job, c)) run_chunk(p, job, c);
    // A job that moved on has nothing left for us.
    if (p->job_.load(std::memory_order_relaxed) != job) return;
  }
}

uint64_t wait_for_job(Pool* p, uint64_t last) {
  if (may_spin(p)) {
    const int64_t deadline = now_ns() + kWorkerSpinNs;
    for (uint32_t i = 1;; ++i) {
      uint64_t j = p->job_.load(std::memory_order_acquire);
      if (j != last) return j;
      detail::cpu_relax();
      if (i % 64 == 0 && now_ns() > deadline) break;
    }
  }
  for (;;) {
    // Dekker with publish(): either we see the new job here, or publish() sees sleepers_ > 0.
    p->sleepers_.fetch_add(1, std::memory_order_seq_cst);
    uint32_t w = p->wake_.load(std::memory_order_seq_cst);
    if (p->job_.load(std::memory_order_seq_cst) == last) detail::futex_wait(&p->wake_, w);
    p->sleepers_.fetch_sub(1, std::memory_order_relaxed);
    uint64_t j = p->job_.load(std::memory_order_acquire);
    if (j != last) return j;
  }
}

// Note [Worker placement]
// A worker woken after the machine was idle for a while is often placed by the scheduler on the
// CPU its waker runs on, and then shares that CPU with the caller until the load balancer moves
// one of them, milliseconds later: a two-way GEMM ran 1.7x slower after a 0.2 s pause, with dozens
// of migrations where back-to-back calls had one. So a worker that finds itself on the caller's
// CPU narrows its affinity to the other CPUs it may use, which moves it at once; it widens it
// again when the caller is elsewhere. Nothing is pinned for good, and with a single allowed CPU
// nothing changes.
void keep_off_caller_cpu(Pool* p) {
  thread_local bool narrowed = false;
  const int caller = p->caller_cpu_.load(std::memory_order_relaxed);
  const int here = sched_getcpu();
  if (caller < 0 || here < 0 || (here != caller && !narrowed)) return;
  static const cpu_set_t allowed = [] {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) CPU_ZERO(&set);
    return set;
  }();
  if (CPU_COUNT(&allowed) < 2 || caller >= CPU_SETSIZE || !CPU_ISSET(caller, &allowed)) return;
  cpu_set_t set = allowed;
  if (here == caller) {
    CPU_CLR(caller, &set);
    narrowed = sched_setaffinity(0, sizeof set, &set) == 0;
  } else if (narrowed) {
    narrowed = sched_setaffinity(0, sizeof set, &set) != 0;
  }
}

void worker_main(Pool* p, int index, uint64_t last) {
  tl_in_parallel = true;  // nested parallel_for calls from a body run inline
  char name[16];
  std::snprintf(name, sizeof name, "framejit-w%d", (index + 1) % 10000);
  pthread_setname_np(pthread_self(), name);
  for (;;) {
    uint64_t job = wait_for_job(p, last);
    if (p->stop_.load(std::memory_order_acquire)) break;
    last = job;
    keep_off_caller_cpu(p);
    run_chunks(p, job, static_cast<uint32_t>(index + 1));
  }
  // NB: the last touch of the pool; the process may be exiting (see Note [Pool at exit]).
  p->live_.fetch_sub(1, std::memory_order_seq_cst);
  detail::futex_wake(&p->live_, INT_MAX);
}

// Starts one more worker. Called with dispatch_mu_ held and no job in flight.
bool spawn_worker(Pool* p) {
  if (p->stop_.load(std::memory_order_relaxed)) return false;
  const int index = p->workers_.load(std::memory_order_relaxed);
  // Workers take no asynchronous signals (SIGINT, SIGCHLD, ...): those belong to the
  // application's threads (Python handles them on its main thread). Faults stay deliverable so
  // crash handlers (faulthandler) still see a crash in a kernel.
  sigset_t block, old;
  sigfillset(&block);
  for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT, SIGSYS}) sigdelset(&block, s);
  pthread_sigmask(SIG_SETMASK, &block, &old);
  bool ok = true;
  p->live_.fetch_add(1, std::memory_order_relaxed);
  try {
    std::thread(worker_main, p, index, p->job_.load(std::memory_order_relaxed)).detach();
  } catch (const std::system_error&) {  // out of threads: run with the ones we have
    p->live_.fetch_sub(1, std::memory_order_relaxed);
    ok = false;
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (ok) p->workers_.store(index + 1, std::memory_order_relaxed);
  return ok;
}

// Publishes a job of k chunks. Called with dispatch_mu_ held and no job in flight.
uint64_t publish(Pool* p, const Body* fn, int64_t n, uint32_t k) {
  p->fn_ = fn;
  p->n_ = n;
  p->unfinished_.store(k, std::memory_order_relaxed);
  const uint64_t job =
      ((p->job_.load(std::memory_order_relaxed) >> kChunkBits) + 1) << kChunkBits | k;
  p->job_.store(job, std::memory_order_seq_cst);
  p->wake_.fetch_add(1, std::memory_order_seq_cst);
  if (p->sleepers_.load(std::memory_order_seq_cst) > 0)
    detail::futex_wake(&p->wake_, k == 0 ? INT_MAX : static_cast<int>(k - 1));
  return job;
}

void wait_done(Pool* p) {
  if (may_spin(p)) {
    const int64_t deadline = now_ns() + kCallerSpinNs;
    for (uint32_t i = 1; p->unfinished_.load(std::memory_order_acquire) != 0; ++i) {
      detail::cpu_relax();
      if (i % 64 == 0 && now_ns() > deadline) break;
    }
  }
  for (;;) {
    p->caller_sleeping_.store(1, std::memory_order_seq_cst);
    uint32_t u = p->unfinished_.load(std::memory_order_seq_cst);
    if (u == 0) break;
    detail::futex_wait(&p->unfinished_, u);
  }
  p->caller_sleeping_.store(0, std::memory_order_relaxed);
}

// In a fork() child only the forking thread exists: forget the parent's pool (leaked on purpose:
// its mutex may be locked and its threads are gone) and let the next parallel_for start one.
void atfork_child() {
  if (Pool* p = g_pool.exchange(nullptr, std::memory_order_relaxed)) retire(p);
}

Pool* get_pool() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (p || g_shutdown.load(std::memory_order_relaxed)) return p;
  if (!g_atfork_registered.exchange(true)) pthread_atfork(nullptr, nullptr, atfork_child);
  Pool* fresh = new (std::nothrow) Pool;
  if (!fresh) return nullptr;
  if (g_pool.compare_exchange_strong(p, fresh, std::memory_order_acq_rel)) return fresh;
  delete fresh;  // another thread won; ours never started a thread
  return p;
}

// Note [Pool at exit]
// Static destructors run on whatever thread called exit(), possibly while another thread (a
// Python daemon thread with the GIL released) is still inside parallel_for. So: later calls run
// inline; the workers are told to stop and are waited for, but only for a bounded time; and the
// Pool is retired, not freed, because a worker we stopped waiting for may still read it. Workers
// are detached, so nothing can block in a join.
void shutdown_at_exit() {
  g_shutdown.store(true, std::memory_order_seq_cst);
  Pool* p = g_pool.exchange(nullptr, std::memory_order_acq_rel);
  if (!p) return;
  retire(p);
  const int64_t deadline = now_ns() + kExitWaitNs;
  std::unique_lock<std::mutex> lock(p->dispatch_mu_, std::defer_lock);
  while (!lock.try_lock()) {
    if (now_ns() > deadline) return;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  p->stop_.store(true, std::memory_order_seq_cst);
  publish(p, nullptr, 0, 0);  // an empty job wakes every worker; each sees stop_ and leaves
  for (;;) {
    uint32_t live = p->live_.load(std::memory_order_seq_cst);
    int64_t left = deadline - now_ns();
    if (live == 0 || left <= 0) break;
    detail::futex_wait(&p->live_, live, left);
  }
}

struct ExitHook {
  ~ExitHook() { shutdown_at_exit(); }
} g_exit_hook;

}  // namespace

int num_threads() {
  int o = g_override.load(std::memory_order_relaxed);
  return o > 0 ? o : default_threads();
}

void set_num_threads(int n) {
  g_override.store(std::clamp(n, 0, kMaxThreads), std::memory_order_relaxed);
}

bool in_parallel_region() { return tl_in_parallel; }

void share_openmp_team(const OpenMpTeam* team) {
  g_team_pid.store(static_cast<int>(getpid()), std::memory_order_relaxed);
  g_team.store(team && team->parallel && team->thread_num && team->team_size ? team : nullptr,
               std::memory_order_release);
}

namespace {

// Note [One team size]
// libgomp keeps the threads of its last region docked for the next one, but a region that asks
// for fewer threads than the last one makes the surplus threads exit, and the next larger region
// creates them again (pthread_create, fresh stacks). Kernels split into as many chunks as their
// size allows, so consecutive steps of one program asked for 16, 4, 16, 12 threads: on the
// 16-core GPU machine (torch 2.11) that cost 14 involuntary and 24 voluntary context switches and
// 30 page faults per call of the GPT block sample, whose median call took 20 ms against 1.7 ms when
// every region had the same size. So every region asks for num_threads() threads, whatever its
// chunk count, and threads past the job's chunks only pass the closing barrier. (torch sizes its
// own regions by their work, so a switch between torch's ops and framejit's may still resize the
// team: once per switch, not once per step.)

// parallel_for on a shared OpenMP team (Note [Sharing an OpenMP team]).
void run_on_team(const OpenMpTeam& team, int threads, int64_t n, int64_t k, const Body& fn) {
  struct Job {
    const OpenMpTeam* team;
    const Body* fn;
    int64_t n, k;
  } job{&team, &fn, n, k};
  team.parallel(
      [](void* data) {
        const Job& j = *static_cast<const Job*>(data);
        const bool was = tl_in_parallel;
        tl_in_parallel = true;  // nested parallel_for calls from a body run inline
        const int64_t size = std::max(j.team->team_size(), 1), me = j.team->thread_num();
        for (int64_t c = me; c < j.k; c += size) run_chunk_of(*j.fn, j.n, j.k, c);
        tl_in_parallel = was;
      },
      &job, static_cast<unsigned>(threads), 0);
}

}  // namespace

void parallel_for(int64_t n, int64_t grain, Body fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  const int threads = num_threads();
  if (n <= grain || threads == 1 || tl_in_parallel) {
    run_body(fn, 0, n);
    return;
  }
  int64_t k = std::min<int64_t>(threads, n / grain);  // every chunk >= grain
  if (const OpenMpTeam* team = g_team.load(std::memory_order_acquire);
      team && g_team_pid.load(std::memory_order_relaxed) == static_cast<int>(getpid())) {
    run_on_team(*team, threads, n, k, fn);
    return;
  }
  Pool* p = k > 1 ? get_pool() : nullptr;
  std::unique_lock<std::mutex> lock;
  if (p) lock = std::unique_lock<std::mutex>(p->dispatch_mu_, std::try_to_lock);
  if (p && lock.owns_lock()) {
    while (p->workers_.load(std::memory_order_relaxed) < k - 1 && spawn_worker(p)) {
    }
    k = std::min<int64_t>(k, p->workers_.load(std::memory_order_relaxed) + 1);
  }
  if (!lock.owns_lock() || k <= 1) {  // pool busy, stopped or unavailable
    run_body(fn, 0, n);
    return;
  }
  p->caller_cpu_.store(sched_getcpu(), std::memory_order_relaxed);
  const uint64_t job = publish(p, &fn, n, static_cast<uint32_t>(k));
  tl_in_parallel = true;
  run_chunks(p, job, 0);
  tl_in_parallel = false;
  wait_done(p);
}

}  // namespace framejit::rt
