// threads.h — the process-wide thread pool and parallel_for used by kernels and GEMM.
#pragma once

#include <cstdint>
#include "runtime/function_ref.h"

namespace framejit::rt {

/// Number of worker threads (including the caller) parallel_for may use: the machine's hardware
/// threads, or FRAMEJIT_NUM_THREADS when set. At least 1.
int num_threads();
/// Overrides num_threads() (tests force 1 or 2); 0 restores the default.
void set_num_threads(int n);

/// Runs fn(begin, end) over [0, n) split into chunks of at least `grain` items, on up to
/// num_threads() threads (the caller takes part). Small problems (n <= grain) run inline on the
/// caller with no synchronization. Blocks until every chunk is done. fn must not throw.
/// Nested calls from inside fn run inline.
///
/// Details (see Note [parallel_for protocol] in threads.cpp):
/// - n <= 0 calls fn not at all; grain < 1 counts as 1.
/// - At most num_threads() chunks, of sizes differing by at most one item, each >= grain; fn sees
///   each index exactly once. Which thread runs which chunk is not fixed (the caller steals chunks
///   no worker has picked up yet), but with warm workers chunk i tends to stay on the same thread
///   from call to call.
/// - Only one parallel_for uses the pool at a time: a call made while another thread's call is
///   running runs inline on its caller instead of queueing.
/// - An exception escaping fn prints its message and calls std::terminate().
/// - Workers start on first use, are re-created lazily in a fork() child, and are stopped at exit.
void parallel_for(int64_t n, int64_t grain, FunctionRef<void(int64_t begin, int64_t end)> fn);

/// True on a pool worker and on a caller while it runs its chunks: where parallel_for would run
/// inline. Kernels use it to skip parallel set-up work that cannot pay off.
bool in_parallel_region();

/// An OpenMP runtime loaded in the process, by its entry points (the GNU OpenMP ABI, which other
/// OpenMP runtimes also export). See Note [Sharing an OpenMP team] in threads.cpp.
struct OpenMpTeam {
  void (*parallel)(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags) = nullptr;  // GOMP_parallel
  int (*thread_num)() = nullptr;   // omp_get_thread_num
  int (*team_size)() = nullptr;    // omp_get_num_threads
};
/// From now on parallel_for runs its chunks on `team`'s threads (in this process; a fork() child
/// goes back to framejit's own pool). The entry points must stay valid for the process's life.
/// Null goes back to framejit's own pool.
void share_openmp_team(const OpenMpTeam* team);

}  // namespace framejit::rt
