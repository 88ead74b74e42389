// What the executor needs of a communicator, and nothing more: its
// connections, its scratch, the doorbell it sleeps on, the abort flag, the
// timeout and spin policy, and a sink for failures. src/core's Comm
// implements it; the executor never sees a communicator.
//
// The hot path (connections, doorbell, abort flag, limits) is plain data
// read without a call; what runs once per batch or per failure is virtual.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "transports/transport.h"

namespace nodus {

struct Task;

class ExecContext {
 public:
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  SendConnection* sendTo(int peer) const { return execConns_->send[static_cast<size_t>(peer)].get(); }
  RecvConnection* recvFrom(int peer) const { return execConns_->recv[static_cast<size_t>(peer)].get(); }
  Doorbell* doorbell() const { return execConns_->doorbell; }
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  int64_t timeoutMs() const { return execTimeoutMs_; }
  int64_t spin() const { return spin_; }

  // Gives each task of this context in `tasks` its own part of the scratch
  // (called at the start of a batch, while the caller holds the claim).
  virtual Status assignScratch(std::span<Task> tasks) = 0;
  // Whether `peer` is alive and has not failed (asked only while waiting on it).
  virtual Status checkPeer(int peer) = 0;
  // The failure sink: the first failure is remembered (every later call
  // fails with it) and the peers are told, so that none waits for us.
  virtual void fail(const Status& s) = 0;
  // What the calling thread does with the connections (Transport::callerPolling).
  virtual void callerPolling(CallerPolling state) = 0;
  virtual void callerIdle() = 0;

 protected:
  ExecContext() = default;
  ~ExecContext() = default;

  int rank_ = 0, nranks_ = 0;
  const Connections* execConns_ = nullptr;
  int64_t execTimeoutMs_ = 0;
  int64_t spin_ = 0;
  std::atomic<bool> aborted_{false};
};

}  // namespace nodus
