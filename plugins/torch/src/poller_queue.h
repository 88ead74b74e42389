// The poller's queue, shared with the Works so that one can ask for the
// poller's attention while the process group (and its poller) may be gone.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>

#include <c10/util/intrusive_ptr.h>

namespace nodus_torch {

class NodusWork;

extern thread_local bool tOnPoller;  // whether this thread is a poller

struct PollerQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<c10::intrusive_ptr<NodusWork>> works;  // in issue order
  size_t urgent = 0;                                 // queued Works someone is blocked on
  bool stop = false;
};

}  // namespace nodus_torch
