// kernel_cache.h — compiled kernels shared by every graph, keyed by a hash of their content.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace framejit::rt {

/// A piece of executable code and what keeps it alive (e.g. an asmjit runtime allocation).
struct Kernel {
  void* entry = nullptr;        // the function to call
  std::string name;             // for logs
  std::string listing;          // loop IR / assembly text when FRAMEJIT_LOGS=kernels,asm asked for it
  std::function<void()> release;  // frees the executable memory; called when the last user drops it
  ~Kernel() {
    if (release) release();
  }
};
using KernelPtr = std::shared_ptr<const Kernel>;

/// Returns the cached kernel for `key` (a content description: same key, same code), or builds it
/// with `build` (which returns null on failure; failures are not cached). Thread-safe.
KernelPtr kernel_cache_get(const std::string& key, const std::function<KernelPtr()>& build);
/// Drops the cache's references (framejit.reset()); kernels still used by live programs stay alive
/// until those programs are freed.
void kernel_cache_clear();
size_t kernel_cache_size();

/// 64-bit FNV-1a of a string, for keys and file names.
uint64_t content_hash(const std::string& s);

}  // namespace framejit::rt
