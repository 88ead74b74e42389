#include "transports/net/tcp/tcp_net.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <utility>

#include "base/log.h"
#include "base/socket.h"
#include "transports/net/tcp/tcp_wire.h"

namespace nodus::net {

namespace {

using namespace tcp;

// A stranger gets this long to prove itself before we hang up.
constexpr auto kHelloTimeout = std::chrono::seconds(5);
// Asked of the kernel (as root it is granted beyond net.core.[rw]mem_max):
// enough for a slot ring's worth of data in flight on a fast link.
constexpr int kSocketBufferBytes = 4 << 20;

bool sameSecret(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;  // constant time: a probe learns nothing from timing
  for (size_t i = 0; i < 16; ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

void tuneSocket(int fd) {
  setNoDelay(fd);
  for (int opt : {SO_SNDBUFFORCE, SO_RCVBUFFORCE}) {
    // Without the privilege leave the kernel's autotuning alone: a plain
    // SO_SNDBUF would cap it at net.core.wmem_max.
    (void)setsockopt(fd, SOL_SOCKET, opt, &kSocketBufferBytes, sizeof(kSocketBufferBytes));
  }
}

class NoRegion final : public MemoryRegion {};

class TcpComm;

struct TcpRequest final : Request {
  TcpComm* owner = nullptr;
  std::byte* data = nullptr;
  size_t capacity = 0;  // receives: the most this request accepts
  // Receives: the buffer it was posted with, while retarget() has pointed
  // it elsewhere (a message too large for the new place goes back here).
  std::byte* home = nullptr;
  size_t homeCapacity = 0;
  uint64_t bytes = 0;   // the message size (sends: from the start; receives: from socket 0's header)
  bool sizeKnown = false;
  uint32_t seq = 0;     // on the wire: index mod 2^32
  uint64_t index = 0;   // in the comm's sequence of requests
  int socketsDone = 0;
  bool reported = false;  // test() said done: may be dropped
};

// Receives: what one recv() takes in when a socket needs a frame header. A
// small message then arrives with its header in one system call (and the
// next ones behind it, if already there) instead of two; the bytes beyond
// the header are copied out of it as the requests read them. Larger
// messages read their rest straight into place. 16 KiB: a copy of it costs
// less than the recv() it saves (about a microsecond here).
constexpr size_t kLookaheadBytes = 16 << 10;

// Per socket progress through the requests of its comm.
struct Lane {
  Fd fd;
  uint64_t cursor = 0;  // sequence number of the request this socket works on
  size_t hdrDone = 0;   // header bytes sent / received for it
  uint64_t dataDone = 0;
  FrameHeader hdr{};    // receives: the header being read
  bool closed = false;  // receives: the peer closed this socket between messages
  // Receives: bytes read ahead of the frames, [aheadBegin, aheadEnd) of ahead.
  std::unique_ptr<std::byte[]> ahead;
  size_t aheadBegin = 0, aheadEnd = 0;
};

// State both directions share: sockets, requests in sequence order, the
// first error (after which every test fails with it).
class TcpComm {
 public:
  TcpComm(std::vector<Fd> fds, int peerRank, bool sending) : peerRank_(peerRank), sending_(sending) {
    for (Fd& f : fds) {
      lanes_.emplace_back();
      lanes_.back().fd = std::move(f);
    }
  }

  Status post(std::byte* data, size_t bytes, Request** out) {
    if (!error_.isOk()) return error_;
    requests_.emplace_back();
    TcpRequest& r = requests_.back();
    r.owner = this;
    r.data = data;
    r.capacity = bytes;
    r.bytes = sending_ ? bytes : 0;
    r.sizeKnown = sending_;
    r.index = nextSeq_++;
    r.seq = static_cast<uint32_t>(r.index);
    *out = &r;
    return Status::ok();
  }

  Status test(TcpRequest* r, bool* done, size_t* bytes) {
    *done = false;
    if (!r->reported && r->socketsDone < static_cast<int>(lanes_.size()) && error_.isOk()) {
      // A receive reads no further than its own message: the later ones
      // may yet be retargeted (NetTransport::progress).
      Status s = sending_ ? progressSend() : progressRecv(r->index);
      if (!s.isOk()) fail(s);
    }
    if (r->socketsDone == static_cast<int>(lanes_.size())) {
      *done = true;
      *bytes = r->bytes;
      r->reported = true;
      while (!requests_.empty() && requests_.front().reported) {
        requests_.pop_front();
        ++frontSeq_;
      }
      return Status::ok();
    }
    if (!error_.isOk()) return error_;
    // A socket the peer closed between messages fails only the requests that
    // need it: the other sockets may still be finishing earlier ones.
    for (size_t s = 0; s < lanes_.size(); ++s) {
      const Lane& l = lanes_[s];
      if (l.closed && l.cursor <= r->index && (s == 0 || r->sizeKnown)) {
        fail(closedError(static_cast<int>(s), true));
        return error_;
      }
    }
    return Status::ok();
  }

  // A receive no socket has written data of yet now lands at `data`.
  bool retarget(TcpRequest* r, std::byte* data, size_t bytes) {
    if (sending_ || r->reported || !error_.isOk()) return false;
    for (const Lane& l : lanes_)
      if (l.cursor > r->index || (l.cursor == r->index && l.dataDone > 0)) return false;
    if (r->sizeKnown && r->bytes > bytes) return false;  // its header is in: it cannot fit
    if (!r->home) {
      r->home = r->data;
      r->homeCapacity = r->capacity;
    }
    r->data = data;
    r->capacity = bytes;
    return true;
  }

  void fds(std::vector<int>* out) const {
    for (const Lane& l : lanes_) out->push_back(l.fd.get());
  }
  void shutdownAll() {
    for (Lane& l : lanes_) ::shutdown(l.fd.get(), SHUT_RDWR);
  }
  int peerRank() const { return peerRank_; }

 private:
  void fail(const Status& s) {
    if (!error_.isOk()) return;
    error_ = s;
    // Close the connection at once: the peer must not take the rest of a
    // broken stream for frames, and sees our end go away.
    shutdownAll();
  }

  TcpRequest& at(uint64_t seq) { return requests_[static_cast<size_t>(seq - frontSeq_)]; }

  Status progressSend() {
    const int n = static_cast<int>(lanes_.size());
    for (int s = 0; s < n; ++s) {
      Lane& l = lanes_[static_cast<size_t>(s)];
      while (l.cursor < nextSeq_) {
        TcpRequest& r = at(l.cursor);
        uint64_t off = 0, len = 0;
        stripe(r.bytes, n, s, &off, &len);
        if (s != 0 && len == 0) {
          nextRequest(l, r);
          continue;
        }
        const FrameHeader hdr{kFrameMagic, r.seq, r.bytes};
        iovec iov[2];
        int niov = 0;
        if (l.hdrDone < sizeof(hdr))
          iov[niov++] = {reinterpret_cast<char*>(const_cast<FrameHeader*>(&hdr)) + l.hdrDone, sizeof(hdr) - l.hdrDone};
        if (l.dataDone < len) iov[niov++] = {r.data + off + l.dataDone, static_cast<size_t>(len - l.dataDone)};
        if (niov > 0) {
          msghdr m{};
          m.msg_iov = iov;
          m.msg_iovlen = static_cast<size_t>(niov);
          const ssize_t k = sendmsg(l.fd.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
          if (k < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
            return makeError(errno == EPIPE || errno == ECONNRESET ? nodusRemoteError : nodusSystemError,
                             "tcp: sending failed on socket %d (%s): the peer closed the connection or died", s,
                             strerror(errno));
          }
          size_t sent = static_cast<size_t>(k);
          const size_t h = std::min(sent, sizeof(hdr) - l.hdrDone);
          l.hdrDone += h;
          l.dataDone += sent - h;
        }
        if (l.hdrDone < sizeof(hdr) || l.dataDone < len) continue;  // partial: try again (EAGAIN ends it)
        nextRequest(l, r);
      }
    }
    return Status::ok();
  }

  // Reads the sockets' data of the requests up to sequence number `last`.
  Status progressRecv(uint64_t last) {
    const int n = static_cast<int>(lanes_.size());
    for (int s = 0; s < n; ++s) {
      Lane& l = lanes_[static_cast<size_t>(s)];
      while (l.cursor < nextSeq_ && l.cursor <= last) {
        TcpRequest& r = at(l.cursor);
        if (s != 0 && !r.sizeKnown) break;  // socket 0's header says what this socket carries
        uint64_t off = 0, len = 0;
        if (s != 0) {
          stripe(r.bytes, n, s, &off, &len);
          if (len == 0) {
            nextRequest(l, r);
            continue;
          }
        }
        if (l.closed) break;
        if (l.hdrDone < sizeof(FrameHeader)) {
          bool closed = false;
          size_t got = 0;
          NODUS_TRY(readSome(l, s, reinterpret_cast<std::byte*>(&l.hdr) + l.hdrDone, sizeof(FrameHeader) - l.hdrDone,
                             &got, &closed, /*lookahead=*/true));
          if (closed && l.hdrDone + got > 0) return closedError(s, false);
          if (closed) {
            l.closed = true;  // test() decides which requests that fails
            break;
          }
          l.hdrDone += got;
          if (l.hdrDone < sizeof(FrameHeader)) break;  // EAGAIN
          if (r.home && l.hdr.bytes > r.capacity && l.hdr.bytes <= r.homeCapacity) {
            r.data = r.home;  // does not fit where it was retargeted: the slot takes it
            r.capacity = r.homeCapacity;
          }
          NODUS_TRY(validate(l.hdr, r, s));
          if (s == 0) {
            r.bytes = l.hdr.bytes;
            r.sizeKnown = true;
            stripe(r.bytes, n, 0, &off, &len);
          }
        } else {
          stripe(r.bytes, n, s, &off, &len);
        }
        if (l.dataDone < len) {
          bool closed = false;
          size_t got = 0;
          NODUS_TRY(readSome(l, s, r.data + off + l.dataDone, static_cast<size_t>(len - l.dataDone), &got, &closed));
          if (closed) return closedError(s, false);
          l.dataDone += got;
          if (l.dataDone < len) break;  // EAGAIN
        }
        nextRequest(l, r);
      }
    }
    return Status::ok();
  }

  // Reads up to `want` bytes for the lane's current frame: first what was
  // read ahead, then from the socket (with `lookahead`, through the
  // read-ahead buffer: a frame header, and whatever follows it).
  Status readSome(Lane& l, int s, std::byte* p, size_t want, size_t* got, bool* closed, bool lookahead = false) {
    *got = 0;
    if (l.aheadEnd > l.aheadBegin) {
      const size_t n = std::min(want, l.aheadEnd - l.aheadBegin);
      memcpy(p, l.ahead.get() + l.aheadBegin, n);
      l.aheadBegin += n;
      *got = n;
      if (n == want) return Status::ok();
      p += n;
      want -= n;
    }
    if (lookahead) {
      if (!l.ahead) l.ahead = std::make_unique<std::byte[]>(kLookaheadBytes);
      size_t more = 0;
      NODUS_TRY(recvSome(l, s, l.ahead.get(), kLookaheadBytes, &more, closed));
      l.aheadBegin = std::min(want, more);
      l.aheadEnd = more;
      memcpy(p, l.ahead.get(), l.aheadBegin);
      *got += l.aheadBegin;
      return Status::ok();
    }
    size_t direct = 0;
    NODUS_TRY(recvSome(l, s, p, want, &direct, closed));
    *got += direct;
    return Status::ok();
  }

  Status recvSome(Lane& l, int s, std::byte* p, size_t want, size_t* got, bool* closed) {
    const ssize_t k = recv(l.fd.get(), p, want, MSG_DONTWAIT);
    if (k > 0) {
      *got = static_cast<size_t>(k);
      return Status::ok();
    }
    if (k == 0) {
      *closed = true;
      return Status::ok();
    }
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return Status::ok();
    return makeError(errno == ECONNRESET ? nodusRemoteError : nodusSystemError,
                     "tcp: receiving from rank %d failed on socket %d (%s): the peer reset the connection or died",
                     peerRank_, s, strerror(errno));
  }

  Status closedError(int s, bool atBoundary) const {
    if (atBoundary)
      return makeError(nodusRemoteError, "tcp: rank %d closed the connection (it exited, failed or was killed)", peerRank_);
    return makeError(nodusRemoteError,
                     "tcp: rank %d closed the connection in the middle of a message on socket %d (short read): it died "
                     "or is not a nodus peer",
                     peerRank_, s);
  }

  Status validate(const FrameHeader& h, const TcpRequest& r, int s) const {
    if (h.magic != kFrameMagic)
      return makeError(nodusRemoteError,
                       "tcp: bad frame from rank %d on socket %d (magic 0x%08x, expected 0x%08x): not a nodus peer or a "
                       "corrupted stream; connection closed",
                       peerRank_, s, h.magic, kFrameMagic);
    if (h.seq != r.seq)
      return makeError(nodusRemoteError,
                       "tcp: frame out of sequence from rank %d on socket %d (message %u, expected %u): corrupted "
                       "stream; connection closed",
                       peerRank_, s, h.seq, r.seq);
    if (h.bytes > r.capacity)
      return makeError(nodusRemoteError,
                       "tcp: rank %d sent a %llu-byte message where at most %zu fit (socket %d): mismatched slot sizes "
                       "or a corrupted stream; connection closed",
                       peerRank_, static_cast<unsigned long long>(h.bytes), r.capacity, s);
    if (s != 0 && h.bytes != r.bytes)
      return makeError(nodusRemoteError,
                       "tcp: rank %d's frame on socket %d says %llu bytes, socket 0 said %llu: corrupted stream; "
                       "connection closed",
                       peerRank_, s, static_cast<unsigned long long>(h.bytes), static_cast<unsigned long long>(r.bytes));
    return Status::ok();
  }

  void nextRequest(Lane& l, TcpRequest& r) {
    ++r.socketsDone;
    ++l.cursor;
    l.hdrDone = 0;
    l.dataDone = 0;
  }

  std::vector<Lane> lanes_;
  std::deque<TcpRequest> requests_;  // stable addresses: requests are handed out by pointer
  uint64_t frontSeq_ = 0, nextSeq_ = 0;
  int peerRank_;
  bool sending_;
  Status error_;
};

class TcpSendComm final : public SendComm {
 public:
  explicit TcpSendComm(std::vector<Fd> fds, int peer) : comm(std::move(fds), peer, true) {}
  TcpComm comm;
};

class TcpRecvComm final : public RecvComm {
 public:
  explicit TcpRecvComm(std::vector<Fd> fds, int peer) : comm(std::move(fds), peer, false) {}
  int peerRank() const override { return comm.peerRank(); }
  TcpComm comm;
};

// A connection being received: its sockets as their hellos arrive.
struct PendingSocket {
  Fd fd;
  sockaddr_in from{};
  Hello hello{};
  size_t got = 0;
  Clock::time_point deadline;
};

class TcpListener final : public Listener {
 public:
  Fd fd;
  std::vector<PendingSocket> pending;
  // (rank, nonce) -> sockets by index
  std::map<std::pair<int, uint64_t>, std::vector<Fd>> groups;
};

class TcpNet final : public Net {
 public:
  TcpNet(int nsocks, std::vector<NetInterface> ifs) : nsocks_(nsocks), ifs_(std::move(ifs)) {}
  const char* name() const override { return "tcp"; }
  int deviceCount() const override { return static_cast<int>(ifs_.size()); }

  DeviceProperties device(int dev) const override {
    DeviceProperties p;
    const NetInterface& i = ifs_[static_cast<size_t>(dev)];
    p.name = i.name;
    char ip[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &i.addr, ip, sizeof(ip));
    p.address = ip;
    p.speedMbps = 10000;  // what /sys does not tell (loopback, virtual NICs)
    const std::string path = "/sys/class/net/" + i.name + "/speed";
    if (FILE* f = fopen(path.c_str(), "r")) {
      int mbps = 0;
      if (fscanf(f, "%d", &mbps) == 1 && mbps > 0) p.speedMbps = mbps;
      fclose(f);
    }
    return p;
  }

  Status listen(int dev, Handle* handle, std::unique_ptr<Listener>* out) override {
    auto l = std::make_unique<TcpListener>();
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr = ifs_[static_cast<size_t>(dev)].addr;
    sockaddr_in bound{};
    NODUS_TRY(listenOn(addr, &l->fd, &bound));
    WireHandle h{kHandleMagic, bound.sin_addr.s_addr, bound.sin_port, 0};
    memset(handle, 0, sizeof(*handle));
    memcpy(handle->bytes, &h, sizeof(h));
    *out = std::move(l);
    return Status::ok();
  }

  Status connect(int, const Handle& handle, const Identity& self, Clock::time_point deadline,
                 std::unique_ptr<SendComm>* out) override {
    WireHandle h;
    memcpy(&h, handle.bytes, sizeof(h));
    if (h.magic != kHandleMagic) return makeError(nodusInternalError, "tcp: a peer's connection handle is not a tcp handle");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = h.ip;
    addr.sin_port = h.port;
    uint64_t nonce = 0;
    if (getrandom(&nonce, sizeof(nonce), 0) != sizeof(nonce)) return systemError("getrandom");
    std::vector<Fd> fds;
    for (int s = 0; s < nsocks_; ++s) {
      Fd fd;
      Status st = connectTo(addr, deadline, &fd);
      if (!st.isOk()) return Status(st.code(), "tcp: cannot connect to " + addrText(addr) + ": " + st.message());
      tuneSocket(fd.get());
      Hello hello{kHelloMagic, kVersion, {}, self.rank, static_cast<uint16_t>(s), static_cast<uint16_t>(nsocks_), nonce};
      memcpy(hello.secret, self.secret.data(), sizeof(hello.secret));
      NODUS_TRY(sendAll(fd.get(), &hello, sizeof(hello), deadline));
      fds.push_back(std::move(fd));
    }
    *out = std::make_unique<TcpSendComm>(std::move(fds), -1);
    return Status::ok();
  }

  Status accept(Listener& listener, const JobSecret& secret, Clock::time_point deadline,
                std::unique_ptr<RecvComm>* out) override {
    auto& l = static_cast<TcpListener&>(listener);
    for (;;) {
      for (auto it = l.groups.begin(); it != l.groups.end(); ++it) {
        bool complete = true;
        for (const Fd& f : it->second) complete &= f.valid();
        if (!complete) continue;
        *out = std::make_unique<TcpRecvComm>(std::move(it->second), it->first.first);
        l.groups.erase(it);
        return Status::ok();
      }
      const auto now = Clock::now();
      if (now >= deadline) return makeError(nodusTimeout, "tcp: a peer did not connect before the deadline");
      std::vector<pollfd> p;
      p.push_back({l.fd.get(), POLLIN, 0});
      for (const PendingSocket& s : l.pending) p.push_back({s.fd.get(), POLLIN, 0});
      auto until = deadline;
      for (const PendingSocket& s : l.pending) until = std::min(until, s.deadline);
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count();
      if (poll(p.data(), p.size(), static_cast<int>(std::clamp<int64_t>(ms + 1, 0, 1000))) < 0 && errno != EINTR)
        return systemError("poll");
      for (;;) {
        sockaddr_in from{};
        socklen_t len = sizeof(from);
        const int fd = accept4(l.fd.get(), reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) break;
        PendingSocket s;
        s.fd = Fd(fd);
        s.from = from;
        s.deadline = Clock::now() + kHelloTimeout;
        l.pending.push_back(std::move(s));
      }
      for (size_t i = 0; i < l.pending.size();) {
        PendingSocket& s = l.pending[i];
        const char* why = nullptr;
        bool ready = false;
        const ssize_t k = recv(s.fd.get(), reinterpret_cast<char*>(&s.hello) + s.got, sizeof(Hello) - s.got, MSG_DONTWAIT);
        if (k > 0) s.got += static_cast<size_t>(k);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
          why = "closed before a complete greeting";
        else if (s.got == sizeof(Hello)) {
          const Hello& h = s.hello;
          if (h.magic != kHelloMagic || h.version != kVersion) why = "not a nodus tcp greeting";
          else if (!sameSecret(h.secret, secret.data())) why = "wrong secret";
          else if (h.nsocks < 1 || h.nsocks > kMaxSockets || h.socket >= h.nsocks || h.rank < 0) why = "malformed greeting";
          else ready = true;
        } else if (Clock::now() >= s.deadline) {
          why = "no complete greeting in time";
        }
        if (ready) {
          auto& group = l.groups[{s.hello.rank, s.hello.nonce}];
          if (group.empty()) group.resize(s.hello.nsocks);
          if (group.size() != s.hello.nsocks || group[s.hello.socket].valid()) {
            why = "socket does not fit its connection";
          } else {
            tuneSocket(s.fd.get());
            group[s.hello.socket] = std::move(s.fd);
          }
        }
        if (why) NODUS_WARN(-1, "tcp: refused a connection from %s: %s", addrText(s.from).c_str(), why);
        if (why || ready) {
          l.pending.erase(l.pending.begin() + static_cast<std::ptrdiff_t>(i));
          continue;
        }
        ++i;
      }
    }
  }

  Status regMr(void*, size_t, std::unique_ptr<MemoryRegion>* out) override {
    *out = std::make_unique<NoRegion>();  // sockets read and write any memory
    return Status::ok();
  }

  Status isend(SendComm& comm, const void* data, size_t bytes, const MemoryRegion&, Request** req) override {
    return static_cast<TcpSendComm&>(comm).comm.post(static_cast<std::byte*>(const_cast<void*>(data)), bytes, req);
  }
  Status irecv(RecvComm& comm, void* data, size_t bytes, const MemoryRegion&, Request** req) override {
    return static_cast<TcpRecvComm&>(comm).comm.post(static_cast<std::byte*>(data), bytes, req);
  }
  Status test(Request* req, bool* done, size_t* bytes) override {
    auto* r = static_cast<TcpRequest*>(req);
    return owner(r)->test(r, done, bytes);
  }
  bool anyMemory() const override { return true; }
  bool retarget(Request* req, void* data, size_t bytes) override {
    auto* r = static_cast<TcpRequest*>(req);
    return owner(r)->retarget(r, static_cast<std::byte*>(data), bytes);
  }

  void eventFds(const SendComm& c, std::vector<int>* fds) const override { static_cast<const TcpSendComm&>(c).comm.fds(fds); }
  void eventFds(const RecvComm& c, std::vector<int>* fds) const override { static_cast<const TcpRecvComm&>(c).comm.fds(fds); }
  void shutdown(SendComm& c) override { static_cast<TcpSendComm&>(c).comm.shutdownAll(); }
  void shutdown(RecvComm& c) override { static_cast<TcpRecvComm&>(c).comm.shutdownAll(); }

 private:
  TcpComm* owner(TcpRequest* r) { return r->owner; }
  int nsocks_;
  std::vector<NetInterface> ifs_;
};

}  // namespace

Status makeTcpNet(const Settings& settings, std::unique_ptr<Net>* out) {
  const int nsocks = static_cast<int>(settings.get(param::kNsocks));
  if (nsocks < 1 || nsocks > kMaxSockets)
    return makeError(nodusInvalidArgument, "NODUS_NSOCKS=%d is outside [1, %d]", nsocks, kMaxSockets);
  std::vector<NetInterface> ifs;
  NODUS_TRY(selectInterfaces(settings, &ifs));
  *out = std::make_unique<TcpNet>(nsocks, std::move(ifs));
  return Status::ok();
}

}  // namespace nodus::net
