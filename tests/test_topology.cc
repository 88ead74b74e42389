// The topology layer: hwloc fixtures, fabric files (good and each kind of
// mistake), host placement, hop distances, NODUS_ALGO rules and the tuner's
// choices on given fabrics.
#include <gtest/gtest.h>

#include <cmath>
#include <chrono>
#include <memory>
#include <thread>
#include <functional>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "base/bootstrap.h"
#include "core/comm.h"
#include "algorithms/ring.h"
#include "topo/binding.h"
#include "topo/fabric.h"
#include "topo/node.h"
#include "topo/topology.h"
#include "tune/tuner.h"

using namespace nodus;

namespace {

std::string fixture(const char* name) { return std::string(NODUS_TEST_DIR) + "/topo/" + name; }

FabricConfig parseOk(const std::string& yaml) {
  FabricConfig f;
  Status s = parseFabric(yaml, "test.yaml", &f);
  EXPECT_TRUE(s.isOk()) << s.message();
  return f;
}

// The error message for a bad file, which must name the file.
std::string parseError(const std::string& yaml) {
  FabricConfig f;
  Status s = parseFabric(yaml, "bad.yaml", &f);
  EXPECT_FALSE(s.isOk()) << "accepted:\n" << yaml;
  EXPECT_EQ(s.code(), nodusInvalidArgument);
  EXPECT_NE(s.message().find("bad.yaml:"), std::string::npos) << s.message();
  return s.message();
}

FabricConfig torusDims(const std::string& dims) {
  std::string list = dims;
  for (char& c : list)
    if (c == 'x') c = ',';
  return parseOk("fabric: torus\ndims: [" + list + "]\n");
}

Topology build(const FabricConfig& f, int hosts, int local, const std::vector<std::string>& names = {}) {
  std::vector<std::string> hostOfRank;
  std::vector<int> numa;
  for (int h = 0; h < hosts; ++h)
    for (int l = 0; l < local; ++l) {
      hostOfRank.push_back(names.empty() ? "h" + std::to_string(h) : names[static_cast<size_t>(h)]);
      numa.push_back(0);
    }
  Topology t;
  Status s = Topology::build(f, hostOfRank, numa, &t);
  EXPECT_TRUE(s.isOk()) << s.message();
  return t;
}

Choice choice(const Topology& t, Collective coll, uint64_t bytes, const std::string& algo = "", bool forceSlice = false) {
  PlanContext ctx;
  ctx.sliceBytes = 128 << 10;
  ctx.slots = 8;
  ctx.roundSlices = 4;  // the runtime's default: half the slots
  ctx.directMaxBytes = 64 << 10;
  ctx.topo = &t;
  ctx.sliceForced = forceSlice;
  AlgoSpec spec;
  EXPECT_TRUE(AlgoSpec::parse(algo, &spec).isOk());
  const uint64_t perRank = (coll == Collective::AllGather || coll == Collective::ReduceScatter) ? bytes / t.nranks : bytes;
  Choice c;
  Status s = chooseAlgorithm(PlanKey{coll, t.nranks, 0, perRank / 4, 4, 0, false}, ctx, spec, &c);
  EXPECT_TRUE(s.isOk()) << s.message();
  return c;
}

const char* pick(const Topology& t, Collective coll, uint64_t bytes, const std::string& algo = "") {
  const Choice c = choice(t, coll, bytes, algo);
  return c.algo ? c.algo->name : "";
}

}  // namespace

// ---- Node (hwloc) ----------------------------------------------------------------

TEST(Node, TwoSocketFourNumaTwoNics) {
  NodeInfo n;
  ASSERT_TRUE(loadNodeXml(fixture("two-socket-4numa-2nic.xml"), &n).isOk());
  EXPECT_EQ(n.packages, 2);
  EXPECT_EQ(n.numa.size(), 4u);
  EXPECT_EQ(n.cores, 32);
  EXPECT_EQ(n.pus, 64);
  for (const NumaInfo& m : n.numa) EXPECT_EQ(m.cores, 8);
  // ib0 and mlx5_0 are one adapter: one NIC, known by its RDMA name.
  ASSERT_EQ(n.nics.size(), 2u);
  EXPECT_EQ(n.nics[0].name, "mlx5_0");
  EXPECT_TRUE(n.nics[0].rdma);
  EXPECT_EQ(n.nics[0].numa, 0);
  EXPECT_EQ(n.nics[1].name, "mlx5_1");
  EXPECT_EQ(n.nics[1].numa, 2);
  // A rank on NUMA 3 (package 1) gets the NIC on its own package's NUMA 2
  // before the far one; on NUMA 0, mlx5_0.
  EXPECT_EQ(n.nicsNear(2)[0]->name, "mlx5_1");
  EXPECT_EQ(n.nicsNear(0)[0]->name, "mlx5_0");
  // PUs map to their NUMA node.
  EXPECT_EQ(n.numaOfCpu(n.numa[3].pus.front()), 3);
}

TEST(Node, EightAcceleratorsFourNics) {
  NodeInfo n;
  ASSERT_TRUE(loadNodeXml(fixture("eight-accel-4nic.xml"), &n).isOk());
  EXPECT_EQ(n.numa.size(), 2u);
  EXPECT_EQ(n.accelerators, 8);
  ASSERT_EQ(n.nics.size(), 4u);
  int near0 = 0;
  for (const NicInfo& nic : n.nics) {
    EXPECT_TRUE(nic.rdma);
    near0 += nic.numa == 0;
  }
  EXPECT_EQ(near0, 2);
  EXPECT_EQ(n.nicsNear(1)[0]->numa, 1);
}

TEST(Node, OneCoreVm) {
  NodeInfo n;
  ASSERT_TRUE(loadNodeXml(fixture("one-core-vm.xml"), &n).isOk());
  EXPECT_EQ(n.cores, 1);
  EXPECT_EQ(n.numa.size(), 1u);
  ASSERT_EQ(n.nics.size(), 1u);
  EXPECT_EQ(n.nics[0].name, "eth0");
  EXPECT_FALSE(n.nics[0].rdma);
}

TEST(Node, ThisMachineAndMissingXml) {
  NodeInfo n;
  ASSERT_TRUE(detectNode(&n).isOk());
  EXPECT_GE(n.cores, 1);
  EXPECT_GE(n.numa.size(), 1u);
  Status s = loadNodeXml("/nonexistent/topo.xml", &n);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("/nonexistent/topo.xml"), std::string::npos) << s.message();
}

// ---- Binding ---------------------------------------------------------------------

// The NUMA nodes a set of PUs touches.
std::set<int> numasOf(const NodeInfo& n, const std::vector<int>& pus) {
  std::set<int> out;
  for (int pu : pus) out.insert(n.numaOfCpu(pu));
  return out;
}

TEST(Binding, CoreSharesAreDisjointEvenAndNumaLocal) {
  NodeInfo n;
  ASSERT_TRUE(loadNodeXml(fixture("two-socket-4numa-2nic.xml"), &n).isOk());
  ASSERT_EQ(n.corePus.size(), 32u);
  for (int count : {1, 2, 3, 4, 5, 8, 32}) {
    std::set<int> seen;
    size_t smallest = SIZE_MAX, largest = 0;
    for (int i = 0; i < count; ++i) {
      const std::vector<int> share = bindingShare(n, BindMode::Core, i, count);
      ASSERT_FALSE(share.empty()) << count;
      // Whole cores: both hardware threads of each (2 PUs a core here).
      EXPECT_EQ(share.size() % 2, 0u) << count << " " << i;
      smallest = std::min(smallest, share.size());
      largest = std::max(largest, share.size());
      for (int pu : share) EXPECT_TRUE(seen.insert(pu).second) << "PU " << pu << " in two shares";
      // 4 processes: one NUMA node each; 8 or 32: inside one.
      if (count == 4 || count == 8 || count == 32) {
        EXPECT_EQ(numasOf(n, share).size(), 1u) << count << " " << i;
      }
      if (count == 4) {
        EXPECT_EQ(*numasOf(n, share).begin(), i);
      }
    }
    EXPECT_EQ(seen.size(), 64u) << "every PU in some share";
    EXPECT_LE(largest - smallest, 2u) << "shares differ by at most a core";
  }
  // Auto shares like Core.
  EXPECT_EQ(bindingShare(n, BindMode::Auto, 1, 4), bindingShare(n, BindMode::Core, 1, 4));
  // More processes than cores, or none at all: no share.
  EXPECT_TRUE(bindingShare(n, BindMode::Core, 0, 33).empty());
  EXPECT_TRUE(bindingShare(n, BindMode::None, 0, 2).empty());
  EXPECT_TRUE(bindingShare(n, BindMode::Core, 2, 2).empty());
}

TEST(Binding, NumaSharesAndOneCore) {
  NodeInfo n;
  ASSERT_TRUE(loadNodeXml(fixture("two-socket-4numa-2nic.xml"), &n).isOk());
  for (int i = 0; i < 8; ++i) {
    const std::vector<int> share = bindingShare(n, BindMode::Numa, i, 8);
    EXPECT_EQ(share, n.numa[static_cast<size_t>(i / 2)].pus) << i;  // two processes a node
  }
  EXPECT_EQ(bindingShare(n, BindMode::Numa, 0, 1).size(), n.numa[0].pus.size());
  NodeInfo vm;
  ASSERT_TRUE(loadNodeXml(fixture("one-core-vm.xml"), &vm).isOk());
  EXPECT_EQ(bindingShare(vm, BindMode::Core, 0, 1).size(), vm.corePus[0].size());
  EXPECT_TRUE(bindingShare(vm, BindMode::Core, 0, 2).empty());
}

TEST(Binding, ModesAndMasks) {
  BindMode m = BindMode::None;
  EXPECT_TRUE(parseBindMode("", &m).isOk());
  EXPECT_EQ(m, BindMode::Auto);
  for (const char* name : {"none", "auto", "core", "numa"}) {
    ASSERT_TRUE(parseBindMode(name, &m).isOk()) << name;
    EXPECT_STREQ(bindModeName(m), name);
  }
  Status s = parseBindMode("socket", &m);
  EXPECT_EQ(s.code(), nodusInvalidArgument);
  EXPECT_NE(s.message().find("NODUS_BIND=socket"), std::string::npos) << s.message();
  CpuMask a = maskOf({0, 1, 2, 3, 8, 1023, 5000});
  EXPECT_EQ(a.count(), 6);
  EXPECT_EQ(a.describe(), "0-3,8,1023");
  CpuMask b = maskOf({4});
  b |= a;
  EXPECT_EQ(b.describe(), "0-4,8,1023");
  EXPECT_FALSE(a == b);
  EXPECT_EQ(CpuMask().describe(), "none");
  EXPECT_GE(currentCpus().count(), 1);
}

// ---- Fabric files --------------------------------------------------------------------

TEST(Fabric, TorusFile) {
  FabricConfig f = parseOk(
      "fabric: torus\n"
      "dims: [4, 3, 2]\n"
      "wrap: [true, true, false]\n"
      "link: {bandwidth: 200Gb/s, latency: 500ns}\n");
  EXPECT_EQ(f.kind, FabricKind::Torus);
  EXPECT_EQ(f.dims, (std::vector<int>{4, 3, 2}));
  EXPECT_EQ(f.wrap, (std::vector<bool>{true, true, false}));
  EXPECT_DOUBLE_EQ(f.link.bandwidthGBs, 25.0);
  EXPECT_DOUBLE_EQ(f.link.latencyUs, 0.5);
  EXPECT_EQ(f.capacity(), 24u);
}

TEST(Fabric, FatTreeFileWithNamedHosts) {
  FabricConfig f = parseOk(
      "# two leaves of two hosts\n"
      "fabric: fat-tree\n"
      "radix: [2, 2]\n"
      "oversubscription: [4, 1]\n"
      "hosts:\n"
      "  - {name: a, leaf: 1}\n"
      "  - {name: b, leaf: 0}\n"
      "  - {name: c, leaf: 1}\n");
  EXPECT_EQ(f.kind, FabricKind::FatTree);
  EXPECT_EQ(f.radix, (std::vector<int>{2, 2}));
  EXPECT_DOUBLE_EQ(f.oversubscription[0], 4.0);
  std::vector<HostCoord> c;
  ASSERT_TRUE(placeHosts(f, {"b", "c", "a"}, &c).isOk());
  EXPECT_EQ(c[0][0], 0);
  EXPECT_EQ(c[1][0], 1);
  EXPECT_EQ(c[2][0], 1);
  Status s = placeHosts(f, {"b", "zz"}, &c);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("'zz' is not listed"), std::string::npos) << s.message();
}

TEST(Fabric, EveryKindOfMistakeNamesLineAndField) {
  struct Bad {
    const char* yaml;
    const char* expect;  // in the message
  } cases[] = {
      {"fabric: hypercube\n", ":1: field 'fabric': unknown fabric 'hypercube'"},
      {"fabric: torus\n", "field 'dims': missing"},
      {"fabric: torus\ndims: [4, 0]\n", ":2: field 'dims': must be at least 1"},
      {"fabric: torus\ndims: [4, x]\n", ":2: field 'dims': expected a whole number"},
      {"fabric: torus\ndims: [2, 2, 2, 2]\n", "expected a list of 1 to 3 sizes"},
      {"fabric: torus\ndims: [4]\ndim: [4]\n", ":3: field 'dim': unknown field"},
      {"fabric: torus\ndims: [4]\nwrap: [true, false]\n", ":3: field 'wrap': expected true/false or one per dimension"},
      {"fabric: torus\ndims: [4]\nlink: {bandwidth: fast}\n", ":3: field 'link.bandwidth'"},
      {"fabric: torus\ndims: [4]\nlink: {bandwidth: 10 furlongs}\n", "unknown bandwidth unit 'furlongs'"},
      {"fabric: torus\ndims: [4]\nlink: {latency: 3 fortnights}\n", "unknown latency unit"},
      {"fabric: torus\ndims: [2, 2]\nhosts:\n  - {name: a, coord: [0, 2]}\n", ":4: field 'hosts[0].coord': coordinate 2 is outside 0..1"},
      {"fabric: torus\ndims: [2, 2]\nhosts:\n  - {name: a, coord: [0, 1]}\n  - {name: b, coord: [0, 1]}\n",
       ":5: field 'hosts[1].coord': the same coordinates as hosts[0] ('a')"},
      {"fabric: torus\ndims: [2, 2]\nhosts:\n  - {name: a, coord: [0]}\n", "field 'hosts[0].coord': expected 2 coordinates"},
      {"fabric: torus\ndims: [2]\nhosts:\n  - {name: a, coord: [0]}\n  - {name: a, coord: [1]}\n", "host 'a' is listed twice"},
      {"fabric: torus\ndims: [2]\nhosts: {pattern: 'n(\\d+)-(\\d+)'}\n", "has 2 capture groups; the fabric needs 1"},
      {"fabric: torus\ndims: [2]\nhosts: {pattern: 'n(\\d+'}\n", "is not a regular expression"},
      {"fabric: torus\ndims: [2]\nradix: [2]\n", ":3: field 'radix': applies to a fat-tree only"},
      {"fabric: fat-tree\n", "field 'radix': missing"},
      {"fabric: fat-tree\nradix: [2]\nhosts:\n  - {name: a, leaf: 0}\n  - {name: b, leaf: 0}\n  - {name: c, leaf: 0}\n",
       ":6: field 'hosts[2].leaf': leaf 0 has more hosts than its radix 2"},
      {"fabric: fat-tree\nradix: [2, 2]\noversubscription: [0.5, 1]\n", "field 'oversubscription': must be at least 1"},
      {"fabric: flat\nhosts: in-order\n", "a flat fabric places no hosts"},
      {"fabric: torus\ndims: [2\n", "bad.yaml:"},  // YAML syntax error, still located
      {"- just\n- a list\n", "expected a map of fields"},
  };
  for (const Bad& b : cases) {
    const std::string msg = parseError(b.yaml);
    EXPECT_NE(msg.find(b.expect), std::string::npos) << "for:\n" << b.yaml << "got: " << msg;
  }
}

TEST(Fabric, FileThatCannotBeReadIsNamed) {
  FabricConfig f;
  Status s = loadFabricFile("/nonexistent/fabric.yaml", &f);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("/nonexistent/fabric.yaml"), std::string::npos) << s.message();
}

TEST(Fabric, Environment) {
  setenv("NODUS_TORUS_DIMS", "4x4x2", 1);
  FabricConfig f;
  ASSERT_TRUE(fabricFromEnvironment(&f).isOk());
  EXPECT_EQ(f.kind, FabricKind::Torus);
  EXPECT_EQ(f.dims, (std::vector<int>{4, 4, 2}));
  setenv("NODUS_TORUS_DIMS", "4x-1", 1);
  EXPECT_FALSE(fabricFromEnvironment(&f).isOk());
  unsetenv("NODUS_TORUS_DIMS");
  setenv("NODUS_FATTREE", "16x8:4x1", 1);
  ASSERT_TRUE(fabricFromEnvironment(&f).isOk());
  EXPECT_EQ(f.kind, FabricKind::FatTree);
  EXPECT_EQ(f.radix, (std::vector<int>{16, 8}));
  EXPECT_DOUBLE_EQ(f.oversubscription[0], 4.0);
  setenv("NODUS_FATTREE", "16x8:4", 1);
  EXPECT_FALSE(fabricFromEnvironment(&f).isOk());
  unsetenv("NODUS_FATTREE");
  ASSERT_TRUE(fabricFromEnvironment(&f).isOk());
  EXPECT_EQ(f.kind, FabricKind::Flat);
}

// ---- Placement -------------------------------------------------------------------------

TEST(Placement, RowMajorPatternAndTooManyHosts) {
  FabricConfig t = parseOk("fabric: torus\ndims: [3, 2]\n");
  std::vector<HostCoord> c;
  ASSERT_TRUE(placeHosts(t, {"a", "b", "c", "d"}, &c).isOk());
  EXPECT_EQ(c[1], (HostCoord{1, 0, 0}));
  EXPECT_EQ(c[3], (HostCoord{0, 1, 0}));
  Status s = placeHosts(t, std::vector<std::string>(7, "x"), &c);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("7 hosts do not fit"), std::string::npos) << s.message();

  FabricConfig p = parseOk("fabric: torus\ndims: [3, 2]\nhosts: {pattern: 'node-(\\d+)-(\\d+)'}\n");
  ASSERT_TRUE(placeHosts(p, {"node-2-1", "node-0-0"}, &c).isOk());
  EXPECT_EQ(c[0], (HostCoord{2, 1, 0}));
  EXPECT_EQ(c[1], (HostCoord{0, 0, 0}));
  EXPECT_FALSE(placeHosts(p, {"node-3-0"}, &c).isOk());         // outside the torus
  EXPECT_FALSE(placeHosts(p, {"node-1-1", "node-1-1x"}, &c).isOk());  // no match
  s = placeHosts(p, {"node-1-1", "node-01-1"}, &c);               // duplicate place
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("the same coordinates"), std::string::npos) << s.message();
}

TEST(Placement, RingFollowsTheFabricAndNuma) {
  // 2x2 torus, hosts in rank order: the ring snakes (0,0) (1,0) (1,1) (0,1).
  const Topology t = build(parseOk("fabric: torus\ndims: [2, 2]\n"), 4, 1);
  EXPECT_EQ(t.ringOrder, (std::vector<int>{0, 1, 3, 2}));
  EXPECT_EQ(t.hops(0, 3), 2);
  EXPECT_EQ(t.hops(0, 1), 1);
  // Fat-tree: hosts grouped by leaf whatever the rank order.
  const Topology f = build(parseOk("fabric: fat-tree\nradix: [2, 2]\nhosts:\n  - {name: a, leaf: 1}\n  - {name: b, leaf: 0}\n"
                                   "  - {name: c, leaf: 1}\n  - {name: d, leaf: 0}\n"),
                           4, 1, {"a", "b", "c", "d"});
  EXPECT_EQ(f.ringOrder, (std::vector<int>{1, 3, 0, 2}));
  EXPECT_EQ(f.hops(1, 3), 2);
  EXPECT_EQ(f.hops(0, 1), 4);
  // Inside a host, ranks on one NUMA node are neighbours.
  Topology n;
  ASSERT_TRUE(Topology::build(FabricConfig{}, {"x", "x", "x", "x"}, {1, 0, 1, 0}, &n).isOk());
  EXPECT_EQ(n.ringOrder, (std::vector<int>{1, 3, 0, 2}));
  // A 3x3x3 torus with two ranks per host is a 2x3x3x3 rank grid.
  const Topology g = build(torusDims("3x3x3"), 27, 2);
  RankGrid grid;
  ASSERT_TRUE(g.rankGrid(&grid));
  EXPECT_EQ(grid.dims, (std::vector<int>{2, 3, 3, 3}));
  EXPECT_EQ(grid.size(), 54);
}

// ---- NODUS_ALGO ------------------------------------------------------------------------

TEST(AlgoSpec, RulesPerCollectiveAndSize) {
  AlgoSpec s;
  ASSERT_TRUE(AlgoSpec::parse("allreduce:0-64K:tree,64K-:ring;allgather:halving-doubling;ring", &s).isOk());
  const PlanKey small{Collective::AllReduce, 4, 0, 1000, 4, 0, false};    // 4000 B
  const PlanKey large{Collective::AllReduce, 4, 0, 100000, 4, 0, false};  // 400 KB
  const PlanKey gather{Collective::AllGather, 4, 0, 10, 4, 0, false};
  const PlanKey scatter{Collective::ReduceScatter, 4, 0, 10, 4, 0, false};
  EXPECT_STREQ(s.forcedFor(small)->name, "tree");
  EXPECT_STREQ(s.forcedFor(large)->name, "ring");
  EXPECT_STREQ(s.forcedFor(gather)->name, "halving-doubling");
  EXPECT_STREQ(s.forcedFor(scatter)->name, "ring");  // the catch-all rule
  AlgoSpec none;
  ASSERT_TRUE(AlgoSpec::parse("", &none).isOk());
  EXPECT_EQ(none.forcedFor(small), nullptr);
  for (const char* bad : {"allreduce:0-64K:nosuch", "allreduce:64K-0:ring", "allreduce:1x-:ring", "allreduce:ring,tree:x"}) {
    Status st = AlgoSpec::parse(bad, &s);
    EXPECT_FALSE(st.isOk()) << bad;
    EXPECT_NE(st.message().find("NODUS_ALGO"), std::string::npos) << st.message();
  }
}

// ---- The tuner on given fabrics -----------------------------------------------------------

// The algorithms build, the tuner prices (src/tune/costs/): every registered
// algorithm has exactly one formula and every formula prices a registered
// algorithm, so a new algorithm without its formula fails here rather than
// never being picked.
TEST(Tuner, EveryAlgorithmHasOneCostFormula) {
  for (const Algorithm* a : algorithms()) {
    int n = 0;
    for (const CostFormula* f : costFormulas()) n += f->algo == a;
    EXPECT_EQ(n, 1) << a->name;
    ASSERT_NE(costFormulaFor(a), nullptr) << a->name;
  }
  for (const CostFormula* f : costFormulas()) {
    ASSERT_NE(f->algo, nullptr);
    EXPECT_EQ(findAlgorithm(f->algo->name), f->algo) << f->algo->name;
  }
  // Priced, the ring costs something finite and grows with the data.
  PlanContext ctx;
  ctx.sliceBytes = 128 << 10;
  const CostModel m = CostModel::of(ctx);
  const double small = predictUs(kRingAlgorithm, PlanKey{Collective::AllReduce, 4, 0, 1024, 4, 0, false}, ctx, m);
  const double large = predictUs(kRingAlgorithm, PlanKey{Collective::AllReduce, 4, 0, 1 << 20, 4, 0, false}, ctx, m);
  EXPECT_GT(small, 0);
  EXPECT_GT(large, small);
}

TEST(Tuner, TorusWinsLargeAndLogStepAlgorithmsSmallOn8x8x8) {
  const Topology t = build(torusDims("8x8x8"), 512, 1);
  EXPECT_STREQ(pick(t, Collective::AllReduce, 256 << 20), "torus");
  EXPECT_STREQ(pick(t, Collective::AllReduce, 32 << 20), "torus");
  const std::string small = pick(t, Collective::AllReduce, 8);
  EXPECT_TRUE(small == "tree" || small == "halving-doubling") << small;
  EXPECT_STREQ(pick(t, Collective::Broadcast, 8), "tree");
  // Forcing still wins over the model.
  EXPECT_STREQ(pick(t, Collective::AllReduce, 256 << 20, "ring"), "ring");
}

// Exchanges between partners several torus hops apart share links:
// halving-doubling's partners 2 and 4 hops away along an 8-ring put 2 and 4
// flows on a link (routed the short way, + on a tie). nodus-sim, 8x8x8,
// halving-doubling AllReduce of 2 MiB-1 GiB: the tuner was -33% to -40%
// without this, within 1% with it.
TEST(Tuner, TorusExchangesShareTheLinksOnTheirWay) {
  const Topology t = build(torusDims("8x8x8"), 512, 1);
  const auto xorFlows = [&](int mask) {
    std::vector<std::pair<int, int>> f;
    for (int q = 0; q < t.nranks; ++q) f.emplace_back(t.hostOf[q], t.hostOf[q ^ mask]);
    return f;
  };
  EXPECT_EQ(t.maxLinkLoad(xorFlows(1)), 1);   // neighbours, opposite directions
  EXPECT_EQ(t.maxLinkLoad(xorFlows(2)), 2);   // 0->2 and 1->3 both cross 1->2
  EXPECT_EQ(t.maxLinkLoad(xorFlows(4)), 4);   // half-way round: every flow goes +
  EXPECT_EQ(t.maxLinkLoad(xorFlows(8)), 1);   // y neighbours
  EXPECT_EQ(t.maxLinkLoad(xorFlows(32)), 4);  // z, half-way round
  EXPECT_EQ(t.maxLinkLoad({}), 1);
  // A mesh dimension does not wrap: 0 -> 3 crosses 1 -> 2 on the way, as 1 -> 2 does.
  const Topology m = build(parseOk("fabric: torus\ndims: [4]\nwrap: [false]\n"), 4, 1);
  EXPECT_EQ(m.maxLinkLoad({{0, 3}, {1, 2}}), 2);
  EXPECT_EQ(m.maxLinkLoad({{0, 3}, {3, 0}}), 1);
  // The model prices an exchange at its busiest link.
  PlanContext ctx;
  ctx.topo = &t;
  ctx.sliceBytes = 512 << 10;
  const CostModel cm = CostModel::of(ctx);
  EXPECT_DOUBLE_EQ(cm.concurrentBeta(0, [](int q) { return q ^ 4; }), 4 * cm.interBetaUsPerByte);
  EXPECT_DOUBLE_EQ(cm.concurrentBeta(0, [](int q) { return q ^ 1; }), cm.interBetaUsPerByte);
  // On a fat-tree a host's one port is what exchanges share, as before.
  const Topology ft = build(parseOk("fabric: fat-tree\nradix: [16, 32]\n"), 512, 1);
  EXPECT_EQ(ft.maxLinkLoad({{0, 5}, {1, 5}}), 1);
}

// 64 hosts x 8 ranks on a 4:1 fat-tree. nodus-sim (docs/sim-findings.md,
// "Multi-rank hosts") measured halving-doubling fastest up to 2 MiB and the
// leaf-grouped ring from 16 MiB: every rank's bytes go through its 10 GB/s
// shared-memory port, which binds the ring at 1.08x the bound, while
// hierarchical adds its intra-host stages to the host link's share.
TEST(Tuner, MultiRankHostsPayForTheirSharedPortsAndHierarchicalWinsWhereItShould) {
  FabricConfig f = parseOk("fabric: fat-tree\nradix: [16, 32]\noversubscription: [4, 1]\n");
  const Topology t = build(f, 64, 8);
  EXPECT_STREQ(pick(t, Collective::AllReduce, 2 << 20), "halving-doubling");
  EXPECT_STREQ(pick(t, Collective::AllReduce, 64 << 20), "ring");
  PlanContext ctx;
  ctx.topo = &t;
  ctx.sliceBytes = 128 << 10;
  CostModel m = CostModel::of(ctx);
  EXPECT_DOUBLE_EQ(m.uplinkSharing, 4.0);
  // Hierarchical can be no faster than its two intra-host stages through
  // each rank's port plus its share of the host's one fabric link (network
  // only: no reductions).
  m.gammaUsPerByte = 0;
  const double n = 64 << 20;
  const double floor = 2 * 7.0 / 8 * n * m.intraBetaUsPerByte + 2 * 63.0 / 64 * n * m.interBetaUsPerByte;
  const Algorithm* hier = findAlgorithm("hierarchical");
  ASSERT_NE(hier, nullptr);
  const double us = predictUs(*hier, PlanKey{Collective::AllReduce, t.nranks, 0, (64 << 20) / 4, 4, 0, false}, ctx, m);
  EXPECT_GE(us, floor);
  EXPECT_LE(us, 1.2 * floor);
  // A halving-doubling exchange that leaves the host shares the host's link
  // with the other 7 ranks; one that leaves the leaf, the leaf's 4:1 uplinks.
  const auto partner = [](int mask) { return [mask](int q) { return q ^ mask; }; };
  EXPECT_DOUBLE_EQ(m.concurrentBeta(0, partner(1)), m.intraBetaUsPerByte);
  EXPECT_DOUBLE_EQ(m.concurrentBeta(0, partner(8)), 8 * m.interBetaUsPerByte);
  EXPECT_DOUBLE_EQ(m.concurrentBeta(0, partner(128)), 8 * 4 * m.interBetaUsPerByte);
  // Where hierarchical wins: 48 hosts x 6 ranks (not a power of two, so
  // halving-doubling folds), 4 MiB. nodus-sim: hierarchical 1469 us, ring
  // 1576 in 128 KiB slices, halving-doubling 2162; at the slot the tuner
  // picks hierarchical. The ring's steps are 14.5 KiB: in 8 KiB slices they
  // pipeline and it simulates at 1536 us (16 KiB: 1844, one slice a step),
  // and the tuner's ring estimate then comes within 3% of hierarchical's:
  // either pick is within 5% of the best simulated.
  const Topology odd = build(f, 48, 6);
  const Choice atSlot = choice(odd, Collective::AllReduce, 4 << 20, "", /*forceSlice=*/true);
  EXPECT_STREQ(atSlot.algo->name, "hierarchical");
  const Choice tuned = choice(odd, Collective::AllReduce, 4 << 20);
  const std::string name = tuned.algo->name;
  EXPECT_TRUE(name == "hierarchical" || (name == "ring" && tuned.sliceBytes == 8u << 10)) << name << " " << tuned.explain();
  // Without oversubscription the uplinks are not shared.
  FabricConfig full = parseOk("fabric: fat-tree\nradix: [16, 32]\n");
  const Topology u = build(full, 64, 8);
  ctx.topo = &u;
  const CostModel fullModel = CostModel::of(ctx);
  EXPECT_DOUBLE_EQ(fullModel.uplinkSharing, 1.0);
  EXPECT_DOUBLE_EQ(fullModel.concurrentBeta(0, partner(128)), 8 * fullModel.interBetaUsPerByte);
}

// 8 ranks on a 2-core machine (nodus-perf -a all, back-to-back calls): an
// 8 B Broadcast took 5.3 us along the chain and 26 us down the tree, Reduce
// 4 and 58 us; chain stayed fastest up to 16 MiB. Every hand-off is a
// wake-up, except along a chain, whose ranks never wait for an answer.
TEST(Tuner, OversubscribedHostStreamsBroadcastAndReduceAlongTheChain) {
  Topology t = build(FabricConfig{}, 1, 8);
  t.oversubscribed = true;
  for (Collective c : {Collective::Broadcast, Collective::Reduce})
    for (uint64_t bytes : {uint64_t{8}, uint64_t{4096}, uint64_t{256} << 10})
      EXPECT_STREQ(pick(t, c, bytes), "chain") << collectiveName(c) << " " << bytes << " B";
  PlanContext ctx;
  ctx.topo = &t;
  const CostModel m = CostModel::of(ctx);
  EXPECT_DOUBLE_EQ(m.alphaBetween(0, 1), 2.5);
  EXPECT_DOUBLE_EQ(m.streamAlphaBetween(0, 1), 0.75);
  // A host with a core per rank polls: a hand-off is a hand-off.
  t.oversubscribed = false;
  const CostModel polled = CostModel::of(ctx);
  EXPECT_DOUBLE_EQ(polled.streamAlphaBetween(0, 1), polled.alphaBetween(0, 1));
}

// 4 and 8 ranks on 2 cores, nodus-perf -a all --rounds 3 (best of two
// runs): Bruck is faster up to 4-8 KiB (8 ranks, 4 KiB: 17.1 us against the
// ring's 23.6), the ring from 32 KiB (8 ranks, 128 KiB: 59 against 83; 4
// ranks, 128 KiB: 24 against 31). Priced at 15 us a hand-off, the ring's
// p-1 steps handed Bruck everything up to 256 KiB-1 MiB. At 32 KiB the
// model still prices Bruck a little under the ring (measured 0.80-0.86x).
TEST(Tuner, OversubscribedHostGivesTheRingAllGatherFrom128KiB) {
  for (int ranks : {4, 8}) {
    Topology t = build(FabricConfig{}, 1, ranks);
    t.oversubscribed = true;
    t.coreShare = ranks / 2.0;
    EXPECT_STREQ(pick(t, Collective::AllGather, 1 << 10), "halving-doubling") << ranks << " ranks";
    for (uint64_t bytes : {uint64_t{128} << 10, uint64_t{512} << 10, uint64_t{4} << 20})
      EXPECT_STREQ(pick(t, Collective::AllGather, bytes), "ring") << ranks << " ranks, " << bytes << " B";
    // Every rank copies at once there: the cores' share is in the ring's
    // bytes, not in a chain's.
    PlanContext ctx;
    ctx.topo = &t;
    const CostModel m = CostModel::of(ctx);
    EXPECT_DOUBLE_EQ(m.busyShare, ranks / 2.0);
    EXPECT_DOUBLE_EQ(m.busyBetaBetween(0, 1), m.betaBetween(0, 1) * ranks / 2.0);
  }
}

// Where ranks share cores, a round in which every rank exchanges at once
// (direct, halving-doubling, Bruck) waits for every rank to have run, and
// direct's copies and folds add up instead of overlapping. The picks of
// nodus-perf -a all --rounds 3 on 2 cores (medians of 8 runs, 2026-12-04).
TEST(Tuner, OversubscribedExchangeRoundsWaitForEveryRank) {
  Topology eight = build(FabricConfig{}, 1, 8);
  eight.oversubscribed = true;
  eight.coreShare = 4;
  // 8 ranks: direct 24.2 us at 4 KiB (halving-doubling 25.5); at 8 KiB
  // direct 46.1, halving-doubling 28.9.
  EXPECT_STREQ(pick(eight, Collective::AllReduce, 4 << 10), "direct");
  EXPECT_STREQ(pick(eight, Collective::AllReduce, 8 << 10), "halving-doubling");
  // AllGather: Bruck 27.8 us at 32 KiB (ring 31.4); at 64 KiB the two
  // measure alike (41.8 and 42.0) and the ring, priced lower, takes it.
  EXPECT_STREQ(pick(eight, Collective::AllGather, 32 << 10), "halving-doubling");
  EXPECT_STREQ(pick(eight, Collective::AllGather, 64 << 10), "ring");
  PlanContext ctx;
  ctx.topo = &eight;
  const CostModel m = CostModel::of(ctx);
  EXPECT_DOUBLE_EQ(m.exchangeAlphaShare, std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(m.exchanging().alphaBetween(0, 1), m.alphaBetween(0, 1) * std::sqrt(2.0));
  // 4 ranks: 16 KiB to halving-doubling (13.4 us; direct 14.4, which the
  // slower of beta and gamma alone priced low enough to take it).
  Topology four = build(FabricConfig{}, 1, 4);
  four.oversubscribed = true;
  four.coreShare = 2;
  EXPECT_STREQ(pick(four, Collective::AllReduce, 8 << 10), "direct");
  EXPECT_STREQ(pick(four, Collective::AllReduce, 16 << 10), "halving-doubling");
  ctx.topo = &four;
  EXPECT_DOUBLE_EQ(CostModel::of(ctx).exchangeAlphaShare, 1.0);
  // Several hosts: only the hand-offs inside a host wait for its ranks; a
  // link between hosts costs what it did (even where it happens to cost
  // the same as the hand-off, here 2.0 + 0.5 us).
  FabricConfig fc;
  fc.link.latencyUs = 0.5;
  Topology hosts = build(fc, 2, 8);
  hosts.oversubscribed = true;
  hosts.coreShare = 4;
  ctx.topo = &hosts;
  const CostModel h = CostModel::of(ctx);
  ASSERT_GT(h.exchangeAlphaShare, 1.0);
  EXPECT_DOUBLE_EQ(h.exchanging().alphaUs, h.alphaUs);
  EXPECT_DOUBLE_EQ(h.exchanging().alphaBetween(0, 8), h.alphaBetween(0, 8));
  EXPECT_DOUBLE_EQ(h.exchanging().alphaBetween(0, 1), h.alphaBetween(0, 1) * h.exchangeAlphaShare);
}

TEST(Tuner, OneHostUsesIntraHostConstants) {
  const Topology t = build(FabricConfig{}, 1, 8);
  PlanContext ctx;
  ctx.topo = &t;
  const CostModel m = CostModel::of(ctx);
  EXPECT_DOUBLE_EQ(m.alphaUs, m.intraAlphaUs);
  EXPECT_DOUBLE_EQ(m.alphaBetween(0, 7), m.intraAlphaUs);
  EXPECT_STREQ(pick(t, Collective::AllReduce, 64 << 20), "ring");
  EXPECT_STREQ(pick(t, Collective::AllReduce, 8), "direct");
}

// The slice (NODUS_CHUNK_BYTES unset): the tuner prices each algorithm whose
// cost knows what slices change at the slot and at halves of it.
TEST(Tuner, OneHostKeepsTheWholeSlotWhereSmallerSlicesWereMeasuredSlower) {
  // 2 ranks, AllReduce and AllGather of 64 KiB-4 MiB: no smaller slice was
  // faster than the 128 KiB slot (a slice costs about 0.6 us of its own).
  const Topology two = build(FabricConfig{}, 1, 2);
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::Broadcast})
    for (uint64_t bytes : {uint64_t{64} << 10, uint64_t{1} << 20, uint64_t{4} << 20, uint64_t{64} << 20})
      EXPECT_EQ(choice(two, c, bytes).sliceBytes, 128u << 10) << collectiveName(c) << " " << bytes;
  // 4 ranks on 2 cores: a slice costs a wake-up (2.6-3.8 us measured), and
  // the ranks cannot overlap one slice's hand-off with the next one's copy.
  Topology four = build(FabricConfig{}, 1, 4);
  four.oversubscribed = true;
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::Broadcast, Collective::Reduce})
    for (uint64_t bytes : {uint64_t{256} << 10, uint64_t{1} << 20, uint64_t{4} << 20})
      EXPECT_EQ(choice(four, c, bytes).sliceBytes, 128u << 10) << collectiveName(c) << " " << bytes;
  // Forced smaller there, a slice costs the wake-ups measured.
  PlanContext over;
  over.topo = &four;
  over.sliceBytes = 16 << 10;
  EXPECT_NEAR(CostModel::of(over).intraBetaUsPerByte - 1.0 / 10000, 3.0 * (1.0 / (16 << 10) - 1.0 / (128 << 10)), 1e-12);
  // The per-slice work is folded into the per-byte cost, as measured at 128 KiB.
  PlanContext ctx;
  ctx.topo = &two;
  ctx.sliceBytes = 128 << 10;
  const double atSlot = CostModel::of(ctx).intraBetaUsPerByte;
  EXPECT_DOUBLE_EQ(atSlot, 1.0 / 10000);
  ctx.sliceBytes = 16 << 10;
  EXPECT_NEAR(CostModel::of(ctx).intraBetaUsPerByte - atSlot, 0.6 * (1.0 / (16 << 10) - 1.0 / (128 << 10)), 1e-12);
}

TEST(Tuner, AChainAcrossHostsRunsInSmallerSlicesUnlessTheSliceIsForced) {
  // Broadcast of 1 MiB along 8 hosts: every hop adds a slice to the fill, so
  // smaller slices win until the 8 slots no longer cover a link's latency
  // (nodus-sim: 66.9 us in the tuner's 16 KiB slices, 94.4 in 128 KiB).
  const Topology t = build(torusDims("8"), 8, 1);
  const Choice c = choice(t, Collective::Broadcast, 1 << 20);
  ASSERT_NE(c.algo, nullptr);
  EXPECT_STREQ(c.algo->name, "chain");
  EXPECT_LT(c.sliceBytes, 128u << 10);
  EXPECT_GE(c.sliceBytes, kMinSliceBytes);
  PlanContext ctx;
  ctx.topo = &t;
  ctx.slots = 8;
  ctx.sliceBytes = 4 << 10;
  const CostModel tiny = CostModel::of(ctx);
  EXPECT_GT(tiny.interBetaUsPerByte, 1.0 / 25000) << "4 KiB slices, 8 slots: below the link's bandwidth";
  ctx.sliceBytes = c.sliceBytes;
  EXPECT_DOUBLE_EQ(CostModel::of(ctx).interBetaUsPerByte, 1.0 / 25000);
  // NODUS_CHUNK_BYTES: the only slice tried.
  EXPECT_EQ(choice(t, Collective::Broadcast, 1 << 20, "", true).sliceBytes, 128u << 10);
  // The torus's streams share one cursor and nodus-sim shows them slower in
  // smaller slices: they keep the slot.
  const Topology cube = build(torusDims("4x4x4"), 64, 1);
  const Choice big = choice(cube, Collective::AllReduce, 64 << 20);
  EXPECT_STREQ(big.algo->name, "torus");
  EXPECT_EQ(big.sliceBytes, 128u << 10);
}

TEST(Tuner, RingReduceScatterMovesWhatItsAllGatherMoves) {
  // Both counts are one rank's share: the same bytes cross every link
  // (the ReduceScatter cost once priced 1/p of them).
  const Topology t = build(torusDims("8"), 8, 1);
  PlanContext ctx;
  ctx.topo = &t;
  ctx.slots = 8;
  ctx.roundSlices = 4;
  ctx.sliceBytes = 128 << 10;
  CostModel m = CostModel::of(ctx);
  m.gammaUsPerByte = 0;
  const Algorithm* ring = findAlgorithm("ring");
  ASSERT_NE(ring, nullptr);
  const uint64_t count = (16 << 20) / 8 / 4;
  const double rs = predictUs(*ring, PlanKey{Collective::ReduceScatter, 8, 0, count, 4, 0, false}, ctx, m);
  const double ag = predictUs(*ring, PlanKey{Collective::AllGather, 8, 0, count, 4, 0, false}, ctx, m);
  EXPECT_DOUBLE_EQ(rs, ag);
  EXPECT_GE(rs, 7.0 / 8 * (16 << 20) * m.interBetaUsPerByte);
}

// Channels: a ring's data split in parts, every other one around the ring
// backward. On a torus each direction of a link is a wire of its own, so two
// channels move the ring's bytes in half the time (nodus-sim, 4x4x4, ring
// AllGather of 64 MiB: 2645 us in one channel, 1327 us in two, the tuner
// -0.1% and -0.5%); through one port (a host's NIC on a fat-tree, a rank's
// shared-memory copies) both directions add up and channels only cost steps.
TEST(Tuner, RingRunsTwoChannelsOnATorusAndOneWhereAPortCarriesBothDirections) {
  const Topology torus = build(torusDims("8x8x8"), 512, 1);
  const Choice c = choice(torus, Collective::AllGather, 64 << 20);
  ASSERT_STREQ(c.algo->name, "ring");
  EXPECT_EQ(c.channels, 2u) << c.explain();
  // Where bandwidth rules (1 GiB), one channel takes about twice as long.
  PlanContext ctx;
  ctx.sliceBytes = 128 << 10;
  ctx.slots = 8;
  ctx.roundSlices = 4;
  ctx.topo = &torus;
  ctx.channels = c.channels;
  const Algorithm* ring = findAlgorithm("ring");
  const PlanKey key{Collective::AllGather, 512, 0, (1u << 30) / 512 / 4, 4, 0, false};
  const double two = predictUs(*ring, key, ctx, CostModel::of(ctx));
  ctx.channels = 1;
  const double one = predictUs(*ring, key, ctx, CostModel::of(ctx));
  EXPECT_NEAR(one / two, 2.0, 0.15);
  // Four channels: no more wires to use, more steps.
  ctx.channels = 4;
  EXPECT_GE(predictUs(*ring, key, ctx, CostModel::of(ctx)), two);

  // A fat-tree, one host, and a host of many ranks keep one channel.
  const Topology fat = build(parseOk("fabric: fat-tree\nradix: [16, 32]\n"), 512, 1);
  EXPECT_EQ(choice(fat, Collective::AllGather, 64 << 20).channels, 1u);
  EXPECT_EQ(choice(fat, Collective::AllReduce, 64 << 20).channels, 1u);
  const Topology one8 = Topology::flat(8);
  for (uint64_t bytes : {uint64_t{8}, uint64_t{256} << 10, uint64_t{64} << 20})
    for (Collective coll : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter})
      EXPECT_EQ(choice(one8, coll, bytes).channels, 1u) << collectiveName(coll) << " " << bytes;
}

// NODUS_CHANNELS: every algorithm that runs channels runs that many (capped
// at its most); the others are unaffected.
TEST(Tuner, ForcedChannelsApplyToTheAlgorithmsThatRunThem) {
  const Topology t = Topology::flat(6);
  PlanContext ctx;
  ctx.sliceBytes = 128 << 10;
  ctx.slots = 8;
  ctx.roundSlices = 4;
  ctx.topo = &t;
  ctx.channels = 3;
  ctx.channelsForced = true;
  AlgoSpec spec;
  ASSERT_TRUE(AlgoSpec::parse("allreduce:ring;broadcast:tree", &spec).isOk());
  Choice c;
  ASSERT_TRUE(chooseAlgorithm(PlanKey{Collective::AllReduce, 6, 0, 1 << 20, 4, 0, false}, ctx, spec, &c).isOk());
  EXPECT_STREQ(c.algo->name, "ring");
  EXPECT_EQ(c.channels, 2u);  // the ring's most: one each way
  EXPECT_NE(c.explain().find("ring"), std::string::npos);
  EXPECT_NE(c.explain().find("x2ch"), std::string::npos) << c.explain();
  ASSERT_TRUE(chooseAlgorithm(PlanKey{Collective::Broadcast, 6, 0, 1 << 20, 4, 0, false}, ctx, spec, &c).isOk());
  EXPECT_STREQ(c.algo->name, "tree");
  EXPECT_EQ(c.channels, 1u);
  // On 2 ranks both ways are one connection: the ring runs one, and says so.
  const Topology twoRanks = Topology::flat(2);
  PlanContext ctx2 = ctx;
  ctx2.topo = &twoRanks;
  ASSERT_TRUE(chooseAlgorithm(PlanKey{Collective::AllReduce, 2, 0, 1 << 20, 4, 0, false}, ctx2, spec, &c).isOk());
  EXPECT_STREQ(c.algo->name, "ring");
  EXPECT_EQ(c.channels, 1u) << c.explain();
  // The plan the ring builds runs them, and logs how many.
  ctx.sliceBytes = c.sliceBytes;
  ctx.channels = 16;
  Plan plan;
  ASSERT_TRUE(findAlgorithm("ring")->build(PlanKey{Collective::AllReduce, 6, 2, 1 << 20, 4, 0, false}, ctx, plan).isOk());
  EXPECT_EQ(plan.channels, 2u);
  EXPECT_EQ(plan.steps.size(), 2u * (2 * (6 - 1) + 1));  // each ring's steps
  Plan two;
  ASSERT_TRUE(findAlgorithm("ring")->build(PlanKey{Collective::AllReduce, 2, 0, 1 << 20, 4, 0, false}, ctx, two).isOk());
  EXPECT_EQ(two.channels, 1u);  // both ways are one connection
}

// NODUS_DIRECT_MAX_BYTES=-1 (the default): direct up to 128 KiB where each
// rank has a core (measured on 2 ranks: 1.2-1.37x the ring at 64-128 KiB),
// 16 KiB where ranks share cores (4 ranks on 2 cores: 0.27-0.77x
// halving-doubling at 32-128 KiB).
TEST(Tuner, DirectTakesMidSizesOnlyWhereRanksHaveCoresOfTheirOwn) {
  Topology t = Topology::flat(2);
  PlanContext ctx;
  ctx.sliceBytes = 128 << 10;
  ctx.slots = 8;
  ctx.roundSlices = 4;
  ctx.directMaxBytes = kDirectMaxAuto;
  ctx.topo = &t;
  AlgoSpec none;
  Choice c;
  const PlanKey key{Collective::AllReduce, 2, 0, (128 << 10) / 4, 4, 0, false};
  ASSERT_TRUE(chooseAlgorithm(key, ctx, none, &c).isOk());
  EXPECT_STREQ(c.algo->name, "direct") << c.explain();
  const PlanKey big{Collective::AllReduce, 2, 0, (256 << 10) / 4, 4, 0, false};
  ASSERT_TRUE(chooseAlgorithm(big, ctx, none, &c).isOk());
  EXPECT_STRNE(c.algo->name, "direct") << c.explain();
  t.oversubscribed = true;
  t.coreShare = 2;
  EXPECT_EQ(directMaxFor(ctx), 16u << 10);
  ASSERT_TRUE(chooseAlgorithm(key, ctx, none, &c).isOk());
  EXPECT_STRNE(c.algo->name, "direct") << c.explain();
  // A value set by the user is the limit either way.
  ctx.directMaxBytes = 1 << 20;
  EXPECT_EQ(directMaxFor(ctx), 1u << 20);
}

// ---- Communicators made from communicators inherit placement and fabric ------

// A 4x4 torus of threads posing as 16 hosts (loopback transport), split into
// rows and into columns: each child keeps its hosts where the parent placed
// them, so its ring walks torus neighbours (every hop, the closing one
// included, one link), as a split along one dimension should.
TEST(SplitTopology, ASplitAlongATorusDimensionIsThatDimensionsRing) {
  constexpr int n = 16;
  Settings base;
  ASSERT_TRUE(Settings::fromEnvironment(&base).isOk());
  std::string hosts;
  for (int r = 0; r < n; ++r) hosts += (r ? ",h" : "h") + std::to_string(r);
  ASSERT_TRUE(base.set("NODUS_TORUS_DIMS", "4x4").isOk());
  ASSERT_TRUE(base.set("NODUS_TOPO_FILE", "").isOk());
  ASSERT_TRUE(base.set("NODUS_FATTREE", "").isOk());
  ASSERT_TRUE(base.set("NODUS_HOSTID", hosts).isOk());
  ASSERT_TRUE(base.set("NODUS_BIND", "none").isOk());
  auto group = makeInProcessGroup(n);
  std::vector<std::unique_ptr<Comm>> comms(n), rows(n), cols(n);
  std::vector<Status> made(n, Status::ok());
  auto onEveryRank = [&](const std::function<Status(int)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) threads.emplace_back([&, r] { made[static_cast<size_t>(r)] = fn(r); });
    for (auto& t : threads) t.join();
    for (const Status& s : made) ASSERT_TRUE(s.isOk()) << s.message();
  };
  onEveryRank([&](int r) {
    InitOptions opts;
    opts.settings = base;
    opts.bootstrap = inProcessBootstrap(group, r, std::chrono::seconds(60));
    opts.inProcess = true;
    return Comm::create(std::move(opts), &comms[static_cast<size_t>(r)]);
  });
  onEveryRank([&](int r) {
    Status s = comms[static_cast<size_t>(r)]->split(r / 4, r, base, Status::ok(), &rows[static_cast<size_t>(r)]);
    if (s.isOk()) s = comms[static_cast<size_t>(r)]->split(r % 4, r, base, Status::ok(), &cols[static_cast<size_t>(r)]);
    return s;
  });
  const Topology& parent = comms[0]->topology();
  for (int r = 0; r < n; ++r)
    for (const auto* kids : {&rows, &cols}) {
      const Topology& t = (*kids)[static_cast<size_t>(r)]->topology();
      ASSERT_EQ(t.nranks, 4);
      ASSERT_EQ(t.hosts.size(), 4u);
      for (size_t h = 0; h < t.hosts.size(); ++h) {
        const auto at = std::find(parent.hosts.begin(), parent.hosts.end(), t.hosts[h]);
        ASSERT_NE(at, parent.hosts.end());
        EXPECT_EQ(t.coords[h], parent.coords[static_cast<size_t>(at - parent.hosts.begin())]) << t.hosts[h];
      }
      for (int i = 0; i < 4; ++i)
        EXPECT_EQ(t.hops(t.ringOrder[static_cast<size_t>(i)], t.ringOrder[static_cast<size_t>((i + 1) % 4)]), 1)
            << "rank " << r << (kids == &rows ? " row" : " column") << ": " << t.describe();
    }
}
