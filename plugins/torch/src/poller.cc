#include "poller.h"

#include <utility>

namespace nodus_torch {

thread_local bool tOnPoller = false;

Poller::Poller() : q_(std::make_shared<PollerQueue>()), thread_([this] { main(); }) {}

Poller::~Poller() {
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    q_->stop = true;
  }
  q_->cv.notify_all();
  thread_.join();
}

void Poller::push(const c10::intrusive_ptr<NodusWork>& w) {
  w->enqueued(q_);
  bool wake;
  {
    std::lock_guard<std::mutex> lock(q_->mu);
    w->inQueue_ = true;
    q_->works.push_back(w);
    wake = q_->works.size() % kSweepEvery == 0;
  }
  if (wake) q_->cv.notify_one();
}

void Poller::pop(std::unique_lock<std::mutex>&) {
  c10::intrusive_ptr<NodusWork>& w = q_->works.front();
  w->inQueue_ = false;
  if (w->urgent_) --q_->urgent;
  q_->works.pop_front();
}

void Poller::main() {
  tOnPoller = true;
  std::unique_lock<std::mutex> lock(q_->mu);
  for (;;) {
    if (q_->works.empty()) {
      if (q_->stop) return;  // everything issued has ended
      q_->cv.wait(lock);
      continue;
    }
    // Works complete in issue order: only the oldest needs looking at.
    c10::intrusive_ptr<NodusWork> w = q_->works.front();
    const bool wait = q_->urgent > 0 || q_->stop;
    lock.unlock();  // completing runs future callbacks, which may issue more
    bool done;
    if (wait) {
      w->block();  // ends: done, failed, timed out (NODUS_TIMEOUT_MS) or aborted
      done = true;
    } else {
      done = w->poll();
    }
    lock.lock();
    if (done) {
      pop(lock);
      // Drop the reference without the lock: the Work's destructor frees requests.
      lock.unlock();
      w.reset();
      lock.lock();
    } else {
      q_->cv.wait_for(lock, kSweepPeriod);
    }
  }
}

}  // namespace nodus_torch
