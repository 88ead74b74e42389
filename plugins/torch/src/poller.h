// The poller: one thread per process group.
//
// Completes Works nobody waits on, and those someone is blocked on (urged)
// as soon as their requests are done. It is not woken per operation: a short
// operation its caller waits for completes on the caller's thread, and the
// poller only sweeps it out of the queue later.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>

#include "nodus_work.h"
#include "poller_queue.h"

namespace nodus_torch {

class Poller {
 public:
  Poller();
  // Returns once every Work pushed has ended.
  ~Poller();
  // Hands over an issued Work, to be completed in issue order.
  void push(const c10::intrusive_ptr<NodusWork>& w);

 private:
  static constexpr size_t kSweepEvery = 64;
  static constexpr std::chrono::milliseconds kSweepPeriod{2};

  void pop(std::unique_lock<std::mutex>&);
  void main();

  std::shared_ptr<PollerQueue> q_;
  std::thread thread_;  // last: starts once the rest exists
};

}  // namespace nodus_torch
