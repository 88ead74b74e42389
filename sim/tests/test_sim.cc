// nodus-sim on small platforms (8 to 64 hosts, seconds): the simulated
// placement is the runtime's, contention-free schedules take exactly their
// alpha-beta time under CM02, shared links halve bandwidth, and the
// simulator and the verifier agree on which plans are valid.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <thread>

#include "algorithms/algorithm.h"
#include "base/bootstrap.h"
#include "core/comm.h"
#include "tune/planner.h"
#include "sim/bounds.h"
#include "sim/reorder.h"
#include "sim/simulation.h"
#include "tune/tuner.h"

using namespace nodus;
using namespace nodus::sim;

namespace {

// Fabric environment for a spec: exactly one of the three variables set.
std::vector<std::string> torus(const std::string& dims) {
  return {"NODUS_TOPO_FILE=", "NODUS_FATTREE=", "NODUS_TORUS_DIMS=" + dims};
}
std::vector<std::string> fatTree(const std::string& radix) {
  return {"NODUS_TOPO_FILE=", "NODUS_TORUS_DIMS=", "NODUS_FATTREE=" + radix};
}

// Pins everything the environment could change, so the formulas below hold.
SimSpec baseSpec(std::vector<std::string> env) {
  SimSpec s;
  s.settings = std::move(env);
  s.settings.push_back("NODUS_ALGO=");
  // The formulas below are of one ring; channels are tested on their own.
  s.settings.push_back("NODUS_CHANNELS=1");
  s.sliceBytes = 128 * 1024;
  s.slots = 8;
  s.softwareUs = 2.0;
  s.timeoutS = 120;
  return s;
}

// Plans that only move data: `flows` (from, to) pairs of `bytes` each, all at once.
std::function<Status(const Topology&, std::vector<Plan>&)> flowPlans(std::vector<std::pair<int, int>> flows,
                                                                    uint64_t bytes) {
  return [flows, bytes](const Topology&, std::vector<Plan>& plans) {
    const uint64_t n = bytes / 4;
    for (Plan& p : plans) {
      p.key.count = n;
      p.steps.clear();
      p.phaseStarts.clear();
    }
    for (const auto& [from, to] : flows)
      plans[static_cast<size_t>(from)].steps.push_back({Op::Send, -1, to, {Buf::Send, 0}, {}, n, false});
    for (const auto& [from, to] : flows)
      plans[static_cast<size_t>(to)].steps.push_back({Op::Recv, from, -1, {}, {Buf::Recv, 0}, n, false});
    // A rank with several flows runs them one after the other (with enough
    // slots, its sends never wait for the receiver).
    for (Plan& p : plans)
      for (uint32_t i = 1; i < p.steps.size(); ++i) p.phaseStarts.push_back(i);
    return Status::ok();
  };
}

void expectNear(double got, double want, double rel, const std::string& what) {
  EXPECT_NEAR(got, want, want * rel) << what << ": simulated " << got << " us, formula " << want << " us";
}

}  // namespace

// ---- Placement ------------------------------------------------------------------

TEST(SimPlatform, RoutesFollowTheRuntimesPlacement) {
  struct Case {
    std::vector<std::string> settings;
    int ranksPerHost;
  };
  const Case cases[] = {
      {torus("4x4x4"), 1}, {torus("3x4x5"), 1}, {torus("2x2x2"), 2}, {torus("8"), 1},
      {fatTree("4x4x4"), 1}, {fatTree("8x4:2x1"), 1}, {fatTree("4x2"), 3},
  };
  for (const Case& c : cases) {
    const Status s = inChild([&] {
      for (const std::string& kv : c.settings) {
        const size_t eq = kv.find('=');
        if (eq + 1 == kv.size()) unsetenv(kv.substr(0, eq).c_str());
        else setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
      }
      Topology t;
      NODUS_TRY(topologyFromEnvironment(0, c.ranksPerHost, &t));
      return checkRoutes(t, LinkModel{}, 4000);
    });
    EXPECT_TRUE(s.isOk()) << c.settings.back() << " x" << c.ranksPerHost << ": " << s.message();
  }
}

// ---- Alpha-beta formulas under CM02 (1%) ----------------------------------------

TEST(SimFormula, OneMessageIsLatencyPlusBytesOverBandwidth) {
  // A ring of 8 hosts: rank 0 to rank 3 crosses 3 links.
  SimSpec s = baseSpec(torus("8"));
  s.bytes = 1 << 20;
  s.algo = "ring";
  s.editPlans = flowPlans({{0, 3}}, s.bytes);
  const SimOutcome o = simulate(s);
  ASSERT_TRUE(o.ok) << o.error;
  expectNear(o.simUs, 2.0 + 3 * 1.0 + (1 << 20) / 25e3, 0.01, "0 -> 3");
}

TEST(SimFormula, RingAllReduceInOneRound) {
  // Blocks of 64 KiB fit one slice: 2(p-1) steps of (alpha + block * beta).
  SimSpec s = baseSpec(torus("8"));
  s.bytes = 512 * 1024;
  s.algo = "ring";
  const SimOutcome o = simulate(s);
  ASSERT_TRUE(o.ok) << o.error;
  const double alpha = 2.0 + 1.0, block = s.bytes / 8.0;
  expectNear(o.simUs, 14 * (alpha + block / 25e3), 0.01, "ring 8 x 512K");
  // The tuner's ring formula is this case exactly.
  expectNear(o.tunerUs, o.simUs, 0.01, "tuner");
}

TEST(SimFormula, RingAllReduceSliceRoundsEachPayTheLatencyChain) {
  // 8 MiB on 8 ranks: blocks of 1 MiB = 8 slices. With one slice a round
  // (NODUS_ROUND_SLICES=1) the executor runs slice 0 of every step, then
  // slice 1, ...: each of the R = 8 rounds waits for the whole 2(p-1)-hop
  // chain, so T = 2(p-1) R alpha + 2(p-1)/p N beta.
  SimSpec s = baseSpec(torus("8"));
  s.bytes = 8 << 20;
  s.algo = "ring";
  s.roundSlices = 1;
  const SimOutcome o = simulate(s);
  ASSERT_TRUE(o.ok) << o.error;
  const double alpha = 3.0, rounds = 8;
  expectNear(o.simUs, 14 * rounds * alpha + 14.0 / 8 * s.bytes / 25e3, 0.01, "ring 8 x 8M, one slice a round");
  expectNear(o.tunerUs, o.simUs, 0.01, "tuner, one slice a round");
  // With the runtime's rounds (half the slots: 4 slices a step in a row) a
  // slice's transfer hides the next one's latency: the ring runs at the
  // links' pace, and the tuner knows it (pipelinedPass).
  for (uint32_t round : {2u, 0u}) {
    s.roundSlices = round;
    const SimOutcome several = simulate(s);
    ASSERT_TRUE(several.ok) << several.error;
    const double data = 14.0 / 8 * s.bytes / 25e3;
    EXPECT_GT(several.simUs, data);
    EXPECT_LT(several.simUs, data * 1.03) << "round " << round;
    expectNear(several.tunerUs, several.simUs, 0.03, "tuner, rounds of several slices");
  }
}

TEST(SimFormula, ChainBroadcastPipelinesAlsoInTheTunersSlice) {
  // Contention-free pipeline: (p-1) alpha + (N + (p-2) slice) beta, in the
  // slot and in the tuner's smaller slice (less fill; the 8 slots still
  // cover the latency).
  const auto formula = [](double bytes, double slice) { return 7 * 3.0 + (bytes + 6.0 * slice) / 25e3; };
  SimSpec s = baseSpec(torus("8"));
  s.coll = Collective::Broadcast;
  s.algo = "chain";
  for (uint64_t bytes : {uint64_t{4} << 20, uint64_t{1} << 20}) {
    s.bytes = bytes;
    s.sliceBytes = 128 << 10;
    const SimOutcome slot = simulate(s);
    ASSERT_TRUE(slot.ok) << slot.error;
    EXPECT_EQ(slot.sliceBytes, 128u << 10);
    expectNear(slot.simUs, formula(static_cast<double>(bytes), 1 << 17), 0.01, "chain in the slot");
    s.sliceBytes = 0;  // the tuner's pick
    const SimOutcome tuned = simulate(s);
    ASSERT_TRUE(tuned.ok) << tuned.error;
    EXPECT_LT(tuned.sliceBytes, 128u << 10);
    expectNear(tuned.simUs, formula(static_cast<double>(bytes), static_cast<double>(tuned.sliceBytes)), 0.01,
               "chain in the tuner's slice");
    expectNear(tuned.tunerUs, tuned.simUs, 0.01, "tuner");
    EXPECT_LT(tuned.simUs, slot.simUs);
  }
}

TEST(SimFormula, ChainOverLongRoutesIsPacedByItsSlots) {
  // 16 hosts under 4 leaves: the chain's hop from one leaf to the next
  // crosses 4 links (6 us with the software overhead), and 8 slots of 4 KiB
  // cover only 8 x 0.16 us of it: a slice every (6 + 0.16) / 8 us, not the
  // one-link window's (3 + 0.16) / 8 (the tuner's price before: -47%).
  SimSpec s = baseSpec(fatTree("4x4"));
  s.coll = Collective::Broadcast;
  s.algo = "chain";
  s.bytes = 16 << 20;
  s.sliceBytes = 4 << 10;
  const SimOutcome o = simulate(s);
  ASSERT_TRUE(o.ok) << o.error;
  const double slices = 4096;
  expectNear(o.simUs, slices * (6.0 + 4096 / 25e3) / 8, 0.03, "chain paced by its slots");
  expectNear(o.tunerUs, o.simUs, 0.03, "tuner");
}

TEST(SimFormula, RingReduceScatterMatchesTheTuner) {
  // 16 MiB scattered over 8 hosts: 7/8 of it crosses every ring link.
  SimSpec s = baseSpec(torus("8"));
  s.coll = Collective::ReduceScatter;
  s.bytes = 16 << 20;
  s.algo = "ring";
  const SimOutcome o = simulate(s);
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_EQ(o.channels, 1u);
  expectNear(o.tunerUs, o.simUs, 0.03, "ring ReduceScatter");
}

TEST(SimFormula, RingInTwoChannelsUsesBothWiresOfATorusLink) {
  // Half the data around the ring each way: every link of the 8-ring carries
  // data in both directions, and the pass takes half as long.
  SimSpec s = baseSpec(torus("8"));
  s.coll = Collective::AllGather;
  s.bytes = 64 << 20;
  s.algo = "ring";
  ASSERT_EQ(s.settings.back(), "NODUS_CHANNELS=1");
  const SimOutcome one = simulate(s);
  s.settings.back() = "NODUS_CHANNELS=2";
  const SimOutcome two = simulate(s);
  ASSERT_TRUE(one.ok && two.ok) << one.error << two.error;
  EXPECT_EQ(one.channels, 1u);
  EXPECT_EQ(two.channels, 2u);
  EXPECT_NEAR(one.simUs / two.simUs, 2.0, 0.1);
  // Both runs take 48 us beyond their data (the pipeline's fill, which the
  // formula leaves out): 2% of one channel's time, 4% of two's.
  expectNear(two.tunerUs, two.simUs, 0.05, "ring AllGather in 2 channels");
  // The tuner's own choice on this torus.
  s.settings.pop_back();
  EXPECT_EQ(simulate(s).channels, 2u);
}

TEST(SimFormula, BruckPaysForTheRoundsOfRangesThatWrap) {
  // Bruck's AllGather on 4 hosts: the last step's range wraps for half the
  // ranks and is two steps there, each moving a round's slices a round, so
  // those ranks' rounds stretch (16 MiB: 24 slice times for 16 slices). Its
  // cost prices that; on 2 hosts nothing wraps and the plain formula holds.
  for (const char* hosts : {"2", "4"}) {
    SimSpec s = baseSpec(fatTree(hosts));
    s.coll = Collective::AllGather;
    s.bytes = 16 << 20;
    s.sliceBytes = 512 << 10;
    s.roundSlices = 4;
    s.algo = "halving-doubling";
    const SimOutcome o = simulate(s);
    ASSERT_TRUE(o.ok) << o.error;
    expectNear(o.tunerUs, o.simUs, 0.03, std::string("Bruck on ") + hosts + " hosts");
  }
}

TEST(SimFormula, TorusWithInterleavedStreamsMatchesTheTuner) {
  // One slice round: every stream's ring is contention-free on its own links,
  // and the dimension-wise formula the tuner uses is exact.
  SimSpec s = baseSpec(torus("4x4x4"));
  s.bytes = 1 << 20;
  s.algo = "torus";
  s.reorder = "streams";
  const SimOutcome o = simulate(s);
  ASSERT_TRUE(o.ok) << o.error;
  EXPECT_TRUE(o.reordered);
  expectNear(o.simUs, o.tunerNetUs, 0.01, "torus 4x4x4, streams interleaved");
  // The plan as algorithms/dimension_wise.cc builds it already emits step k
  // of every stream before step k+1: the rewrite must gain nothing, and the
  // executor's own order meets the formula (were the streams listed one after
  // the other, their latency chains would add up: about 6x here).
  s.reorder.clear();
  const SimOutcome asIs = simulate(s);
  ASSERT_TRUE(asIs.ok) << asIs.error;
  EXPECT_FALSE(asIs.reordered);
  expectNear(asIs.simUs, o.tunerNetUs, 0.01, "torus 4x4x4 as built");
}

TEST(SimFormula, TreeAsBuiltMatchesTheTunerAndFourLanesWouldPipeline) {
  // The double binary tree as one plan: every slice round waits for a trip
  // up to the root and back through both trees, which the tuner prices (about
  // 5 x depth x (alpha + slice beta) a round). Split NCCL-style into each
  // tree's up and down lanes, it would pipeline, several times faster.
  SimSpec s = baseSpec(fatTree("8"));
  s.bytes = 8 << 20;
  s.algo = "tree";
  const SimOutcome asIs = simulate(s);
  ASSERT_TRUE(asIs.ok) << asIs.error;
  expectNear(asIs.simUs, asIs.tunerUs, 0.15, "tree as built");
  s.reorder = "tree";
  const SimOutcome lanes = simulate(s);
  ASSERT_TRUE(lanes.ok) << lanes.error;
  EXPECT_TRUE(lanes.reordered);
  EXPECT_GT(asIs.simUs, 3 * lanes.simUs);
}

TEST(SimFormula, TreeBroadcastRoundsMatchTheTuner) {
  // 64 hosts, 512 KiB slices, 4 a round: 4 MiB is one round of 4 slices a
  // tree, 16 MiB four rounds. The per-level factors fitted before (3 slice
  // times a slice in a single round, 2 in several) priced 4 MiB 15% high.
  SimSpec s = baseSpec(fatTree("8x8"));
  s.coll = Collective::Broadcast;
  s.algo = "tree";
  s.sliceBytes = 512 << 10;
  s.roundSlices = 4;
  for (uint64_t bytes : {uint64_t{4} << 20, uint64_t{16} << 20}) {
    s.bytes = bytes;
    const SimOutcome o = simulate(s);
    ASSERT_TRUE(o.ok) << o.error;
    expectNear(o.tunerUs, o.simUs, 0.05, "tree Broadcast of " + std::to_string(bytes));
  }
}

TEST(SimFormula, MultiRankHostsMatchTheTuner) {
  // 8 hosts x 4 ranks, bandwidth-bound (8 MiB): every rank's bytes go
  // through its own shared-memory port, and ranks that leave the host share
  // its one fabric link. The tuner prices both (CostModel::concurrentBeta,
  // the dimension-wise port); halving-doubling trades its biggest halves with
  // the nearest partners, so the fabric link carries only the small ones.
  for (const char* algo : {"halving-doubling", "hierarchical", "ring"}) {
    SimSpec s = baseSpec(fatTree("4x2"));
    s.hosts = 8;
    s.ranksPerHost = 4;
    s.bytes = 8 << 20;
    s.algo = algo;
    const SimOutcome o = simulate(s);
    ASSERT_TRUE(o.ok) << algo << ": " << o.error;
    expectNear(o.simUs, o.tunerNetUs, 0.15, std::string(algo) + " on 8 hosts x 4 ranks");
  }
  // A torus of 2-rank hosts: the host axis' rings share the rank's port too.
  SimSpec t = baseSpec(torus("2x2x2"));
  t.ranksPerHost = 2;
  t.bytes = 8 << 20;
  t.algo = "torus";
  const SimOutcome o = simulate(t);
  ASSERT_TRUE(o.ok) << o.error;
  expectNear(o.simUs, o.tunerNetUs, 0.15, "torus 2x2x2 x 2 ranks");
}

// ---- The tuner's pick -----------------------------------------------------------

TEST(SimTuner, PricesTheMachineItSimulates) {
  // 16 hosts, AllReduce of 1 MiB, network only. At this project's measured
  // reduction speed and with halving-doubling's local passes the runtime
  // would pick the ring; the simulated machine does both for free, and
  // there halving-doubling is faster (118.6 us against 157.6), so that is
  // what the tuner must pick for it.
  SimSpec s = baseSpec(fatTree("4x4"));
  s.sliceBytes = 0;  // the tuner's slices
  s.bytes = 1 << 20;
  s.algo = "ring";
  const SimOutcome ring = simulate(s);
  ASSERT_TRUE(ring.ok) << ring.error;
  s.algo = "halving-doubling";
  const SimOutcome hd = simulate(s);
  ASSERT_TRUE(hd.ok) << hd.error;
  EXPECT_LT(hd.simUs, ring.simUs);
  EXPECT_EQ(hd.pick, "halving-doubling");
  EXPECT_EQ(ring.pick, "halving-doubling");
  expectNear(hd.tunerUs, hd.simUs, 0.05, "halving-doubling");
  expectNear(ring.tunerUs, ring.simUs, 0.05, "ring");
  // With reductions simulated, the tuner prices them, at the speed simulated.
  s.gammaGBs = -1;  // --compute: the measured 12 GB/s
  const SimOutcome hdCompute = simulate(s);
  ASSERT_TRUE(hdCompute.ok) << hdCompute.error;
  EXPECT_TRUE(hdCompute.compute);
  EXPECT_GT(hdCompute.tunerUs, hdCompute.tunerNetUs);
  EXPECT_GT(hdCompute.simUs, hd.simUs);
  s.gammaGBs = 6;  // --gamma 6: reductions take twice as long
  const SimOutcome hdSlow = simulate(s);
  ASSERT_TRUE(hdSlow.ok) << hdSlow.error;
  expectNear(hdSlow.tunerUs - hdSlow.tunerNetUs, 2 * (hdCompute.tunerUs - hdCompute.tunerNetUs), 1e-6,
             "reductions at 6 GB/s");

  // The same call as the runtime prices it, with this project's measured
  // reductions and local passes, goes to the ring: the pick above comes
  // from pricing what is simulated, nothing else.
  for (const std::string& kv : fatTree("4x4")) {
    const size_t eq = kv.find('=');
    setenv(kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str(), 1);
  }
  Topology topo;
  ASSERT_TRUE(topologyFromEnvironment(0, 1, &topo).isOk());
  SimSpec networkOnly = baseSpec(fatTree("4x4"));
  networkOnly.sliceBytes = 0;
  PlanContext ctx = contextFor(networkOnly, topo);
  EXPECT_EQ(ctx.gammaUsPerByte, 0.0);
  EXPECT_EQ(ctx.passUsPerByte, 0.0);
  const PlanKey key{Collective::AllReduce, topo.nranks, 0, (1u << 20) / 4, 4, 0, false};
  Choice simulated, runtime;
  ASSERT_TRUE(chooseAlgorithm(key, ctx, AlgoSpec{}, &simulated).isOk());
  EXPECT_STREQ(simulated.algo->name, "halving-doubling");
  ctx.gammaUsPerByte = ctx.passUsPerByte = -1;  // the runtime's: CostModel::of's measured constants
  const CostModel measured = CostModel::of(ctx);
  EXPECT_DOUBLE_EQ(measured.gammaUsPerByte, 1.0 / 12000.0);
  EXPECT_GT(measured.passUsPerByte, 0.0);
  ASSERT_TRUE(chooseAlgorithm(key, ctx, AlgoSpec{}, &runtime).isOk());
  EXPECT_STREQ(runtime.algo->name, "ring");
}

// ---- Contention -----------------------------------------------------------------

TEST(SimContention, TwoFlowsOnOneLinkTakeTwiceAsLong) {
  const uint64_t bytes = 64 << 20;
  auto run = [&](std::vector<std::string> env, std::vector<std::pair<int, int>> flows) {
    SimSpec s = baseSpec(std::move(env));
    s.slots = 1024;  // every slice of a flow may be in flight: the links alone set the pace
    s.bytes = bytes;
    s.algo = "ring";
    s.editPlans = flowPlans(flows, bytes);
    const SimOutcome o = simulate(s);
    EXPECT_TRUE(o.ok) << o.error;
    return o.simUs;
  };
  // Fat-tree leaf of 4 hosts: 0 -> 2 alone, then 0 -> 2 and 1 -> 2 (rank 2's downlink shared).
  const double one = run(fatTree("4"), {{0, 2}});
  const double two = run(fatTree("4"), {{0, 2}, {1, 2}});
  const double apart = run(fatTree("4"), {{0, 1}, {2, 3}});
  const double latency = 2.0 + 2 * 1.0;
  expectNear(one, latency + bytes / 25e3, 0.01, "one flow");
  expectNear(two, latency + 2 * bytes / 25e3, 0.01, "two flows into one host");
  expectNear(apart, one, 0.01, "two flows on separate links");
  // Torus ring of 4: 0 -> 2 goes 0-1-2, 1 -> 2 shares the link 1-2.
  const double tone = run(torus("4"), {{0, 2}});
  const double ttwo = run(torus("4"), {{0, 2}, {1, 2}});
  EXPECT_NEAR((ttwo - 4.0) / (tone - 4.0), 2.0, 0.02);
  // Opposite directions of one link do not share (split-duplex links).
  const double duplex = run(torus("4"), {{0, 1}, {1, 0}});
  expectNear(duplex, 3.0 + bytes / 25e3, 0.01, "both directions of one link");
}

// ---- The simulator and the verifier agree -----------------------------------------

namespace {

// A deliberately broken variant of an algorithm's plans, checked both ways.
struct Broken {
  const char* what;
  std::function<void(std::vector<Plan>&)> edit;
};

}  // namespace

TEST(SimVerifier, BothRejectBrokenPlans) {
  const PlanContext tight{1 << 10, 4, 2, 0, nullptr};  // the executor's rounds: slots / 2
  const Broken cases[] = {
      {"a lost last receive", [](std::vector<Plan>& p) { p[2].steps.pop_back(); }},
      {"a size mismatch", [](std::vector<Plan>& p) { p[1].steps[1].count -= 1; }},
      {"two ranks waiting for each other",
       [](std::vector<Plan>& p) {
         for (int r = 0; r < 2; ++r) {
           p[r].steps = {{Op::Recv, 1 - r, -1, {}, {Buf::Recv, 0}, 5, false},
                         {Op::Send, -1, 1 - r, {Buf::Send, 0}, {}, 5, false}};
           p[r].phaseStarts.clear();
         }
       }},
      {"a peer out of range", [](std::vector<Plan>& p) { p[0].steps[0].sendPeer = 9; }},
  };
  const Algorithm* ring = findAlgorithm("ring");
  ASSERT_NE(ring, nullptr);
  const VerifyCase vc{Collective::AllReduce, 4, 4096, 0, false, 4};
  for (const Broken& b : cases) {
    std::vector<Plan> plans(4);
    for (int r = 0; r < 4; ++r) {
      plans[r].key = PlanKey{vc.coll, 4, r, vc.count, 4, 0, false};
      plans[r].algorithm = "ring";
      ASSERT_TRUE(ring->build(plans[r].key, tight, plans[r]).isOk());
    }
    b.edit(plans);
    EXPECT_FALSE(verifyPlans(vc, tight, plans).isOk()) << b.what << ": the verifier accepts it";

    SimSpec s = baseSpec(fatTree("4"));
    s.bytes = vc.count * 4;
    s.sliceBytes = tight.sliceBytes;
    s.slots = tight.slots;
    s.roundSlices = tight.roundSlices;
    s.algo = "ring";
    s.editPlans = [&](const Topology&, std::vector<Plan>& p) {
      b.edit(p);
      return Status::ok();
    };
    const SimOutcome o = simulate(s);
    EXPECT_FALSE(o.ok) << b.what << ": the simulator runs it in " << o.simUs << " us";
  }
}

TEST(SimVerifier, OneSlotDeadlocksARingInBoth) {
  const Algorithm* ring = findAlgorithm("ring");
  PlanContext one{1 << 10, 1, 1, 0, nullptr};
  const Status v = verifyAlgorithm(*ring, VerifyCase{Collective::AllReduce, 3, 30, 0, false, 4}, one);
  EXPECT_NE(v.message().find("deadlock"), std::string::npos) << v.message();
  SimSpec s = baseSpec(fatTree("3"));
  s.bytes = 120;
  s.sliceBytes = 1 << 10;
  s.slots = 1;
  s.roundSlices = 1;
  s.algo = "ring";
  const SimOutcome o = simulate(s);
  EXPECT_FALSE(o.ok);
  EXPECT_NE(o.error.find("deadlock"), std::string::npos) << o.error;
  // Two slots are enough for both.
  s.slots = 2;
  EXPECT_TRUE(simulate(s).ok);
  one.slots = 2;
  EXPECT_TRUE(verifyAlgorithm(*ring, VerifyCase{Collective::AllReduce, 3, 30, 0, false, 4}, one).isOk());
}

// Every registered algorithm's plans that the verifier accepts complete in the
// simulator, on a torus with two ranks per host, a fat-tree and a flat
// switch, single-slice and multi-slice, never faster than the bandwidth bound.
TEST(SimVerifier, EveryAlgorithmRunsToCompletion) {
  struct Fabric {
    std::vector<std::string> env;
    int ranksPerHost;
  };
  const Fabric fabrics[] = {{torus("2x2x2"), 2}, {fatTree("4x2:2x1"), 1}, {fatTree("6"), 1}};
  std::vector<SimSpec> specs;
  for (const Fabric& f : fabrics) {
    for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                         Collective::Broadcast, Collective::Reduce}) {
      for (const Algorithm* a : algorithms()) {
        if (std::string(a->name) == "p2p") continue;
        for (uint64_t bytes : {uint64_t{4096}, uint64_t{3} << 20}) {
          SimSpec s = baseSpec(f.env);
          s.ranksPerHost = f.ranksPerHost;
          s.coll = c;
          s.bytes = bytes;
          s.root = 1;
          s.algo = a->name;
          s.sliceBytes = 64 * 1024;
          s.verify = true;
          s.reorder = "all";  // the rewrites must pass the verifier too
          specs.push_back(s);
        }
      }
    }
  }
  const std::vector<SimOutcome> out = simulateMany(specs, 2);
  int ran = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const SimOutcome& o = out[i];
    if (!o.ok && o.error.find("does not run") != std::string::npos) continue;
    ++ran;
    EXPECT_TRUE(o.ok) << specs[i].settings.back() << " " << specs[i].algo << " " << o.coll << " " << specs[i].bytes << ": "
                      << o.error;
    if (o.ok) {
      EXPECT_GE(o.simUs, o.boundUs * 0.999) << specs[i].algo << " " << o.coll << " beats the bound";
    }
  }
  EXPECT_GT(ran, 40);
}

// ---- Bounds ---------------------------------------------------------------------

TEST(SimBound, Formulas) {
  Topology t;
  setenv("NODUS_TORUS_DIMS", "8x8x8", 1);
  unsetenv("NODUS_FATTREE");
  unsetenv("NODUS_TOPO_FILE");
  ASSERT_TRUE(topologyFromEnvironment(0, 1, &t).isOk());
  // 256 MiB AllReduce on 8x8x8, 25 GB/s: 2 * 511/512 * N / (6 x 25 GB/s).
  const Bound b = bandwidthBound(Collective::AllReduce, 256ull << 20, t, LinkModel{});
  EXPECT_NEAR(b.us, 2.0 * 511 / 512 * (256 << 20) / 150e3, 0.01);
  // Fat-tree 16x32 with 4:1 leaves: the host link binds (16/4 uplinks per leaf of 16 hosts).
  setenv("NODUS_FATTREE", "16x32:4x1", 1);
  unsetenv("NODUS_TORUS_DIMS");
  Topology f;
  ASSERT_TRUE(topologyFromEnvironment(0, 1, &f).isOk());
  const Bound fb = bandwidthBound(Collective::AllReduce, 1 << 30, f, LinkModel{});
  EXPECT_NEAR(fb.us, 2.0 * 511 / 512 * (1 << 30) / 25e3, 0.1);
  // Even one uplink per leaf (16:1) does not bind an AllReduce (a leaf can
  // reduce inside first and send 2(k-1)/k N up), but it binds an AllGather
  // of the leaves' combined 16 inputs... which is also (k-1)/k N: the bound
  // stays the host's. Two levels of 4:1 over 2 pods: the pod's 1 x 4 uplinks
  // carry (2-1)/2 N against a host's 511/512 N: still the host.
  setenv("NODUS_FATTREE", "16x32:16x1", 1);
  Topology o;
  ASSERT_TRUE(topologyFromEnvironment(0, 1, &o).isOk());
  const Bound ob = bandwidthBound(Collective::AllReduce, 1 << 30, o, LinkModel{});
  EXPECT_NEAR(ob.us, fb.us, 0.1);
  EXPECT_NE(ob.formula.find("host"), std::string::npos) << ob.formula;
  // Several ranks per host: their 10 GB/s links inside the host bind first.
  setenv("NODUS_TORUS_DIMS", "4x4x4", 1);
  unsetenv("NODUS_FATTREE");
  Topology l;
  ASSERT_TRUE(topologyFromEnvironment(0, 4, &l).isOk());
  const Bound lb = bandwidthBound(Collective::AllReduce, 1 << 30, l, LinkModel{});
  EXPECT_NEAR(lb.us, 2.0 * 255 / 256 * (1 << 30) / 10e3, 0.1);
  unsetenv("NODUS_TORUS_DIMS");
  unsetenv("NODUS_FATTREE");
}

// ---- One planner: the runtime's plans are the simulator's ----------------------

namespace planner_test {

// A communicator of `n` threads (loopback), posing as the hosts `hostIds`
// lists, with `settings` over the environment's.
std::vector<std::unique_ptr<Comm>> runtimeComms(int n, const std::vector<std::string>& settings) {
  Settings base;
  EXPECT_TRUE(settingsOf(settings, &base).isOk());
  auto group = makeInProcessGroup(n);
  std::vector<std::unique_ptr<Comm>> comms(static_cast<size_t>(n));
  std::vector<Status> made(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      InitOptions opts;
      opts.settings = base;
      opts.bootstrap = inProcessBootstrap(group, r, std::chrono::milliseconds(base.get(param::kTimeoutMs)));
      opts.inProcess = true;
      made[static_cast<size_t>(r)] = Comm::create(std::move(opts), &comms[static_cast<size_t>(r)]);
    });
  for (auto& t : threads) t.join();
  for (const Status& s : made) EXPECT_TRUE(s.isOk()) << s.message();
  return comms;
}

std::string fingerprint(const Plan& p) {
  return p.algorithm + " slice=" + std::to_string(p.sliceElems) + " round=" + std::to_string(p.roundSlices) +
         " slices=" + std::to_string(p.maxSlices) + " refs=" + std::to_string(p.referencesAcross) +
         " channels=" + std::to_string(p.channels) + " scratch=" + std::to_string(p.scratchElems) + "\n" + describe(p);
}

}  // namespace planner_test

// The plans a communicator runs and the plans nodus-sim simulates for the
// same settings, fabric and placement come from one planner and are the
// same, step for step, for a matrix of calls; so are the picks of nodus-topo
// (which prints makePlan's choice) and the runtime's.
TEST(Planner, RuntimeAndSimulatorMakeTheSamePlans) {
  struct Setup {
    std::vector<std::string> settings;
    int hosts, ranksPerHost;
  };
  // 128 KiB slots on both sides: the runtime's threads connect over
  // loopback, which a simulated multi-host job would model as RDMA.
  const Setup setups[] = {
      {{"NODUS_TORUS_DIMS=2x2", "NODUS_HOSTID=host0,host1,host2,host3", "NODUS_SLOT_BYTES=128K", "NODUS_BIND=none"}, 4, 1},
      {{"NODUS_FATTREE=2x2", "NODUS_HOSTID=host0,host0,host1,host1", "NODUS_SLOT_BYTES=128K", "NODUS_BIND=none"}, 2, 2},
      {{"NODUS_ALGO=allreduce:0-64K:direct", "NODUS_SLOT_BYTES=128K", "NODUS_BIND=none"}, 1, 3},
  };
  const Collective colls[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                              Collective::Broadcast, Collective::Reduce};
  int compared = 0;
  for (const Setup& setup : setups) {
    const int n = setup.hosts * setup.ranksPerHost;
    auto comms = planner_test::runtimeComms(n, setup.settings);
    ASSERT_EQ(comms.size(), static_cast<size_t>(n));
    for (const auto& c : comms) ASSERT_TRUE(c);
    SimSpec spec;
    spec.settings = setup.settings;
    spec.hosts = setup.hosts;
    spec.ranksPerHost = setup.ranksPerHost;
    spec.priceAsRuntime = true;
    spec.coreShare = comms[0]->topology().coreShare;  // the cores the runtime found
    for (Collective coll : colls)
      for (uint32_t typeSize : {4u, 2u})
        for (uint64_t count : {uint64_t{1}, uint64_t{1000}, uint64_t{64} << 10, uint64_t{1} << 20})
          for (bool inPlace : {false, true})
            for (int root : {0, n - 1}) {
              if (root != 0 && coll != Collective::Broadcast && coll != Collective::Reduce) continue;
              spec.coll = coll;
              spec.typeSize = typeSize;
              spec.root = root;
              std::vector<Plan> simulated;
              const Status s = simulatedPlans(spec, count, inPlace, &simulated);
              ASSERT_TRUE(s.isOk()) << s.message();
              ASSERT_EQ(simulated.size(), static_cast<size_t>(n));
              for (int r = 0; r < n; ++r) {
                const PlanKey key{coll, n, r, count, typeSize, root, inPlace};
                const Plan* run = nullptr;
                ASSERT_TRUE(comms[static_cast<size_t>(r)]->plan(key, &run).isOk());
                EXPECT_EQ(planner_test::fingerprint(*run), planner_test::fingerprint(simulated[static_cast<size_t>(r)]))
                    << collectiveName(coll) << " count " << count << " x" << typeSize << (inPlace ? " in place" : "")
                    << " root " << root << " rank " << r << " of " << setup.settings.front();
                ++compared;
              }
            }
  }
  EXPECT_GT(compared, 500);
}

// nodus-topo prints the planner's pick: for every collective and size of its
// table, the algorithm of the plan the simulator's path makes for the same
// fabric (one rank a host, float32, out of place).
TEST(Planner, NodusTopoPrintsThePlannersPick) {
  const std::string cmd = std::string("NODUS_TORUS_DIMS=2x3 NODUS_TOPO_FILE= NODUS_FATTREE= NODUS_ALGO= ") +
                          NODUS_TOPO_BIN + " --ranks-per-host 1 --json -b 8 -e 64M";
  FILE* f = popen(cmd.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), f)) > 0;) out.append(buf, n);
  ASSERT_EQ(pclose(f), 0) << out;
  SimSpec spec;
  spec.settings = {"NODUS_TORUS_DIMS=2x3", "NODUS_TOPO_FILE=", "NODUS_FATTREE=", "NODUS_ALGO="};
  spec.ranksPerHost = 1;
  spec.priceAsRuntime = true;
  const int p = 6;
  int rows = 0;
  for (size_t at = out.find("{\"collective\": \""); at != std::string::npos; at = out.find("{\"collective\": \"", at + 1)) {
    const size_t c0 = at + 16, c1 = out.find('"', c0);
    const std::string coll = out.substr(c0, c1 - c0);
    const size_t b0 = out.find("\"bytes\": ", c1) + 9;
    const uint64_t bytes = std::stoull(out.substr(b0, out.find(',', b0) - b0));
    const size_t a0 = out.find("\"algorithm\": \"", b0) + 14;
    const std::string algo = out.substr(a0, out.find('"', a0) - a0);
    bool known = false;
    spec.coll = parseCollective(coll, &known);
    ASSERT_TRUE(known) << coll;
    const bool split = spec.coll == Collective::AllGather || spec.coll == Collective::ReduceScatter;
    const uint64_t count = (split ? bytes / p : bytes) / 4;
    std::vector<Plan> plans;
    ASSERT_TRUE(simulatedPlans(spec, count, false, &plans).isOk());
    EXPECT_EQ(plans[0].algorithm, algo) << coll << " " << bytes << " B";
    ++rows;
  }
  EXPECT_GT(rows, 40) << out;
}
