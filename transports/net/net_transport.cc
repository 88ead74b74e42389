#include "transports/net/net_transport.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include "base/bootstrap.h"
#include "base/log.h"
#include "base/settings.h"
#include "base/socket.h"
#include "transports/net/net.h"
#include "transports/net/tcp/tcp_net.h"
#include "transports/slot_ring.h"

namespace nodus {
namespace {

using net::Clock;

// A slot ring in anonymous memory of this process.
class RingMemory {
 public:
  RingMemory() = default;
  RingMemory(const RingMemory&) = delete;
  RingMemory& operator=(const RingMemory&) = delete;
  ~RingMemory() {
    if (addr_) munmap(addr_, size_);
  }
  Status map(size_t size) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return systemError("mmap(%zu bytes for a net ring)", size);
    addr_ = p;
    size_ = size;
    new (p) RingHeader();
    return Status::ok();
  }
  void* addr() const { return addr_; }
  size_t size() const { return size_; }
  RingHeader* header() const { return static_cast<RingHeader*>(addr_); }

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

// One peer: a connection each way, the two rings the executor sees, and
// the proxy's progress over them.
struct NetPeer {
  int rank = -1;
  std::unique_ptr<net::SendComm> send;
  std::unique_ptr<net::RecvComm> recv;
  RingMemory sendRing, recvRing;  // executor -> network, network -> executor
  std::unique_ptr<net::MemoryRegion> sendMr, recvMr;

  // Whoever holds `progressMu` (both only ever try-lock): the proxy
  // thread, or the executor's thread helping.
  std::mutex progressMu;
  uint64_t sendIssued = 0, sendDone = 0;  // send-ring slots handed to isend / sent (= the ring's tail)
  std::deque<net::Request*> sendReqs;
  uint64_t recvIssued = 0, recvDone = 0;  // recv-ring slots with an irecv posted / filled (= the ring's head)
  std::deque<net::Request*> recvReqs;
  bool broken = false;

  // Nets that take any memory (Net::anyMemory) move the collective's own
  // buffers, per slot of the rings:
  // - sendFrom: where a posted slot's bytes really are (NetSender::postReference;
  //   null: in the slot), written by the executor before it posts;
  // - recvTo / recvToBytes: where the executor asked the slot's message to
  //   land (NetReceiver::tryPeekTo), under progressMu;
  // - recvPlaced: whether it did, written before the ring's head publishes
  //   the slot.
  std::vector<const std::byte*> sendFrom;
  std::vector<std::byte*> recvTo;
  std::vector<size_t> recvToBytes;
  std::vector<uint8_t> recvPlaced;

  // Seen by the executor's thread (checkPeer).
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status error;
};

// What each rank publishes through the bootstrap.
struct Published {
  net::Handle handle;
  uint32_t listening;
  uint32_t pad;
};

class NetTransport;

// What the executor holds for a tcp peer: the slot rings, plus help for the
// proxy. After a post or release, and before reporting "nothing yet", the
// executor's thread moves that peer's data itself if the proxy is not busy
// with it (try-lock): a small message then costs no thread wake-up on
// either side, the busy path stays in the caller, and the proxy remains the
// one that moves data while the executor sleeps or computes.
class NetSender final : public SendConnection {
 public:
  NetSender(NetTransport* t, NetPeer* p, void* mem, uint32_t slots, size_t slotBytes, Doorbell* quiet)
      : t_(t), p_(p), ring_(mem, slots, slotBytes, quiet) {}
  std::byte* tryAcquire() override;
  void post(size_t bytes) override;
  size_t slotBytes() const override { return ring_.slotBytes(); }
  bool postReference(const std::byte* src, size_t bytes, bool acrossProcesses) override;
  bool referencesDone() override;

 private:
  NetTransport* t_;
  NetPeer* p_;
  RingSender ring_;
  uint64_t referenced_ = 0;  // slots up to the last postReference (the ring's tail must pass it)
};

class NetReceiver final : public RecvConnection {
 public:
  NetReceiver(NetTransport* t, NetPeer* p, void* mem, uint32_t slots, size_t slotBytes, Doorbell* quiet)
      : t_(t), p_(p), ring_(mem, slots, slotBytes, quiet) {}
  const std::byte* tryPeek(size_t* bytes) override;
  void release() override;
  const std::byte* tryPeekTo(std::byte* dst, size_t dstBytes, size_t* bytes, bool* placed) override;
  void cancelPlacement() override;

 private:
  NetTransport* t_;
  NetPeer* p_;
  RingReceiver ring_;
};

// progress(): no limit on which messages may be read.
constexpr uint64_t kReadAll = UINT64_MAX;

class NetTransport final : public Transport {
 public:
  NetTransport(const char* name, net::NetFactory factory) : name_(name), factory_(factory) {}
  const char* name() const override { return name_; }
  double deviceGBs() const override { return deviceGBs_; }

  ~NetTransport() override {
    if (proxy_.joinable()) {
      stop_.store(true, std::memory_order_release);
      wake();
      proxy_.join();
      for (const auto& p : peers_)
        NODUS_INFO(rank_, "%s: rank %d: %llu message(s) sent, %llu received", name_, p->rank,
                   static_cast<unsigned long long>(p->sendDone), static_cast<unsigned long long>(p->recvDone));
    }
  }

  Status connect(const ConnectRequest& req, Connections& out) override {
    rank_ = req.rank;
    slots_ = req.slots;
    slotBytes_ = (req.slotBytes + 63) / 64 * 64;  // as the ring lays slots out
    rankBell_ = req.bell;
    timeoutMs_ = req.timeoutMs;
    const auto deadline = Clock::now() + std::chrono::milliseconds(req.timeoutMs);

    std::vector<Published> pub(static_cast<size_t>(req.nranks));
    memset(pub.data(), 0, pub.size() * sizeof(Published));
    std::unique_ptr<net::Listener> listener;
    Status made = Status::ok();
    if (!req.peers.empty()) {
      net::NetContext ctx;
      ctx.rank = rank_;
      ctx.node = req.node;
      ctx.numa = req.numa;
      // A request without settings (a unit test's) takes the environment's.
      if (req.settings == nullptr) (void)Settings::fromEnvironment(&ownSettings_);
      ctx.settings = req.settings ? req.settings : &ownSettings_;
      made = factory_(ctx, &net_);
      if (made.isOk()) made = net_->listen(0, &pub[static_cast<size_t>(rank_)].handle, &listener);
      if (made.isOk()) pub[static_cast<size_t>(rank_)].listening = 1;
    }
    // Exchange even on failure, so the others learn of it instead of waiting.
    NODUS_TRY(req.bootstrap->allGather(pub.data(), sizeof(Published)));
    NODUS_TRY(made);
    if (req.peers.empty()) return Status::ok();
    for (int peer : req.peers)
      if (!pub[static_cast<size_t>(peer)].listening)
        return makeError(nodusRemoteError, "rank %d could not listen for %s connections", peer, name_);
    const net::DeviceProperties dev = net_->device(0);
    deviceGBs_ = dev.speedMbps > 0 ? dev.speedMbps / 8000.0 : 0;
    NODUS_INFO(rank_, "%s: %zu peer(s) over %s (%s, %d Mb/s)", name_, req.peers.size(), dev.name.c_str(),
               dev.address.c_str(), dev.speedMbps);

    byRank_.assign(static_cast<size_t>(req.nranks), nullptr);
    const size_t ringSize = ringBytes(slots_, slotBytes_);
    net::Identity self;
    self.secret = req.bootstrap->secret();
    self.rank = rank_;
    // Connect everywhere first, then accept: connecting needs only the peer's
    // listen backlog, so no order of ranks can deadlock.
    for (int peer : req.peers) {
      auto p = std::make_unique<NetPeer>();
      p->rank = peer;
      Status s = net_->connect(0, pub[static_cast<size_t>(peer)].handle, self, deadline, &p->send);
      if (!s.isOk()) return Status(s.code(), "rank " + std::to_string(peer) + ": " + s.message());
      NODUS_TRY(p->sendRing.map(ringSize));
      NODUS_TRY(p->recvRing.map(ringSize));
      if (peer == req.ringPrev) prefaultRing(p->recvRing.addr(), ringSize);
      if (peer == req.ringNext) prefaultRing(p->sendRing.addr(), ringSize);
      p->sendFrom.assign(slots_, nullptr);
      p->recvTo.assign(slots_, nullptr);
      p->recvToBytes.assign(slots_, 0);
      p->recvPlaced.assign(slots_, 0);
      NODUS_TRY(net_->regMr(p->sendRing.addr(), ringSize, &p->sendMr));
      NODUS_TRY(net_->regMr(p->recvRing.addr(), ringSize, &p->recvMr));
      byRank_[static_cast<size_t>(peer)] = p.get();
      peers_.push_back(std::move(p));
    }
    for (size_t accepted = 0; accepted < req.peers.size();) {
      std::unique_ptr<net::RecvComm> rc;
      Status s = net_->accept(*listener, self.secret, deadline, &rc);
      if (!s.isOk()) return Status(s.code(), s.message() + " (" + std::to_string(accepted) + " of " +
                                                 std::to_string(req.peers.size()) + " peers connected)");
      const int from = rc->peerRank();
      NetPeer* p = from >= 0 && from < req.nranks ? byRank_[static_cast<size_t>(from)] : nullptr;
      if (p == nullptr || p->recv) {
        NODUS_WARN(rank_, "%s: refused a connection claiming rank %d: not a %s peer of this rank, or connected twice", name_,
                   from, name_);
        continue;
      }
      p->recv = std::move(rc);
      ++accepted;
    }
    listener.reset();  // nobody else may connect

    wakeFd_ = Fd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!wakeFd_.valid()) return systemError("eventfd");
    epollFd_ = Fd(epoll_create1(EPOLL_CLOEXEC));
    parkFd_ = Fd(epoll_create1(EPOLL_CLOEXEC));
    if (!epollFd_.valid() || !parkFd_.valid()) return systemError("epoll_create1");
    for (const Fd* set : {&epollFd_, &parkFd_}) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      if (epoll_ctl(set->get(), EPOLL_CTL_ADD, wakeFd_.get(), &ev) != 0) return systemError("epoll_ctl(eventfd)");
    }
    // Edge-triggered, each direction for what it waits on (a send socket
    // would otherwise wake the proxy for every ACK): the proxy always works a
    // socket until it would block.
    const bool sendReadable = net_->sendReadiness() == net::Net::SendReadiness::Readable;
    for (const auto& p : peers_) {
      for (bool sending : {true, false}) {
        std::vector<int> fds;
        if (sending) net_->eventFds(*p->send, &fds);
        else net_->eventFds(*p->recv, &fds);
        for (int fd : fds) {
          epoll_event e{};
          e.events = (sending && !sendReadable ? EPOLLOUT : EPOLLIN) | EPOLLRDHUP | EPOLLET;
          if (epoll_ctl(epollFd_.get(), EPOLL_CTL_ADD, fd, &e) != 0) return systemError("epoll_ctl(socket)");
        }
      }
    }
    proxyBell_.wakeFd = wakeFd_.get();

    out.send.resize(static_cast<size_t>(req.nranks));
    out.recv.resize(static_cast<size_t>(req.nranks));
    out.peerDoorbells.assign(static_cast<size_t>(req.nranks), nullptr);  // peers' doorbells are out of reach
    for (const auto& p : peers_) {
      // A post gives the proxy a slot to send, a release a slot to receive
      // into: the connections help, or wake the proxy (see NetSender).
      out.send[static_cast<size_t>(p->rank)] =
          std::make_unique<NetSender>(this, p.get(), p->sendRing.addr(), slots_, slotBytes_, &quietBell_);
      out.recv[static_cast<size_t>(p->rank)] =
          std::make_unique<NetReceiver>(this, p.get(), p->recvRing.addr(), slots_, slotBytes_, &quietBell_);
    }
    proxy_ = std::thread([this] { proxyMain(); });
    return Status::ok();
  }

  // Moves `p`'s data on the calling thread unless the proxy is at it;
  // whether it did. Without it, the caller must wake the proxy. Messages
  // with ring sequence numbers from `readTo` on stay in the network (see
  // progress()).
  bool help(NetPeer& p, uint64_t readTo = kReadAll) {
    std::unique_lock<std::mutex> lock(p.progressMu, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    progress(p, readTo);
    return true;
  }
  // help() after a post or a release: sends and posts receives, reads
  // nothing (the executor's next peek reads, into the collective's buffer
  // where it can).
  bool helpWithoutReading(NetPeer& p) { return help(p, 0); }
  // Wakes the proxy if it sleeps (the Dekker handshake of Doorbell).
  void wakeProxy() { proxyBell_.ring(); }

  bool anyMemory() const { return net_->anyMemory(); }

  // help(), after pointing the receive of ring slot `seq` at `dst` if it
  // has not begun (NetReceiver::tryPeekTo); whether it could look.
  bool helpInto(NetPeer& p, uint64_t seq, std::byte* dst, size_t bytes) {
    std::unique_lock<std::mutex> lock(p.progressMu, std::try_to_lock);
    if (!lock.owns_lock()) return false;
    const size_t i = seq % slots_;
    if (!p.broken && seq >= p.recvDone && seq < p.recvIssued && p.recvTo[i] != dst &&
        net_->retarget(p.recvReqs[static_cast<size_t>(seq - p.recvDone)], dst, bytes)) {
      p.recvTo[i] = dst;
      p.recvToBytes[i] = bytes;
    }
    progress(p, seq + 1);
    return true;
  }

  // Takes back the destination of ring slot `seq`'s receive: into its slot
  // again if no data has come, else the connection ends (data would keep
  // landing in memory the caller is about to let go of).
  void unplace(NetPeer& p, uint64_t seq) {
    std::lock_guard<std::mutex> lock(p.progressMu);
    const size_t i = seq % slots_;
    if (p.broken || seq < p.recvDone || seq >= p.recvIssued || p.recvTo[i] == nullptr) return;
    RingHeader* rh = p.recvRing.header();
    if (net_->retarget(p.recvReqs[static_cast<size_t>(seq - p.recvDone)], ringSlot(rh, slotBytes_, seq, slots_),
                       slotBytes_)) {
      p.recvTo[i] = nullptr;
      return;
    }
    fail(p, makeError(nodusRemoteError, "a message was arriving into a collective's buffer when the collective failed"));
  }

  Status checkPeer(int peer) override {
    NetPeer* p = peer >= 0 && static_cast<size_t>(peer) < byRank_.size() ? byRank_[static_cast<size_t>(peer)] : nullptr;
    if (p == nullptr || !p->failed.load(std::memory_order_acquire)) return Status::ok();
    // What arrived before the connection broke is still good: report the
    // failure once the executor is stuck on it (nothing left to receive, or
    // no slot left to send into).
    const RingHeader* in = p->recvRing.header();
    const RingHeader* outRing = p->sendRing.header();
    const bool nothingToReceive = in->head.load(std::memory_order_acquire) == in->tail.load(std::memory_order_acquire);
    const bool noSlotToSend =
        outRing->head.load(std::memory_order_acquire) - outRing->tail.load(std::memory_order_acquire) >= slots_;
    if (!nothingToReceive && !noSlotToSend) return Status::ok();
    std::lock_guard<std::mutex> lock(p->mu);
    return Status(p->error.code(), "rank " + std::to_string(peer) + " over " + name_ + ": " + p->error.message());
  }

  // While the executor polls, the proxy sleeps on its eventfd alone (parkFd_):
  // the sockets' edges stay queued in epollFd_'s ready list, so none is lost,
  // and the proxy takes them up once the executor stops polling.
  void callerPolling(CallerPolling state) override {
    if (!proxy_.joinable()) return;
    callerPolls_.store(state == CallerPolling::Polls, std::memory_order_seq_cst);
    if (state == CallerPolling::Polls || proxyBell_.sleepers.load(std::memory_order_seq_cst) == 0) return;
    // A collective that ended with everything sent needs nobody until the
    // next one (which polls again); one that left data unsent, or an
    // executor about to sleep, needs the proxy on the sockets now.
    if (state == CallerPolling::Done && nothingUnsent()) return;
    wake();
  }

  // While the executor polls, a frame half-sent to a peer it no longer
  // posts to (a direct exchange moved on to the next peer) moves only here.
  void callerIdle() override {
    if (!callerPolls_.load(std::memory_order_relaxed)) return;
    for (const auto& p : peers_) {
      const RingHeader* h = p->sendRing.header();
      if (h->tail.load(std::memory_order_acquire) != h->head.load(std::memory_order_acquire)) help(*p);
    }
  }

  // allSent() for the executor's thread: from the rings' shared counters
  // (the ring's tail is the proxy's sendDone).
  bool nothingUnsent() const {
    for (const auto& p : peers_) {
      const RingHeader* h = p->sendRing.header();
      if (!p->failed.load(std::memory_order_acquire) &&
          h->tail.load(std::memory_order_acquire) != h->head.load(std::memory_order_acquire))
        return false;
    }
    return true;
  }

  void notifyFailure() override {
    for (const auto& p : peers_) {
      if (p->send) net_->shutdown(*p->send);
      if (p->recv) net_->shutdown(*p->recv);
      // Nothing moves for this peer after this: a send may have been
      // reading the failed collective's buffers (NetSender::postReference).
      std::lock_guard<std::mutex> lock(p->progressMu);
      p->broken = true;
    }
  }

 private:
  void wake() {
    const uint64_t one = 1;
    ssize_t ignored = write(wakeFd_.get(), &one, sizeof(one));
    (void)ignored;
  }

  void fail(NetPeer& p, const Status& s) {
    p.broken = true;
    {
      std::lock_guard<std::mutex> lock(p.mu);
      p.error = s;
    }
    p.failed.store(true, std::memory_order_release);
    NODUS_INFO(rank_, "%s: connection with rank %d ended: %s", name_, p.rank, s.message().c_str());
    net_->shutdown(*p.send);
    net_->shutdown(*p.recv);
    rankBell_->ring();  // a waiting executor looks at its peers again
  }

  // Moves whatever can move for one peer without blocking; whether anything
  // did. Only messages with ring sequence numbers below `readTo` are read
  // from the network: one the executor has not asked for yet may still be
  // pointed at its destination (helpInto) instead of landing in its slot
  // and being copied out (on 2 cores, 9 of 10 slices of a 1 MiB tcp
  // AllGather had arrived in their slots while the executor was still
  // posting its sends). The proxy, and an executor stuck for a slot, read
  // everything: the rings then buffer as the verifier assumes.
  bool progress(NetPeer& p, uint64_t readTo = kReadAll) {
    if (p.broken) return false;
    bool moved = false;
    Status st;
    RingHeader* sh = p.sendRing.header();
    const uint64_t posted = sh->head.load(std::memory_order_acquire);
    while (st.isOk() && p.sendIssued < posted) {
      net::Request* r = nullptr;
      const std::byte* from = p.sendFrom[p.sendIssued % slots_];
      st = net_->isend(*p.send, from ? from : ringSlot(sh, slotBytes_, p.sendIssued, slots_),
                       sh->sizes[p.sendIssued % slots_], *p.sendMr, &r);
      if (!st.isOk()) break;
      p.sendReqs.push_back(r);
      ++p.sendIssued;
      moved = true;
    }
    while (st.isOk() && !p.sendReqs.empty()) {
      bool done = false;
      size_t n = 0;
      st = net_->test(p.sendReqs.front(), &done, &n);
      if (!st.isOk() || !done) break;
      p.sendReqs.pop_front();
      sh->tail.store(++p.sendDone, std::memory_order_release);  // the slot is free for the executor again
      rankBell_->ring();
      moved = true;
    }
    RingHeader* rh = p.recvRing.header();
    const uint64_t released = rh->tail.load(std::memory_order_acquire);
    while (st.isOk() && p.recvIssued - released < slots_) {
      net::Request* r = nullptr;
      p.recvTo[p.recvIssued % slots_] = nullptr;
      st = net_->irecv(*p.recv, ringSlot(rh, slotBytes_, p.recvIssued, slots_), slotBytes_, *p.recvMr, &r);
      if (!st.isOk()) break;
      p.recvReqs.push_back(r);
      ++p.recvIssued;
      moved = true;
    }
    while (st.isOk() && !p.recvReqs.empty() && p.recvDone < readTo) {
      bool done = false;
      size_t n = 0;
      st = net_->test(p.recvReqs.front(), &done, &n);
      if (!st.isOk() || !done) break;
      p.recvReqs.pop_front();
      const size_t i = p.recvDone % slots_;
      // A message too large for where it was asked to land went to its slot.
      p.recvPlaced[i] = p.recvTo[i] != nullptr && n <= p.recvToBytes[i];
      rh->sizes[i] = n;
      rh->head.store(++p.recvDone, std::memory_order_release);  // the executor may read it
      rankBell_->ring();
      moved = true;
    }
    if (!st.isOk()) fail(p, st);
    return moved;
  }

  // Every slot the executor posted has gone out (or cannot).
  bool allSent() const {
    for (const auto& p : peers_)
      if (!p->broken && p->sendDone != p->sendRing.header()->head.load(std::memory_order_acquire)) return false;
    return true;
  }

  void proxyMain() {
    epoll_event events[64];
    Clock::time_point drainUntil{};
    for (;;) {
      bool moved = false, skipped = false;
      for (const auto& p : peers_) {
        // A peer the executor is helping is in hands already; whatever it
        // leaves undone either waits on a socket (an epoll edge follows) or
        // on the executor's next post or release (which helps or wakes us).
        std::unique_lock<std::mutex> lock(p->progressMu, std::try_to_lock);
        if (lock.owns_lock()) moved |= progress(*p);
        else skipped = true;
      }
      if (stop_.load(std::memory_order_acquire)) {
        // The communicator is going away: the last collective's final slots
        // may still be posted but unsent, and the peers wait for them.
        if (drainUntil == Clock::time_point{}) drainUntil = Clock::now() + std::chrono::milliseconds(timeoutMs_);
        if (allSent()) return;
        if (Clock::now() >= drainUntil) {
          NODUS_WARN(rank_, "%s: gave up sending the last messages at communicator destruction after %lld ms", name_,
                     static_cast<long long>(timeoutMs_));
          return;
        }
      }
      // No polling before sleeping: measured on 2 shared cores, polling (even
      // with sched_yield) took the CPU from the executors and made small
      // collectives 3-8x slower than sleeping in epoll right away.
      if (moved) continue;
      // Sleep until a socket is ready or the executor posts / releases a
      // slot (Dekker with the doorbell: announce, re-check, then sleep).
      proxyBell_.sleepers.fetch_add(1, std::memory_order_seq_cst);
      bool movedNow = false;
      for (const auto& p : peers_) {
        std::unique_lock<std::mutex> lock(p->progressMu, std::try_to_lock);
        if (lock.owns_lock()) movedNow |= progress(*p);
        else skipped = true;
      }
      // A skipped peer may have had its socket's edge taken while the
      // executor held it: look again soon rather than at the next edge
      // (unless parked: the executor is at the sockets, and tells us when it
      // stops). Read after announcing the sleep: callerPolling() sets it
      // first and then looks for sleepers (Dekker), so a parked proxy is
      // woken whenever the executor sleeps or leaves data unsent; after a
      // collective that sent everything it may stay parked until the next
      // call or its timeout, since nobody waits on it then.
      const bool parked = callerPolls_.load(std::memory_order_seq_cst);
      if (!movedNow)
        epoll_wait(parked ? parkFd_.get() : epollFd_.get(), events, 64,
                   parked ? 1000 : skipped ? 1 : stop_.load(std::memory_order_acquire) ? 10 : 1000);
      proxyBell_.sleepers.fetch_sub(1, std::memory_order_seq_cst);
      uint64_t count = 0;
      ssize_t ignored = read(wakeFd_.get(), &count, sizeof(count));
      (void)ignored;
    }
  }

  const char* name_;
  net::NetFactory factory_;
  Settings ownSettings_;  // connect()'s when its request carries none
  int rank_ = 0;
  double deviceGBs_ = 0;  // the device's speed (deviceGBs), once connected to peers
  uint32_t slots_ = 0;
  size_t slotBytes_ = 0;
  int64_t timeoutMs_ = 0;
  Doorbell* rankBell_ = nullptr;
  std::unique_ptr<net::Net> net_;
  std::vector<std::unique_ptr<NetPeer>> peers_;
  std::vector<NetPeer*> byRank_;
  Doorbell proxyBell_;  // process-local: its wakeFd is the eventfd the proxy epolls
  Doorbell quietBell_;  // what the rings ring: nobody sleeps on it (the connections wake the proxy)
  Fd wakeFd_, epollFd_;
  Fd parkFd_;  // the eventfd alone: where the proxy sleeps while the executor polls
  std::atomic<bool> callerPolls_{false};
  std::atomic<bool> stop_{false};
  std::thread proxy_;  // last: joined (in the destructor) before anything it uses goes away
};

std::byte* NetSender::tryAcquire() {
  std::byte* slot = ring_.tryAcquire();
  if (slot == nullptr && t_->help(*p_)) slot = ring_.tryAcquire();  // a send may have completed
  return slot;
}

void NetSender::post(size_t bytes) {
  p_->sendFrom[ring_.posted() % p_->sendFrom.size()] = nullptr;
  ring_.post(bytes);
  if (!t_->helpWithoutReading(*p_)) t_->wakeProxy();
}

bool NetSender::postReference(const std::byte* src, size_t bytes, bool /*acrossProcesses: the proxy is ours*/) {
  if (!t_->anyMemory()) return false;
  p_->sendFrom[ring_.posted() % p_->sendFrom.size()] = src;  // published by the post's release of head
  ring_.post(bytes);
  referenced_ = ring_.posted();
  if (!t_->helpWithoutReading(*p_)) t_->wakeProxy();
  return true;
}

bool NetSender::referencesDone() {
  auto sent = [&] {
    return p_->failed.load(std::memory_order_acquire) ||
           p_->sendRing.header()->tail.load(std::memory_order_acquire) >= referenced_;
  };
  if (sent()) return true;
  if (!t_->help(*p_)) t_->wakeProxy();
  return sent();
}

const std::byte* NetReceiver::tryPeek(size_t* bytes) {
  const std::byte* slot = ring_.tryPeek(bytes);
  if (slot == nullptr && t_->help(*p_, ring_.released() + 1)) slot = ring_.tryPeek(bytes);
  return slot;
}

const std::byte* NetReceiver::tryPeekTo(std::byte* dst, size_t dstBytes, size_t* bytes, bool* placed) {
  *placed = false;
  if (!t_->anyMemory()) return tryPeek(bytes);
  const uint64_t seq = ring_.released();
  const std::byte* slot = ring_.tryPeek(bytes);
  if (slot == nullptr && t_->helpInto(*p_, seq, dst, dstBytes)) slot = ring_.tryPeek(bytes);
  if (slot != nullptr) *placed = p_->recvPlaced[seq % p_->recvPlaced.size()] != 0;
  return slot;
}

void NetReceiver::cancelPlacement() {
  if (t_->anyMemory()) t_->unplace(*p_, ring_.released());
}

void NetReceiver::release() {
  ring_.release();
  if (!t_->helpWithoutReading(*p_)) t_->wakeProxy();
}

}  // namespace

std::unique_ptr<Transport> makeNetTransport(const char* name, net::NetFactory factory) {
  return std::make_unique<NetTransport>(name, factory);
}

std::unique_ptr<Transport> makeTcpTransport() {
  return makeNetTransport("tcp", [](const net::NetContext& ctx, std::unique_ptr<net::Net>* out) {
    return net::makeTcpNet(*ctx.settings, out);
  });
}

}  // namespace nodus
