// The Work (and future) of one operation: its nodus requests, the tensors
// they use, and what is done once they complete. Completed by whichever
// thread first sees every request done: the waiter, the future's user or
// the poller (poller.h).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "nodus/nodus.h"
#include "poller_queue.h"

namespace nodus_torch {

class StagingPool;

class NodusWork : public c10d::Work {
 public:
  NodusWork(int rank, c10d::OpType type, const char* profilingTitle, std::string name, std::vector<at::Tensor> outputs,
            std::chrono::milliseconds timeout, std::shared_ptr<StagingPool> pool);
  ~NodusWork() override;

  // ---- Building, on the issuing thread before the poller sees the Work.
  void addRequest(nodusRequest_t r) { reqs_.push_back(r); }
  void keep(at::Tensor t) { keep_.push_back(std::move(t)); }
  void afterSuccess(std::function<void()> f) { after_.push_back(std::move(f)); }
  void issueFailed(std::string msg) {
    if (issueError_.empty()) issueError_ = std::move(msg);
  }

  // A contiguous tensor in a staging buffer (kept until the Work completes).
  at::Tensor staging(at::IntArrayRef sizes, const at::TensorOptions& options);
  // What nodus reads for `t`: `t` itself if contiguous, else a contiguous copy.
  // Either way it lives until the Work completes.
  at::Tensor input(const at::Tensor& t);
  // What nodus writes for `t`: `t` itself if contiguous, else a contiguous
  // buffer (holding `t`'s values if `copyIn`) copied into `t` on success.
  at::Tensor output(const at::Tensor& t, bool copyIn);

  // ---- c10d::Work
  bool isCompleted() override { return poll(); }

  bool isSuccess() const override;

  // Raises (RuntimeError in Python) with nodus's explanation if the operation
  // failed, or when `timeout` (else the operation's, else the process group's)
  // passes first; the operation then continues in the background.
  bool wait(std::chrono::milliseconds timeout) override;

  // Whoever asks for the future may block on it (DDP does): the poller
  // completes this Work as soon as its requests are done.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  std::vector<at::Tensor> result() override { return outputs_; }
  void synchronize() override {}

  // Completes the Work if every request is done. Never blocks.
  bool poll();

  void enqueued(std::shared_ptr<PollerQueue> queue) { queue_ = std::move(queue); }

  // Asks the poller to complete this Work as soon as it can (it otherwise
  // sweeps completed Works lazily).
  void urge();

  // Guarded by the queue's mutex.
  bool inQueue_ = false, urgent_ = false;

  // The poller's part: waits for every request, then completes the Work.
  void block();

 private:
  // Runs once, on whichever thread first sees every request done.
  void settle();

  static const c10::TypePtr& listOfTensors();

  std::shared_ptr<PollerQueue> queue_;
  const std::string name_;
  const std::vector<at::Tensor> outputs_;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<StagingPool> pool_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::vector<nodusRequest_t> reqs_;
  std::vector<at::Tensor> keep_, staged_;
  std::vector<std::function<void()>> after_;
  std::string issueError_;
  std::atomic<bool> claimed_{false}, done_{false};
};

}  // namespace nodus_torch
