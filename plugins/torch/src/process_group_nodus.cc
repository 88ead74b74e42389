// The "nodus" backend for torch.distributed: a c10d process group (torch 1.x)
// or backend (torch 2.x) whose every operation is one or more nodus
// non-blocking requests. One poller thread per process group completes the
// Work objects in issue order (nodus completes a communicator's requests in
// that order), so no call costs a thread; Work::wait() polls the requests
// itself first, so short operations do not wait for the poller to wake.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <pybind11/chrono.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/csrc/utils/pybind.h>

#include "nodus/nodus.h"

namespace nodus_torch {
namespace {

namespace py = pybind11;
using Clock = std::chrono::steady_clock;
using c10d::OpType;

#if TORCH_VERSION_MAJOR >= 2
using Base = c10d::Backend;  // torch 2 wraps backends in its own ProcessGroup
#else
using Base = c10d::ProcessGroup;
#endif

// ---- Errors ------------------------------------------------------------------------
// Everything this file throws is a std::runtime_error (Python: RuntimeError)
// whose message starts with "nodus: <operation>: ".

[[noreturn]] void raise(const std::string& op, const std::string& what) {
  throw std::runtime_error("nodus: " + op + ": " + what);
}

void require(bool ok, const std::string& op, const std::string& what) {
  if (!ok) raise(op, what);
}

// The calling thread's explanation of its last nodus failure: nodus keeps one
// per thread, so a concurrent failure seen by another thread cannot replace it.
std::string nodusError(nodusResult_t rc) {
  std::string msg = nodusGetErrorString(rc);
  const char* detail = nodusGetLastError(nullptr);
  if (detail && *detail) msg += std::string(": ") + detail;
  return msg;
}

void check(nodusResult_t rc, const std::string& op) {
  if (rc != nodusSuccess) raise(op, nodusError(rc));
}

// ---- Types and reductions -------------------------------------------------------

const char* dtypeName(at::ScalarType st) {
  switch (st) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kChar: return "torch.int8";
    case at::kByte: return "torch.uint8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kBool: return "torch.bool";
    default: return c10::toString(st);
  }
}

constexpr const char* kSupported =
    "float32, float64, float16, bfloat16, int8, uint8, int32, int64 and bool are supported";

// bool travels as uint8 (torch stores it as one byte holding 0 or 1).
nodusDataType_t dataType(at::ScalarType st, const std::string& op) {
  switch (st) {
    case at::kFloat: return nodusFloat32;
    case at::kDouble: return nodusFloat64;
    case at::kHalf: return nodusFloat16;
    case at::kBFloat16: return nodusBfloat16;
    case at::kChar: return nodusInt8;
    case at::kByte: return nodusUint8;
    case at::kInt: return nodusInt32;
    case at::kLong: return nodusInt64;
    case at::kBool: return nodusUint8;
    default: raise(op, std::string("tensors of type ") + dtypeName(st) + " are not supported (" + kSupported + ")");
  }
}

const char* opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNKNOWN";
  }
}

struct Reduction {
  nodusDataType_t type = nodusFloat32;
  nodusRedOp_t op = nodusSum;
  bool premul = false;  // multiply the input by `factor` (or `factorTensor`), then sum
  double factor = 1.0;
  at::Tensor factorTensor;
};

// SUM/PRODUCT on bool are logical or/and, as torch computes them: MAX/MIN on
// 0/1 bytes. AVG and PREMUL_SUM are defined for floating-point tensors only
// (an integer average would have to round; nodus and torch round differently).
Reduction reduction(const c10d::ReduceOp& reduceOp, at::ScalarType st, const std::string& op) {
  const auto kind = static_cast<c10d::ReduceOp::RedOpType>(reduceOp);
  const bool isFloat = at::isFloatingType(st);
  const bool isBool = st == at::kBool;
  Reduction r;
  r.type = dataType(st, op);
  switch (kind) {
    case c10d::ReduceOp::SUM: r.op = isBool ? nodusMax : nodusSum; break;
    case c10d::ReduceOp::PRODUCT: r.op = isBool ? nodusMin : nodusProd; break;
    case c10d::ReduceOp::MIN: r.op = nodusMin; break;
    case c10d::ReduceOp::MAX: r.op = nodusMax; break;
    case c10d::ReduceOp::AVG:
      require(isFloat, op, std::string("ReduceOp.AVG needs a floating-point tensor, not ") + dtypeName(st) +
                           " (use ReduceOp.SUM and divide)");
      r.op = nodusAvg;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      require(isFloat, op, std::string("ReduceOp.PREMUL_SUM needs a floating-point tensor, not ") + dtypeName(st));
      auto* supplement = static_cast<c10d::NCCLPreMulSumSupplement*>(reduceOp.supplement_.get());
      require(supplement != nullptr, op, "ReduceOp.PREMUL_SUM without a factor (make it with _make_nccl_premul_sum)");
      r.op = nodusSum;
      r.premul = true;
#if TORCH_VERSION_MAJOR >= 2
      if (supplement->tensor_factor.defined()) r.factorTensor = supplement->tensor_factor;
#else
      if (!supplement->tensor_factors.empty()) r.factorTensor = supplement->tensor_factors[0];
#endif
      else r.factor = supplement->double_factor;
      break;
    }
    default: raise(op, std::string("ReduceOp.") + opName(kind) + " is not supported (SUM, PRODUCT, MIN, MAX, AVG and PREMUL_SUM are)");
  }
  return r;
}

at::Tensor premultiplied(const at::Tensor& t, const Reduction& r) {
  if (r.factorTensor.defined()) return at::mul(t, r.factorTensor.to(t.scalar_type()));
  return at::mul(t, r.factor);
}

// ---- Tensor checks ------------------------------------------------------------------

void checkTensor(const at::Tensor& t, const std::string& op) {
  require(t.defined(), op, "a tensor is undefined");
  require(t.layout() == c10::kStrided, op, "sparse tensors are not supported");
  require(t.device().is_cpu(), op, "tensors must be on the CPU, not " + t.device().str());
  (void)dataType(t.scalar_type(), op);
}

at::Tensor& single(std::vector<at::Tensor>& tensors, const std::string& op) {
  require(tensors.size() == 1, op,
          "expects exactly one tensor per process, got " + std::to_string(tensors.size()));
  checkTensor(tensors[0], op);
  return tensors[0];
}

void checkLike(const at::Tensor& t, const at::Tensor& like, const std::string& op, const std::string& what) {
  checkTensor(t, op);
  require(t.scalar_type() == like.scalar_type(), op,
          what + " has type " + dtypeName(t.scalar_type()) + " but the input has " + dtypeName(like.scalar_type()));
  require(t.numel() == like.numel(), op,
          what + " has " + std::to_string(t.numel()) + " elements but the input has " + std::to_string(like.numel()));
}

// Whether `ts` are contiguous and lie one after the other in memory: then
// they are one buffer nodus can use without a copy.
bool adjacent(const std::vector<at::Tensor>& ts) {
  if (ts.empty()) return false;
  auto* next = static_cast<const char*>(ts[0].data_ptr());
  for (const at::Tensor& t : ts) {
    if (!t.is_contiguous() || static_cast<const char*>(t.data_ptr()) != next) return false;
    next += t.nbytes();
  }
  return true;
}

// ---- Staging buffers ------------------------------------------------------------------
// Non-contiguous tensors and list arguments go through contiguous buffers.
// Faulting pages in costs more than the copy on these machines, so buffers are
// kept and reused rather than allocated per call.
class StagingPool {
 public:
  at::Tensor acquire(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t best = free_.size();
      for (size_t i = 0; i < free_.size(); ++i) {
        size_t have = static_cast<size_t>(free_[i].numel());
        if (have >= bytes && (best == free_.size() || have < static_cast<size_t>(free_[best].numel()))) best = i;
      }
      if (best != free_.size()) {
        at::Tensor t = std::move(free_[best]);
        free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
        return t;
      }
    }
    return at::empty({static_cast<int64_t>(std::max<size_t>(bytes, 64))}, at::TensorOptions().dtype(at::kByte));
  }
  void release(at::Tensor t) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(std::move(t));
    if (free_.size() > kKeep) {  // drop the smallest
      auto smallest = std::min_element(free_.begin(), free_.end(),
                                       [](const at::Tensor& a, const at::Tensor& b) { return a.numel() < b.numel(); });
      free_.erase(smallest);
    }
  }

 private:
  static constexpr size_t kKeep = 8;
  std::mutex mu_;
  std::vector<at::Tensor> free_;
};

// ---- Work ----------------------------------------------------------------------------

class NodusWork;

thread_local bool tOnPoller = false;  // whether this thread is a poller

// The poller's queue, shared with the Works so that one can ask for the
// poller's attention while the process group (and its poller) may be gone.
struct PollerQueue {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<c10::intrusive_ptr<NodusWork>> works;  // in issue order
  size_t urgent = 0;                                 // queued Works someone is blocked on
  bool stop = false;
};

class NodusWork : public c10d::Work {
 public:
  NodusWork(int rank, OpType type, const char* profilingTitle, std::string name, std::vector<at::Tensor> outputs,
            std::chrono::milliseconds timeout, std::shared_ptr<StagingPool> pool)
      : c10d::Work(rank, type, profilingTitle),
        name_(std::move(name)),
        outputs_(std::move(outputs)),
        timeout_(timeout),
        pool_(std::move(pool)),
        future_(c10::make_intrusive<c10::ivalue::Future>(listOfTensors())) {}

  ~NodusWork() override {
    // Only completed requests reach here (the poller holds every issued Work
    // until its requests are done), so freeing never waits.
    for (nodusRequest_t r : reqs_) nodusRequestFree(r);
  }

  // ---- Building, on the issuing thread before the poller sees the Work.
  void addRequest(nodusRequest_t r) { reqs_.push_back(r); }
  void keep(at::Tensor t) { keep_.push_back(std::move(t)); }
  void afterSuccess(std::function<void()> f) { after_.push_back(std::move(f)); }
  void issueFailed(std::string msg) {
    if (issueError_.empty()) issueError_ = std::move(msg);
  }

  // A contiguous tensor in a staging buffer (kept until the Work completes).
  at::Tensor staging(at::IntArrayRef sizes, const at::TensorOptions& options) {
    const size_t bytes = static_cast<size_t>(c10::multiply_integers(sizes)) * options.dtype().itemsize();
    at::Tensor buf = pool_->acquire(bytes);
    staged_.push_back(buf);
    return at::from_blob(buf.data_ptr(), sizes, options);
  }
  // What nodus reads for `t`: `t` itself if contiguous, else a contiguous copy.
  // Either way it lives until the Work completes.
  at::Tensor input(const at::Tensor& t) {
    keep(t);
    if (t.is_contiguous()) return t;
    at::Tensor s = staging(t.sizes(), t.options());
    s.copy_(t);
    return s;
  }
  // What nodus writes for `t`: `t` itself if contiguous, else a contiguous
  // buffer (holding `t`'s values if `copyIn`) copied into `t` on success.
  at::Tensor output(const at::Tensor& t, bool copyIn) {
    keep(t);
    if (t.is_contiguous()) return t;
    at::Tensor s = staging(t.sizes(), t.options());
    if (copyIn) s.copy_(t);
    afterSuccess([t, s]() mutable { t.copy_(s); });
    return s;
  }

  // ---- c10d::Work
  bool isCompleted() override { return poll(); }

  bool isSuccess() const override {
    const_cast<NodusWork*>(this)->poll();
    std::lock_guard<std::mutex> lock(mutex_);
    return completed_ && !exception_;
  }

  // Raises (RuntimeError in Python) with nodus's explanation if the operation
  // failed, or when `timeout` (else the operation's, else the process group's)
  // passes first; the operation then continues in the background.
  bool wait(std::chrono::milliseconds timeout) override {
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

  // Whoever asks for the future may block on it (DDP does): the poller
  // completes this Work as soon as its requests are done.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    urge();
    return future_;
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  void synchronize() override {}

  // Completes the Work if every request is done. Never blocks.
  bool poll() {
    if (done_.load(std::memory_order_acquire)) return true;
    for (nodusRequest_t r : reqs_) {
      int d = 0;
      nodusTest(r, &d);
      if (!d) return false;
    }
    settle();
    return done_.load(std::memory_order_acquire);
  }

  void enqueued(std::shared_ptr<PollerQueue> queue) { queue_ = std::move(queue); }

  // Asks the poller to complete this Work as soon as it can (it otherwise
  // sweeps completed Works lazily).
  void urge() {
    if (!queue_ || done_.load(std::memory_order_acquire)) return;
    {
      std::lock_guard<std::mutex> lock(queue_->mu);
      if (!inQueue_ || urgent_) return;
      urgent_ = true;
      ++queue_->urgent;
    }
    queue_->cv.notify_one();
  }

  // Guarded by the queue's mutex.
  bool inQueue_ = false, urgent_ = false;

  // The poller's part: waits for every request, then completes the Work.
  void block() {
    for (nodusRequest_t r : reqs_) nodusWait(r);
    settle();
  }

 private:
  // Runs once, on whichever thread first sees every request done.
  void settle() {
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

  static const c10::TypePtr& listOfTensors() {
    static const c10::TypePtr type = c10::ListType::create(c10::TensorType::get());
    return type;
  }

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

// ---- Poller: one thread per process group ------------------------------------------

// Completes Works nobody waits on, and those someone is blocked on (urged)
// as soon as their requests are done. It is not woken per operation: a short
// operation its caller waits for completes on the caller's thread, and the
// poller only sweeps it out of the queue later.
class Poller {
 public:
  Poller() : q_(std::make_shared<PollerQueue>()), thread_([this] { main(); }) {}
  ~Poller() {
    {
      std::lock_guard<std::mutex> lock(q_->mu);
      q_->stop = true;
    }
    q_->cv.notify_all();
    thread_.join();
  }
  void push(const c10::intrusive_ptr<NodusWork>& w) {
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

 private:
  static constexpr size_t kSweepEvery = 64;
  static constexpr std::chrono::milliseconds kSweepPeriod{2};

  void pop(std::unique_lock<std::mutex>&) {
    c10::intrusive_ptr<NodusWork>& w = q_->works.front();
    w->inQueue_ = false;
    if (w->urgent_) --q_->urgent;
    q_->works.pop_front();
  }

  void main() {
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

  std::shared_ptr<PollerQueue> q_;
  std::thread thread_;  // last: starts once the rest exists
};

// ---- Pairwise exchange schedule --------------------------------------------------------
// Rounds of a round-robin tournament: in each round every rank has at most
// one partner, so a sequence of (send, recv) pairs issued in round order,
// lower rank sending first, never waits in a cycle. -1: idle this round.
std::vector<int> partners(int nranks, int rank) {
  const int n = nranks + (nranks % 2);  // odd: a phantom rank; its partner sits out
  std::vector<int> out;
  for (int k = 0; k < n - 1; ++k) {
    int q;
    if (rank == n - 1) q = k;
    else if (rank == k) q = n - 1;
    else q = ((2 * k - rank) % (n - 1) + (n - 1)) % (n - 1);
    out.push_back(q < nranks ? q : -1);
  }
  return out;
}

// ---- The process group ---------------------------------------------------------------

class ProcessGroupNodus : public Base {
 public:
  ProcessGroupNodus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout)
      : Base(rank, size), timeout_(timeout), pool_(std::make_shared<StagingPool>()) {
    const std::string op = "init";
    require(size >= 1 && rank >= 0 && rank < size, op,
            "rank " + std::to_string(rank) + " is not in a group of " + std::to_string(size));
    // Several groups may rendezvous through one store (a PrefixStore per group
    // already separates most): count generations of `size` members.
    const int64_t generation = (store->add("nodus/members", 1) - 1) / size;
    const std::string key = "nodus/unique_id/" + std::to_string(generation);
    nodusUniqueId id;
    if (rank == 0) {
      check(nodusGetUniqueId(&id), op);
      store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
    } else {
      std::vector<uint8_t> bytes = store->get(key);
      require(bytes.size() == sizeof(id.internal), op,
              "the unique id in the store has " + std::to_string(bytes.size()) + " bytes, not " +
                  std::to_string(sizeof(id.internal)));
      std::memcpy(id.internal, bytes.data(), bytes.size());
    }
    check(nodusCommInitRank(&comm_, size, id, rank), op);
    poller_ = std::make_unique<Poller>();
#if TORCH_VERSION_MAJOR < 2
    init();
#endif
  }

  ~ProcessGroupNodus() override {
    // Waits until every issued operation has ended. Their futures' callbacks
    // may need the GIL: do not hold it meanwhile.
    if (Py_IsInitialized() && PyGILState_Check()) {
      py::gil_scoped_release nogil;
      poller_.reset();
    } else {
      poller_.reset();
    }
    nodusCommDestroy(comm_);
  }

  const std::string getBackendName() const override { return "nodus"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override {
    const std::string op = "allreduce";
    at::Tensor t = single(tensors, op);
    const Reduction red = reduction(opts.reduceOp, t.scalar_type(), op);
    auto w = work(OpType::ALLREDUCE, "nodus:all_reduce", op, {t}, opts.timeout);
    return launch(w, [&] {
      at::Tensor buf = w->output(t, true);
      at::Tensor src = buf;
      if (red.premul) w->keep(src = premultiplied(buf, red));
      nodusRequest_t r;
      check(nodusIallReduce(src.data_ptr(), buf.data_ptr(), static_cast<size_t>(buf.numel()), red.type, red.op, comm_, &r), op);
      w->addRequest(r);
    });
  }

  // One reduction over the tensors laid end to end in a staging buffer.
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override {
    const std::string op = "allreduce_coalesced";
    require(!tensors.empty(), op, "needs at least one tensor");
    size_t bytes = 0;
    for (const at::Tensor& t : tensors) {
      checkTensor(t, op);
      require(t.scalar_type() == tensors[0].scalar_type(), op,
              std::string("all tensors must have one type; found ") + dtypeName(tensors[0].scalar_type()) + " and " +
                  dtypeName(t.scalar_type()));
      bytes += t.nbytes();
    }
    const Reduction red = reduction(opts.reduceOp, tensors[0].scalar_type(), op);
    auto w = work(OpType::ALLREDUCE_COALESCED, "nodus:all_reduce_coalesced", op, tensors, opts.timeout);
    return launch(w, [&] {
      const int64_t elems = static_cast<int64_t>(bytes / tensors[0].element_size());
      at::Tensor flat = w->staging({elems}, tensors[0].options());
      std::vector<at::Tensor> parts;
      int64_t offset = 0;
      for (const at::Tensor& t : tensors) {
        w->keep(t);
        at::Tensor part = flat.narrow(0, offset, t.numel()).view(t.sizes());
        part.copy_(t);
        parts.push_back(part);
        offset += t.numel();
      }
      at::Tensor src = flat;
      if (red.premul) w->keep(src = premultiplied(flat, red));
      nodusRequest_t r;
      check(nodusIallReduce(src.data_ptr(), flat.data_ptr(), static_cast<size_t>(elems), red.type, red.op, comm_, &r), op);
      w->addRequest(r);
      w->afterSuccess([tensors, parts]() mutable {
        for (size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(parts[i]);
      });
    });
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override {
    const std::string op = "broadcast";
    at::Tensor t = single(tensors, op);
    checkRoot(opts.rootRank, op);
    require(opts.rootTensor == 0, op, "rootTensor must be 0 (one tensor per process)");
    const int root = static_cast<int>(opts.rootRank);
    auto w = work(OpType::BROADCAST, "nodus:broadcast", op, {t}, opts.timeout);
    return launch(w, [&] {
      at::Tensor buf = getRank() == root ? w->input(t) : w->output(t, false);
      nodusRequest_t r;
      check(nodusIbroadcast(buf.data_ptr(), buf.data_ptr(), static_cast<size_t>(buf.numel()), dataType(t.scalar_type(), op),
                            root, comm_, &r),
            op);
      w->addRequest(r);
    });
  }

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override {
    const std::string op = "reduce";
    at::Tensor t = single(tensors, op);
    checkRoot(opts.rootRank, op);
    require(opts.rootTensor == 0, op, "rootTensor must be 0 (one tensor per process)");
    const int root = static_cast<int>(opts.rootRank);
    const Reduction red = reduction(opts.reduceOp, t.scalar_type(), op);
    auto w = work(OpType::REDUCE, "nodus:reduce", op, {t}, opts.timeout);
    return launch(w, [&] {
      const bool isRoot = getRank() == root;
      at::Tensor buf = isRoot ? w->output(t, true) : w->input(t);
      at::Tensor src = buf;
      if (red.premul) w->keep(src = premultiplied(buf, red));
      nodusRequest_t r;
      check(nodusIreduce(src.data_ptr(), isRoot ? buf.data_ptr() : nullptr, static_cast<size_t>(buf.numel()), red.type,
                         red.op, root, comm_, &r),
            op);
      w->addRequest(r);
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    const std::string op = "allgather";
    at::Tensor in = single(inputs, op);
    require(outputs.size() == 1, op, "expects one list of output tensors");
    std::vector<at::Tensor>& outs = outputs[0];
    require(static_cast<int>(outs.size()) == getSize(), op,
            "the output list has " + std::to_string(outs.size()) + " tensors; the group has " + std::to_string(getSize()));
    for (const at::Tensor& o : outs) checkLike(o, in, op, "an output tensor");
    auto w = work(OpType::ALLGATHER, "nodus:all_gather", op, outs, opts.timeout);
    return launch(w, [&] {
      const at::Tensor src = w->input(in);
      const size_t count = static_cast<size_t>(in.numel());
      nodusRequest_t r;
      if (adjacent(outs)) {
        check(nodusIallGather(src.data_ptr(), outs[0].data_ptr(), count, dataType(in.scalar_type(), op), comm_, &r), op);
      } else {
        // Straight into each output (non-contiguous ones through staging):
        // no gathered copy to scatter afterwards.
        std::vector<void*> dsts;
        for (const at::Tensor& o : outs) dsts.push_back(w->output(o, false).data_ptr());
        check(nodusIallGatherList(src.data_ptr(), dsts.data(), count, dataType(in.scalar_type(), op), comm_, &r), op);
      }
      w->addRequest(r);
    });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override {
    const std::string op = "all_gather_into_tensor";
    checkTensor(input, op);
    checkTensor(output, op);
    require(output.scalar_type() == input.scalar_type(), op,
            std::string("the output has type ") + dtypeName(output.scalar_type()) + " but the input has " +
                dtypeName(input.scalar_type()));
    require(output.numel() == input.numel() * getSize(), op,
            "the output has " + std::to_string(output.numel()) + " elements; it needs the group size (" +
                std::to_string(getSize()) + ") times the input's " + std::to_string(input.numel()));
    auto w = work(OpType::_ALLGATHER_BASE, "nodus:all_gather_into_tensor", op, {output}, opts.timeout);
    return launch(w, [&] {
      const at::Tensor src = w->input(input);
      at::Tensor dst = w->output(output, false);
      nodusRequest_t r;
      check(nodusIallGather(src.data_ptr(), dst.data_ptr(), static_cast<size_t>(input.numel()),
                            dataType(input.scalar_type(), op), comm_, &r),
            op);
      w->addRequest(r);
    });
  }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    const std::string op = "reduce_scatter";
    at::Tensor out = single(outputs, op);
    require(inputs.size() == 1, op, "expects one list of input tensors");
    std::vector<at::Tensor>& ins = inputs[0];
    require(static_cast<int>(ins.size()) == getSize(), op,
            "the input list has " + std::to_string(ins.size()) + " tensors; the group has " + std::to_string(getSize()));
    for (const at::Tensor& i : ins) checkLike(i, out, op, "an input tensor");
    const Reduction red = reduction(opts.reduceOp, out.scalar_type(), op);
    auto w = work(OpType::REDUCE_SCATTER, "nodus:reduce_scatter", op, {out}, opts.timeout);
    return launch(w, [&] {
      at::Tensor src;
      if (adjacent(ins)) {
        for (const at::Tensor& i : ins) w->keep(i);
        src = at::from_blob(ins[0].data_ptr(), {out.numel() * getSize()}, out.options());
      } else {
        src = w->staging({out.numel() * getSize()}, out.options());
        for (int i = 0; i < getSize(); ++i) src.narrow(0, i * out.numel(), out.numel()).view(out.sizes()).copy_(ins[i]);
      }
      if (red.premul) w->keep(src = premultiplied(src, red));
      at::Tensor dst = w->output(out, false);
      nodusRequest_t r;
      check(nodusIreduceScatter(src.data_ptr(), dst.data_ptr(), static_cast<size_t>(out.numel()), red.type, red.op, comm_, &r),
            op);
      w->addRequest(r);
    });
  }

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override {
    const std::string op = "reduce_scatter_tensor";
    checkTensor(input, op);
    checkTensor(output, op);
    require(output.scalar_type() == input.scalar_type(), op,
            std::string("the output has type ") + dtypeName(output.scalar_type()) + " but the input has " +
                dtypeName(input.scalar_type()));
    require(input.numel() == output.numel() * getSize(), op,
            "the input has " + std::to_string(input.numel()) + " elements; it needs the group size (" +
                std::to_string(getSize()) + ") times the output's " + std::to_string(output.numel()));
    const Reduction red = reduction(opts.reduceOp, output.scalar_type(), op);
    auto w = work(OpType::_REDUCE_SCATTER_BASE, "nodus:reduce_scatter_tensor", op, {output}, opts.timeout);
    return launch(w, [&] {
      at::Tensor src = w->input(input);
      if (red.premul) w->keep(src = premultiplied(src, red));
      at::Tensor dst = w->output(output, false);
      nodusRequest_t r;
      check(nodusIreduceScatter(src.data_ptr(), dst.data_ptr(), static_cast<size_t>(output.numel()), red.type, red.op,
                                comm_, &r),
            op);
      w->addRequest(r);
    });
  }

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override {
    const std::string op = "all_to_all_single";
    checkTensor(input, op);
    checkTensor(output, op);
    require(output.scalar_type() == input.scalar_type(), op,
            std::string("the output has type ") + dtypeName(output.scalar_type()) + " but the input has " +
                dtypeName(input.scalar_type()));
    require(input.dim() >= 1 && output.dim() >= 1, op, "tensors need at least one dimension");
    const std::vector<size_t> sendBytes = splitBytes(input, inputSplits, "input", op);
    const std::vector<size_t> recvBytes = splitBytes(output, outputSplits, "output", op);
    auto w = work(OpType::ALLTOALL_BASE, "nodus:all_to_all_single", op, {output}, opts.timeout);
    return launch(w, [&] {
      at::Tensor src = w->input(input);
      at::Tensor dst = w->output(output, false);
      std::vector<const char*> sendAt(getSize());
      std::vector<char*> recvAt(getSize());
      size_t s = 0, d = 0;
      for (int q = 0; q < getSize(); ++q) {
        sendAt[q] = static_cast<const char*>(src.data_ptr()) + s;
        recvAt[q] = static_cast<char*>(dst.data_ptr()) + d;
        s += sendBytes[q];
        d += recvBytes[q];
      }
      exchange(*w, sendAt, sendBytes, recvAt, recvBytes, op);
    });
  }

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override {
    const std::string op = "all_to_all";
    require(static_cast<int>(outputs.size()) == getSize() && static_cast<int>(inputs.size()) == getSize(), op,
            "needs one input and one output tensor per rank (" + std::to_string(getSize()) + "), got " +
                std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
    for (const at::Tensor& t : inputs) checkTensor(t, op);
    for (const at::Tensor& t : outputs) {
      checkTensor(t, op);
      require(t.scalar_type() == inputs[0].scalar_type(), op, "all tensors must have one type");
    }
    for (const at::Tensor& t : inputs) require(t.scalar_type() == inputs[0].scalar_type(), op, "all tensors must have one type");
    auto w = work(OpType::ALLTOALL, "nodus:all_to_all", op, outputs, opts.timeout);
    return launch(w, [&] {
      std::vector<const char*> sendAt(getSize());
      std::vector<char*> recvAt(getSize());
      std::vector<size_t> sendBytes(getSize()), recvBytes(getSize());
      for (int q = 0; q < getSize(); ++q) {
        sendAt[q] = static_cast<const char*>(w->input(inputs[q]).data_ptr());
        recvAt[q] = static_cast<char*>(w->output(outputs[q], false).data_ptr());
        sendBytes[q] = inputs[q].nbytes();
        recvBytes[q] = outputs[q].nbytes();
      }
      exchange(*w, sendAt, sendBytes, recvAt, recvBytes, op);
    });
  }

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = c10d::GatherOptions()) override {
    const std::string op = "gather";
    at::Tensor in = single(inputs, op);
    checkRoot(opts.rootRank, op);
    const int root = static_cast<int>(opts.rootRank);
    const bool isRoot = getRank() == root;
    std::vector<at::Tensor> outs;
    if (isRoot) {
      require(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(), op,
              "the root needs a list of " + std::to_string(getSize()) + " output tensors");
      outs = outputs[0];
      for (const at::Tensor& o : outs) checkLike(o, in, op, "an output tensor");
    } else {
      require(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()), op, "only the root passes output tensors");
    }
    auto w = work(OpType::GATHER, "nodus:gather", op, outs, opts.timeout);
    return launch(w, [&] {
      const size_t bytes = in.nbytes();
      if (!isRoot) {
        if (bytes) send(*w, w->input(in).data_ptr(), bytes, root, op);
        return;
      }
      outs[root].copy_(in);
      for (int q = 0; q < getSize(); ++q)
        if (q != root && bytes) recv(*w, w->output(outs[q], false).data_ptr(), bytes, q, op);
    });
  }

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override {
    const std::string op = "scatter";
    at::Tensor out = single(outputs, op);
    checkRoot(opts.rootRank, op);
    const int root = static_cast<int>(opts.rootRank);
    const bool isRoot = getRank() == root;
    std::vector<at::Tensor> ins;
    if (isRoot) {
      require(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(), op,
              "the root needs a list of " + std::to_string(getSize()) + " input tensors");
      ins = inputs[0];
      for (const at::Tensor& i : ins) checkLike(i, out, op, "an input tensor");
    } else {
      require(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()), op, "only the root passes input tensors");
    }
    auto w = work(OpType::SCATTER, "nodus:scatter", op, {out}, opts.timeout);
    return launch(w, [&] {
      const size_t bytes = out.nbytes();
      if (!isRoot) {
        if (bytes) recv(*w, w->output(out, false).data_ptr(), bytes, root, op);
        return;
      }
      out.copy_(ins[root]);
      for (int q = 0; q < getSize(); ++q)
        if (q != root && bytes) send(*w, w->input(ins[q]).data_ptr(), bytes, q, op);
    });
  }

  // Tags are not used: messages between two ranks match in the order issued.
  // A send completes as its receiver takes the data (there is no unbounded
  // buffering): exchanges that could wait in a cycle belong in
  // batch_isend_irecv, which runs them as one nodus group.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) override {
    const std::string op = "send";
    at::Tensor t = single(tensors, op);
    auto w = work(OpType::SEND, "nodus:send", op, {t}, c10d::kUnsetTimeout);
#if TORCH_VERSION_MAJOR < 2
    if (coalescing_) {
      deferred_.push_back(Deferred{w, true, w->input(t).data_ptr(), t.nbytes(), dstRank});
      return w;
    }
#endif
    return launch(w, [&] { send(*w, w->input(t).data_ptr(), t.nbytes(), dstRank, op); });
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) override {
    const std::string op = "recv";
    at::Tensor t = single(tensors, op);
    auto w = work(OpType::RECV, "nodus:recv", op, {t}, c10d::kUnsetTimeout);
#if TORCH_VERSION_MAJOR < 2
    if (coalescing_) {
      deferred_.push_back(Deferred{w, false, w->output(t, false).data_ptr(), t.nbytes(), srcRank});
      return w;
    }
#endif
    return launch(w, [&] { recv(*w, w->output(t, false).data_ptr(), t.nbytes(), srcRank, op); });
  }

#if TORCH_VERSION_MAJOR < 2
  // batch_isend_irecv: the sends and receives between these two calls are
  // recorded, then run together as one nodus group, which progresses them all
  // at once (so rings and exchanges cannot wait in a cycle). The group runs to
  // completion on this thread.
  void startCoalescing() override { coalescing_ = true; }

  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /*reqs*/) override {
    coalescing_ = false;
    std::vector<Deferred> ops = std::move(deferred_);
    deferred_.clear();
    if (ops.empty()) return;
    {
      std::lock_guard<std::mutex> lock(issueMu_);
      nodusGroupStart();
      for (Deferred& d : ops) {
        nodusRequest_t r = nullptr;
        nodusResult_t rc = d.isSend ? nodusIsend(d.buf, d.bytes, nodusUint8, d.peer, comm_, &r)
                                    : nodusIrecv(d.buf, d.bytes, nodusUint8, d.peer, comm_, &r);
        if (rc != nodusSuccess) d.work->issueFailed(nodusError(rc));
        else d.work->addRequest(r);
      }
      nodusResult_t rc = nodusGroupEnd();
      if (rc != nodusSuccess) {
        const std::string msg = nodusError(rc);
        for (Deferred& d : ops) d.work->issueFailed(msg);
      }
    }
    for (Deferred& d : ops) poller_->push(d.work);
  }
#endif


  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& /*tensors*/, int /*tag*/) override {
    raise("recv", "receiving from any source is not supported: pass src");
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override {
    const std::string op = "barrier";
    auto w = work(OpType::BARRIER, "nodus:barrier", op, {}, opts.timeout);
    return launch(w, [&] {
      nodusRequest_t r;
      check(nodusIbarrier(comm_, &r), op);
      w->addRequest(r);
    });
  }

 private:
  c10::intrusive_ptr<NodusWork> work(OpType type, const char* title, const std::string& name, std::vector<at::Tensor> outputs,
                                     std::chrono::milliseconds timeout) {
    const auto limit = timeout > std::chrono::milliseconds::zero() ? timeout : timeout_;
    return c10::make_intrusive<NodusWork>(getRank(), type, title, name, std::move(outputs), limit, pool_);
  }

  // Issues the Work's requests (one thread at a time: a communicator is not
  // meant to be driven by several), then hands it to the poller. A failure
  // while issuing raises here; requests issued before it still complete in
  // the background first.
  template <typename Issue>
  c10::intrusive_ptr<c10d::Work> launch(const c10::intrusive_ptr<NodusWork>& w, Issue&& issue) {
    std::exception_ptr failed;
    {
      std::lock_guard<std::mutex> lock(issueMu_);
      try {
        issue();
      } catch (const std::exception& e) {
        failed = std::current_exception();
        w->issueFailed(e.what());
      }
    }
    poller_->push(w);
    if (failed) std::rethrow_exception(failed);
    return w;
  }

  void checkRoot(int64_t root, const std::string& op) const {
    require(root >= 0 && root < getSize(), op,
            "root " + std::to_string(root) + " is not a rank of this group of " + std::to_string(getSize()));
  }

  std::vector<size_t> splitBytes(const at::Tensor& t, const std::vector<int64_t>& splits, const char* which,
                                 const std::string& op) const {
    const int p = getSize();
    const int64_t rows = t.size(0);
    const size_t rowBytes = rows ? t.nbytes() / static_cast<size_t>(rows) : 0;
    std::vector<size_t> bytes(p);
    if (splits.empty()) {
      require(rows % p == 0, op,
              std::string("the ") + which + " has " + std::to_string(rows) + " rows, not a multiple of the group size " +
                  std::to_string(p) + " (pass split sizes)");
      for (int q = 0; q < p; ++q) bytes[q] = static_cast<size_t>(rows / p) * rowBytes;
      return bytes;
    }
    require(static_cast<int>(splits.size()) == p, op,
            std::string(which) + " split sizes have " + std::to_string(splits.size()) + " entries; the group has " +
                std::to_string(p));
    int64_t sum = 0;
    for (int q = 0; q < p; ++q) {
      require(splits[q] >= 0, op, std::string(which) + " split sizes must not be negative");
      sum += splits[q];
      bytes[q] = static_cast<size_t>(splits[q]) * rowBytes;
    }
    require(sum == rows, op,
            std::string(which) + " split sizes add up to " + std::to_string(sum) + " but the " + which + " has " +
                std::to_string(rows) + " rows");
    return bytes;
  }

  void send(NodusWork& w, const void* buf, size_t bytes, int peer, const std::string& op) {
    nodusRequest_t r;
    check(nodusIsend(buf, bytes, nodusUint8, peer, comm_, &r), op);
    w.addRequest(r);
  }
  void recv(NodusWork& w, void* buf, size_t bytes, int peer, const std::string& op) {
    nodusRequest_t r;
    check(nodusIrecv(buf, bytes, nodusUint8, peer, comm_, &r), op);
    w.addRequest(r);
  }

  // All-to-all as pairwise exchanges in tournament rounds. (nodusGroupEnd
  // would run a group to completion on the calling thread; these stay
  // asynchronous and cannot deadlock, see partners().)
  void exchange(NodusWork& w, const std::vector<const char*>& sendAt, const std::vector<size_t>& sendBytes,
                const std::vector<char*>& recvAt, const std::vector<size_t>& recvBytes, const std::string& op) {
    const int me = getRank();
    require(sendBytes[me] == recvBytes[me], op,
            "this rank sends itself " + std::to_string(sendBytes[me]) + " bytes but expects " +
                std::to_string(recvBytes[me]));
    if (sendBytes[me]) std::memcpy(recvAt[me], sendAt[me], sendBytes[me]);
    for (int q : partners(getSize(), me)) {
      if (q < 0) continue;
      if (me < q) {
        if (sendBytes[q]) send(w, sendAt[q], sendBytes[q], q, op);
        if (recvBytes[q]) recv(w, recvAt[q], recvBytes[q], q, op);
      } else {
        if (recvBytes[q]) recv(w, recvAt[q], recvBytes[q], q, op);
        if (sendBytes[q]) send(w, sendAt[q], sendBytes[q], q, op);
      }
    }
  }

#if TORCH_VERSION_MAJOR < 2
  struct Deferred {
    c10::intrusive_ptr<NodusWork> work;
    bool isSend;
    void* buf;
    size_t bytes;
    int peer;
  };
  bool coalescing_ = false;
  std::vector<Deferred> deferred_;
#endif

  nodusComm_t comm_ = nullptr;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<StagingPool> pool_;
  std::mutex issueMu_;
  std::unique_ptr<Poller> poller_;
};

c10::intrusive_ptr<ProcessGroupNodus> create(c10d::Store& store, int rank, int size, std::chrono::milliseconds timeout) {
  // The creator gets the store torch made for this group; no other rendezvous.
  auto owned = c10::intrusive_ptr<c10d::Store>::unsafe_reclaim_from_nonowning(&store);
  return c10::make_intrusive<ProcessGroupNodus>(owned, rank, size, timeout);
}

}  // namespace
}  // namespace nodus_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace py = pybind11;
  using nodus_torch::ProcessGroupNodus;
  m.doc() = "nodus collectives as the torch.distributed backend \"nodus\"";
  py::module dist = py::module::import("torch.distributed");

  py::class_<ProcessGroupNodus, nodus_torch::Base, c10::intrusive_ptr<ProcessGroupNodus>>(m, "ProcessGroupNodus");
  m.def("create_process_group", &nodus_torch::create, py::arg("store"), py::arg("rank"), py::arg("size"),
        py::arg("timeout"), py::call_guard<py::gil_scoped_release>(),
        "Creates a nodus process group (the creator registered as backend \"nodus\").");
  m.def("version", [] {
    int v = 0;
    nodusGetVersion(&v);
    return v;
  }, "nodus's version code (MAJOR*10000 + MINOR*100 + PATCH) of the library loaded.");

  py::object backend = dist.attr("Backend");
  if (!py::hasattr(backend, "NODUS")) {
    py::object creator = m.attr("create_process_group");
#if TORCH_VERSION_MAJOR >= 2
    backend.attr("register_backend")("nodus", creator, py::arg("extended_api") = false,
                                     py::arg("devices") = std::vector<std::string>{"cpu"});
#else
    backend.attr("register_backend")("nodus", creator);
#endif
  }
}
