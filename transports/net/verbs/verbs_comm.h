// One direction of a verbs connection (VerbsComm), the requests posted on it
// and the registrations they use. Set-up and the side channel are in
// verbs_comm_setup.cc, the data path (clear-to-send, RDMA write with
// immediate, completions) in verbs_data_path.cc.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/socket.h"
#include "base/status.h"
#include "transports/net/net.h"
#include "transports/net/verbs/qp_setup.h"
#include "transports/net/verbs/reg_cache.h"
#include "transports/net/verbs/verbs_device.h"
#include "transports/net/verbs/verbs_wire.h"

namespace nodus::net::verbs {

// Requests in flight per connection: bounds the CTS buffers, the work
// requests of the queue pair and the CQ (the transport keeps NODUS_SLOTS,
// at most 64, in flight).
inline constexpr uint32_t kMaxInflight = 128;
inline constexpr int kCqEntries = 4 * kMaxInflight;
// A stranger on the side channel gets this long to prove itself.
inline constexpr auto kHelloTimeout = std::chrono::seconds(5);

class VerbsComm;

struct VerbsRequest final : Request {
  VerbsComm* owner = nullptr;
  uint32_t seq = 0;
  std::byte* data = nullptr;
  size_t bytes = 0;  // sends: the message; receives: the capacity, then what arrived
  uint32_t lkey = 0, rkey = 0;
  bool posted = false;  // sends: the write is posted; receives: the CTS is
  bool done = false;
  bool reported = false;
};

class VerbsMemory final : public MemoryRegion {
 public:
  explicit VerbsMemory(std::shared_ptr<const RegCache::Region> r) : region(std::move(r)) {}
  const ibv_mr* mr() const { return static_cast<const ibv_mr*>(region->handle); }
  std::shared_ptr<const RegCache::Region> region;
};

// One direction of a connection: its queue pair, completion queue and
// channel, the side-channel socket, and the requests in sequence order.
// Used by one thread at a time (the transport serialises per comm), except
// shutdown().
class VerbsComm {
 public:
  VerbsComm(std::shared_ptr<Device> dev, bool sending) : dev_(std::move(dev)), sending_(sending) {}
  VerbsComm(const VerbsComm&) = delete;
  VerbsComm& operator=(const VerbsComm&) = delete;
  ~VerbsComm();

  // ---- Set-up and side channel (verbs_comm_setup.cc)
  // The queue pair in INIT with our receives for CTS posted (senders).
  Status create();
  // The queue pair through RTR to RTS, connected to the peer's.
  Status connectTo(const QpInfo& remote);

  const QpInfo& local() const { return local_; }
  void setSocket(Fd fd) { sock_ = std::move(fd); }
  int socket() const { return sock_.get(); }
  void setPeer(int rank) { peer_ = rank; }
  int peer() const { return peer_; }
  std::string who() const { return peer_ >= 0 ? "rank " + std::to_string(peer_) : std::string("the peer"); }
  // Senders: the peer's reply is still to come (see progressSocket).
  void awaitReply() { ready_ = false; }
  // Receivers: CTS wait for the connecting side's "ready".
  void awaitReady() { ready_ = false; }

  // The completion channel's and the side channel's descriptors.
  void fds(std::vector<int>* out) const;
  // Fails the connection on both ends: the peer sees it at once.
  void shutdownNow();

  // ---- Data path (verbs_data_path.cc)
  // A send or receive of `data` (in `mr`), in sequence after the others.
  Status post(std::byte* data, size_t bytes, const VerbsMemory& mr, Request** out);
  // Progresses the connection, then says whether `r` is done (and its size).
  Status test(VerbsRequest* r, bool* done, size_t* bytes);

 private:
  // Set-up and side channel.
  Status modify(QpTransition t, const char* state);
  // The side channel after set-up: the listener's reply (senders), the
  // connecting side's "ready" (receivers), then only the peer closing it.
  Status progressSocket();

  // Data path.
  Status postCtsRecv(uint32_t slot);
  // A receive: a receive work request for the write's immediate, and the
  // CTS once the connecting side said it is ready.
  Status postReceive(VerbsRequest& r);
  Status sendCts(VerbsRequest& r);
  Status postWrite(VerbsRequest& r, const Cts& cts);
  VerbsRequest* bySeq(uint32_t seq);
  Status completion(const ibv_wc& wc);
  Status progress();
  void fail(const Status& s);

  std::shared_ptr<Device> dev_;
  bool sending_;
  int peer_ = -1;
  Fd sock_;
  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  ibv_mr* ctsMr_ = nullptr;
  std::vector<uint8_t> ctsBuf_;  // senders: CTS received; receivers: CTS sent (by seq % kMaxInflight)
  bool inline_ = false;
  QpInfo local_;
  bool ready_ = true;
  uint8_t handshake_[kQpInfoBytes] = {};
  size_t handshakeGot_ = 0;
  bool armed_ = false;
  unsigned unacked_ = 0;
  std::deque<VerbsRequest> requests_;  // in sequence order, from frontSeq_
  uint32_t nextSeq_ = 0, frontSeq_ = 0;
  std::deque<Cts> ctsReady_;  // senders: clear-to-sends not yet used
  uint32_t ctsExpected_ = 0;
  Status error_;
};

}  // namespace nodus::net::verbs
