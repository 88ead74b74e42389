// The TCP net (transports/net/tcp) on its own, over loopback: messages of
// every size arrive whole on 1..4 sockets; strangers (wrong secret, garbage,
// silence) are refused while a real peer gets through; and a peer that sends
// a malformed frame (bad magic, too long, out of sequence, cut short) fails
// the receive with nodusRemoteError and a clear message, closes the
// connection, and never crashes or hangs the receiver. Then through
// communicators of threads with tcp forced: no thread or descriptor outlives
// them, idle proxies sleep, and garbage injected into live connections fails
// the next collective with a clear error.
#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/socket.h"
#include "nodus/nodus.h"
#include "transports/net/net.h"
#include "transports/net/tcp/tcp_net.h"
#include "transports/net/tcp/tcp_wire.h"

namespace nodus {
namespace {

using net::Clock;
using namespace std::chrono_literals;

class TcpNetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("NODUS_SOCKET_IFNAME", "lo", 1);
    for (size_t i = 0; i < secret_.size(); ++i) secret_[i] = static_cast<uint8_t>(0xa0 + i);
  }
  void TearDown() override { unsetenv("NODUS_SOCKET_IFNAME"); }

  // The environment as it is now, with NODUS_NSOCKS=nsocks.
  static Settings Env(int nsocks) {
    Settings s;
    EXPECT_TRUE(Settings::fromEnvironment(&s).isOk());
    EXPECT_TRUE(s.set(param::kNsocks, nsocks).isOk());
    return s;
  }
  std::unique_ptr<net::Net> MakeNet(int nsocks) {
    std::unique_ptr<net::Net> n;
    Status s = net::makeTcpNet(Env(nsocks), &n);
    EXPECT_TRUE(s.isOk()) << s.message();
    return n;
  }

  // A net of `nsocks` sockets per connection, one connection of it from
  // `peerRank` to itself, and a memory region.
  struct Connected {
    std::unique_ptr<net::Net> n;
    std::unique_ptr<net::Listener> listener;
    std::unique_ptr<net::SendComm> sc;
    std::unique_ptr<net::RecvComm> rc;
    std::unique_ptr<net::MemoryRegion> mr;
  };
  void Connect(int nsocks, int peerRank, Connected* c) {
    c->n = MakeNet(nsocks);
    ASSERT_TRUE(c->n);
    net::Handle handle;
    ASSERT_TRUE(c->n->listen(0, &handle, &c->listener).isOk());
    ASSERT_TRUE(c->n->connect(0, handle, net::Identity{secret_, peerRank}, Clock::now() + 5s, &c->sc).isOk());
    ASSERT_TRUE(c->n->accept(*c->listener, secret_, Clock::now() + 5s, &c->rc).isOk());
    ASSERT_TRUE(c->n->regMr(nullptr, 0, &c->mr).isOk());
  }

  // The listener's address, from its handle.
  static sockaddr_in AddressOf(const net::Handle& h) {
    net::tcp::WireHandle w;
    memcpy(&w, h.bytes, sizeof(w));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = w.ip;
    a.sin_port = w.port;
    return a;
  }

  // A raw socket connected to the listener (no greeting yet).
  static Fd RawConnect(const net::Handle& h) {
    Fd fd;
    Status s = connectTo(AddressOf(h), Clock::now() + 5s, &fd);
    EXPECT_TRUE(s.isOk()) << s.message();
    return fd;
  }

  net::tcp::Hello GoodHello(int rank, uint16_t socket, uint16_t nsocks) const {
    net::tcp::Hello h{net::tcp::kHelloMagic, net::tcp::kVersion, {}, rank, socket, nsocks, 42};
    memcpy(h.secret, secret_.data(), sizeof(h.secret));
    return h;
  }

  static void SendBytes(int fd, const void* p, size_t n) {
    ASSERT_TRUE(sendAll(fd, p, n, Clock::now() + 5s).isOk());
  }

  // Tests until done, an error, or the deadline.
  static Status Drive(net::Net& n, net::Request* r, size_t* bytes, std::chrono::milliseconds limit = 5000ms) {
    const auto deadline = Clock::now() + limit;
    for (;;) {
      bool done = false;
      Status s = n.test(r, &done, bytes);
      if (!s.isOk() || done) return s;
      if (Clock::now() > deadline) return makeError(nodusTimeout, "test: not done in time");
      usleep(100);
    }
  }

  // Whether the peer closed `fd` within a second (EOF or reset).
  static bool ClosedByPeer(int fd) {
    const auto deadline = Clock::now() + 2s;
    char buf[256];
    while (Clock::now() < deadline) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        const ssize_t k = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (k == 0 || (k < 0 && errno != EAGAIN)) return true;
      }
    }
    return false;
  }

  JobSecret secret_{};
};

TEST_F(TcpNetTest, DevicesComeFromTheInterfaceSpec) {
  auto n = MakeNet(2);
  ASSERT_TRUE(n);
  ASSERT_GE(n->deviceCount(), 1);
  EXPECT_EQ(n->device(0).name, "lo");
  EXPECT_EQ(n->device(0).address, "127.0.0.1");
  EXPECT_GT(n->device(0).speedMbps, 0);
  setenv("NODUS_SOCKET_IFNAME", "=nosuchif0", 1);
  std::unique_ptr<net::Net> none;
  Status s = net::makeTcpNet(Env(2), &none);
  EXPECT_EQ(s.code(), nodusInvalidArgument);
  EXPECT_NE(s.message().find("NODUS_SOCKET_IFNAME"), std::string::npos) << s.message();
  setenv("NODUS_SOCKET_IFNAME", "^lo", 1);  // everything but loopback: maybe nothing here, never lo
  if (net::makeTcpNet(Env(2), &none).isOk()) {
    for (int d = 0; d < none->deviceCount(); ++d) EXPECT_NE(none->device(d).name, "lo");
  }
  // NODUS_NSOCKS' range is [1, 16]: the settings refuse 0 and 17, naming it.
  Settings bad;
  EXPECT_EQ(bad.set(param::kNsocks, 0).code(), nodusInvalidArgument);
  const Status big = bad.set(param::kNsocks, 17);
  EXPECT_EQ(big.code(), nodusInvalidArgument);
  EXPECT_NE(big.message().find("NODUS_NSOCKS=17 is outside its range [1, 16]"), std::string::npos) << big.message();
}

// The bootstrap listens where NODUS_SOCKET_IFNAME says, unless
// NODUS_BOOTSTRAP_ADDR names an address.
TEST_F(TcpNetTest, BootstrapAddressFollowsTheInterfaceSpec) {
  in_addr a{};
  ASSERT_TRUE(defaultListenAddress(Env(1), &a).isOk());
  EXPECT_EQ(ntohl(a.s_addr), INADDR_LOOPBACK);
  setenv("NODUS_BOOTSTRAP_ADDR", "127.0.0.2", 1);
  ASSERT_TRUE(defaultListenAddress(Env(1), &a).isOk());
  EXPECT_EQ(ntohl(a.s_addr), INADDR_LOOPBACK + 1);
  unsetenv("NODUS_BOOTSTRAP_ADDR");
  setenv("NODUS_SOCKET_IFNAME", "=nosuchif0", 1);
  EXPECT_EQ(defaultListenAddress(Env(1), &a).code(), nodusInvalidArgument);
}

class TcpNetRoundTrip : public TcpNetTest, public ::testing::WithParamInterface<int> {};

// Messages of many sizes, around the striping threshold and the socket
// buffer, several in flight, arrive whole and in order.
TEST_P(TcpNetRoundTrip, EverySizeArrivesWholeAndInOrder) {
  const int nsocks = GetParam();
  auto n = MakeNet(nsocks);
  net::Handle handle;
  std::unique_ptr<net::Listener> listener;
  ASSERT_TRUE(n->listen(0, &handle, &listener).isOk());
  std::unique_ptr<net::SendComm> sc;
  Status s = n->connect(0, handle, net::Identity{secret_, 7}, Clock::now() + 5s, &sc);
  ASSERT_TRUE(s.isOk()) << s.message();
  std::unique_ptr<net::RecvComm> rc;
  s = n->accept(*listener, secret_, Clock::now() + 5s, &rc);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(rc->peerRank(), 7);
  std::unique_ptr<net::MemoryRegion> mr;
  ASSERT_TRUE(n->regMr(nullptr, 0, &mr).isOk());

  const std::vector<size_t> sizes = {0, 1, 63, 4096, 65535, 65536, 65537, 1000003, 4 << 20, 7};
  std::vector<std::vector<uint8_t>> out, in;
  std::vector<net::Request*> sends, recvs;
  for (size_t i = 0; i < sizes.size(); ++i) {
    out.emplace_back(sizes[i]);
    for (size_t k = 0; k < sizes[i]; ++k) out[i][k] = static_cast<uint8_t>(k * 31 + i);
    in.emplace_back(sizes[i] + 100, 0xee);
    net::Request* r = nullptr;
    ASSERT_TRUE(n->isend(*sc, out[i].data(), sizes[i], *mr, &r).isOk());
    sends.push_back(r);
    ASSERT_TRUE(n->irecv(*rc, in[i].data(), in[i].size(), *mr, &r).isOk());
    recvs.push_back(r);
  }
  std::vector<bool> sent(sizes.size()), got(sizes.size());
  const auto deadline = Clock::now() + 20s;
  size_t left = 2 * sizes.size();
  while (left > 0 && Clock::now() < deadline) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      bool done = false;
      size_t bytes = 0;
      if (!sent[i]) {
        ASSERT_TRUE(n->test(sends[i], &done, &bytes).isOk());
        if (done) sent[i] = true, --left;
      }
      if (!got[i]) {
        s = n->test(recvs[i], &done, &bytes);
        ASSERT_TRUE(s.isOk()) << s.message();
        if (done) {
          got[i] = true, --left;
          EXPECT_EQ(bytes, sizes[i]);
          // (An empty message's buffers may be null: memcmp must not see them.)
          EXPECT_TRUE(sizes[i] == 0 || memcmp(in[i].data(), out[i].data(), sizes[i]) == 0)
              << "message " << i << " of " << sizes[i] << " bytes";
          EXPECT_EQ(in[i][sizes[i]], 0xee) << "written past the message";
        }
      }
    }
  }
  EXPECT_EQ(left, 0u) << "messages still in flight at the deadline";
}

INSTANTIATE_TEST_SUITE_P(Sockets, TcpNetRoundTrip, ::testing::Values(1, 2, 4),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "socks"; });

// Receives posted into one buffer and pointed at another before any data
// came (how the net transport lands a message straight in a collective's
// buffer): the message arrives there, whole, on 1..4 sockets; one too
// large for its new place goes to the
// buffer it was posted with, and the reported size tells the caller so.
TEST_P(TcpNetRoundTrip, RetargetedReceivesLandWhereTheyWerePointed) {
  Connected c;
  ASSERT_NO_FATAL_FAILURE(Connect(GetParam(), 3, &c));
  auto& n = c.n;
  auto& sc = c.sc;
  auto& rc = c.rc;
  auto& mr = c.mr;
  ASSERT_TRUE(n->anyMemory());

  constexpr size_t kSlot = 300000;
  std::vector<uint8_t> slot0(kSlot, 0xee), slot1(kSlot, 0xee), slot2(kSlot, 0xee);
  std::vector<uint8_t> place0(200000 + 1, 0xdd), place2(1000, 0xdd);
  std::vector<uint8_t> msg0(200000), msg1(250000), msg2(5000);
  for (size_t k = 0; k < msg0.size(); ++k) msg0[k] = static_cast<uint8_t>(k * 7 + 1);
  for (size_t k = 0; k < msg1.size(); ++k) msg1[k] = static_cast<uint8_t>(k * 11 + 2);
  for (size_t k = 0; k < msg2.size(); ++k) msg2[k] = static_cast<uint8_t>(k * 13 + 3);
  net::Request *r0 = nullptr, *r1 = nullptr, *r2 = nullptr, *s0 = nullptr, *s1 = nullptr, *s2 = nullptr;
  ASSERT_TRUE(n->irecv(*rc, slot0.data(), kSlot, *mr, &r0).isOk());
  ASSERT_TRUE(n->irecv(*rc, slot1.data(), kSlot, *mr, &r1).isOk());
  ASSERT_TRUE(n->irecv(*rc, slot2.data(), kSlot, *mr, &r2).isOk());
  // Nothing has been sent: receive 0 moves.
  ASSERT_TRUE(n->retarget(r0, place0.data(), 200000));
  // Receive 2 moves to a place too small for what will come.
  ASSERT_TRUE(n->retarget(r2, place2.data(), place2.size()));
  ASSERT_TRUE(n->isend(*sc, msg0.data(), msg0.size(), *mr, &s0).isOk());
  ASSERT_TRUE(n->isend(*sc, msg1.data(), msg1.size(), *mr, &s1).isOk());
  ASSERT_TRUE(n->isend(*sc, msg2.data(), msg2.size(), *mr, &s2).isOk());
  size_t bytes = 0;
  // Receive 1 stays where it was posted.
  std::thread sender([&] {
    size_t b = 0;
    for (net::Request* r : {s0, s1, s2}) EXPECT_TRUE(Drive(*n, r, &b).isOk());
  });
  Status st = Drive(*n, r0, &bytes);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(bytes, msg0.size());
  EXPECT_EQ(memcmp(place0.data(), msg0.data(), msg0.size()), 0);
  EXPECT_EQ(place0[200000], 0xdd) << "written past the new place";
  EXPECT_EQ(slot0[0], 0xee) << "the slot it was moved from was written";
  st = Drive(*n, r1, &bytes);
  ASSERT_TRUE(st.isOk()) << st.message();
  // (A request test() reported done is gone: it must not be retargeted.)
  EXPECT_EQ(memcmp(slot1.data(), msg1.data(), msg1.size()), 0);
  st = Drive(*n, r2, &bytes);
  sender.join();
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(bytes, msg2.size());  // larger than place2: the caller knows it is in slot2
  EXPECT_EQ(memcmp(slot2.data(), msg2.data(), msg2.size()), 0);
  EXPECT_EQ(place2[0], 0xdd) << "a message too large for its new place was written there";
}

// Small frames back to back: one recv() takes a header and the frames behind
// it (the read-ahead buffer, 16 KiB); frames of 4078 bytes + a 16-byte
// header put the 16 KiB boundary inside the fifth header. Receives whose
// data is already read ahead, or whose header is split by the boundary, can
// still be pointed elsewhere and land there, and every message arrives
// whole and in order.
TEST_P(TcpNetRoundTrip, FramesReadAheadStillLandWhereTheirReceivesPoint) {
  Connected c;
  ASSERT_NO_FATAL_FAILURE(Connect(GetParam(), 3, &c));
  static_assert(sizeof(net::tcp::FrameHeader) == 16);

  constexpr size_t kMsgs = 12, kBytes = 4078, kSlot = 8192;
  std::vector<std::vector<uint8_t>> out(kMsgs, std::vector<uint8_t>(kBytes)), slots(kMsgs, std::vector<uint8_t>(kSlot, 0xee));
  std::vector<uint8_t> place2(kBytes + 1, 0xdd), place4(kBytes + 1, 0xdd);
  std::vector<net::Request*> sends(kMsgs), recvs(kMsgs);
  for (size_t i = 0; i < kMsgs; ++i) {
    for (size_t k = 0; k < kBytes; ++k) out[i][k] = static_cast<uint8_t>(k * 29 + i * 7 + 1);
    ASSERT_TRUE(c.n->irecv(*c.rc, slots[i].data(), kSlot, *c.mr, &recvs[i]).isOk());
    ASSERT_TRUE(c.n->isend(*c.sc, out[i].data(), kBytes, *c.mr, &sends[i]).isOk());
  }
  size_t bytes = 0;
  for (net::Request* r : sends) ASSERT_TRUE(Drive(*c.n, r, &bytes).isOk());  // all in the socket now
  Status st = Drive(*c.n, recvs[0], &bytes);
  ASSERT_TRUE(st.isOk()) << st.message();
  EXPECT_EQ(bytes, kBytes);
  EXPECT_EQ(memcmp(slots[0].data(), out[0].data(), kBytes), 0);
  EXPECT_TRUE(c.n->retarget(recvs[2], place2.data(), kBytes));
  EXPECT_TRUE(c.n->retarget(recvs[4], place4.data(), kBytes));
  for (size_t i = 1; i < kMsgs; ++i) {
    st = Drive(*c.n, recvs[i], &bytes);
    ASSERT_TRUE(st.isOk()) << "message " << i << ": " << st.message();
    EXPECT_EQ(bytes, kBytes);
    const uint8_t* at = i == 2 ? place2.data() : i == 4 ? place4.data() : slots[i].data();
    EXPECT_EQ(memcmp(at, out[i].data(), kBytes), 0) << "message " << i;
    EXPECT_EQ(at[kBytes], i == 2 || i == 4 ? 0xdd : 0xee) << "written past message " << i;
  }
  EXPECT_EQ(slots[2][0], 0xee) << "the slot receive 2 was moved from was written";
  EXPECT_EQ(slots[4][0], 0xee) << "the slot receive 4 was moved from was written";
}

// Strangers connect first: a wrong secret, garbage, a greeting cut short,
// one that says nothing. Each is refused (closed) and the real peer, which
// connects last, is accepted at once — the silent one does not hold it up.
TEST_F(TcpNetTest, StrangersAreRefusedAndTheRealPeerGetsThrough) {
  auto n = MakeNet(2);
  net::Handle handle;
  std::unique_ptr<net::Listener> listener;
  ASSERT_TRUE(n->listen(0, &handle, &listener).isOk());
  Fd wrongSecret = RawConnect(handle);
  net::tcp::Hello bad = GoodHello(3, 0, 1);
  bad.secret[5] ^= 1;
  SendBytes(wrongSecret.get(), &bad, sizeof(bad));
  Fd garbage = RawConnect(handle);
  std::string junk(sizeof(net::tcp::Hello), 'x');
  SendBytes(garbage.get(), junk.data(), junk.size());
  Fd shortHello = RawConnect(handle);
  net::tcp::Hello good = GoodHello(3, 0, 1);
  SendBytes(shortHello.get(), &good, 10);
  shortHello.reset();
  Fd silent = RawConnect(handle);

  std::unique_ptr<net::SendComm> sc;
  ASSERT_TRUE(n->connect(0, handle, net::Identity{secret_, 1}, Clock::now() + 5s, &sc).isOk());
  const auto start = Clock::now();
  std::unique_ptr<net::RecvComm> rc;
  Status s = n->accept(*listener, secret_, Clock::now() + 10s, &rc);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_LT(Clock::now() - start, 3s) << "a silent stranger held up the real peer";
  EXPECT_EQ(rc->peerRank(), 1);
  EXPECT_TRUE(ClosedByPeer(wrongSecret.get())) << "the wrong secret was not refused";
  EXPECT_TRUE(ClosedByPeer(garbage.get())) << "garbage was not refused";

  // The accepted connection works.
  std::unique_ptr<net::MemoryRegion> mr;
  ASSERT_TRUE(n->regMr(nullptr, 0, &mr).isOk());
  int x = 12345, y = 0;
  net::Request *a = nullptr, *b = nullptr;
  ASSERT_TRUE(n->isend(*sc, &x, sizeof(x), *mr, &a).isOk());
  ASSERT_TRUE(n->irecv(*rc, &y, sizeof(y), *mr, &b).isOk());
  size_t bytes = 0;
  ASSERT_TRUE(Drive(*n, a, &bytes).isOk());
  ASSERT_TRUE(Drive(*n, b, &bytes).isOk());
  EXPECT_EQ(y, 12345);
}

// The real peer never comes: accept gives up at its deadline.
TEST_F(TcpNetTest, AcceptTimesOut) {
  auto n = MakeNet(1);
  net::Handle handle;
  std::unique_ptr<net::Listener> listener;
  ASSERT_TRUE(n->listen(0, &handle, &listener).isOk());
  Fd silent = RawConnect(handle);
  std::unique_ptr<net::RecvComm> rc;
  const auto start = Clock::now();
  EXPECT_EQ(n->accept(*listener, secret_, Clock::now() + 300ms, &rc).code(), nodusTimeout);
  EXPECT_LT(Clock::now() - start, 3s);
}

struct Malformed {
  const char* name;
  const char* expect;  // in the error message
};

class TcpNetMalformed : public TcpNetTest, public ::testing::WithParamInterface<int> {};

const Malformed& MalformedAt(int i) {
  static const Malformed kCases[] = {
      {"bad_magic", "bad frame"},
      {"oversized_length", "at most 4096 fit"},
      {"wrong_sequence", "out of sequence"},
      {"short_read", "short read"},
      {"closed", "closed the connection"},
  };
  return kCases[i];
}

// A peer that proves the secret, then sends something that is not a valid
// frame. The receive fails with nodusRemoteError and says why, the
// connection is closed, and later receives fail too.
TEST_P(TcpNetMalformed, FailsTheReceiveAndClosesTheConnection) {
  const Malformed& c = MalformedAt(GetParam());
  auto n = MakeNet(1);
  net::Handle handle;
  std::unique_ptr<net::Listener> listener;
  ASSERT_TRUE(n->listen(0, &handle, &listener).isOk());
  Fd peer = RawConnect(handle);
  net::tcp::Hello hello = GoodHello(2, 0, 1);
  SendBytes(peer.get(), &hello, sizeof(hello));
  std::unique_ptr<net::RecvComm> rc;
  Status s = n->accept(*listener, secret_, Clock::now() + 5s, &rc);
  ASSERT_TRUE(s.isOk()) << s.message();

  std::vector<uint8_t> payload(100, 1);
  net::tcp::FrameHeader h{net::tcp::kFrameMagic, 0, payload.size()};
  // A valid first message, so that the failure is in the second.
  SendBytes(peer.get(), &h, sizeof(h));
  SendBytes(peer.get(), payload.data(), payload.size());
  h.seq = 1;
  const std::string name = c.name;
  if (name == "bad_magic") h.magic = 0xdeadbeef;
  if (name == "oversized_length") h.bytes = uint64_t{1} << 40;
  if (name == "wrong_sequence") h.seq = 7;
  if (name != "closed") SendBytes(peer.get(), &h, sizeof(h));
  if (name == "short_read") SendBytes(peer.get(), payload.data(), 10);
  if (name == "short_read" || name == "closed") shutdown(peer.get(), SHUT_WR);

  std::unique_ptr<net::MemoryRegion> mr;
  ASSERT_TRUE(n->regMr(nullptr, 0, &mr).isOk());
  std::vector<uint8_t> buf(4096 + 64, 0xee);
  net::Request *first = nullptr, *second = nullptr;
  ASSERT_TRUE(n->irecv(*rc, buf.data(), 4096, *mr, &first).isOk());
  size_t bytes = 0;
  s = Drive(*n, first, &bytes);
  ASSERT_TRUE(s.isOk()) << s.message();
  EXPECT_EQ(bytes, payload.size());
  ASSERT_TRUE(n->irecv(*rc, buf.data(), 4096, *mr, &second).isOk());
  s = Drive(*n, second, &bytes);
  EXPECT_EQ(s.code(), nodusRemoteError) << s.message();
  EXPECT_NE(s.message().find(c.expect), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rank 2"), std::string::npos) << s.message();
  EXPECT_EQ(buf[4096], 0xee) << "written past the receive";
  if (name != "closed" && name != "short_read") {
    EXPECT_TRUE(ClosedByPeer(peer.get())) << "the connection stays open";
  }
  net::Request* third = nullptr;
  Status later = n->irecv(*rc, buf.data(), 4096, *mr, &third);
  if (later.isOk()) later = Drive(*n, third, &bytes);
  EXPECT_FALSE(later.isOk()) << "a receive after the failure succeeded";
}

INSTANTIATE_TEST_SUITE_P(Frames, TcpNetMalformed, ::testing::Range(0, 5),
                         [](const ::testing::TestParamInfo<int>& info) { return std::string(MalformedAt(info.param).name); });

// ---- Through a communicator ---------------------------------------------------------
// Ranks are threads (nodusCommInitAll) with tcp forced: each rank's proxy and
// sockets are real, only the bootstrap is in-process.

struct CommsOverTcp {
  explicit CommsOverTcp(int n) : comms(static_cast<size_t>(n), nullptr) {
    setenv("NODUS_TRANSPORT", "tcp", 1);
    ok = nodusCommInitAll(comms.data(), n) == nodusSuccess;
    unsetenv("NODUS_TRANSPORT");
  }
  ~CommsOverTcp() {
    for (nodusComm_t c : comms)
      if (c) nodusCommDestroy(c);
  }
  // One AllReduce of `count` floats on every rank, each from its own thread.
  std::vector<nodusResult_t> AllReduce(size_t count) {
    std::vector<nodusResult_t> results(comms.size(), nodusSuccess);
    std::vector<std::thread> threads;
    for (size_t r = 0; r < comms.size(); ++r)
      threads.emplace_back([&, r] {
        std::vector<float> in(count, 1.0f), out(count, 0.0f);
        results[r] = nodusAllReduce(in.data(), out.data(), count, nodusFloat32, nodusSum, comms[r]);
        if (results[r] == nodusSuccess && count > 0 && out[count - 1] != static_cast<float>(comms.size()))
          results[r] = nodusInternalError;
      });
    for (std::thread& t : threads) t.join();
    return results;
  }
  std::vector<nodusComm_t> comms;
  bool ok = false;
};

int CountEntries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (dirent* e = readdir(d)) n += e->d_name[0] != '.';
    closedir(d);
  }
  return n;
}

// Communicators over tcp come and go without leaving a thread (proxy) or a
// descriptor (socket, epoll, eventfd) behind.
TEST_F(TcpNetTest, CommunicatorsLeaveNoThreadOrDescriptorBehind) {
  { CommsOverTcp warm(2); }  // one-time allocations (the logger, hwloc) before counting
  const int fds = CountEntries("/proc/self/fd"), threads = CountEntries("/proc/self/task");
  for (int round = 0; round < 3; ++round) {
    CommsOverTcp c(3);
    ASSERT_TRUE(c.ok) << nodusGetLastError(nullptr);
    EXPECT_GT(CountEntries("/proc/self/task"), threads) << "no proxy threads while the communicators live";
    for (nodusResult_t r : c.AllReduce(300007)) EXPECT_EQ(r, nodusSuccess);
  }
  EXPECT_EQ(CountEntries("/proc/self/fd"), fds) << "descriptors leaked";
  EXPECT_EQ(CountEntries("/proc/self/task"), threads) << "threads leaked";
}

// An idle communicator's proxies sleep (epoll) instead of polling.
TEST_F(TcpNetTest, IdleProxiesSleep) {
  CommsOverTcp c(2);
  ASSERT_TRUE(c.ok) << nodusGetLastError(nullptr);
  for (nodusResult_t r : c.AllReduce(1000)) ASSERT_EQ(r, nodusSuccess);
  timespec a{}, b{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
  std::this_thread::sleep_for(500ms);
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
  const double cpuMs = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
  EXPECT_LT(cpuMs, 50.0) << "the process used " << cpuMs << " ms of CPU in 500 ms of idling";
}

// Garbage written into every tcp connection between two collectives: each
// rank's next collective fails, within the timeout, with nodusRemoteError
// (naming the bad frame, or the connection its peer closed on seeing one);
// nothing crashes and the communicators still destroy.
TEST_F(TcpNetTest, GarbageInjectedIntoAConnectionFailsTheNextCollective) {
  setenv("NODUS_TIMEOUT_MS", "5000", 1);
  CommsOverTcp c(2);
  unsetenv("NODUS_TIMEOUT_MS");
  ASSERT_TRUE(c.ok) << nodusGetLastError(nullptr);
  for (nodusResult_t r : c.AllReduce(1000)) ASSERT_EQ(r, nodusSuccess);
  // The sending ends are the process's connected IPv4 stream sockets; what
  // is written into a receiving end goes nowhere anyone reads, harmlessly.
  int injected = 0;
  const uint8_t garbage[sizeof(net::tcp::FrameHeader)] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  for (int fd = 3; fd < 1024; ++fd) {
    sockaddr_in peer{};
    socklen_t len = sizeof(peer);
    int type = 0;
    socklen_t tlen = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) != 0 || type != SOCK_STREAM) continue;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0 || peer.sin_family != AF_INET) continue;
    injected += send(fd, garbage, sizeof(garbage), MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof(garbage));
  }
  ASSERT_GT(injected, 0) << "found no tcp connection to write into";
  const auto start = Clock::now();
  const std::vector<nodusResult_t> results = c.AllReduce(1000);
  EXPECT_LT(Clock::now() - start, 5000ms) << "the failure took the whole timeout";
  // The first rank to read garbage closes its connections, which may reach
  // the other before (or instead of) the garbage written towards it.
  int sawBadFrame = 0;
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_EQ(results[r], nodusRemoteError) << "rank " << r;
    const std::string why = nodusGetLastError(c.comms[r]);
    sawBadFrame += why.find("bad frame") != std::string::npos;
    EXPECT_TRUE(why.find("bad frame") != std::string::npos || why.find("closed the connection") != std::string::npos)
        << "rank " << r << ": " << why;
  }
  EXPECT_GT(sawBadFrame, 0) << "no rank named the bad frame";
}

}  // namespace
}  // namespace nodus
