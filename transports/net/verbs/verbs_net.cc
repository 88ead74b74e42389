#include "transports/net/verbs/verbs_net.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <mutex>
#include <vector>

#include "base/log.h"
#include "base/settings.h"
#include "base/socket.h"
#include "transports/net/net_transport.h"
#include "transports/net/verbs/ibv_loader.h"
#include "transports/net/verbs/qp_setup.h"
#include "transports/net/verbs/reg_cache.h"
#include "transports/net/verbs/verbs_wire.h"

namespace nodus::net {

using namespace verbs;

namespace {

// Requests in flight per connection: bounds the CTS buffers, the work
// requests of the queue pair and the CQ (the transport keeps NODUS_SLOTS,
// at most 64, in flight).
constexpr uint32_t kMaxInflight = 128;
constexpr int kCqEntries = 4 * kMaxInflight;
// Registrations kept (slot rings: two per peer).
constexpr size_t kRegCacheEntries = 1024;
// A stranger on the side channel gets this long to prove itself.
constexpr auto kHelloTimeout = std::chrono::seconds(5);
constexpr uint32_t kListenMagic = 0x6e64564c;  // "ndVL"

// Work request ids: the kind in the top byte, a sequence number or CTS
// buffer index below.
enum : uint64_t { kWrWrite = 1ull << 56, kWrImmRecv = 2ull << 56, kWrCtsRecv = 3ull << 56, kWrCtsSend = 4ull << 56 };
constexpr uint64_t kWrKindMask = 0xffull << 56;

const IbvApi& ibv() {
  const IbvApi* api = nullptr;
  (void)loadIbv(&api);  // only called once a net exists, i.e. after a successful load
  return *api;
}

// ---- Devices --------------------------------------------------------------------

// The device list, released with it.
struct DeviceList {
  ibv_device** list = nullptr;
  int count = 0;
  DeviceList() = default;
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
  ~DeviceList() {
    if (list) ibv().free_device_list(list);
  }
};

Status describeDevices(const IbvApi& api, DeviceList* raw, std::vector<DeviceDesc>* out) {
  errno = 0;
  raw->list = api.get_device_list(&raw->count);
  // Without kernel RDMA support the list is null (ENOSYS) rather than empty.
  if (raw->list == nullptr)
    return makeError(nodusSystemError, "verbs: no RDMA device (ibv_get_device_list: %s)",
                     errno ? strerror(errno) : "no list");
  for (int i = 0; i < raw->count; ++i) {
    DeviceDesc d;
    const char* name = api.get_device_name(raw->list[i]);
    d.name = name ? name : "?";
    if (ibv_context* ctx = api.open_device(raw->list[i])) {
      ibv_device_attr attr{};
      if (api.query_device(ctx, &attr) == 0) {
        for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
          ibv_port_attr pa{};
          if (api.queryPort(ctx, p, &pa) != 0) continue;
          d.ports.push_back({p, pa.state == IBV_PORT_ACTIVE, static_cast<uint8_t>(pa.active_mtu),
                             pa.link_layer == IBV_LINK_LAYER_ETHERNET ? kLinkEthernet : kLinkInfiniband});
        }
      }
      api.close_device(ctx);
    }
    out->push_back(std::move(d));
  }
  return Status::ok();
}

GidType sysfsGidType(const std::string& dev, int port, int index) {
  const std::string path =
      "/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/gid_attrs/types/" + std::to_string(index);
  char text[32] = {};
  if (FILE* f = fopen(path.c_str(), "r")) {
    if (fgets(text, sizeof(text), f) == nullptr) text[0] = '\0';
    fclose(f);
  }
  if (strncmp(text, "RoCE v2", 7) == 0) return GidType::RoceV2;
  if (strncmp(text, "IB/RoCE v1", 10) == 0) return GidType::RoceV1;
  return GidType::Unknown;
}

// One opened device and port, with the protection domain every connection
// and registration of the net shares. Destroyed last (comms hold it).
struct Device {
  std::string name;  // mlx5_0
  uint8_t port = 0;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_port_attr attr{};
  GidDesc gid;
  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device() {
    if (pd) ibv().dealloc_pd(pd);
    if (ctx) ibv().close_device(ctx);
  }
  std::string where() const { return name + " port " + std::to_string(port); }
  LocalPath path() const {
    return {port, attr.link_layer == IBV_LINK_LAYER_ETHERNET ? kLinkEthernet : kLinkInfiniband,
            static_cast<uint8_t>(attr.active_mtu), gid.index};
  }
};

Status openDevice(const NetContext& ctx, std::shared_ptr<Device>* out) {
  const IbvApi* api = nullptr;
  NODUS_TRY(loadIbv(&api));
  HcaSpec spec;
  NODUS_TRY(parseHcaSpec(ctx.settings->get(param::kIbHca), &spec));
  DeviceList raw;
  std::vector<DeviceDesc> devices;
  NODUS_TRY(describeDevices(*api, &raw, &devices));
  DeviceChoice choice;
  NODUS_TRY(chooseDevice(devices, ctx.node, ctx.numa, spec, &choice));
  auto d = std::make_shared<Device>();
  d->name = devices[choice.device].name;
  d->port = choice.port;
  d->ctx = api->open_device(raw.list[choice.device]);
  if (d->ctx == nullptr) return systemError("verbs: ibv_open_device(%s)", d->name.c_str());
  if (api->queryPort(d->ctx, d->port, &d->attr) != 0) return systemError("verbs: ibv_query_port(%s)", d->where().c_str());
  d->pd = api->alloc_pd(d->ctx);
  if (d->pd == nullptr) return systemError("verbs: ibv_alloc_pd(%s)", d->name.c_str());
  std::vector<GidDesc> table;
  for (int i = 0; i < std::min(d->attr.gid_tbl_len, 256); ++i) {
    GidDesc g;
    g.index = i;
    ibv_gid raw{};
    if (api->query_gid(d->ctx, d->port, i, &raw) != 0) continue;
    memcpy(g.gid.data(), raw.raw, 16);
    ibv_gid_entry e{};
    if (api->query_gid_ex && api->query_gid_ex(d->ctx, d->port, static_cast<uint32_t>(i), &e, 0, sizeof(e)) == 0)
      g.type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? GidType::RoceV2
               : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::RoceV1
                                                    : GidType::Ib;
    else
      g.type = sysfsGidType(d->name, d->port, i);
    table.push_back(g);
  }
  const uint8_t link = d->path().linkLayer;
  NODUS_TRY(chooseGid(table, link, static_cast<int>(ctx.settings->get(param::kIbGidIndex)), d->where(), &d->gid));
  NODUS_INFO(ctx.rank, "verbs: %s (%s), %s, MTU %d, GID index %d%s", d->where().c_str(), choice.why.c_str(),
             link == kLinkEthernet ? "RoCE" : "InfiniBand", mtuBytes(static_cast<uint8_t>(d->attr.active_mtu)),
             d->gid.index,
             link != kLinkEthernet               ? ""
             : d->gid.type == GidType::RoceV2 ? " (RoCE v2)"
             : d->gid.type == GidType::RoceV1 ? " (RoCE v1)"
                                              : "");
  *out = std::move(d);
  return Status::ok();
}

// ---- Connections ----------------------------------------------------------------

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
  ~VerbsComm() {
    const IbvApi& api = ibv();
    if (qp_) api.destroy_qp(qp_);
    if (cq_) {
      if (unacked_) api.ack_cq_events(cq_, unacked_);
      api.destroy_cq(cq_);
    }
    if (channel_) api.destroy_comp_channel(channel_);
    if (ctsMr_) api.dereg_mr(ctsMr_);
  }

  // The queue pair in INIT with our receives for CTS posted (senders).
  Status create() {
    const IbvApi& api = ibv();
    channel_ = api.create_comp_channel(dev_->ctx);
    if (channel_ == nullptr) return systemError("verbs: ibv_create_comp_channel(%s)", dev_->name.c_str());
    const int flags = fcntl(channel_->fd, F_GETFL);
    if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0)
      return systemError("verbs: making the completion channel of %s non-blocking", dev_->name.c_str());
    cq_ = api.create_cq(dev_->ctx, kCqEntries, nullptr, channel_, 0);
    if (cq_ == nullptr) return systemError("verbs: ibv_create_cq(%s, %d entries)", dev_->name.c_str(), kCqEntries);
    ibv_qp_init_attr init{};
    init.send_cq = cq_;
    init.recv_cq = cq_;
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = kMaxInflight;
    init.cap.max_recv_wr = kMaxInflight;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = kCtsBytes;
    qp_ = api.create_qp(dev_->pd, &init);
    if (qp_ == nullptr) {
      // Some providers refuse inline data: CTS then go from registered memory.
      init.cap.max_inline_data = 0;
      qp_ = api.create_qp(dev_->pd, &init);
    }
    if (qp_ == nullptr) return systemError("verbs: ibv_create_qp(%s, RC)", dev_->where().c_str());
    inline_ = init.cap.max_inline_data >= kCtsBytes;
    ctsBuf_.assign(static_cast<size_t>(kMaxInflight) * kCtsBytes, 0);
    ctsMr_ = api.reg_mr(dev_->pd, ctsBuf_.data(), ctsBuf_.size(), IBV_ACCESS_LOCAL_WRITE);
    if (ctsMr_ == nullptr) return systemError("verbs: ibv_reg_mr(%s, CTS buffers)", dev_->name.c_str());
    NODUS_TRY(modify(qpToInit(dev_->path()), "INIT"));
    if (sending_)
      for (uint32_t i = 0; i < kMaxInflight; ++i) NODUS_TRY(postCtsRecv(i));
    uint32_t psn = 0;
    if (getrandom(&psn, sizeof(psn), 0) != sizeof(psn)) return systemError("getrandom");
    local_.qpn = qp_->qp_num;
    local_.psn = psn & 0xffffff;
    local_.lid = dev_->attr.lid;
    local_.port = dev_->port;
    local_.mtu = static_cast<uint8_t>(dev_->attr.active_mtu);
    local_.linkLayer = dev_->path().linkLayer;
    local_.gidIndex = static_cast<uint8_t>(dev_->gid.index);
    local_.gid = dev_->gid.gid;
    return Status::ok();
  }

  Status connectTo(const QpInfo& remote) {
    NODUS_TRY(modify(qpToRtr(dev_->path(), remote), "RTR"));
    NODUS_TRY(modify(qpToRts(local_.psn), "RTS"));
    NODUS_TRACE(-1, "verbs: QP %u on %s connected to QP %u of %s (path MTU %d)", local_.qpn, dev_->where().c_str(),
                remote.qpn, who().c_str(), mtuBytes(pathMtu(local_.mtu, remote.mtu)));
    return Status::ok();
  }

  const QpInfo& local() const { return local_; }
  void setSocket(Fd fd) { sock_ = std::move(fd); }
  int socket() const { return sock_.get(); }
  void setPeer(int rank) { peer_ = rank; }
  int peer() const { return peer_; }
  std::string who() const { return peer_ >= 0 ? "rank " + std::to_string(peer_) : std::string("the peer"); }
  // Senders: the peer's reply is still to come (see progressHandshake).
  void awaitReply() { ready_ = false; }
  // Receivers: CTS wait for the connecting side's "ready".
  void awaitReady() { ready_ = false; }

  Status post(std::byte* data, size_t bytes, const VerbsMemory& mr, Request** out) {
    if (!error_.isOk()) return error_;
    if (bytes > kMaxMessageBytes)
      return makeError(nodusInvalidArgument, "verbs: a message of %zu bytes to %s exceeds the %llu-byte limit", bytes,
                       who().c_str(), static_cast<unsigned long long>(kMaxMessageBytes));
    if (requests_.size() >= kMaxInflight)
      return makeError(nodusInternalError, "verbs: more than %u requests in flight with %s", kMaxInflight, who().c_str());
    const uintptr_t a = reinterpret_cast<uintptr_t>(data);
    if (a < mr.region->begin || a + bytes > mr.region->end)
      return makeError(nodusInvalidArgument, "verbs: a buffer for %s lies outside the memory region given with it",
                       who().c_str());
    requests_.emplace_back();
    VerbsRequest& r = requests_.back();
    r.owner = this;
    r.seq = nextSeq_++;
    r.data = data;
    r.bytes = bytes;
    r.lkey = mr.mr()->lkey;
    r.rkey = mr.mr()->rkey;
    *out = &r;
    Status s = sending_ ? Status::ok() : postReceive(r);
    if (!s.isOk()) fail(s);
    return s.isOk() ? Status::ok() : error_;
  }

  Status test(VerbsRequest* r, bool* done, size_t* bytes) {
    *done = false;
    if (!r->done && error_.isOk()) {
      Status s = progress();
      if (!s.isOk()) fail(s);
    }
    if (r->done) {
      *done = true;
      *bytes = r->bytes;
      r->reported = true;
      while (!requests_.empty() && requests_.front().reported) {
        requests_.pop_front();
        ++frontSeq_;
      }
      return Status::ok();
    }
    return error_;
  }

  void fds(std::vector<int>* out) const {
    out->push_back(channel_->fd);
    out->push_back(sock_.get());
  }

  void shutdownNow() {
    ::shutdown(sock_.get(), SHUT_RDWR);
    // To ERR: outstanding work is flushed and the peer's next packet fails.
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_ERR;
    if (qp_) (void)ibv().modify_qp(qp_, &attr, IBV_QP_STATE);
  }

 private:
  Status modify(QpTransition t, const char* state) {
    if (ibv().modify_qp(qp_, &t.attr, t.mask) != 0)
      return systemError("verbs: moving QP %u on %s to %s (with %s)", qp_->qp_num, dev_->where().c_str(), state,
                         who().c_str());
    return Status::ok();
  }

  Status postCtsRecv(uint32_t slot) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(&ctsBuf_[slot * kCtsBytes]), kCtsBytes, ctsMr_->lkey};
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = kWrCtsRecv | slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    if (int e = ibv_post_recv(qp_, &wr, &bad); e != 0)
      return makeError(nodusSystemError, "verbs: ibv_post_recv(CTS, %s): %s", dev_->where().c_str(), strerror(e));
    return Status::ok();
  }

  // A receive: a receive work request for the write's immediate, and the
  // CTS once the connecting side said it is ready.
  Status postReceive(VerbsRequest& r) {
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = kWrImmRecv | r.seq;
    wr.num_sge = 0;  // the data comes by RDMA write; only the immediate lands here
    if (int e = ibv_post_recv(qp_, &wr, &bad); e != 0)
      return makeError(nodusSystemError, "verbs: ibv_post_recv(%s, from %s): %s", dev_->where().c_str(), who().c_str(),
                       strerror(e));
    return ready_ ? sendCts(r) : Status::ok();
  }

  Status sendCts(VerbsRequest& r) {
    Cts cts;
    cts.seq = r.seq;
    cts.rkey = r.rkey;
    cts.addr = reinterpret_cast<uintptr_t>(r.data);
    cts.capacity = static_cast<uint32_t>(r.bytes);
    uint8_t* buf = &ctsBuf_[(r.seq % kMaxInflight) * kCtsBytes];
    encodeCts(cts, buf);
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf), kCtsBytes, ctsMr_->lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = kWrCtsSend | r.seq;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED | (inline_ ? IBV_SEND_INLINE : 0);
    if (int e = ibv_post_send(qp_, &wr, &bad); e != 0)
      return makeError(nodusSystemError, "verbs: ibv_post_send(CTS to %s on %s): %s", who().c_str(),
                       dev_->where().c_str(), strerror(e));
    r.posted = true;
    return Status::ok();
  }

  Status postWrite(VerbsRequest& r, const Cts& cts) {
    if (r.bytes > cts.capacity)
      return makeError(nodusInvalidUsage, "verbs: a message of %zu bytes to %s exceeds the %u bytes its receive accepts",
                       r.bytes, who().c_str(), cts.capacity);
    ibv_sge sge{reinterpret_cast<uintptr_t>(r.data), static_cast<uint32_t>(r.bytes), r.lkey};
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = kWrWrite | r.seq;
    wr.sg_list = &sge;
    wr.num_sge = r.bytes ? 1 : 0;
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htonl(static_cast<uint32_t>(r.bytes));
    wr.wr.rdma.remote_addr = cts.addr;
    wr.wr.rdma.rkey = cts.rkey;
    if (int e = ibv_post_send(qp_, &wr, &bad); e != 0)
      return makeError(nodusSystemError, "verbs: ibv_post_send(RDMA write to %s on %s): %s", who().c_str(),
                       dev_->where().c_str(), strerror(e));
    r.posted = true;
    return Status::ok();
  }

  VerbsRequest* bySeq(uint32_t seq) {
    const uint32_t i = seq - frontSeq_;
    return i < requests_.size() ? &requests_[i] : nullptr;
  }

  // The side channel after set-up: the listener's reply (senders), the
  // connecting side's "ready" (receivers), then only the peer closing it.
  Status progressSocket() {
    if (ready_) {
      char c;
      const ssize_t k = recv(sock_.get(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
      if (k == 0) return makeError(nodusRemoteError, "verbs: %s closed the connection (it exited, failed or was killed)", who().c_str());
      if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return makeError(nodusRemoteError, "verbs: the connection with %s failed (%s)", who().c_str(), strerror(errno));
      if (k > 0) return makeError(nodusRemoteError, "verbs: %s sent unexpected bytes on the side channel", who().c_str());
      return Status::ok();
    }
    const size_t want = sending_ ? kQpInfoBytes : 1;
    while (handshakeGot_ < want) {
      const ssize_t k = recv(sock_.get(), handshake_ + handshakeGot_, want - handshakeGot_, MSG_DONTWAIT);
      if (k > 0) {
        handshakeGot_ += static_cast<size_t>(k);
        continue;
      }
      if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::ok();
      return makeError(nodusRemoteError, "verbs: %s closed the connection during set-up", who().c_str());
    }
    if (sending_) {
      QpInfo remote;
      NODUS_TRY(decodeQpInfo(handshake_, kQpInfoBytes, who().c_str(), &remote));
      NODUS_TRY(connectTo(remote));
      const uint8_t one = 1;  // our QP takes packets now: the receiver may send CTS
      NODUS_TRY(sendAll(sock_.get(), &one, 1, Clock::now() + kHelloTimeout));
    } else if (handshake_[0] != 1) {
      return makeError(nodusRemoteError, "verbs: %s sent a malformed ready signal", who().c_str());
    }
    ready_ = true;
    if (!sending_)
      for (VerbsRequest& r : requests_)
        if (!r.posted) NODUS_TRY(sendCts(r));
    return Status::ok();
  }

  Status completion(const ibv_wc& wc) {
    const uint64_t kind = wc.wr_id & kWrKindMask;
    const uint32_t low = static_cast<uint32_t>(wc.wr_id & 0xffffffffu);
    if (wc.status != IBV_WC_SUCCESS) {
      if (wc.status == IBV_WC_WR_FLUSH_ERR)
        return makeError(nodusRemoteError, "verbs: the connection with %s on %s was shut down", who().c_str(),
                         dev_->where().c_str());
      return makeError(nodusRemoteError, "verbs: %s with %s on %s failed: %s (status %d, vendor error 0x%x)",
                       kind == kWrWrite ? "an RDMA write" : kind == kWrImmRecv ? "a receive" : "a clear-to-send",
                       who().c_str(), dev_->where().c_str(), ibv().wc_status_str(wc.status), static_cast<int>(wc.status),
                       wc.vendor_err);
    }
    if (kind == kWrCtsSend) return Status::ok();
    if (kind == kWrCtsRecv) {
      if (!sending_ || low >= kMaxInflight) return makeError(nodusInternalError, "verbs: a stray CTS completion");
      Cts cts;
      NODUS_TRY(decodeCts(&ctsBuf_[low * kCtsBytes], wc.byte_len, ctsExpected_, who().c_str(), &cts));
      ++ctsExpected_;
      ctsReady_.push_back(cts);
      return postCtsRecv(low);  // before any write: the receiver may send the next CTS once it completes
    }
    VerbsRequest* r = bySeq(low);
    if (r == nullptr || r->done)
      return makeError(nodusRemoteError, "verbs: a completion from %s for no request in flight", who().c_str());
    if (kind == kWrImmRecv) {
      if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || (wc.wc_flags & IBV_WC_WITH_IMM) == 0)
        return makeError(nodusRemoteError, "verbs: %s sent a message that is not an RDMA write with immediate", who().c_str());
      const uint32_t size = ntohl(wc.imm_data);
      if (size > r->bytes)
        return makeError(nodusRemoteError, "verbs: %s wrote %u bytes into a receive of %zu", who().c_str(), size, r->bytes);
      r->bytes = size;
    }
    r->done = true;
    return Status::ok();
  }

  Status progress() {
    const IbvApi& api = ibv();
    // Edge-triggered like the sockets: consume the channel's events, re-arm,
    // then drain the CQ, so that any completion after the drain raises a new
    // event (and an epoll edge).
    for (;;) {
      ibv_cq* cq = nullptr;
      void* cqContext = nullptr;
      if (api.get_cq_event(channel_, &cq, &cqContext) != 0) break;
      ++unacked_;
      armed_ = false;
    }
    if (unacked_ >= 64) {
      api.ack_cq_events(cq_, unacked_);
      unacked_ = 0;
    }
    if (!armed_) {
      if (int e = ibv_req_notify_cq(cq_, 0); e != 0)
        return makeError(nodusSystemError, "verbs: ibv_req_notify_cq(%s): %s", dev_->name.c_str(), strerror(e));
      armed_ = true;
    }
    ibv_wc wc[16];
    for (;;) {
      const int n = ibv_poll_cq(cq_, 16, wc);
      if (n < 0) return makeError(nodusSystemError, "verbs: ibv_poll_cq(%s) failed", dev_->name.c_str());
      for (int i = 0; i < n; ++i) NODUS_TRY(completion(wc[i]));
      if (n < 16) break;
    }
    if (sending_) {
      for (VerbsRequest& r : requests_) {
        if (r.posted) continue;
        if (ctsReady_.empty()) break;
        NODUS_TRY(postWrite(r, ctsReady_.front()));
        ctsReady_.pop_front();
      }
    }
    return progressSocket();
  }

  void fail(const Status& s) {
    if (!error_.isOk()) return;
    error_ = s;
    shutdownNow();  // the peer sees it at once
  }

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

class VerbsSendComm final : public SendComm {
 public:
  explicit VerbsSendComm(std::shared_ptr<Device> d) : comm(std::move(d), true) {}
  VerbsComm comm;
};
class VerbsRecvComm final : public RecvComm {
 public:
  explicit VerbsRecvComm(std::shared_ptr<Device> d) : comm(std::move(d), false) {}
  int peerRank() const override { return comm.peer(); }
  VerbsComm comm;
};

struct VerbsListener final : Listener {
  Fd fd;
};

bool sameSecret(const uint8_t* a, const uint8_t* b) {
  uint8_t diff = 0;  // constant time
  for (size_t i = 0; i < 16; ++i) diff |= static_cast<uint8_t>(a[i] ^ b[i]);
  return diff == 0;
}

int laneGbps(uint8_t speed) {
  switch (speed) {
    case 1: return 2;  // SDR 2.5
    case 2: return 5;
    case 4: case 8: return 10;
    case 16: return 14;
    case 32: return 25;
    case 64: return 50;
    case 128: return 100;
    default: return 10;
  }
}
int lanes(uint8_t width) { return width == 1 ? 1 : width == 2 ? 4 : width == 4 ? 8 : width == 8 ? 12 : width == 16 ? 2 : 1; }

class VerbsNet final : public Net {
 public:
  VerbsNet(std::shared_ptr<Device> dev, NetInterface side)
      : dev_(std::move(dev)),
        side_(std::move(side)),
        cache_(kRegCacheEntries, static_cast<size_t>(sysconf(_SC_PAGESIZE)),
               [pd = dev_->pd](void* addr, size_t bytes, void** handle) {
                 ibv_mr* mr = ibv().reg_mr(pd, addr, bytes, IBV_ACCESS_LOCAL_WRITE | kRemoteAccess);
                 if (mr == nullptr) return systemError("verbs: ibv_reg_mr(%zu bytes at %p)", bytes, addr);
                 *handle = mr;
                 return Status::ok();
               },
               [](void* handle) { ibv().dereg_mr(static_cast<ibv_mr*>(handle)); }) {}
  ~VerbsNet() override {
    NODUS_TRACE(-1, "verbs: registration cache: %llu hit(s), %llu miss(es), %llu eviction(s)",
                static_cast<unsigned long long>(cache_.hits()), static_cast<unsigned long long>(cache_.misses()),
                static_cast<unsigned long long>(cache_.evictions()));
  }

  const char* name() const override { return "verbs"; }
  int deviceCount() const override { return 1; }
  DeviceProperties device(int) const override {
    DeviceProperties p;
    p.name = dev_->where();
    char text[INET6_ADDRSTRLEN] = {};
    if (dev_->path().linkLayer == kLinkEthernet) inet_ntop(AF_INET6, dev_->gid.gid.data(), text, sizeof(text));
    else snprintf(text, sizeof(text), "LID %u", dev_->attr.lid);
    p.address = text;
    p.speedMbps = laneGbps(dev_->attr.active_speed) * lanes(dev_->attr.active_width) * 1000;
    return p;
  }
  SendReadiness sendReadiness() const override { return SendReadiness::Readable; }

  Status listen(int, Handle* handle, std::unique_ptr<Listener>* out) override {
    auto l = std::make_unique<VerbsListener>();
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr = side_.addr;
    sockaddr_in bound{};
    NODUS_TRY(listenOn(addr, &l->fd, &bound));
    memset(handle, 0, sizeof(*handle));
    memcpy(handle->bytes, &kListenMagic, 4);
    memcpy(handle->bytes + 4, &bound.sin_addr.s_addr, 4);
    memcpy(handle->bytes + 8, &bound.sin_port, 2);
    *out = std::move(l);
    return Status::ok();
  }

  Status connect(int, const Handle& handle, const Identity& self, Clock::time_point deadline,
                 std::unique_ptr<SendComm>* out) override {
    uint32_t magic = 0;
    memcpy(&magic, handle.bytes, 4);
    if (magic != kListenMagic) return makeError(nodusInternalError, "verbs: a peer's connection handle is not a verbs handle");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    memcpy(&addr.sin_addr.s_addr, handle.bytes + 4, 4);
    memcpy(&addr.sin_port, handle.bytes + 8, 2);
    auto c = std::make_unique<VerbsSendComm>(dev_);
    NODUS_TRY(c->comm.create());
    Fd fd;
    Status st = connectTo(addr, deadline, &fd);
    if (!st.isOk()) return Status(st.code(), "verbs: cannot reach the side channel at " + addrText(addr) + ": " + st.message());
    setNoDelay(fd.get());
    Hello h;
    memcpy(h.secret.data(), self.secret.data(), 16);
    h.rank = self.rank;
    h.qp = c->comm.local();
    uint8_t wire[kHelloBytes];
    encodeHello(h, wire);
    NODUS_TRY(sendAll(fd.get(), wire, sizeof(wire), deadline));
    // The reply comes when the peer accepts, which it may do only after its
    // own connects: it is read by the first test (no order of ranks waits on
    // another here).
    c->comm.setSocket(std::move(fd));
    c->comm.awaitReply();
    *out = std::move(c);
    return Status::ok();
  }

  Status accept(Listener& listener, const JobSecret& secret, Clock::time_point deadline,
                std::unique_ptr<RecvComm>* out) override {
    auto& l = static_cast<VerbsListener&>(listener);
    for (;;) {
      Fd fd;
      sockaddr_in from{};
      NODUS_TRY(acceptOne(l.fd.get(), deadline, &fd, &from));
      uint8_t wire[kHelloBytes];
      Hello h;
      Status st = recvAll(fd.get(), wire, sizeof(wire), std::min(deadline, Clock::now() + kHelloTimeout));
      if (st.isOk()) st = decodeHello(wire, sizeof(wire), &h);
      if (st.isOk() && !sameSecret(h.secret.data(), secret.data())) st = makeError(nodusRemoteError, "wrong secret");
      if (!st.isOk()) {
        NODUS_WARN(-1, "verbs: refused a connection from %s: %s", addrText(from).c_str(), st.message().c_str());
        continue;
      }
      setNoDelay(fd.get());
      auto c = std::make_unique<VerbsRecvComm>(dev_);
      c->comm.setPeer(h.rank);
      NODUS_TRY(c->comm.create());
      NODUS_TRY(c->comm.connectTo(h.qp));
      uint8_t reply[kQpInfoBytes];
      encodeQpInfo(c->comm.local(), reply);
      NODUS_TRY(sendAll(fd.get(), reply, sizeof(reply), deadline));
      c->comm.setSocket(std::move(fd));
      c->comm.awaitReady();
      *out = std::move(c);
      return Status::ok();
    }
  }

  Status regMr(void* data, size_t bytes, std::unique_ptr<MemoryRegion>* out) override {
    std::lock_guard<std::mutex> lock(cacheMu_);
    std::shared_ptr<const RegCache::Region> r;
    NODUS_TRY(cache_.get(data, bytes, &r));
    *out = std::make_unique<VerbsMemory>(std::move(r));
    return Status::ok();
  }
  Status isend(SendComm& comm, const void* data, size_t bytes, const MemoryRegion& mr, Request** req) override {
    auto& c = static_cast<VerbsSendComm&>(comm);
    return c.comm.post(static_cast<std::byte*>(const_cast<void*>(data)), bytes, static_cast<const VerbsMemory&>(mr), req);
  }
  Status irecv(RecvComm& comm, void* data, size_t bytes, const MemoryRegion& mr, Request** req) override {
    auto& c = static_cast<VerbsRecvComm&>(comm);
    return c.comm.post(static_cast<std::byte*>(data), bytes, static_cast<const VerbsMemory&>(mr), req);
  }
  Status test(Request* req, bool* done, size_t* bytes) override {
    auto* r = static_cast<VerbsRequest*>(req);
    return r->owner->test(r, done, bytes);
  }
  void eventFds(const SendComm& c, std::vector<int>* fds) const override { static_cast<const VerbsSendComm&>(c).comm.fds(fds); }
  void eventFds(const RecvComm& c, std::vector<int>* fds) const override { static_cast<const VerbsRecvComm&>(c).comm.fds(fds); }
  void shutdown(SendComm& c) override { static_cast<VerbsSendComm&>(c).comm.shutdownNow(); }
  void shutdown(RecvComm& c) override { static_cast<VerbsRecvComm&>(c).comm.shutdownNow(); }

 private:
  std::shared_ptr<Device> dev_;
  NetInterface side_;
  std::mutex cacheMu_;
  RegCache cache_;
};

}  // namespace

Status makeVerbsNet(const NetContext& ctx, std::unique_ptr<Net>* out) {
  std::shared_ptr<Device> dev;
  NODUS_TRY(openDevice(ctx, &dev));
  // The side channel for connection set-up goes where the tcp transport
  // would (NODUS_SOCKET_IFNAME).
  std::vector<NetInterface> ifs;
  NODUS_TRY(selectInterfaces(*ctx.settings, &ifs));
  *out = std::make_unique<VerbsNet>(std::move(dev), ifs.front());
  return Status::ok();
}

bool verbsUsable(const Settings& settings, std::string* why) {
  struct Probe {
    bool usable = false;
    std::string why;
  };
  // Once per process: a documented, immutable-after-init singleton.
  static const Probe probe = [&settings] {
    Probe p;
    const IbvApi* api = nullptr;
    Status s = loadIbv(&api);
    HcaSpec spec;
    if (s.isOk()) s = parseHcaSpec(settings.get(param::kIbHca), &spec);
    DeviceList raw;
    std::vector<DeviceDesc> devices;
    if (s.isOk()) s = describeDevices(*api, &raw, &devices);
    DeviceChoice choice;
    if (s.isOk()) s = chooseDevice(devices, nullptr, -1, spec, &choice);
    p.usable = s.isOk();
    p.why = s.message();
    if (p.why.rfind("verbs: ", 0) == 0) p.why.erase(0, 7);  // the caller names the transport
    return p;
  }();
  if (why) *why = probe.why;
  return probe.usable;
}

}  // namespace nodus::net

namespace nodus {
std::unique_ptr<Transport> makeVerbsTransport() { return makeNetTransport("verbs", net::makeVerbsNet); }
}  // namespace nodus
