#include "nodus_work.h"

#include <sched.h>

#include <exception>
#include <stdexcept>
#include <thread>

#include "errors.h"
#include "staging_pool.h"

namespace nodus_torch {

using Clock = std::chrono::steady_clock;

NodusWork::NodusWork(int rank, c10d::OpType type, const char* profilingTitle, std::string name,
                     std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout,
                     std::shared_ptr<StagingPool> pool)
    : c10d::Work(rank, type, profilingTitle),
      name_(std::move(name)),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      pool_(std::move(pool)),
      future_(c10::make_intrusive<c10::ivalue::Future>(listOfTensors())) {}

NodusWork::~NodusWork() {
  // Only completed requests reach here (the poller holds every issued Work
  // until its requests are done), so freeing never waits.
  for (nodusRequest_t r : reqs_) nodusRequestFree(r);
}

at::Tensor NodusWork::staging(at::IntArrayRef sizes, const at::TensorOptions& options) {
  const size_t bytes = static_cast<size_t>(c10::multiply_integers(sizes)) * options.dtype().itemsize();
  at::Tensor buf = pool_->acquire(bytes);
  staged_.push_back(buf);
  return at::from_blob(buf.data_ptr(), sizes, options);
}

at::Tensor NodusWork::input(const at::Tensor& t) {
  keep(t);
  if (t.is_contiguous()) return t;
  at::Tensor s = staging(t.sizes(), t.options());
  s.copy_(t);
  return s;
}

at::Tensor NodusWork::output(const at::Tensor& t, bool copyIn) {
  keep(t);
  if (t.is_contiguous()) return t;
  at::Tensor s = staging(t.sizes(), t.options());
  if (copyIn) s.copy_(t);
  afterSuccess([t, s]() mutable { t.copy_(s); });
  return s;
}

bool NodusWork::isSuccess() const {
  const_cast<NodusWork*>(this)->poll();
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ && !exception_;
}

bool NodusWork::wait(std::chrono::milliseconds timeout) {
  const auto limit = timeout > std::chrono::milliseconds::zero() ? timeout : timeout_;
  const auto start = Clock::now();
  const auto deadline = start + limit;
  if (!tOnPoller) {
    // Wait in nodus itself: the caller then runs the queued operations on
    // its own thread when nodus's progress thread has not started them (no
    // hand-off and wake-up each way, which dominate short operations when
    // ranks outnumber cores). The poller is urged only if the deadline
    // passes first.
    bool inTime = true;
    for (nodusRequest_t r : reqs_) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0 || nodusWaitTimeout(r, left) == nodusInProgress) {
        inTime = false;
        break;
      }
    }
    if (!inTime || !poll()) urge();
  } else {
    // A future's callback waiting on the poller's own thread: nobody else
    // completes this Work, so poll (gently, yielding the core) until the deadline.
    for (int i = 0; !poll() && Clock::now() <= deadline; ++i) {
      if (i >= 64) std::this_thread::sleep_for(std::chrono::microseconds(50));
      else sched_yield();
    }
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (!cv_.wait_until(lock, deadline, [&] { return completed_; })) {
    raise(name_, "not complete after " + std::to_string(limit.count()) +
                     " ms (the wait timed out; the operation is still in progress: a peer may be slow, stuck "
                     "or not calling it)");
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> NodusWork::getFuture() {
  urge();
  return future_;
}

bool NodusWork::poll() {
  if (done_.load(std::memory_order_acquire)) return true;
  for (nodusRequest_t r : reqs_) {
    int d = 0;
    nodusTest(r, &d);
    if (!d) return false;
  }
  settle();
  return done_.load(std::memory_order_acquire);
}

void NodusWork::urge() {
  if (!queue_ || done_.load(std::memory_order_acquire)) return;
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    if (!inQueue_ || urgent_) return;
    urgent_ = true;
    ++queue_->urgent;
  }
  queue_->cv.notify_one();
}

void NodusWork::block() {
  for (nodusRequest_t r : reqs_) nodusWait(r);
  settle();
}

void NodusWork::settle() {
  if (claimed_.exchange(true, std::memory_order_acq_rel)) return;
  std::string error = issueError_;
  for (nodusRequest_t r : reqs_) {
    int d = 0;
    nodusResult_t rc = nodusTest(r, &d);
    if (rc != nodusSuccess && error.empty()) error = nodusError(rc);
  }
  std::exception_ptr ep;
  if (error.empty()) {
    try {
      for (auto& f : after_) f();
    } catch (const std::exception& e) {
      error = std::string("copying the result out failed: ") + e.what();
    }
  }
  if (!error.empty()) ep = std::make_exception_ptr(std::runtime_error("nodus: " + name_ + ": " + error));
  after_.clear();
  keep_.clear();
  for (at::Tensor& b : staged_) pool_->release(std::move(b));
  staged_.clear();
  done_.store(true, std::memory_order_release);
  // The future first (its callbacks run here), so that once wait() returns
  // the future holds the result too.
  if (ep) future_->setError(ep);
  else future_->markCompleted(c10::IValue(outputs_));
  finish(ep);
}

const c10::TypePtr& NodusWork::listOfTensors() {
  static const c10::TypePtr type = c10::ListType::create(c10::TensorType::get());
  return type;
}

}  // namespace nodus_torch
