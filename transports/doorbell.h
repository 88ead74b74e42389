// Doorbell: where a rank sleeps when it has nothing to do, and how peers
// wake it. Lives in memory the peers can reach (shared memory for shm), so
// the futex is process-shared.
//
// Lost-wakeup protocol (Dekker): the waiter announces itself in `sleepers`,
// re-checks for work, then sleeps on `seq`; a waker publishes its work,
// then (after a full fence) bumps `seq` and wakes only if someone sleeps.
#pragma once

#include <atomic>
#include <cstdint>

namespace nodus {

struct alignas(64) Doorbell {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleepers{0};
  std::atomic<uint32_t> aborted{0};  // this rank aborted or failed: peers stop waiting on it
  std::atomic<int32_t> pid{0};
  // Process-local doorbells only (never one in shared memory, where an fd
  // number means nothing to the other processes): an eventfd that ring()
  // also writes when someone sleeps, so that a thread waiting in epoll on
  // sockets as well (the net transport's proxy) wakes on a post or release.
  int32_t wakeFd = -1;

  // Called after publishing work for the owner of this doorbell.
  void ring();
  // Sleeps until rung or `timeoutUs` passes; `expected` is seq read before
  // the final check for work.
  void sleep(uint32_t expected, int64_t timeoutUs);
};

static_assert(std::atomic<uint32_t>::is_always_lock_free);

}  // namespace nodus
