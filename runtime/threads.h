// threads.h — the process-wide thread pool and parallel_for used by kernels and GEMM.
#pragma once

#include <cstdint>
#include <functional>

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
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t begin, int64_t end)>& fn);

}  // namespace framejit::rt
