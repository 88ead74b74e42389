// The verbs net without RDMA hardware: the queue pair state machine, the
// registration cache, the wire formats against truncated and hostile input,
// device / GID / MTU selection from hwloc fixtures, and what happens on a
// host where no device exists (this CI's): a clear status, and tcp instead.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "topo/node.h"
#include "transports/net/verbs/ibv_loader.h"
#include "transports/net/verbs/qp_setup.h"
#include "transports/net/verbs/reg_cache.h"
#include "transports/net/verbs/verbs_net.h"
#include "transports/net/verbs/verbs_wire.h"
#include "transports/registry.h"

namespace nodus::net::verbs {
namespace {

std::string fixture(const char* name) { return std::string(NODUS_TEST_DIR) + "/topo/" + name; }

// ---- Queue pair transitions ------------------------------------------------------

QpInfo remoteRoce() {
  QpInfo q;
  q.qpn = 0x1234;
  q.psn = 0xabcdef;
  q.port = 1;
  q.mtu = IBV_MTU_1024;
  q.linkLayer = kLinkEthernet;
  q.gidIndex = 3;
  q.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 2};
  return q;
}

TEST(VerbsQp, InitTakesPortPkeyAndRemoteWriteOnly) {
  const QpTransition t = qpToInit({2, kLinkInfiniband, IBV_MTU_4096, 0});
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_INIT);
  EXPECT_EQ(t.attr.port_num, 2);
  EXPECT_EQ(t.attr.pkey_index, 0);
  EXPECT_EQ(t.attr.qp_access_flags, static_cast<unsigned>(IBV_ACCESS_REMOTE_WRITE));
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

TEST(VerbsQp, RtrOnRoceUsesTheGidAndTheSmallerMtu) {
  const LocalPath local{1, kLinkEthernet, IBV_MTU_4096, 5};
  const QpTransition t = qpToRtr(local, remoteRoce());
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_RTR);
  EXPECT_EQ(t.attr.path_mtu, IBV_MTU_1024);
  EXPECT_EQ(t.attr.dest_qp_num, 0x1234u);
  EXPECT_EQ(t.attr.rq_psn, 0xabcdefu);
  EXPECT_EQ(t.attr.ah_attr.is_global, 1);
  EXPECT_EQ(t.attr.ah_attr.grh.sgid_index, 5);
  EXPECT_EQ(t.attr.ah_attr.port_num, 1);
  EXPECT_EQ(memcmp(t.attr.ah_attr.grh.dgid.raw, remoteRoce().gid.data(), 16), 0);
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                        IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  // Nothing of a later state leaks in.
  EXPECT_EQ(t.mask & (IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT), 0);
}

TEST(VerbsQp, RtrOnInfinibandRoutesByLid) {
  QpInfo remote = remoteRoce();
  remote.linkLayer = kLinkInfiniband;
  remote.lid = 7;
  remote.mtu = IBV_MTU_4096;
  const QpTransition t = qpToRtr({1, kLinkInfiniband, IBV_MTU_2048, 0}, remote);
  EXPECT_EQ(t.attr.ah_attr.is_global, 0);
  EXPECT_EQ(t.attr.ah_attr.dlid, 7);
  EXPECT_EQ(t.attr.path_mtu, IBV_MTU_2048);
}

TEST(VerbsQp, RtsCarriesOurPsnAndRetryPolicy) {
  const QpTransition t = qpToRts(0x42);
  EXPECT_EQ(t.attr.qp_state, IBV_QPS_RTS);
  EXPECT_EQ(t.attr.sq_psn, 0x42u);
  EXPECT_EQ(t.attr.retry_cnt, kRetryCount);
  EXPECT_EQ(t.attr.rnr_retry, kRnrRetry);
  EXPECT_EQ(t.attr.timeout, kAckTimeout);
  EXPECT_EQ(t.mask, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                        IBV_QP_MAX_QP_RD_ATOMIC);
}

TEST(VerbsQp, PathMtu) {
  EXPECT_EQ(pathMtu(IBV_MTU_4096, IBV_MTU_1024), IBV_MTU_1024);
  EXPECT_EQ(pathMtu(IBV_MTU_256, IBV_MTU_4096), IBV_MTU_256);
  EXPECT_EQ(mtuBytes(IBV_MTU_4096), 4096);
  EXPECT_EQ(mtuBytes(0), 0);
}

// ---- GID choice -----------------------------------------------------------------

GidDesc gid(int index, GidType type, std::array<uint8_t, 16> g) { return {index, g, type}; }
constexpr std::array<uint8_t, 16> kLinkLocal{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8};
constexpr std::array<uint8_t, 16> kV4{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1};
constexpr std::array<uint8_t, 16> kZero{};

TEST(VerbsGid, RoceV2RoutableBeatsV1AndLinkLocal) {
  const std::vector<GidDesc> table = {gid(0, GidType::RoceV1, kLinkLocal), gid(1, GidType::RoceV2, kLinkLocal),
                                      gid(2, GidType::RoceV1, kV4), gid(3, GidType::RoceV2, kV4),
                                      gid(4, GidType::RoceV2, kZero)};
  GidDesc g;
  ASSERT_TRUE(chooseGid(table, kLinkEthernet, -1, "mlx5_0 port 1", &g).isOk());
  EXPECT_EQ(g.index, 3);
  // Without v2 routable: v2 link-local before v1.
  ASSERT_TRUE(chooseGid({table[0], table[1], table[2]}, kLinkEthernet, -1, "mlx5_0 port 1", &g).isOk());
  EXPECT_EQ(g.index, 1);
}

TEST(VerbsGid, ForcedIndexAndItsMistakes) {
  const std::vector<GidDesc> table = {gid(0, GidType::RoceV1, kLinkLocal), gid(1, GidType::RoceV2, kZero)};
  GidDesc g;
  ASSERT_TRUE(chooseGid(table, kLinkEthernet, 0, "mlx5_0 port 1", &g).isOk());
  EXPECT_EQ(g.index, 0);
  Status s = chooseGid(table, kLinkEthernet, 1, "mlx5_0 port 1", &g);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("not set"), std::string::npos) << s.message();
  s = chooseGid(table, kLinkEthernet, 9, "mlx5_0 port 1", &g);
  EXPECT_NE(s.message().find("NODUS_IB_GID_INDEX=9"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("mlx5_0 port 1"), std::string::npos) << s.message();
  s = chooseGid({gid(0, GidType::RoceV2, kZero)}, kLinkEthernet, -1, "mlx5_1 port 1", &g);
  EXPECT_NE(s.message().find("mlx5_1 port 1"), std::string::npos) << s.message();
}

TEST(VerbsGid, InfinibandUsesIndexZero) {
  GidDesc g;
  ASSERT_TRUE(chooseGid({gid(0, GidType::Ib, kLinkLocal), gid(1, GidType::Ib, kV4)}, kLinkInfiniband, -1, "x", &g).isOk());
  EXPECT_EQ(g.index, 0);
}

// ---- Device choice from the topology ---------------------------------------------

std::vector<DeviceDesc> devicesUp(std::vector<std::string> names, std::map<std::string, bool> down = {}) {
  std::vector<DeviceDesc> v;
  for (const std::string& n : names) v.push_back({n, {{1, !down[n], IBV_MTU_4096, kLinkInfiniband}}});
  return v;
}

TEST(VerbsDevice, NearestToTheRanksNumaNode) {
  NodeInfo node;
  ASSERT_TRUE(loadNodeXml(fixture("two-socket-4numa-2nic.xml"), &node).isOk());
  const auto devices = devicesUp({"mlx5_0", "mlx5_1"});
  DeviceChoice c;
  for (auto [numa, want] : std::vector<std::pair<int, const char*>>{{0, "mlx5_0"}, {2, "mlx5_1"}}) {
    ASSERT_TRUE(chooseDevice(devices, &node, numa, {}, &c).isOk());
    EXPECT_EQ(devices[c.device].name, want) << "NUMA " << numa << ": " << c.why;
    EXPECT_EQ(c.port, 1);
  }
  // The near one down: the far one.
  const auto oneDown = devicesUp({"mlx5_0", "mlx5_1"}, {{"mlx5_1", true}});
  ASSERT_TRUE(chooseDevice(oneDown, &node, 2, {}, &c).isOk());
  EXPECT_EQ(oneDown[c.device].name, "mlx5_0");
}

TEST(VerbsDevice, EightAcceleratorsFourNics) {
  NodeInfo node;
  ASSERT_TRUE(loadNodeXml(fixture("eight-accel-4nic.xml"), &node).isOk());
  // libibverbs lists them in another order than the topology.
  const auto devices = devicesUp({"mlx5_3", "mlx5_2", "mlx5_1", "mlx5_0"});
  DeviceChoice c;
  ASSERT_TRUE(chooseDevice(devices, &node, 1, {}, &c).isOk());
  const std::string name = devices[c.device].name;
  EXPECT_TRUE(name == "mlx5_2" || name == "mlx5_3") << name;
  ASSERT_TRUE(chooseDevice(devices, &node, 0, {}, &c).isOk());
  EXPECT_TRUE(devices[c.device].name == "mlx5_0" || devices[c.device].name == "mlx5_1") << devices[c.device].name;
}

TEST(VerbsDevice, ForcedHcaAndPort) {
  std::vector<DeviceDesc> devices = devicesUp({"mlx5_0", "mlx5_1"});
  devices[1].ports.push_back({2, true, IBV_MTU_1024, kLinkEthernet});
  HcaSpec spec;
  ASSERT_TRUE(parseHcaSpec("mlx5_1:2", &spec).isOk());
  DeviceChoice c;
  ASSERT_TRUE(chooseDevice(devices, nullptr, 0, spec, &c).isOk());
  EXPECT_EQ(c.device, 1u);
  EXPECT_EQ(c.port, 2);
  ASSERT_TRUE(parseHcaSpec("mlx5_7", &spec).isOk());
  Status s = chooseDevice(devices, nullptr, 0, spec, &c);
  EXPECT_NE(s.message().find("mlx5_7"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("mlx5_0"), std::string::npos) << s.message();  // lists what exists
  ASSERT_TRUE(parseHcaSpec("mlx5_0:3", &spec).isOk());
  s = chooseDevice(devices, nullptr, 0, spec, &c);
  EXPECT_NE(s.message().find("port 3"), std::string::npos) << s.message();
  for (const char* bad : {"mlx5_0:", "mlx5_0:x", "mlx5_0:0", ":1", "mlx5_0:300"})
    EXPECT_FALSE(parseHcaSpec(bad, &spec).isOk()) << bad;
}

TEST(VerbsDevice, NoneOrNoneActive) {
  DeviceChoice c;
  Status s = chooseDevice({}, nullptr, 0, {}, &c);
  EXPECT_NE(s.message().find("no RDMA device"), std::string::npos) << s.message();
  s = chooseDevice(devicesUp({"mlx5_0"}, {{"mlx5_0", true}}), nullptr, 0, {}, &c);
  EXPECT_NE(s.message().find("no active port"), std::string::npos) << s.message();
}

// ---- Registration cache ----------------------------------------------------------

struct FakeDevice {
  std::map<void*, size_t> live;  // handle -> bytes
  int registered = 0, deregistered = 0;
  bool failNext = false;
  RegCache make(size_t capacity) {
    return RegCache(
        capacity, 4096,
        [this](void* addr, size_t bytes, void** handle) {
          if (failNext) return makeError(nodusSystemError, "fake: refused");
          EXPECT_EQ(reinterpret_cast<uintptr_t>(addr) % 4096, 0u);
          EXPECT_EQ(bytes % 4096, 0u);
          ++registered;
          *handle = addr;
          live[addr] = bytes;
          return Status::ok();
        },
        [this](void* handle) {
          ++deregistered;
          EXPECT_EQ(live.erase(handle), 1u);
        });
  }
};

TEST(VerbsRegCache, HitWhenCoveredMissOtherwise) {
  FakeDevice dev;
  std::vector<std::byte> memory(16 * 4096);
  auto* base = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(memory.data()) + 4095) & ~uintptr_t{4095});
  {
    RegCache cache = dev.make(4);
    std::shared_ptr<const RegCache::Region> a, b, c;
    ASSERT_TRUE(cache.get(base + 100, 3 * 4096, &a).isOk());  // spans 4 pages
    EXPECT_EQ(a->begin, reinterpret_cast<uintptr_t>(base));
    EXPECT_EQ(a->end - a->begin, 4u * 4096);
    ASSERT_TRUE(cache.get(base + 4096, 100, &b).isOk());  // inside: a hit
    EXPECT_EQ(a.get(), b.get());
    ASSERT_TRUE(cache.get(base + 3 * 4096, 2 * 4096, &c).isOk());  // sticks out: a miss
    EXPECT_NE(a.get(), c.get());
    EXPECT_EQ(cache.hits(), 1u);
    EXPECT_EQ(cache.misses(), 2u);
    EXPECT_EQ(dev.registered, 2);
  }
  EXPECT_EQ(dev.deregistered, 2);  // the cache and its holders gone: all deregistered
  EXPECT_TRUE(dev.live.empty());
}

TEST(VerbsRegCache, LeastRecentlyUsedGoesAndHeldRegionsStayRegistered) {
  FakeDevice dev;
  RegCache cache = dev.make(2);
  std::vector<std::byte> memory(8 * 4096);
  auto* base = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(memory.data()) + 4095) & ~uintptr_t{4095});
  std::shared_ptr<const RegCache::Region> r0, r1, r2, held;
  ASSERT_TRUE(cache.get(base, 10, &held).isOk());
  ASSERT_TRUE(cache.get(base + 4096, 10, &r1).isOk());
  r1.reset();
  ASSERT_TRUE(cache.get(base, 10, &r0).isOk());  // page 0 is now the most recent
  r0.reset();
  ASSERT_TRUE(cache.get(base + 2 * 4096, 10, &r2).isOk());  // evicts page 1
  r2.reset();
  EXPECT_EQ(cache.evictions(), 1u);
  EXPECT_EQ(dev.deregistered, 1);
  EXPECT_EQ(cache.size(), 2u);
  ASSERT_TRUE(cache.get(base, 10, &r0).isOk());
  EXPECT_EQ(cache.hits(), 2u);
  // Page 0 evicted while held: it stays registered until let go.
  ASSERT_TRUE(cache.get(base + 3 * 4096, 10, &r1).isOk());
  r1.reset();
  ASSERT_TRUE(cache.get(base + 4 * 4096, 10, &r2).isOk());
  r2.reset();
  r0.reset();
  EXPECT_EQ(dev.live.count(base), 1u);
  held.reset();
  EXPECT_EQ(dev.live.count(base), 0u);
}

TEST(VerbsRegCache, FailedRegistrationAndInvalidate) {
  FakeDevice dev;
  RegCache cache = dev.make(4);
  std::vector<std::byte> memory(2 * 4096);
  std::shared_ptr<const RegCache::Region> r;
  dev.failNext = true;
  Status s = cache.get(memory.data(), 10, &r);
  EXPECT_FALSE(s.isOk());
  EXPECT_EQ(cache.size(), 0u);
  dev.failNext = false;
  ASSERT_TRUE(cache.get(memory.data(), 10, &r).isOk());
  r.reset();
  cache.invalidate(memory.data(), 1);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(dev.deregistered, 1);
  EXPECT_FALSE(cache.get(reinterpret_cast<void*>(UINTPTR_MAX - 10), 100, &r).isOk());  // wraps
}

// ---- Wire formats ----------------------------------------------------------------

TEST(VerbsWire, QpInfoRoundTripAndRejects) {
  const QpInfo q = remoteRoce();
  uint8_t wire[kQpInfoBytes];
  encodeQpInfo(q, wire);
  QpInfo back;
  ASSERT_TRUE(decodeQpInfo(wire, sizeof(wire), "rank 1", &back).isOk());
  EXPECT_EQ(back.qpn, q.qpn);
  EXPECT_EQ(back.psn, q.psn);
  EXPECT_EQ(back.mtu, q.mtu);
  EXPECT_EQ(back.port, q.port);
  EXPECT_EQ(back.gidIndex, q.gidIndex);
  EXPECT_EQ(back.gid, q.gid);
  // Truncated, and every single corrupted field.
  EXPECT_FALSE(decodeQpInfo(wire, sizeof(wire) - 1, "rank 1", &back).isOk());
  EXPECT_FALSE(decodeQpInfo(nullptr, sizeof(wire), "rank 1", &back).isOk());
  auto corrupt = [&](auto edit) {
    QpInfo bad = q;
    edit(bad);
    uint8_t w[kQpInfoBytes];
    encodeQpInfo(bad, w);
    Status s = decodeQpInfo(w, sizeof(w), "rank 1", &back);
    EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.message();
    return s.isOk();
  };
  EXPECT_FALSE(corrupt([](QpInfo& b) { b.qpn = 0; }));
  EXPECT_FALSE(corrupt([](QpInfo& b) { b.qpn = 1u << 24; }));
  EXPECT_FALSE(corrupt([](QpInfo& b) { b.psn = 1u << 24; }));
  EXPECT_FALSE(corrupt([](QpInfo& b) { b.port = 0; }));
  EXPECT_FALSE(corrupt([](QpInfo& b) { b.mtu = 6; }));
  EXPECT_FALSE(corrupt([](QpInfo& b) { b.linkLayer = 9; }));
  EXPECT_FALSE(corrupt([](QpInfo& b) { b.gid = {}; }));  // RoCE without a GID
  EXPECT_FALSE(corrupt([](QpInfo& b) { b.linkLayer = kLinkInfiniband, b.lid = 0, b.gid = {}; }));
  wire[0] ^= 1;  // magic
  EXPECT_FALSE(decodeQpInfo(wire, sizeof(wire), "rank 1", &back).isOk());
}

TEST(VerbsWire, HelloRoundTripAndGarbage) {
  Hello h;
  for (size_t i = 0; i < 16; ++i) h.secret[i] = static_cast<uint8_t>(i * 7);
  h.rank = 5;
  h.qp = remoteRoce();
  uint8_t wire[kHelloBytes];
  encodeHello(h, wire);
  Hello back;
  ASSERT_TRUE(decodeHello(wire, sizeof(wire), &back).isOk());
  EXPECT_EQ(back.rank, 5);
  EXPECT_EQ(back.secret, h.secret);
  EXPECT_EQ(back.qp.qpn, h.qp.qpn);
  EXPECT_FALSE(decodeHello(wire, 10, &back).isOk());
  uint8_t garbage[kHelloBytes];
  for (size_t i = 0; i < sizeof(garbage); ++i) garbage[i] = static_cast<uint8_t>(i * 37 + 11);
  EXPECT_FALSE(decodeHello(garbage, sizeof(garbage), &back).isOk());
  h.rank = -3;
  encodeHello(h, wire);
  EXPECT_FALSE(decodeHello(wire, sizeof(wire), &back).isOk());
  h.rank = 5;
  encodeHello(h, wire);
  wire[4] = 9;  // version
  EXPECT_FALSE(decodeHello(wire, sizeof(wire), &back).isOk());
}

TEST(VerbsWire, CtsRoundTripOrderAndHostileBuffers) {
  Cts c;
  c.seq = 17;
  c.rkey = 0xdeadbeef;
  c.addr = 0x7f0000001000;
  c.capacity = 131072;
  uint8_t wire[kCtsBytes];
  encodeCts(c, wire);
  Cts back;
  ASSERT_TRUE(decodeCts(wire, sizeof(wire), 17, "rank 2", &back).isOk());
  EXPECT_EQ(back.seq, 17u);
  EXPECT_EQ(back.rkey, 0xdeadbeefu);
  EXPECT_EQ(back.addr, 0x7f0000001000u);
  EXPECT_EQ(back.capacity, 131072u);
  Status s = decodeCts(wire, sizeof(wire), 18, "rank 2", &back);  // replayed / out of order
  EXPECT_NE(s.message().find("rank 2"), std::string::npos) << s.message();
  EXPECT_FALSE(decodeCts(wire, sizeof(wire) - 1, 17, "rank 2", &back).isOk());
  c.addr = 0;
  encodeCts(c, wire);
  EXPECT_FALSE(decodeCts(wire, sizeof(wire), 17, "rank 2", &back).isOk());
  c.addr = UINT64_MAX - 10;
  encodeCts(c, wire);
  EXPECT_FALSE(decodeCts(wire, sizeof(wire), 17, "rank 2", &back).isOk());
  uint8_t zeros[kCtsBytes] = {};
  EXPECT_FALSE(decodeCts(zeros, sizeof(zeros), 0, "rank 2", &back).isOk());
}

// ---- This machine: no RDMA ---------------------------------------------------------

bool HostHasRdma() {
  std::string why;
  return verbsUsable(Settings(), &why);
}

TEST(VerbsAbsent, MakingTheNetSaysWhy) {
  if (HostHasRdma()) GTEST_SKIP() << "this host has an RDMA device";
  std::unique_ptr<Net> net;
  NetContext ctx;
  const Settings settings;
  ctx.settings = &settings;
  Status s = makeVerbsNet(ctx, &net);
  ASSERT_FALSE(s.isOk());
  EXPECT_EQ(net, nullptr);
  const bool clear = s.message().find("no RDMA device") != std::string::npos ||
                     s.message().find("libibverbs") != std::string::npos;
  EXPECT_TRUE(clear) << s.message();
  std::string why;
  EXPECT_FALSE(verbsUsable(Settings(), &why));
  EXPECT_FALSE(why.empty());
}

TEST(VerbsAbsent, RegistryHasVerbsBeforeTcpForOtherHosts) {
  const auto table = transportTable();
  int verbs = -1, tcp = -1;
  for (size_t t = 0; t < table.size(); ++t) {
    if (std::string(table[t].name) == "verbs") verbs = static_cast<int>(t);
    if (std::string(table[t].name) == "tcp") tcp = static_cast<int>(t);
  }
  ASSERT_GE(verbs, 0);
  ASSERT_GT(tcp, verbs);
  PeerPlacement other, same;
  same.sameHost = true;
  EXPECT_TRUE(table[static_cast<size_t>(verbs)].reaches(other));
  EXPECT_FALSE(table[static_cast<size_t>(verbs)].reaches(same));
  ASSERT_NE(table[static_cast<size_t>(verbs)].usable, nullptr);
  EXPECT_EQ(table[static_cast<size_t>(tcp)].usable, nullptr);
}

}  // namespace
}  // namespace nodus::net::verbs
