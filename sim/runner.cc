#include "sim/runner.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <unordered_map>

#include <simgrid/s4u/Actor.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/Mailbox.hpp>
#include <simgrid/s4u/Semaphore.hpp>

namespace nodus::sim {

namespace sg4 = simgrid::s4u;

namespace {

struct Slice {
  uint64_t bytes = 0;
  double readyAt = 0;  // simulated seconds: when the receiver may read it
};

// One direction between two ranks. Actors are cooperative contexts of one
// thread, so the queues need no locks: only the semaphores block.
struct Connection {
  int from = 0, to = 0;
  sg4::Host* src = nullptr;
  sg4::Host* dst = nullptr;
  double latency = 0;  // seconds from the last byte leaving to the slice being visible
  std::vector<sg4::Link*> route;
  sg4::Mailbox* mbox = nullptr;  // the receiving rank is its permanent receiver: transfers start when posted
  std::deque<Slice> posted;   // waiting for the wire, in order
  std::deque<Slice> arrived;  // delivered to the receiver's slots, in order
  sg4::SemaphorePtr credits, postedCount, arrivedCount;
  uint64_t messages = 0;
  double bytes = 0;
};

enum class Wait : uint8_t { None, Receive, Slot, Lane };

struct RankState {
  bool done = false;
  double finish = 0;
  Wait wait = Wait::None;
  int peer = -1;
  size_t step = 0;
  uint64_t slice = 0;
};

// Buffer sizes as the verifier and the API's argument checks assume them.
uint64_t bufferElems(const Plan& plan, Buf b) {
  const PlanKey& k = plan.key;
  switch (b) {
    case Buf::Send:
      return (k.coll == Collective::Broadcast && k.rank != k.root) ? 0 : sendElems(k);
    case Buf::Recv:
      return (k.coll == Collective::Reduce && k.rank != k.root) ? 0 : recvElems(k);
    case Buf::Scratch:
      return plan.scratchElems;
  }
  return 0;
}

bool usesSrc(Op op) { return op == Op::Send || op == Op::RecvReduceSend || op == Op::RecvReduceCopy ||
                             op == Op::RecvReduceCopySend || op == Op::Copy || op == Op::Reduce; }
bool usesDst(Op op) { return op == Op::Recv || op == Op::RecvReduceCopy || op == Op::RecvReduceCopySend ||
                             op == Op::RecvCopySend || op == Op::Copy || op == Op::Reduce; }

class Runner {
 public:
  Runner(const std::vector<Plan>& plans, const Platform& platform, const RunOptions& o,
         const std::vector<std::vector<LaneDep>>& deps)
      : plans_(plans), platform_(platform), o_(o), deps_(deps), ranks_(plans.size()),
        p_(static_cast<int>(platform.rankHost.size())), lanes_(p_ > 0 ? static_cast<int>(plans.size()) / p_ : 1) {}

  RunResult run() {
    RunResult res;
    if (p_ == 0 || lanes_ < 1 || plans_.size() != static_cast<size_t>(p_) * static_cast<size_t>(lanes_)) {
      res.status = makeError(nodusInternalError, "%zu plans for %d simulated ranks", plans_.size(), p_);
      return res;
    }
    for (int a = 0; a < static_cast<int>(plans_.size()); ++a) {
      res.status = check(a);
      if (!res.status.isOk()) return res;
    }
    waits_.resize(plans_.size());
    signals_.resize(plans_.size());
    for (size_t r = 0; r < deps_.size() && r < static_cast<size_t>(p_); ++r)
      for (const LaneDep& d : deps_[r]) {
        if (d.from < 0 || d.from >= lanes_ || d.to < 0 || d.to >= lanes_) {
          res.status = makeError(nodusInternalError, "rank %zu: a lane dependency names lane %d or %d of %d", r,
                                 d.from, d.to, lanes_);
          return res;
        }
        sg4::SemaphorePtr sem = sg4::Semaphore::create(0);
        signals_[r * static_cast<size_t>(lanes_) + static_cast<size_t>(d.from)][d.fromStep].push_back(sem);
        waits_[r * static_cast<size_t>(lanes_) + static_cast<size_t>(d.to)][d.toStep].push_back(sem);
      }
    for (int a = 0; a < static_cast<int>(plans_.size()); ++a)
      actors_.push_back(sg4::Actor::create("rank" + std::to_string(a / lanes_),
                                           platform_.rankHost[static_cast<size_t>(a / lanes_)],
                                           [this, a] { rankMain(a); }));
    for (int a = 0; a < static_cast<int>(plans_.size()); ++a)
      for (const Step& st : plans_[static_cast<size_t>(a)].steps) {
        if (opSends(st.op)) connect(a / lanes_, st.sendPeer, a % lanes_);
        if (opReceives(st.op)) connect(st.recvPeer, a / lanes_, a % lanes_);
      }
    sg4::Engine::get_instance()->run();

    for (const RankState& s : ranks_) res.seconds = std::max(res.seconds, s.finish);
    res.connections = conns_.size();
    for (const auto& [key, c] : conns_) res.messages += c->messages;
    if (!error_.isOk()) {
      res.status = error_;
    } else if (Status d = deadlock(); !d.isOk()) {
      res.status = d;
    } else {
      for (const auto& [key, c] : conns_) {
        const size_t left = c->posted.size() + c->arrived.size();
        if (left > 0) {
          res.status = makeError(nodusInternalError, "%zu message(s) from rank %d to rank %d never received", left,
                                 c->from, c->to);
          break;
        }
      }
    }
    if (o_.linkStats) {
      std::map<const sg4::Link*, double> bytes;
      for (const auto& [key, c] : conns_)
        for (const sg4::Link* l : c->route) bytes[l] += c->bytes;
      for (const auto& [l, b] : bytes) res.links.push_back({l->get_name(), b, l->get_bandwidth(), isFabricLink(l)});
    }
    return res;
  }

 private:
  // What the executor would reject before or while running, checked up front.
  Status check(int a) const {
    const Plan& plan = plans_[static_cast<size_t>(a)];
    const int p = p_, r = a / lanes_;
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const Step& st = plan.steps[i];
      if (opReceives(st.op) && (st.recvPeer < 0 || st.recvPeer >= p || st.recvPeer == r))
        return makeError(nodusInternalError, "rank %d step %zu: bad recv peer %d", r, i, st.recvPeer);
      if (opSends(st.op) && (st.sendPeer < 0 || st.sendPeer >= p || st.sendPeer == r))
        return makeError(nodusInternalError, "rank %d step %zu: bad send peer %d", r, i, st.sendPeer);
      for (const auto& [uses, range] : {std::pair{usesSrc(st.op), st.src}, std::pair{usesDst(st.op), st.dst}}) {
        if (!uses) continue;
        const uint64_t size = bufferElems(plan, range.buf);
        if (range.offset + st.count > size)
          return makeError(nodusInternalError, "rank %d: step %zu touches [%llu, %llu) of a %llu-element buffer", r, i,
                           static_cast<unsigned long long>(range.offset),
                           static_cast<unsigned long long>(range.offset + st.count),
                           static_cast<unsigned long long>(size));
      }
    }
    return Status::ok();
  }

  uint64_t key(int from, int to, int lane) const {
    return (static_cast<uint64_t>(from) * static_cast<uint64_t>(p_) + static_cast<uint64_t>(to)) *
               static_cast<uint64_t>(lanes_) + static_cast<uint64_t>(lane);
  }

  // Every connection the plans use, made before the simulation starts: made
  // lazily from inside actors they would race, since any SimGrid call an
  // actor makes lets the others run.
  void connect(int from, int to, int lane) {
    if (conns_.count(key(from, to, lane))) return;
    auto c = std::make_unique<Connection>();
    c->from = from;
    c->to = to;
    c->src = platform_.rankHost[static_cast<size_t>(from)];
    c->dst = platform_.rankHost[static_cast<size_t>(to)];
    double routeLatency = 0;
    c->src->route_to(c->dst, c->route, &routeLatency);
    double latency = 0;
    for (const sg4::Link* l : c->route) latency += l->get_latency();
    if (platform_.hostOf[static_cast<size_t>(from)] != platform_.hostOf[static_cast<size_t>(to)])
      latency += o_.softwareUs * 1e-6;
    c->latency = latency;
    c->credits = sg4::Semaphore::create(o_.slots);
    c->postedCount = sg4::Semaphore::create(0);
    c->arrivedCount = sg4::Semaphore::create(0);
    c->mbox = sg4::Mailbox::by_name("c" + std::to_string(from) + ">" + std::to_string(to) + "." + std::to_string(lane));
    c->mbox->set_receiver(actors_[static_cast<size_t>(to * lanes_ + lane)]);
    Connection* raw = c.get();
    conns_.emplace(key(from, to, lane), std::move(c));
    sg4::Actor::create("wire", raw->src, [raw] { wire(raw); });
  }

  Connection& connection(int from, int to, int lane) { return *conns_.at(key(from, to, lane)); }

  // The connection's NIC: moves posted slices one at a time, in order. An
  // eager mailbox put rather than Comm::sendto: SimGrid 3.32 files host-to-host
  // transfers in one global list that each completion searches, which made a
  // 4096-rank run quadratic.
  static void wire(Connection* c) {
    sg4::Actor::self()->daemonize();  // ends with the ranks
    for (;;) {
      c->postedCount->acquire();
      Slice s = c->posted.front();
      c->posted.pop_front();
      c->mbox->put(c, s.bytes);  // returns once the last byte arrived
      s.readyAt = sg4::Engine::get_clock() + c->latency;
      c->messages++;
      c->bytes += static_cast<double>(s.bytes);
      c->arrived.push_back(s);
      c->arrivedCount->release();
    }
  }

  void fail(Status s) {
    if (error_.isOk()) error_ = std::move(s);
  }

  void rankMain(int a) {
    const Plan& plan = plans_[static_cast<size_t>(a)];
    RankState& me = ranks_[static_cast<size_t>(a)];
    const int r = a / lanes_, lane = a % lanes_;
    const uint64_t ts = std::max<uint32_t>(1, plan.key.typeSize);
    const uint64_t sliceElems = std::max<uint64_t>(1, o_.sliceBytes / ts);
    // The cursor's unit: roundSlices consecutive slices of a step (1: the executor's order).
    const uint64_t roundElems = sliceElems * std::max<uint32_t>(1, o_.roundSlices);
    PlanCursor at;
    at.start(plan, roundElems);
    while (!at.done) {
      const Step& st = plan.steps[at.step];
      me.step = at.step;
      me.slice = at.slice;
      const uint64_t begin = at.slice * roundElems;
      const uint64_t end = std::min(st.count, begin + roundElems);
      const auto waits = waits_[static_cast<size_t>(a)].find(at.step);
      const auto signals = signals_[static_cast<size_t>(a)].find(at.step);
      for (uint64_t off = begin; off < end; off += sliceElems) {
        if (!error_.isOk()) return;  // another rank failed: stop, the run reports that
        const uint64_t bytes = std::min(sliceElems, end - off) * ts;
        if (waits != waits_[static_cast<size_t>(a)].end()) {
          me.wait = Wait::Lane;
          for (const sg4::SemaphorePtr& sem : waits->second) sem->acquire();
        }
        Connection* in = nullptr;
        if (opReceives(st.op)) {
          in = &connection(st.recvPeer, r, lane);
          me.wait = Wait::Receive, me.peer = st.recvPeer;
          in->arrivedCount->acquire();
          const Slice s = in->arrived.front();
          in->arrived.pop_front();
          in->mbox->get<Connection>();  // the transfer is done: this only retires it
          if (s.readyAt > sg4::Engine::get_clock()) sg4::this_actor::sleep_until(s.readyAt);
          if (s.bytes != bytes) {
            fail(makeError(nodusInternalError, "rank %d step %zu: expects %llu bytes from rank %d, got %llu", r,
                           at.step, static_cast<unsigned long long>(bytes), st.recvPeer,
                           static_cast<unsigned long long>(s.bytes)));
            return;
          }
        }
        if (o_.gammaUsPerByte > 0 && opReduces(st.op))
          sg4::this_actor::sleep_for(static_cast<double>(bytes) * o_.gammaUsPerByte * 1e-6);
        if (opSends(st.op)) {
          Connection& out = connection(r, st.sendPeer, lane);
          me.wait = Wait::Slot, me.peer = st.sendPeer;
          out.credits->acquire();
          out.posted.push_back({bytes, 0});
          out.postedCount->release();
        }
        me.wait = Wait::None;
        if (in) in->credits->release();  // the slot is free once the slice is consumed and passed on
        if (signals != signals_[static_cast<size_t>(a)].end())
          for (const sg4::SemaphorePtr& sem : signals->second) sem->release();
      }
      at.next(plan, roundElems);
    }
    me.done = true;
    me.finish = sg4::Engine::get_clock();
  }

  Status deadlock() const {
    std::string why;
    int stuck = 0;
    for (size_t a = 0; a < ranks_.size(); ++a) {
      const RankState& s = ranks_[a];
      if (s.done) continue;
      if (++stuck > 8) continue;
      why += " rank " + std::to_string(a / static_cast<size_t>(lanes_));
      if (lanes_ > 1) why += " lane " + std::to_string(a % static_cast<size_t>(lanes_));
      why += " step " + std::to_string(s.step) + " slice " + std::to_string(s.slice);
      if (s.wait == Wait::Receive) why += " waits for rank " + std::to_string(s.peer) + ";";
      else if (s.wait == Wait::Slot) why += " waits for a free slot towards rank " + std::to_string(s.peer) + ";";
      else if (s.wait == Wait::Lane) why += " waits for another lane;";
      else why += ";";
    }
    if (stuck == 0) return Status::ok();
    if (stuck > 8) why += " ... (" + std::to_string(stuck) + " ranks blocked)";
    return makeError(nodusInternalError, "plans deadlock with %u slot(s) per connection:%s", o_.slots, why.c_str());
  }

  const std::vector<Plan>& plans_;
  const Platform& platform_;
  const RunOptions o_;
  const std::vector<std::vector<LaneDep>>& deps_;
  std::vector<RankState> ranks_;
  // Per plan: step -> semaphores to take before each of its slices / to give after.
  std::vector<std::map<size_t, std::vector<sg4::SemaphorePtr>>> waits_, signals_;
  std::vector<sg4::ActorPtr> actors_;  // per plan: rank * lanes + lane
  const int p_;      // ranks
  const int lanes_;  // plans per rank, each its own actor and connections
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> conns_;
  Status error_;
};

}  // namespace

RunResult runPlans(const std::vector<Plan>& plans, const Platform& platform, const RunOptions& o,
                   const std::vector<std::vector<LaneDep>>& deps) {
  Runner runner(plans, platform, o, deps);
  return runner.run();
}

}  // namespace nodus::sim
