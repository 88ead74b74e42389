// Comm: one rank's communicator. Owns the bootstrap, the transports and their
// connections, the plan cache, scratch memory and the queue of operations
// with the thread that progresses queued ones.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "algorithms/algorithm.h"
#include "core/bootstrap.h"
#include "core/status.h"
#include "exec/executor.h"
#include "topo/binding.h"
#include "topo/topology.h"
#include "tune/tuner.h"
#include "transports/transport.h"

namespace nodus {

// Parameters a communicator reads once, at init.
struct CommConfig {
  int64_t timeoutMs = 0;
  size_t slotBytes = 0;
  uint32_t slots = 0;
  uint32_t roundSlices = 1;  // NODUS_ROUND_SLICES (Plan::roundSlices)
  int64_t spin = 0;
  std::string algo;
  AlgoSpec algoSpec;      // algo, parsed
  size_t sliceBytes = 0;  // pipelining slice (NODUS_CHUNK_BYTES, at most a slot)
  std::string transport;
  uint64_t directMaxBytes = 0;
  BindMode bind = BindMode::Auto;  // NODUS_BIND
  static Status fromEnvironment(CommConfig* out);
};

struct InitOptions {
  std::unique_ptr<Bootstrap> bootstrap;
  bool inProcess = false;  // ranks are threads of this process (nodusCommInitAll)
};

class Comm {
 public:
  static Status create(InitOptions opts, std::unique_ptr<Comm>* out);
  ~Comm();

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  const CommConfig& config() const { return cfg_; }
  const Topology& topology() const { return topo_; }

  // What algorithms see of this communicator, and the tuner's choice for a call.
  PlanContext planContext() const;
  Status choose(const PlanKey& key, Choice* out) const;
  // The plan for a call signature (cached).
  Status plan(const PlanKey& key, std::shared_ptr<const Plan>* out);
  // Scratch of at least `bytes`, allocated and faulted in once, grown rarely.
  Status scratch(size_t bytes, std::byte** out);

  // Runs `tasks` (all of this communicator) in issue order: inline when
  // nothing is queued, else after the queued work. Blocks until done.
  Status runBlocking(std::vector<Task> tasks);
  Status runBlocking(Task&& task);  // one call: no batch to allocate when nothing is queued
  // Queues `tasks` for the progress thread; each task's request completes.
  Status enqueue(std::vector<Task> tasks);
  // Runs queued work on the calling thread while `r` is not done and nothing
  // of this communicator runs: a caller about to block does the work itself
  // rather than wake the progress thread and sleep (two context switches that
  // dominate short operations, above all when ranks outnumber cores).
  void progressUntil(const Request& r);
  // Exclusive use of the executor for a group spanning several communicators:
  // waits until this communicator's queue is empty and idle.
  void claim();
  void unclaim();

  void abort();
  bool aborted() const { return aborted_.load(std::memory_order_acquire); }
  // The first failure of a collective leaves the connections in an unknown
  // state; every later call fails with this status.
  Status failure() const;
  void recordFailure(const Status& s);
  // Lets peers blocked on us stop waiting.
  void notifyPeersOfFailure();

  SendConnection* sendTo(int peer) { return conns_.send[peer].get(); }
  RecvConnection* recvFrom(int peer) { return conns_.recv[peer].get(); }
  Doorbell* doorbell() { return conns_.doorbell; }
  // Whether `peer` is alive and has not failed (checked only while waiting on it).
  Status checkPeer(int peer);
  int64_t spin() const { return spin_; }
  // Tells the transports whose threads stand aside while the executor polls
  // (Transport::callerPolling); a no-op where there are none.
  void callerPolling(CallerPolling state) {
    for (Transport* t : callerPolled_) t->callerPolling(state);
  }
  void callerIdle() {
    for (Transport* t : callerPolled_) t->callerIdle();
  }
  // A few bytes Barrier reduces (operations of one communicator run one at a time).
  std::byte* barrierBuffer() { return barrierBuf_; }

  void setLastError(const std::string& msg);
  const char* lastError();

 private:
  Comm() = default;
  Status init(InitOptions& opts);
  void progressMain();
  void runQueued(std::vector<Task>& tasks);
  // Runs tasks this thread claimed (busy_ set by the caller), then releases the claim.
  Status runClaimed(std::span<Task> tasks);
  // Takes the oldest queued batch and runs it with mu_ released (`lock` holds
  // mu_ on entry and exit); the caller checked that the queue is not empty
  // and nothing runs.
  void runFront(std::unique_lock<std::mutex>& lock);

  int rank_ = 0, nranks_ = 0;
  CommConfig cfg_;
  Topology topo_;
  int64_t spin_ = 0;
  int machineCpus_ = 1;  // CPUs the communicator's ranks under this kernel may use between them
  int kernelRanks_ = 1;  // the communicator's ranks under this kernel (they share machineCpus_)
  std::unique_ptr<Bootstrap> bootstrap_;
  // This rank's doorbell unless a transport provides one (shm); before the
  // transports, which ring it.
  std::unique_ptr<Doorbell> localBell_;
  // Indexed like the transport table; null for transports no rank uses.
  std::vector<std::unique_ptr<Transport>> transports_;
  std::vector<int> peerTransport_;  // table index per peer, -1 for this rank
  std::vector<Transport*> callerPolled_;  // of transports_: see callerPolling()
  Connections conns_;
  std::vector<int> peers_;

  std::mutex planMu_;
  std::unordered_map<PlanKey, std::shared_ptr<const Plan>, PlanKeyHash> plans_;
  std::byte* scratch_ = nullptr;
  size_t scratchBytes_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<Task>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread progress_;

  alignas(64) std::byte barrierBuf_[64] = {};
  std::atomic<bool> aborted_{false};
  mutable std::mutex errMu_;
  Status failure_;
  std::atomic<bool> failed_{false};  // failure_ holds an error (set under errMu_)
  std::string lastError_, lastErrorCopy_;
};

}  // namespace nodus
