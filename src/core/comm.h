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
#include "base/bootstrap.h"
#include "base/status.h"
#include "core/rank_info.h"
#include "exec/exec_context.h"
#include "exec/executor.h"
#include "topo/binding.h"
#include "topo/topology.h"
#include "tune/planner.h"
#include "transports/selection.h"
#include "transports/transport.h"

namespace nodus {

struct NodeInfo;
struct FabricConfig;
class Comm;

// Parameters a communicator reads once, at init.
struct CommConfig {
  int64_t timeoutMs = 0;
  size_t slotBytes = 0;  // NODUS_SLOT_BYTES; 0 until connecting chooses the transports' own
  uint32_t slots = 0;
  uint32_t roundSlices = 1;  // NODUS_ROUND_SLICES (Plan::roundSlices)
  int64_t spin = 0;
  std::string algo;
  AlgoSpec algoSpec;      // algo, parsed
  size_t sliceBytes = 0;  // the largest pipelining slice (a slot), or NODUS_SLICE_BYTES
  bool sliceForced = false;  // NODUS_SLICE_BYTES set: every plan uses sliceBytes, else the tuner picks
  uint32_t channels = 1;        // NODUS_CHANNELS (PlanContext::channels)
  bool channelsForced = false;  // NODUS_CHANNELS set: every algorithm that runs channels runs that many
  std::string transport;
  std::string traceDir;  // NODUS_TRACE: "" where none is given or it is not writable
  uint64_t directMaxBytes = 0;
  BindMode bind = BindMode::Auto;  // NODUS_BIND
  SlotCopy shmCopy = SlotCopy::Auto;  // NODUS_SHM_COPY
  bool shmCma = true;                 // NODUS_SHM_CMA
  // From settings whose values are each within their registered range;
  // checks what depends on several of them.
  static Status fromSettings(const Settings& settings, CommConfig* out);
};

struct InitOptions {
  Settings settings;  // the environment's, with the caller's nodusConfig_t applied
  std::unique_ptr<Bootstrap> bootstrap;
  bool inProcess = false;  // ranks are threads of this process (nodusCommInitAll)
  // A communicator made from another (Comm::split, Comm::createGroup): its
  // ranks' placement, hosts, NUMA nodes and fabric are the parent's, taken
  // rather than exchanged or read again. parentRanks[r] is new rank r's rank
  // in the parent, which outlives init.
  const Comm* parent = nullptr;
  std::vector<int> parentRanks;
};

class Comm final : public ExecContext {
 public:
  static Status create(InitOptions opts, std::unique_ptr<Comm>* out);
  ~Comm();

  // nodusCommSplit: collective over this communicator. Ranks of one colour
  // make a communicator, ordered by (key, rank here); kNoColor gets none
  // (*out stays null). `settings` are the new one's (this one's with the
  // caller's nodusConfig_t applied); `settingsError` is why they could not
  // be made, which fails every rank, not just the caller.
  static constexpr int kNoColor = -1;
  Status split(int color, int key, Settings settings, const Status& settingsError, std::unique_ptr<Comm>* out);
  // nodusCommCreateGroup: collective over `ranks` (ranks of this
  // communicator, in the new one's order) only; the caller is one of them.
  Status createGroup(const std::vector<int>& ranks, Settings settings, std::unique_ptr<Comm>* out);

  const CommConfig& config() const { return cfg_; }
  const Settings& settings() const { return settings_; }
  const Topology& topology() const { return topo_; }

  // What algorithms see of this communicator, and the tuner's choice for a call.
  PlanContext planContext() const;
  Status choose(const PlanKey& key, Choice* out) const;
  // The plan for a call signature, cached for the communicator's lifetime
  // (the pointer stays valid until it is destroyed). The last one found is
  // looked up again without a lock.
  Status plan(const PlanKey& key, const Plan** out);
  // The plan of a V-collective (key.blocks set): from a cache of at most
  // kMaxVPlans (counts that change every call, as MoE's, must not grow it
  // without bound), the oldest dropped first; `hold` keeps it alive for the
  // call.
  static constexpr size_t kMaxVPlans = 128;
  Status plan(const PlanKey& key, std::shared_ptr<const Plan>* hold);
  // Gives each task of this communicator in `tasks` its own part of the
  // communicator's scratch (allocated and faulted in once, grown rarely).
  // Only while holding the claim: growing it unmaps the old one, which no
  // running task may still use.
  Status assignScratch(std::span<Task> tasks) override;

  // Runs `tasks` (all of this communicator) in issue order: inline when
  // nothing is queued, else after the queued work. Blocks until done.
  Status runBlocking(std::vector<Task> tasks);
  Status runBlocking(Task&& task);  // one call: no batch to allocate when nothing is queued
  // Runs the calls of a group (nodusGroupEnd), of one communicator or of
  // several, together: claims every communicator involved, in address order
  // (two threads running groups over the same communicators cannot
  // deadlock), after the work queued on each, then the executor as for a
  // single call.
  static Status runGroup(std::span<Task> tasks);
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
  // The first failure of a collective leaves the connections in an unknown
  // state; every later call fails with this status.
  Status failure() const;
  void recordFailure(const Status& s);
  // Lets peers blocked on us stop waiting.
  void notifyPeersOfFailure();
  void fail(const Status& s) override {
    recordFailure(s);
    notifyPeersOfFailure();
  }

  Status checkPeer(int peer) override;
  // Tells the transports whose threads stand aside while the executor polls
  // (Transport::callerPolling); a no-op where there are none.
  void callerPolling(CallerPolling state) override {
    for (Transport* t : callerPolled_) t->callerPolling(state);
  }
  void callerIdle() override {
    for (Transport* t : callerPolled_) t->callerIdle();
  }
  // A few bytes Barrier reduces (operations of one communicator run one at a time).
  std::byte* barrierBuffer() { return barrierBuf_; }

  void setLastError(const std::string& msg);
  const char* lastError();

 private:
  Comm() = default;
  Status init(InitOptions& opts);
  // The stages of init (comm.cc says what each exchanges and why).
  Status exchangePlacement(const NodeInfo& node, bool inProcess, std::vector<RankPlacement>* out);
  Status exchangeRankInfo(const FabricConfig& fabric, const NodeInfo& node, int forced, uint32_t usable,
                          std::vector<RankInfo>* out);
  Status checkAgreement(const FabricConfig& fabric, int forced, const std::vector<RankInfo>& infos) const;
  Status exchangeConnected();
  // A child's placement, hosts and NUMA nodes from its parent's.
  void inheritPlacement(const Comm& parent, const std::vector<int>& parentRanks);
  // The CPUs the ranks under this kernel share, from `places_`.
  void countKernelRanks();
  // A child communicator over `members` (ranks here, in its order).
  Status makeChild(const std::vector<int>& members, uint64_t tag, Settings settings, std::unique_ptr<Comm>* out);
  void checkTraceDir();
  void progressMain();
  void runQueued(std::vector<Task>& tasks);
  // Runs tasks this thread claimed (tryClaim), then releases the claim.
  Status runClaimed(std::span<Task> tasks);
  // Takes the oldest queued batch and runs it with mu_ released (`lock` holds
  // mu_ on entry and exit), if the queue is not empty and the claim is free.
  bool runFront(std::unique_lock<std::mutex>& lock);

  // The claim: whoever sets busy_ runs this communicator's work. A blocking
  // call takes it without mu_ when nothing is queued; everyone else takes
  // it under mu_. Whoever waits on cv_ for it to clear and may not see it
  // cleared under mu_ says so first: queue_ is not empty (the progress
  // thread, a caller queued behind), or claimWaiters_ (claim(), the
  // destructor). release() stores busy_ before reading both, they are
  // published before busy_ is read (Dekker), so a release that sees nobody
  // waits misses no one.
  bool tryClaim() {
    bool idle = false;
    return busy_.compare_exchange_strong(idle, true, std::memory_order_seq_cst);
  }
  void release();
  Status growScratch(size_t bytes);
  void setQueued() { queued_.store(queue_.size(), std::memory_order_seq_cst); }  // under mu_

  Settings settings_;
  CommConfig cfg_;
  Topology topo_;
  int machineCpus_ = 1;  // CPUs the communicator's ranks under this kernel may use between them
  int kernelRanks_ = 1;  // the communicator's ranks under this kernel (they share machineCpus_)
  std::unique_ptr<Bootstrap> bootstrap_;
  bool inProcess_ = false;
  // What every rank said at init, for the communicators made from this one.
  std::vector<RankPlacement> places_;
  std::vector<RankInfo> infos_;
  // Set while a child is initialised (InitOptions::parent).
  const Comm* initParent_ = nullptr;
  std::vector<int> initParentRanks_;
  // Splits and groups made from this communicator: their sequence numbers
  // make their bootstraps' tags (every member counts alike). bootstrapMu_
  // keeps two threads from using the bootstrap at once.
  std::mutex bootstrapMu_;
  uint64_t splits_ = 0;
  std::unordered_map<uint64_t, uint64_t> groupsOfList_;
  // The transports, their connections and this rank's doorbell.
  ConnectedTransports connected_;
  std::vector<int> peerTransport_;  // table index per peer, -1 for this rank
  std::vector<Transport*> callerPolled_;  // of connected_.transports: see callerPolling()
  // Every connection, on every rank, takes references of any size
  // (Transport::readsReferencesOfAnySize): a plan that sends only by reference
  // may cut slices larger than a slot.
  bool referencesOfAnySize_ = false;

  std::mutex planMu_;
  // Never erased while the communicator lives: the plans, and the map's
  // nodes that lastPlan_ points at, stay put (rehashing moves no node).
  using PlanCache = std::unordered_map<PlanKey, std::unique_ptr<const Plan>, PlanKeyHash>;
  PlanCache plans_;
  std::atomic<const PlanCache::value_type*> lastPlan_{nullptr};
  std::unordered_map<PlanKey, std::shared_ptr<const Plan>, PlanKeyHash> vplans_;  // under planMu_
  std::deque<PlanKey> vplanOrder_;  // vplans_' keys, oldest first
  std::byte* scratch_ = nullptr;
  size_t scratchBytes_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::vector<Task>> queue_;
  std::atomic<size_t> queued_{0};        // queue_.size(), for readers without mu_
  std::atomic<bool> busy_{false};        // the claim (tryClaim)
  std::atomic<int> claimWaiters_{0};     // claim() and the destructor waiting on cv_
  bool stop_ = false;
  std::thread progress_;

  alignas(64) std::byte barrierBuf_[64] = {};
  mutable std::mutex errMu_;
  Status failure_;
  std::atomic<bool> failed_{false};  // failure_ holds an error (set under errMu_)
  std::string lastError_, lastErrorCopy_;
};

}  // namespace nodus
