#include "transports/net/verbs/verbs_net.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "base/log.h"
#include "base/settings.h"
#include "base/socket.h"
#include "transports/net/net_transport.h"
#include "transports/net/verbs/ibv_loader.h"
#include "transports/net/verbs/qp_setup.h"
#include "transports/net/verbs/reg_cache.h"
#include "transports/net/verbs/verbs_comm.h"
#include "transports/net/verbs/verbs_device.h"
#include "transports/net/verbs/verbs_wire.h"

namespace nodus::net {

using namespace verbs;

namespace {

// Registrations kept (slot rings: two per peer).
constexpr size_t kRegCacheEntries = 1024;
constexpr uint32_t kListenMagic = 0x6e64564c;  // "ndVL"

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
