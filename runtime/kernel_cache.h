// kernel_cache.h — compiled kernels shared by every graph, keyed by a hash of their content.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "framejit/status.h"
#include "runtime/dtype.h"

namespace framejit::rt {

/// A piece of executable code and what keeps it alive (e.g. an asmjit runtime allocation).
struct Kernel {
  Kernel();
  Kernel(const Kernel&) = delete;
  Kernel& operator=(const Kernel&) = delete;
  ~Kernel();

  void* entry = nullptr;        // the function to call (a CUfunction for a device kernel)
  Device device;                // where it runs: the host, or a CUDA device (runtime/cuda/launch.h)
  void* module = nullptr;       // a device kernel's CUmodule (its other entries are looked up there)
  std::string name;             // for logs
  std::string listing;          // loop IR / assembly text when FRAMEJIT_LOGS=kernels,asm asked for it
  std::function<void()> release;  // frees the executable memory; called when the last user drops it
  /// A device kernel whose module is loaded on first use (Note [Device modules load when needed]
  /// in jit/cuda/backend.cpp): sets entry, module and release. Run once, through ready().
  std::function<Status(Kernel&)> load;
  /// A device pointwise kernel made for one-dim iteration spaces only (Note [Flat pointwise
  /// kernels] in jit/cuda/pointwise_codegen.cpp): the same computation for any layout; else null.
  std::shared_ptr<const Kernel> strided;
  /// A float sum's row kernel: the most elements per call over which its own leaves keep the sum
  /// pairwise, for contiguous rows and for strided ones (Note [Pairwise sums] in
  /// runtime/reduction_executor.cpp); 0: any number.
  int64_t sum_block = 0, sum_block_strided = 0;
  /// A host pointwise or row-reduction kernel's input count when its strided rows should go
  /// through its vector loop, a block at a time through contiguous buffers (Note [Buffered
  /// strided rows] in runtime/executor.cpp; operands after the inputs are outputs); 0: they run
  /// its own element-at-a-time loop.
  int buffered_inputs = 0;

  /// Ok once `entry` can be called: at once for a kernel without `load`, else after the one call
  /// of `load` (thread-safe; its failure is kept and returned to every caller).
  Status ready() const;

private:
  mutable std::once_flag load_once_;
  mutable Status load_status_;
};

/// Kernels alive in the process (framejit.stats()["live_kernels"]): what reset() and garbage
/// collection of compiled functions must bring back down.
long long live_kernels();
using KernelPtr = std::shared_ptr<const Kernel>;

/// Returns the cached kernel for `key` (a content description: same key, same code), or builds it
/// with `build` (which returns null on failure; failures are not cached). Thread-safe. The cache
/// holds kernels weakly: callers own them (Note [Kernel lifetime] in kernel_cache.cpp).
///
/// `build` runs without the cache's lock held, once per key at a time: threads asking for a key
/// that another thread is building wait for that build and share its result (null if it failed,
/// with the next call building again). An exception from `build` propagates to its caller; the
/// threads waiting on it get null. `build` may itself call kernel_cache_get for other keys; for
/// its own key it gets an uncached build of its own.
KernelPtr kernel_cache_get(const std::string& key, const std::function<KernelPtr()>& build);
/// Drops the cache's references (framejit.reset()); kernels still used by live programs stay alive
/// until those programs are freed.
void kernel_cache_clear();
/// Number of cached kernels still alive (builds in progress not counted).
size_t kernel_cache_size();

struct KernelCacheStats {
  size_t hits = 0;      // served from the cache, or by waiting for another thread's build
  size_t builds = 0;    // calls of a `build` function
  size_t failures = 0;  // builds that returned null or threw
};
KernelCacheStats kernel_cache_stats();

/// 64-bit FNV-1a of a string, for keys and file names.
uint64_t content_hash(const std::string& s);

}  // namespace framejit::rt
