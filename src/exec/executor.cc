#include "exec/executor.h"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <ctime>
#include <cstring>
#include <utility>
#include <vector>

#include "exec/exec_context.h"
#include "base/dtype.h"
#include "base/log.h"
#include "kernels/reduce.h"

namespace nodus {

void Request::complete(Status s) {
  status = std::move(s);
  done.store(1, std::memory_order_seq_cst);
  done.notify_all();
  // std::atomic::wait has no timeout: timed waiters sleep on the futex
  // directly, which notify_all does not know about (Dekker with timedWaiters).
  if (timedWaiters.load(std::memory_order_seq_cst) != 0)
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&done), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

bool Request::waitUntil(std::chrono::steady_clock::time_point deadline) {
  for (int i = 0; i < 64 && done.load(std::memory_order_acquire) == 0; ++i) sched_yield();
  timedWaiters.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    if (done.load(std::memory_order_seq_cst) != 0) break;
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) break;
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
    timespec ts{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&done), FUTEX_WAIT_PRIVATE, 0, &ts, nullptr, 0);
  }
  timedWaiters.fetch_sub(1, std::memory_order_seq_cst);
  return done.load(std::memory_order_acquire) != 0;
}

Status Request::wait() {
  for (int i = 0; i < 1000 && done.load(std::memory_order_acquire) == 0; ++i) __builtin_ia32_pause();
  while (done.load(std::memory_order_acquire) == 0) done.wait(0, std::memory_order_acquire);
  return status;
}

namespace {

using Clock = std::chrono::steady_clock;

std::byte* resolve(const Task& t, const Range& r, uint64_t elem, size_t ts) {
  std::byte* base = r.buf == Buf::Send ? const_cast<std::byte*>(t.send) : r.buf == Buf::Recv ? t.recv : t.scratch;
  return base + (r.offset + elem) * ts;
}

// A list AllGather's Recv buffer is several buffers: element `elem` of range
// r, and in *run how many of the next `n` elements follow it in memory.
std::byte* locate(const Task& t, const Range& r, uint64_t elem, uint64_t n, size_t ts, uint64_t* run) {
  if (r.buf != Buf::Recv || t.recvParts.empty()) {
    *run = n;
    return resolve(t, r, elem, ts);
  }
  const uint64_t e = r.offset + elem, within = e % t.partElems;
  *run = std::min(n, t.partElems - within);
  return t.recvParts[e / t.partElems] + within * ts;
}

// Copies n elements from slice element `elem` on; a null `to`/`from` pointer
// means "the range `dst`/`src`, wherever its pieces are", else contiguous memory.
void copySplit(const Task& t, std::byte* to, const Range& dst, const std::byte* from, const Range& src, uint64_t elem,
               uint64_t n, size_t ts) {
  for (uint64_t done = 0; done < n;) {
    uint64_t runD = n - done, runS = n - done;
    std::byte* d = to ? to + done * ts : locate(t, dst, elem + done, n - done, ts, &runD);
    const std::byte* s = from ? from + done * ts : locate(t, src, elem + done, n - done, ts, &runS);
    const uint64_t k = std::min(runD, runS);
    if (d != s) memcpy(d, s, k * ts);
    done += k;
  }
}

// One slice of a step of a list AllGather: only moves, no reductions.
Status stepSplit(const Task& t, const Step& st, uint64_t off, uint64_t n, size_t ts, const std::byte* in, std::byte* out,
                 SendConnection* sc) {
  switch (st.op) {
    case Op::Send: copySplit(t, out, {}, nullptr, st.src, off, n, ts); return Status::ok();
    case Op::Recv: copySplit(t, nullptr, st.dst, in, {}, off, n, ts); return Status::ok();
    case Op::RecvCopySend:
      copySplit(t, nullptr, st.dst, in, {}, off, n, ts);
      sc->fill(out, in, n * ts);
      return Status::ok();
    case Op::Copy: copySplit(t, nullptr, st.dst, nullptr, st.src, off, n, ts); return Status::ok();
    default:
      return makeError(nodusInternalError, "%s (%s): step %s cannot write separate receive buffers",
                       collectiveName(t.plan->key.coll), t.plan->algorithm.c_str(), opKindName(st.op));
  }
}

// Per-task gating for batches: a task may use a connection only once every
// earlier unfinished task of the same communicator is done with it.
struct Gate {
  std::vector<std::vector<int>> recvPeers, sendPeers;  // sorted, per task

  void init(std::span<Task> tasks) {
    recvPeers.resize(tasks.size());
    sendPeers.resize(tasks.size());
    for (size_t i = 0; i < tasks.size(); ++i) {
      for (const Step& s : tasks[i].plan->steps) {
        if (opReceives(s.op)) recvPeers[i].push_back(s.recvPeer);
        if (opSends(s.op)) sendPeers[i].push_back(s.sendPeer);
      }
      for (auto* v : {&recvPeers[i], &sendPeers[i]}) {
        std::sort(v->begin(), v->end());
        v->erase(std::unique(v->begin(), v->end()), v->end());
      }
    }
  }
  bool blocked(std::span<Task> tasks, size_t i, const Step& s) const {
    for (size_t j = 0; j < i; ++j) {
      if (tasks[j].at.done || tasks[j].comm != tasks[i].comm) continue;
      if (opReceives(s.op) && std::binary_search(recvPeers[j].begin(), recvPeers[j].end(), s.recvPeer)) return true;
      if (opSends(s.op) && std::binary_search(sendPeers[j].begin(), sendPeers[j].end(), s.sendPeer)) return true;
    }
    return false;
  }
};

void nextSlice(Task& t) { t.at.next(*t.plan, t.plan->sliceElems); }

// Does as many slices of `t` as can be done without waiting.
// Returns whether anything moved; errors go to *err.
bool advance(std::span<Task> tasks, size_t i, const Gate* gate, Status* err) {
  Task& t = tasks[i];
  ExecContext& comm = *t.comm;
  const Plan& plan = *t.plan;
  const size_t ts = typeSize(t.type);
  const bool avg = t.op == nodusAvg;
  const nodusRedOp_t op = avg ? nodusSum : t.op;
  const int p = comm.nranks();
  bool moved = false;
  while (!t.at.done) {
    const Step& st = plan.steps[t.at.step];
    if (gate && gate->blocked(tasks, i, st)) return moved;
    const uint64_t off = t.at.slice * plan.sliceElems;
    const uint64_t n = std::min(plan.sliceElems, st.count - off);
    const size_t bytes = n * ts;
    const bool fin = avg && st.finalAvg;
    const bool whole = t.recvParts.empty();  // else stepSplit
    const std::byte* in = nullptr;
    std::byte* out = nullptr;
    RecvConnection* rc = nullptr;
    SendConnection* sc = nullptr;
    bool placed = false;  // the slice came straight into dst (RecvConnection::tryPeekTo)
    if (opReceives(st.op)) {
      rc = comm.recvFrom(st.recvPeer);
      size_t got = 0;
      // Where the slice only lands unchanged, the transport may put it there.
      std::byte* to = whole && !fin && (st.op == Op::Recv || st.op == Op::RecvCopySend) ? resolve(t, st.dst, off, ts) : nullptr;
      in = to ? rc->tryPeekTo(to, bytes, &got, &placed) : rc->tryPeek(&got);
      if (!in) {
        if (to) t.placing = rc;
        return moved;
      }
      t.placing = nullptr;
      if (got != bytes) {
        *err = makeError(nodusInvalidUsage,
                         "%s: rank %d sent %zu bytes where %zu were expected: ranks called different "
                         "collectives, counts or types",
                         collectiveName(plan.key.coll), st.recvPeer, got, bytes);
        return moved;
      }
    }
    if (opSends(st.op)) {
      sc = comm.sendTo(st.sendPeer);
      out = sc->tryAcquire();
      if (!out) return moved;
      // A slice larger than a slot can only go by reference (the planner
      // cuts such slices only where every send is stable and every
      // connection takes references of any size).
      if (bytes > sc->slotBytes() && !(st.mayReference && whole)) {
        *err = makeError(nodusInternalError, "%s (%s): a slice of %zu bytes does not fit a slot of %zu and cannot go by reference",
                         collectiveName(plan.key.coll), plan.algorithm.c_str(), bytes, sc->slotBytes());
        return moved;
      }
    }
    // Sends `from` by reference where the plan allows and the transport can,
    // else copies it into the acquired slot.
    bool referenced = false;
    auto sendOut = [&](const std::byte* from) {
      if (st.mayReference && sc->postReference(from, bytes, plan.referencesAcross)) {
        referenced = true;
        if (std::find(t.referencing.begin(), t.referencing.end(), sc) == t.referencing.end()) t.referencing.push_back(sc);
        return true;
      }
      if (bytes > sc->slotBytes()) {
        *err = makeError(nodusInternalError, "%s (%s): a slice of %zu bytes for rank %d was refused by reference and does "
                         "not fit a slot of %zu", collectiveName(plan.key.coll), plan.algorithm.c_str(), bytes, st.sendPeer,
                         sc->slotBytes());
        return false;
      }
      sc->fill(out, from, bytes);
      return true;
    };
    if (!whole) {
      if (Status s = stepSplit(t, st, off, n, ts, in, out, sc); !s.isOk()) {
        *err = std::move(s);
        return moved;
      }
    } else switch (st.op) {
      case Op::Send:
        if (!sendOut(resolve(t, st.src, off, ts))) return moved;
        break;
      case Op::Recv:
        if (fin) scaleAvg(t.type, resolve(t, st.dst, off, ts), in, n, p);
        else if (!placed) memcpy(resolve(t, st.dst, off, ts), in, bytes);
        break;
      case Op::RecvReduceSend:
        sc->fillReduced(out, {t.type, op, in, resolve(t, st.src, off, ts), n});
        break;
      case Op::RecvReduceCopy:
      case Op::RecvReduceCopySend: {
        std::byte* dst = resolve(t, st.dst, off, ts);
        const std::byte* a = in;
        const std::byte* b = resolve(t, st.src, off, ts);
        if (st.receivedLast) std::swap(a, b);
        if (fin) reduceAvgFinal(t.type, dst, a, b, n, p);
        else reduce(t.type, op, dst, a, b, n);
        if (out && !sendOut(dst)) return moved;
        break;
      }
      case Op::RecvCopySend: {
        std::byte* dst = resolve(t, st.dst, off, ts);
        if (!placed) memcpy(dst, in, bytes);
        if (st.mayReference) {
          if (!sendOut(dst)) return moved;
        } else {
          sc->fill(out, placed ? dst : in, bytes);
        }
        break;
      }
      case Op::Copy: {
        std::byte* dst = resolve(t, st.dst, off, ts);
        const std::byte* src = resolve(t, st.src, off, ts);
        if (fin && p > 1) scaleAvg(t.type, dst, src, n, p);
        else if (dst != src) memcpy(dst, src, bytes);
        break;
      }
      case Op::Reduce: {
        std::byte* dst = resolve(t, st.dst, off, ts);
        if (fin) reduceAvgFinal(t.type, dst, dst, resolve(t, st.src, off, ts), n, p);
        else reduce(t.type, op, dst, dst, resolve(t, st.src, off, ts), n);
        break;
      }
    }
    if (rc) rc->release();
    if (sc && !referenced) sc->post(bytes);
    moved = true;
    nextSlice(t);
  }
  return moved;
}

// Whether the transports are done with what `t` sent by reference.
bool releaseReferences(Task& t) {
  std::erase_if(t.referencing, [](SendConnection* c) { return c->referencesDone(); });
  return t.referencing.empty();
}

std::string waitingFor(const Task& t) {
  if (t.at.done && !t.referencing.empty())
    return std::string(collectiveName(t.plan->key.coll)) + " (" + t.plan->algorithm +
           "): its last messages have not left (sent from the collective's buffers)";
  if (t.at.done || t.plan->steps.empty()) return "";
  const Step& s = t.plan->steps[t.at.step];
  std::string w = std::string(collectiveName(t.plan->key.coll)) + " (" + t.plan->algorithm + ") step " +
                  std::to_string(t.at.step) + " slice " + std::to_string(t.at.slice);
  if (opReceives(s.op)) w += ", waiting to receive from rank " + std::to_string(s.recvPeer);
  else if (opSends(s.op)) w += ", waiting for a free slot towards rank " + std::to_string(s.sendPeer);
  return w;
}

// The communicators of a batch, each once; tells them what this thread does
// with their connections (ExecContext::callerPolling): polls from construction, Done
// at the end.
class PollingScope {
 public:
  explicit PollingScope(std::span<Task> tasks) {
    // Each communicator once; a batch rarely holds more than one, so the
    // first few need no allocation.
    for (const Task& t : tasks) {
      if (std::find(comms_.begin(), comms_.begin() + inlined_, t.comm) != comms_.begin() + inlined_ ||
          std::find(more_.begin(), more_.end(), t.comm) != more_.end())
        continue;
      if (inlined_ < comms_.size()) comms_[inlined_++] = t.comm;
      else more_.push_back(t.comm);
    }
    set(CallerPolling::Polls);
  }
  ~PollingScope() { set(CallerPolling::Done); }
  void set(CallerPolling state) {
    if (state == state_) return;
    state_ = state;
    each([state](ExecContext* c) { c->callerPolling(state); });
  }
  void idle() {
    if (state_ == CallerPolling::Polls) each([](ExecContext* c) { c->callerIdle(); });
  }
  template <typename F>
  void each(F f) {
    for (size_t i = 0; i < inlined_; ++i) f(comms_[i]);
    for (ExecContext* c : more_) f(c);
  }


 private:
  std::array<ExecContext*, 4> comms_{};
  size_t inlined_ = 0;
  std::vector<ExecContext*> more_;
  CallerPolling state_ = CallerPolling::Done;
};

}  // namespace

Status runTasks(std::span<Task> tasks) {
  bool scratch = false;
  for (Task& t : tasks) {
    t.at.start(*t.plan, t.plan->sliceElems, t.plan->roundSlices);
    scratch |= t.plan->scratchElems != 0;
  }
  PollingScope polling(tasks);
  // Scratch is handed out here, under the claim, each task its own part.
  Status scratchErr;
  if (scratch)
    polling.each([&](ExecContext* c) {
      if (scratchErr.isOk()) scratchErr = c->assignScratch(tasks);
    });
  if (!scratchErr.isOk()) {
    for (Task& t : tasks) {
      t.comm->fail(scratchErr);
    }
    return scratchErr;
  }
  Gate gate;
  const bool gated = tasks.size() > 1;
  if (gated) gate.init(tasks);
  int64_t spinLimit = tasks.empty() ? 0 : tasks[0].comm->spin();
  constexpr int64_t kYields = 200;
  constexpr int64_t kSleepUs = 5000;
  int64_t idle = 0;
  Clock::time_point lastProgress{}, lastPeerCheck{};
  Status err;
  auto pass = [&](bool* allDone) {
    bool moved = false;
    *allDone = true;
    for (size_t i = 0; i < tasks.size(); ++i) {
      Task& t = tasks[i];
      if (t.finished()) continue;
      if (!t.at.done) moved |= advance(tasks, i, gated ? &gate : nullptr, &err);
      if (!err.isOk()) return moved;
      if (t.at.done && !t.referencing.empty() && releaseReferences(t)) moved = true;
      *allDone &= t.finished();
    }
    return moved;
  };
  auto fail = [&](Status s) {
    for (Task& t : tasks) {
      if (t.finished()) continue;
      if (t.placing) t.placing->cancelPlacement();
      t.placing = nullptr;
      t.comm->fail(s);  // the peers are told; the transports let go of the task's buffers
      t.referencing.clear();
    }
    return s;
  };
  for (;;) {
    bool allDone = false;
    const bool moved = pass(&allDone);
    if (!err.isOk()) return fail(err);
    if (allDone) return Status::ok();
    if (moved) {
      idle = 0;
      polling.set(CallerPolling::Polls);
      continue;
    }
    if (idle == 0) lastProgress = Clock::now();
    ++idle;
    if (idle % 64 == 0) polling.idle();
    if (idle < spinLimit) {
      __builtin_ia32_pause();
      continue;
    }
    // Checks that cost a clock read or a syscall happen only once spinning stopped.
    Task* waiting = nullptr;
    for (Task& t : tasks)
      if (!t.finished()) {
        waiting = &t;
        break;
      }
    ExecContext& comm = *waiting->comm;
    for (Task& t : tasks)
      if (!t.finished() && t.comm->aborted()) return fail(makeError(nodusAborted, "aborted by nodusCommAbort"));
    const auto now = Clock::now();
    if (now - lastPeerCheck > std::chrono::milliseconds(5)) {
      lastPeerCheck = now;
      // Only the peers a task waits on: a peer that finished its part and
      // exited is no failure.
      for (Task& t : tasks) {
        if (t.at.done) {
          // Done but for what it sent by reference: its readers must still
          // be alive (shm: a dead one never reads them).
          if (t.referencing.empty()) continue;
          for (const Step& st : t.plan->steps) {
            if (!opSends(st.op) || !st.mayReference) continue;
            SendConnection* c = t.comm->sendTo(st.sendPeer);
            if (std::find(t.referencing.begin(), t.referencing.end(), c) == t.referencing.end()) continue;
            Status s = t.comm->checkPeer(st.sendPeer);
            if (!s.isOk()) return fail(Status(s.code(), s.message() + " while " + waitingFor(t)));
          }
          continue;
        }
        const Step& st = t.plan->steps[t.at.step];
        for (int peer : {opReceives(st.op) ? st.recvPeer : -1, opSends(st.op) ? st.sendPeer : -1}) {
          Status s = t.comm->checkPeer(peer);
          if (!s.isOk()) return fail(Status(s.code(), s.message() + " during " + waitingFor(t)));
        }
      }
    }
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - lastProgress).count();
    if (waited >= comm.timeoutMs())
      return fail(makeError(nodusTimeout, "no progress for %lld ms (NODUS_TIMEOUT_MS=%lld) in %s", static_cast<long long>(waited),
                            static_cast<long long>(comm.timeoutMs()), waitingFor(*waiting).c_str()));
    if (idle < spinLimit + kYields) {
      sched_yield();
      continue;
    }
    // Sleep until a peer rings (several communicators: each is rung by its own
    // peers, so sleep on one with a short timeout).
    Doorbell* bell = comm.doorbell();
    polling.set(CallerPolling::Sleeps);
    bell->sleepers.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t seq = bell->seq.load(std::memory_order_seq_cst);
    const bool movedNow = pass(&allDone);
    if (!movedNow && !allDone && err.isOk()) {
      const int64_t leftUs = (comm.timeoutMs() - waited) * 1000;
      bell->sleep(seq, std::max<int64_t>(1, std::min(tasks.size() > 1 ? 1000 : kSleepUs, leftUs)));
    }
    bell->sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (!err.isOk()) return fail(err);
    if (allDone) return Status::ok();
    if (movedNow) idle = 0;
  }
}

}  // namespace nodus
