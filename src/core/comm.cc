#include "core/comm.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <span>

#include "base/dtype.h"
#include "base/log.h"
#include "base/settings.h"
#include "topo/node.h"
#include "transports/registry.h"
#include "transports/selection.h"

namespace nodus {

Comm::~Comm() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    claimWaiters_.fetch_add(1, std::memory_order_seq_cst);
    cv_.wait(lock, [&] { return queue_.empty() && !busy_.load(std::memory_order_seq_cst); });
    claimWaiters_.fetch_sub(1, std::memory_order_seq_cst);
    stop_ = true;
  }
  cv_.notify_all();
  if (progress_.joinable()) progress_.join();
  // Later transports may ring a doorbell an earlier one owns (the net proxy,
  // shm's doorbell): take them down in reverse order, connections first.
  connected_.close();
  if (scratch_) munmap(scratch_, scratchBytes_);
}

Status Comm::plan(const PlanKey& key, const Plan** out) {
  if (const auto* last = lastPlan_.load(std::memory_order_acquire); last && last->first == key) {
    *out = last->second.get();
    return Status::ok();
  }
  std::lock_guard<std::mutex> lock(planMu_);
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    lastPlan_.store(&*it, std::memory_order_release);
    *out = it->second.get();
    return Status::ok();
  }
  Choice choice;
  PlanCapabilities caps;
  caps.referencesOfAnySize = referencesOfAnySize_;
  auto p = std::make_unique<Plan>();
  NODUS_TRY(makePlan(key, planContext(), cfg_.algoSpec, caps, p.get(), &choice));
  const Algorithm* algo = choice.algo;
  NODUS_INFO(rank_,
             "%s count=%llu x %uB%s root=%d: %s in %s slices%s, %u channel(s)%s, %zu step(s), %zu phase(s) "
             "(estimates: %s)",
             collectiveName(key.coll), static_cast<unsigned long long>(key.count), key.typeSize,
             key.inPlace ? " in-place" : "", key.root, algo->name, formatBytes(p->sliceElems * key.typeSize).c_str(),
             cfg_.sliceForced ? " (NODUS_SLICE_BYTES)" : "", p->channels,
             cfg_.channelsForced && algo->maxChannels > 1 ? " (NODUS_CHANNELS)" : "", p->steps.size(),
             p->phaseStarts.size() + 1, choice.explain().c_str());
  if (logLevel() >= LogLevel::Trace) NODUS_TRACE(rank_, "%s", describe(*p).c_str());
  *out = p.get();
  lastPlan_.store(&*plans_.emplace(key, std::move(p)).first, std::memory_order_release);
  return Status::ok();
}

Status Comm::plan(const PlanKey& key, std::shared_ptr<const Plan>* hold) {
  std::lock_guard<std::mutex> lock(planMu_);
  if (auto it = vplans_.find(key); it != vplans_.end()) {
    *hold = it->second;
    return Status::ok();
  }
  PlanCapabilities caps;
  caps.referencesOfAnySize = referencesOfAnySize_;
  auto p = std::make_shared<Plan>();
  Choice choice;
  NODUS_TRY(makePlan(key, planContext(), cfg_.algoSpec, caps, p.get(), &choice));
  NODUS_TRACE(rank_, "%s count=%llu x %uB%s: %s, %zu step(s) (%zu plan(s) of V-collectives cached)",
              collectiveName(key.coll), static_cast<unsigned long long>(key.count), key.typeSize,
              key.inPlace ? " in-place" : "", choice.algo->name, p->steps.size(), vplans_.size() + 1);
  if (vplans_.size() >= kMaxVPlans) {
    vplans_.erase(vplanOrder_.front());
    vplanOrder_.pop_front();
  }
  vplans_.emplace(key, p);
  vplanOrder_.push_back(key);
  *hold = std::move(p);
  return Status::ok();
}

PlanContext Comm::planContext() const {
  PlanContext ctx;
  ctx.sliceBytes = cfg_.sliceBytes;
  ctx.sliceForced = cfg_.sliceForced;
  ctx.channels = cfg_.channels;
  ctx.channelsForced = cfg_.channelsForced;
  ctx.slots = cfg_.slots;
  ctx.roundSlices = cfg_.roundSlices;
  ctx.directMaxBytes = cfg_.directMaxBytes;
  ctx.topo = &topo_;
  return ctx;
}

Status Comm::choose(const PlanKey& key, Choice* out) const {
  return chooseAlgorithm(key, planContext(), cfg_.algoSpec, out);
}

Status Comm::assignScratch(std::span<Task> tasks) {
  auto part = [this](const Task& t) -> size_t {
    if (t.comm != this || t.plan->scratchElems == 0) return 0;
    return (t.plan->scratchElems * typeSize(t.type) + 63) / 64 * 64;
  };
  size_t total = 0;
  for (const Task& t : tasks) total += part(t);
  if (total == 0) return Status::ok();
  if (total > scratchBytes_) NODUS_TRY(growScratch(total));
  size_t off = 0;
  for (Task& t : tasks)
    if (const size_t n = part(t)) {
      t.scratch = scratch_ + off;
      off += n;
    }
  return Status::ok();
}

Status Comm::growScratch(size_t bytes) {
  const size_t size = std::max<size_t>(bytes, std::max<size_t>(scratchBytes_ * 2, 1 << 16));
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) return systemError("mmap(%zu bytes of scratch)", size);
  if (scratch_) munmap(scratch_, scratchBytes_);
  scratch_ = static_cast<std::byte*>(p);
  scratchBytes_ = size;
  return Status::ok();
}

Status Comm::failure() const {
  if (!failed_.load(std::memory_order_acquire)) return Status::ok();  // every call asks: no lock then
  std::lock_guard<std::mutex> lock(errMu_);
  return failure_;
}

void Comm::recordFailure(const Status& s) {
  std::lock_guard<std::mutex> lock(errMu_);
  if (failure_.isOk()) failure_ = s;
  failed_.store(!failure_.isOk(), std::memory_order_release);
}

void Comm::notifyPeersOfFailure() {
  if (!connected_.conns.doorbell) return;
  connected_.conns.doorbell->aborted.store(1, std::memory_order_seq_cst);
  connected_.conns.doorbell->ring();
  for (Doorbell* d : connected_.conns.peerDoorbells)
    if (d) d->ring();
  for (const auto& t : connected_.transports)
    if (t) t->notifyFailure();
}

void Comm::abort() {
  aborted_.store(true, std::memory_order_release);
  notifyPeersOfFailure();
  cv_.notify_all();
}

Status Comm::checkPeer(int peer) {
  if (peer < 0 || peer >= nranks_ || peer == rank_) return Status::ok();
  Doorbell* d = connected_.conns.peerDoorbells[peer];
  if (d && d->aborted.load(std::memory_order_acquire))
    return makeError(nodusRemoteError, "rank %d failed or aborted", peer);
  const int t = peerTransport_[static_cast<size_t>(peer)];
  return t < 0 ? Status::ok() : connected_.transports[static_cast<size_t>(t)]->checkPeer(peer);
}

static Status usable(const Comm& c) {
  if (c.aborted()) return makeError(nodusAborted, "the communicator was aborted");
  Status f = c.failure();
  if (!f.isOk()) return Status(f.code(), "the communicator failed earlier and cannot be used: " + f.message());
  return Status::ok();
}

Status Comm::runGroup(std::span<Task> tasks) {
  std::vector<Comm*> comms;
  for (const Task& t : tasks) comms.push_back(static_cast<Comm*>(t.comm));  // every task api.cc makes runs on a Comm
  std::sort(comms.begin(), comms.end());
  comms.erase(std::unique(comms.begin(), comms.end()), comms.end());
  for (Comm* c : comms) c->claim();
  Status s;
  for (Comm* c : comms)
    if (s.isOk()) s = usable(*c);
  if (s.isOk()) s = runTasks(tasks);
  for (Comm* c : comms) c->unclaim();
  return s;
}

void Comm::release() {
  busy_.store(false, std::memory_order_seq_cst);
  if (queued_.load(std::memory_order_seq_cst) == 0 && claimWaiters_.load(std::memory_order_seq_cst) == 0) return;
  { std::lock_guard<std::mutex> lock(mu_); }  // a waiter that saw busy_ set is inside cv_.wait now
  cv_.notify_all();
}

Status Comm::runBlocking(std::vector<Task> tasks) {
  std::shared_ptr<Request> waitFor;
  {
    std::unique_lock<std::mutex> lock(mu_);
    NODUS_TRY(usable(*this));
    if (!queue_.empty() || !tryClaim()) {
      waitFor = std::make_shared<Request>();
      tasks.back().request = waitFor;
      queue_.push_back(std::move(tasks));
      setQueued();
      if (!progress_.joinable()) progress_ = std::thread([this] { progressMain(); });
      cv_.notify_all();
    }
  }
  if (waitFor) return waitFor->wait();
  return runClaimed(tasks);
}

Status Comm::runBlocking(Task&& task) {
  // Nothing queued, nobody waiting for the claim, nothing running: no lock.
  // A call queued earlier by this thread is counted in queued_ until the
  // progress thread has claimed it (it claims before it dequeues), so no
  // call overtakes an earlier one; a waiting claim() is not starved by a
  // loop of blocking calls.
  if (queued_.load(std::memory_order_seq_cst) == 0 && claimWaiters_.load(std::memory_order_seq_cst) == 0 &&
      tryClaim()) {
    if (Status s = usable(*this); !s.isOk()) {
      release();
      return s;
    }
    return runClaimed(std::span<Task>(&task, 1));
  }
  std::vector<Task> batch;
  batch.push_back(std::move(task));
  return runBlocking(std::move(batch));
}

Status Comm::runClaimed(std::span<Task> tasks) {
  Status s = runTasks(tasks);
  release();
  return s;
}

Status Comm::enqueue(std::vector<Task> tasks) {
  std::lock_guard<std::mutex> lock(mu_);
  NODUS_TRY(usable(*this));
  queue_.push_back(std::move(tasks));
  setQueued();
  if (!progress_.joinable()) progress_ = std::thread([this] { progressMain(); });
  cv_.notify_all();
  return Status::ok();
}

bool Comm::runFront(std::unique_lock<std::mutex>& lock) {
  if (queue_.empty() || !tryClaim()) return false;
  std::vector<Task> tasks = std::move(queue_.front());
  queue_.pop_front();
  setQueued();
  lock.unlock();
  runQueued(tasks);
  lock.lock();
  busy_.store(false, std::memory_order_seq_cst);
  cv_.notify_all();
  return true;
}

void Comm::progressUntil(const Request& r) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!r.done.load(std::memory_order_acquire) && runFront(lock)) {
  }
}

void Comm::claim() {
  std::unique_lock<std::mutex> lock(mu_);
  claimWaiters_.fetch_add(1, std::memory_order_seq_cst);
  cv_.wait(lock, [&] { return queue_.empty() && tryClaim(); });
  claimWaiters_.fetch_sub(1, std::memory_order_seq_cst);
}

void Comm::unclaim() { release(); }

void Comm::runQueued(std::vector<Task>& tasks) {
  Status s = usable(*this);
  if (s.isOk()) s = runTasks(tasks);
  for (Task& t : tasks)
    if (t.request) t.request->complete(s);
}

void Comm::progressMain() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (!queue_.empty() && !busy_.load(std::memory_order_seq_cst)); });
    if (queue_.empty()) return;  // stop_ with nothing left
    runFront(lock);  // may find the claim taken again: then wait for its release
  }
}

void Comm::setLastError(const std::string& msg) {
  std::lock_guard<std::mutex> lock(errMu_);
  lastError_ = msg;
}

const char* Comm::lastError() {
  std::lock_guard<std::mutex> lock(errMu_);
  return lastError_.c_str();
}

}  // namespace nodus
