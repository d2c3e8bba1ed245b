// futex_p.h — the two Linux futex calls the runtime blocks on (private to runtime/).
#pragma once

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <ctime>

namespace framejit::rt::detail {

// NB: a raw futex rather than std::condition_variable: no mutex to be left locked by fork, no
// waiter bookkeeping that a fork child could inherit half-updated, and a wake-up is one syscall
// that the waker skips entirely when it knows nobody sleeps. std::atomic<uint32_t> has the layout
// of a uint32_t on every target we build for (static_assert below).
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
static_assert(std::atomic<uint32_t>::is_always_lock_free);

/// Sleeps while *word == expected (returns at once when it differs), until woken, until
/// `timeout_ns` (relative; < 0 waits forever) passes, or spuriously. Callers re-check in a loop.
inline void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int64_t timeout_ns = -1) {
  timespec ts;
  timespec* tsp = nullptr;
  if (timeout_ns >= 0) {
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000);
    tsp = &ts;
  }
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, tsp, nullptr,
          0);
}

/// Wakes up to `count` threads sleeping in futex_wait on `word`.
inline void futex_wake(std::atomic<uint32_t>* word, int count) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, count, nullptr, nullptr,
          0);
}

/// One iteration of a spin-wait loop: tells the core we are spinning (frees pipeline resources
/// for a hyperthread sibling, avoids a memory-order mis-speculation flush on exit).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace framejit::rt::detail
