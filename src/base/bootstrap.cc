#include "base/bootstrap.h"

#include <arpa/inet.h>
#include <sys/random.h>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/settings.h"
#include "base/socket.h"

namespace nodus {

Status Bootstrap::barrier() {
  std::vector<char> bytes(static_cast<size_t>(nranks_));
  return allGather(bytes.data(), 1);
}

uint64_t mixTag(uint64_t tag, uint64_t value) {
  uint64_t z = tag + 0x9e3779b97f4a7c15ULL + value * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t tagOfSecret(const JobSecret& secret) {
  uint64_t t = 0;
  for (uint8_t b : secret) t = mixTag(t, b);
  return t;
}

Status Bootstrap::checkMembers(Bootstrap& child, const std::vector<int>& members, uint64_t tag) {
  uint64_t h = tag;
  for (int m : members) h = mixTag(h, static_cast<uint64_t>(m));
  std::vector<uint64_t> all(static_cast<size_t>(child.nranks()));
  all[static_cast<size_t>(child.rank())] = h;
  NODUS_TRY(child.allGather(all.data(), sizeof(uint64_t)));
  for (int r = 0; r < child.nranks(); ++r)
    if (all[static_cast<size_t>(r)] != h)
      return makeError(nodusInvalidUsage, "rank %d of the new communicator was given a different list of members "
                       "from rank %d: every member must pass the same ranks in the same order", r, child.rank());
  return Status::ok();
}

// ---- Wire formats ----------------------------------------------------------------

namespace {

constexpr uint32_t kIdMagic = 0x6e6f6431;     // "nod1"
constexpr uint32_t kHelloMagic = 0x6e6f6448;  // "nodH"
constexpr size_t kSecretBytes = 16;

struct IdBlob {
  uint32_t magic;
  uint32_t ip;  // network order
  uint16_t port;  // network order
  uint16_t pad;
  uint8_t secret[kSecretBytes];
};
static_assert(sizeof(IdBlob) <= NODUS_UNIQUE_ID_BYTES);

enum class HelloKind : uint32_t { Root = 1, Ring = 2, Subset = 3 };

struct Hello {
  uint32_t magic;
  HelloKind kind;
  uint8_t secret[kSecretBytes];
  int32_t rank;
  int32_t nranks;
  uint32_t ip;    // the sender's listener (Root hellos)
  uint16_t port;
  uint16_t pad;
  uint64_t tag;   // the subset it is for (Subset hellos)
};

struct PeerAddr {
  uint32_t ip;
  uint16_t port;
  uint16_t pad;
};

bool sameSecret(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;  // constant time: a probe learns nothing from timing
  for (size_t i = 0; i < kSecretBytes; ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

sockaddr_in makeAddr(uint32_t ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = ip;
  a.sin_port = port;
  return a;
}

// A stranger gets this long to say who it is before we hang up.
constexpr auto kHelloTimeout = std::chrono::seconds(5);
// At the listener a rank keeps for subsets, where members say who they are
// as soon as they connect.
constexpr auto kSubsetHelloTimeout = std::chrono::seconds(1);

// Reads a hello; false (and a log line) when it is not one of ours.
bool readHello(int fd, const sockaddr_in& from, const uint8_t* secret, HelloKind kind, Hello* h, int rank,
               Clock::duration timeout = kHelloTimeout) {
  auto deadline = Clock::now() + timeout;
  Status s = recvAll(fd, h, sizeof(*h), deadline);
  const char* why = nullptr;
  if (!s.isOk()) why = "no complete greeting";
  else if (h->magic != kHelloMagic || h->kind != kind) why = "not a nodus bootstrap greeting";
  else if (!sameSecret(h->secret, secret)) why = "wrong secret";
  if (why) {
    NODUS_WARN(rank, "refused bootstrap connection from %s: %s", addrText(from).c_str(), why);
    return false;
  }
  return true;
}

// The root: gathers every rank's listener address, then tells everyone.
void rootMain(Fd listenFd, std::array<uint8_t, kSecretBytes> secret, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  int nranks = -1, joined = 0;
  std::vector<Fd> fds;
  std::vector<PeerAddr> addrs;
  while (nranks < 0 || joined < nranks) {
    Fd fd;
    sockaddr_in from{};
    Status s = acceptOne(listenFd.get(), deadline, &fd, &from);
    if (!s.isOk()) {
      if (nranks < 0)
        NODUS_WARN(-1, "bootstrap root: no rank joined before the timeout; giving up");
      else
        NODUS_WARN(-1, "bootstrap root: %d of %d ranks joined before the timeout; giving up", joined, nranks);
      return;
    }
    Hello h{};
    if (!readHello(fd.get(), from, secret.data(), HelloKind::Root, &h, -1)) continue;
    int32_t verdict = nodusSuccess;
    if (nranks < 0 && h.nranks >= 1) {
      nranks = h.nranks;
      fds.resize(nranks);
      addrs.resize(nranks);
    }
    if (h.nranks != nranks || h.rank < 0 || h.rank >= nranks || fds[h.rank].valid()) {
      NODUS_WARN(-1, "bootstrap root: rank %d of %d from %s does not fit a job of %d ranks%s", h.rank, h.nranks,
                 addrText(from).c_str(), nranks, (h.rank >= 0 && h.rank < nranks) ? " (rank taken)" : "");
      verdict = nodusInvalidUsage;
      (void)sendAll(fd.get(), &verdict, sizeof(verdict), Clock::now() + kHelloTimeout);
      continue;
    }
    addrs[h.rank] = PeerAddr{h.ip, h.port, 0};
    fds[h.rank] = std::move(fd);
    ++joined;
  }
  for (int r = 0; r < nranks; ++r) {
    int32_t verdict = nodusSuccess;
    auto d = Clock::now() + kHelloTimeout;
    if (!sendAll(fds[r].get(), &verdict, sizeof(verdict), d).isOk() ||
        !sendAll(fds[r].get(), addrs.data(), addrs.size() * sizeof(PeerAddr), d).isOk())
      NODUS_WARN(-1, "bootstrap root: could not answer rank %d", r);
  }
}

// The listener a rank keeps once it has joined, where the members of a
// subset (Bootstrap::subset) connect to it. Whoever waits for a connection
// accepts for everyone and parks the ones for other subsets (or other
// members) until they are asked for, so subsets made at once from several
// threads do not take each other's.
class SubsetAcceptor {
 public:
  SubsetAcceptor(Fd listen, const JobSecret& secret, int rank) : listen_(std::move(listen)), secret_(secret), rank_(rank) {}

  // The connection member `from` of subset `tag` made to us, which says the
  // subset has `*nranks` members.
  Status take(uint64_t tag, int from, Clock::time_point deadline, Fd* out, int* nranks) {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      auto it = parked_.find({tag, from});
      if (it != parked_.end()) {
        *out = std::move(it->second.fd);
        *nranks = it->second.nranks;
        parked_.erase(it);
        return Status::ok();
      }
      const auto now = Clock::now();
      if (now >= deadline) return makeError(nodusTimeout, "member %d of the new communicator never connected", from);
      const auto slice = std::min(deadline, now + std::chrono::milliseconds(100));
      if (accepting_) {
        cv_.wait_until(lock, slice);
        continue;
      }
      accepting_ = true;
      lock.unlock();
      Fd fd;
      sockaddr_in peer{};
      Hello h{};
      const bool got = acceptOne(listen_.get(), slice, &fd, &peer).isOk() &&
                       readHello(fd.get(), peer, secret_.data(), HelloKind::Subset, &h, rank_, kSubsetHelloTimeout);
      lock.lock();
      accepting_ = false;
      if (got) parked_[{h.tag, h.rank}] = Parked{std::move(fd), h.nranks};
      cv_.notify_all();
    }
  }

 private:
  struct Parked {
    Fd fd;
    int nranks = 0;
  };
  Fd listen_;
  JobSecret secret_;
  int rank_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool accepting_ = false;
  std::map<std::pair<uint64_t, int>, Parked> parked_;
};

// Ranks in a ring of TCP connections; allGather passes blocks around it.
class SocketBootstrap final : public Bootstrap {
 public:
  SocketBootstrap(int rank, int nranks, std::chrono::milliseconds timeout)
      : Bootstrap(rank, nranks), timeout_(timeout) {}

  Status join(const IdBlob& id) {
    const auto deadline = Clock::now() + timeout_;
    memcpy(secret_.data(), id.secret, kSecretBytes);
    tag_ = tagOfSecret(secret_);
    const sockaddr_in root = makeAddr(id.ip, id.port);
    Fd rootFd;
    Status s = connectTo(root, deadline, &rootFd);
    if (!s.isOk()) return Status(s.code(), "cannot reach the bootstrap root " + addrText(root) + ": " + s.message());
    // Listen where the root can reach us: the local address of that connection.
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    getsockname(rootFd.get(), reinterpret_cast<sockaddr*>(&local), &len);
    local.sin_port = 0;
    sockaddr_in bound{};
    NODUS_TRY(listenOn(local, &listen_, &bound));
    Hello h{kHelloMagic, HelloKind::Root, {}, rank(), nranks(), bound.sin_addr.s_addr, bound.sin_port, 0, 0};
    memcpy(h.secret, secret_.data(), kSecretBytes);
    NODUS_TRY(sendAll(rootFd.get(), &h, sizeof(h), deadline));
    int32_t verdict = 0;
    s = recvAll(rootFd.get(), &verdict, sizeof(verdict), deadline);
    if (!s.isOk()) return Status(s.code(), "bootstrap root " + addrText(root) + " did not admit us: " + s.message());
    if (verdict != nodusSuccess)
      return makeError(nodusInvalidUsage, "bootstrap root refused rank %d of %d: another rank claimed the same rank, or ranks disagree on the number of ranks", rank(), nranks());
    std::vector<PeerAddr>& addrs = addrs_;
    addrs.resize(static_cast<size_t>(nranks()));
    NODUS_TRY(recvAll(rootFd.get(), addrs.data(), addrs.size() * sizeof(PeerAddr), deadline));
    if (nranks() == 1) {
      acceptor_ = std::make_shared<SubsetAcceptor>(std::move(listen_), secret_, rank());
      return Status::ok();
    }
    // Ring: connect to the next rank, accept the previous one.
    const int next = (rank() + 1) % nranks();
    const int prev = (rank() + nranks() - 1) % nranks();
    NODUS_TRY(connectTo(makeAddr(addrs[next].ip, addrs[next].port), deadline, &next_));
    Hello rh{kHelloMagic, HelloKind::Ring, {}, rank(), nranks(), 0, 0, 0, 0};
    memcpy(rh.secret, secret_.data(), kSecretBytes);
    NODUS_TRY(sendAll(next_.get(), &rh, sizeof(rh), deadline));
    while (!prev_.valid()) {
      Fd fd;
      sockaddr_in from{};
      s = acceptOne(listen_.get(), deadline, &fd, &from);
      if (!s.isOk()) return Status(s.code(), "rank " + std::to_string(prev) + " never connected: " + s.message());
      Hello ph{};
      if (!readHello(fd.get(), from, secret_.data(), HelloKind::Ring, &ph, rank())) continue;
      if (ph.rank != prev) {
        NODUS_WARN(rank(), "refused bootstrap connection from %s: claims rank %d, expected %d", addrText(from).c_str(), ph.rank, prev);
        continue;
      }
      prev_ = std::move(fd);
    }
    // Nobody else may join the ring; the listener now serves subsets only
    // (a connection that does not present the secret is refused there).
    acceptor_ = std::make_shared<SubsetAcceptor>(std::move(listen_), secret_, rank());
    return Status::ok();
  }

  Status subset(const std::vector<int>& members, uint64_t tag, std::unique_ptr<Bootstrap>* out) override {
    const int k = static_cast<int>(members.size());
    const int me = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    if (me == k) return makeError(nodusInternalError, "bootstrap subset without this rank");
    auto child = std::make_unique<SocketBootstrap>(me, k, timeout_);
    child->secret_ = secret_;
    child->tag_ = tag;
    child->acceptor_ = acceptor_;
    for (int m : members) child->addrs_.push_back(addrs_[static_cast<size_t>(m)]);
    if (k > 1) {
      const auto deadline = Clock::now() + timeout_;
      const PeerAddr& next = child->addrs_[static_cast<size_t>((me + 1) % k)];
      NODUS_TRY(connectTo(makeAddr(next.ip, next.port), deadline, &child->next_));
      Hello h{kHelloMagic, HelloKind::Subset, {}, me, k, 0, 0, 0, tag};
      memcpy(h.secret, secret_.data(), kSecretBytes);
      NODUS_TRY(sendAll(child->next_.get(), &h, sizeof(h), deadline));
      int theirs = 0;
      NODUS_TRY(acceptor_->take(tag, (me + k - 1) % k, deadline, &child->prev_, &theirs));
      if (theirs != k)
        return makeError(nodusInvalidUsage, "member %d of the new communicator was given %d members, this rank %d: "
                         "every member must pass the same ranks", (me + k - 1) % k, theirs, k);
      NODUS_TRY(checkMembers(*child, members, tag));
    }
    *out = std::move(child);
    return Status::ok();
  }

  Status allGather(void* data, size_t bytes) override {
    const auto deadline = Clock::now() + timeout_;
    char* d = static_cast<char*>(data);
    const int p = nranks();
    for (int s = 0; s < p - 1; ++s) {
      const int sendBlock = (rank() - s + p) % p;
      const int recvBlock = (rank() - s - 1 + p) % p;
      Status st = sendRecv(next_.get(), d + sendBlock * bytes, bytes, prev_.get(), d + recvBlock * bytes, bytes, deadline);
      if (!st.isOk()) return Status(st.code(), "bootstrap all-gather: " + st.message());
    }
    return Status::ok();
  }

 private:
  std::chrono::milliseconds timeout_;
  Fd listen_, next_, prev_;
  std::vector<PeerAddr> addrs_;               // every rank's listener
  std::shared_ptr<SubsetAcceptor> acceptor_;  // this process's, shared by the subsets made from this bootstrap
};

}  // namespace

Status createUniqueId(const Settings& settings, nodusUniqueId* id) {
  IdBlob blob{};
  blob.magic = kIdMagic;
  if (getrandom(blob.secret, kSecretBytes, 0) != static_cast<ssize_t>(kSecretBytes)) return systemError("getrandom");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  NODUS_TRY(defaultListenAddress(settings, &addr.sin_addr));
  Fd fd;
  sockaddr_in bound{};
  NODUS_TRY(listenOn(addr, &fd, &bound));
  blob.ip = bound.sin_addr.s_addr;
  blob.port = bound.sin_port;
  std::array<uint8_t, kSecretBytes> secret{};
  memcpy(secret.data(), blob.secret, kSecretBytes);
  const auto timeout = std::chrono::milliseconds(settings.get(param::kTimeoutMs));
  NODUS_INFO(-1, "bootstrap root listening on %s", addrText(bound).c_str());
  std::thread(rootMain, std::move(fd), secret, timeout).detach();
  memset(id, 0, sizeof(*id));
  memcpy(id->internal, &blob, sizeof(blob));
  return Status::ok();
}

Status socketBootstrap(const nodusUniqueId& id, int rank, int nranks, std::chrono::milliseconds timeout,
                       std::unique_ptr<Bootstrap>* out) {
  IdBlob blob;
  memcpy(&blob, id.internal, sizeof(blob));
  if (blob.magic != kIdMagic)
    return makeError(nodusInvalidArgument, "the unique id was not made by nodusGetUniqueId (bad magic)");
  auto b = std::make_unique<SocketBootstrap>(rank, nranks, timeout);
  NODUS_TRY(b->join(blob));
  *out = std::move(b);
  return Status::ok();
}

// ---- In-process ----------------------------------------------------------------------

class InProcessGroup {
 public:
  explicit InProcessGroup(int n) : n_(n) {
    // Threads need no proof among themselves, but transports that go through
    // the network (tcp forced between threads) still refuse strangers.
    if (getrandom(secret_.data(), secret_.size(), 0) != static_cast<ssize_t>(secret_.size()))
      for (size_t i = 0; i < secret_.size(); ++i) secret_[i] = static_cast<uint8_t>(Clock::now().time_since_epoch().count() >> (8 * (i % 8)));
  }
  InProcessGroup(int n, const JobSecret& secret) : n_(n), secret_(secret) {}
  int size() const { return n_; }
  const JobSecret& secret() const { return secret_; }
  // The group of subset `tag` with n members: made by the first member to
  // ask, found by the others, forgotten once all n have it.
  std::shared_ptr<InProcessGroup> subgroup(uint64_t tag, int n) {
    std::lock_guard<std::mutex> lock(mu_);
    Pending& p = pending_[tag];
    if (!p.group) p.group = std::make_shared<InProcessGroup>(n, secret_);
    std::shared_ptr<InProcessGroup> g = p.group;
    if (++p.taken >= g->size()) pending_.erase(tag);
    return g;
  }
  Status allGather(int rank, void* data, size_t bytes, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    std::unique_lock<std::mutex> lock(mu_);
    // Wait until the previous round has been read by everyone.
    if (!cv_.wait_until(lock, deadline, [&] { return !draining_; }))
      return makeError(nodusTimeout, "bootstrap all-gather: the previous exchange was never finished");
    if (arrived_ == 0) buf_.assign(bytes * n_, 0);
    memcpy(buf_.data() + rank * bytes, static_cast<char*>(data) + rank * bytes, bytes);
    const uint64_t gen = gen_;
    if (++arrived_ == n_) {
      draining_ = true;
      ++gen_;
      cv_.notify_all();
    } else if (!cv_.wait_until(lock, deadline, [&] { return gen_ != gen; })) {
      const int missing = n_ - arrived_;
      --arrived_;
      return makeError(nodusTimeout, "bootstrap all-gather: %d of %d ranks never came", missing, n_);
    }
    memcpy(data, buf_.data(), bytes * n_);
    if (--arrived_ == 0) {
      draining_ = false;
      cv_.notify_all();
    }
    return Status::ok();
  }

 private:
  int n_;
  JobSecret secret_{};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<char> buf_;
  struct Pending {
    std::shared_ptr<InProcessGroup> group;
    int taken = 0;
  };
  std::map<uint64_t, Pending> pending_;
  int arrived_ = 0;
  bool draining_ = false;
  uint64_t gen_ = 0;
};

namespace {
class InProcessBootstrap final : public Bootstrap {
 public:
  InProcessBootstrap(std::shared_ptr<InProcessGroup> g, int rank, int n, std::chrono::milliseconds timeout,
                     uint64_t tag)
      : Bootstrap(rank, n), group_(std::move(g)), timeout_(timeout) {
    secret_ = group_->secret();
    tag_ = tag;
  }
  Status allGather(void* data, size_t bytes) override { return group_->allGather(rank(), data, bytes, timeout_); }

  Status subset(const std::vector<int>& members, uint64_t tag, std::unique_ptr<Bootstrap>* out) override {
    const int k = static_cast<int>(members.size());
    const int me = static_cast<int>(std::find(members.begin(), members.end(), rank()) - members.begin());
    if (me == k) return makeError(nodusInternalError, "bootstrap subset without this rank");
    // The tag names the subset and its size: members that pass lists of
    // different lengths meet in different groups (and time out there).
    auto child = std::make_unique<InProcessBootstrap>(group_->subgroup(mixTag(tag, static_cast<uint64_t>(k)), k), me,
                                                      k, timeout_, tag);
    if (k > 1) NODUS_TRY(checkMembers(*child, members, tag));
    *out = std::move(child);
    return Status::ok();
  }

 private:
  std::shared_ptr<InProcessGroup> group_;
  std::chrono::milliseconds timeout_;
};
}  // namespace

std::shared_ptr<InProcessGroup> makeInProcessGroup(int nranks) { return std::make_shared<InProcessGroup>(nranks); }

std::unique_ptr<Bootstrap> inProcessBootstrap(std::shared_ptr<InProcessGroup> group, int rank,
                                              std::chrono::milliseconds timeout) {
  const int n = group->size();
  const uint64_t tag = tagOfSecret(group->secret());
  return std::make_unique<InProcessBootstrap>(std::move(group), rank, n, timeout, tag);
}

}  // namespace nodus
