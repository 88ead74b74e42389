// Plans proven correct by the verifier: every algorithm, every collective it
// implements, rank counts 1..64 and a sample up to 1024, awkward counts,
// in place and out of place, every root, tight and loose slot budgets.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/tree.h"
#include "plan/plan.h"
#include "tune/planner.h"
#include "topo/topology.h"
#include "tune/tuner.h"

using namespace nodus;

namespace {

const Collective kCollectives[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                                   Collective::Broadcast, Collective::Reduce};

std::vector<uint64_t> countsFor(int p) {
  std::vector<uint64_t> c = {0, 1, 2, 7, 13, 31, static_cast<uint64_t>(p), static_cast<uint64_t>(p) + 1,
                             static_cast<uint64_t>(p) * 3 + 2};
  if (p > 1) c.push_back(static_cast<uint64_t>(p) - 1);
  return c;
}

// Slices of 3 elements and 2 slots: steps span several slices and senders
// block on full connections, which is where pipelining bugs and deadlocks hide.
PlanContext tightContext() {
  PlanContext ctx;
  ctx.sliceBytes = 3 * 4;
  ctx.slots = 2;
  ctx.directMaxBytes = 1 << 20;
  return ctx;
}

// `counts` is the API count: per rank for AllGather and ReduceScatter, so
// their data grows with p; `perRankCap` bounds that for large p.
void verifyAll(int p, const std::vector<uint64_t>& counts, const PlanContext& ctx, bool allRoots,
               uint64_t perRankCap = UINT64_MAX) {
  for (const Algorithm* algo : algorithms()) {
    for (Collective coll : kCollectives) {
      for (uint64_t n : counts) {
        const bool perRank = coll == Collective::AllGather || coll == Collective::ReduceScatter;
        if (perRank && n > perRankCap) continue;
        for (bool inPlace : {false, true}) {
          std::vector<int> roots = {0};
          if (coll == Collective::Broadcast || coll == Collective::Reduce) {
            roots = allRoots ? std::vector<int>{} : std::vector<int>{0, p / 2, p - 1};
            if (allRoots)
              for (int r = 0; r < p; ++r) roots.push_back(r);
          }
          for (int root : roots) {
            VerifyCase c{coll, p, n, root, inPlace, 4};
            PlanKey key{coll, p, 0, n, 4, root, inPlace};
            if (!algo->supports(key, ctx)) continue;
            Status s = verifyAlgorithm(*algo, c, ctx);
            ASSERT_TRUE(s.isOk()) << algo->name << " " << collectiveName(coll) << " p=" << p << " n=" << n
                                  << " root=" << root << (inPlace ? " in-place" : "") << ": " << s.message();
          }
        }
      }
    }
  }
}

}  // namespace

// The cursor's order: phase by phase, in rounds of `group` slices per step.
TEST(PlanCursor, RoundsOfSlicesStepByStep) {
  Plan p;
  p.steps = {{Op::Send, -1, 1, {Buf::Send, 0}, {}, 5, false},
             {Op::Recv, 1, -1, {}, {Buf::Recv, 0}, 3, false},
             {Op::Send, -1, 1, {Buf::Send, 0}, {}, 2, false}};
  p.phaseStarts = {2};
  auto walk = [&](uint32_t group) {
    std::string order;
    PlanCursor at;
    for (at.start(p, 1, group); !at.done; at.next(p, 1))
      order += std::to_string(at.step) + ":" + std::to_string(at.slice) + " ";
    return order;
  };
  EXPECT_EQ(walk(1), "0:0 1:0 0:1 1:1 0:2 1:2 0:3 0:4 2:0 2:1 ");
  EXPECT_EQ(walk(2), "0:0 0:1 1:0 1:1 0:2 0:3 1:2 0:4 2:0 2:1 ");
  EXPECT_EQ(walk(4), "0:0 0:1 0:2 0:3 1:0 1:1 1:2 0:4 2:0 2:1 ");
}

// Which sends may leave from the buffer itself (a transport sends it later,
// by reference): not those whose range a later step of the phase, a later
// phase, or an earlier step of the phase not aligned with it writes again.
TEST(StableSends, OnlyRangesNothingWritesAfterTheSendAreMarked) {
  auto step = [](Op op, Range src, Range dst, uint64_t count) {
    Step s;
    s.op = op;
    s.recvPeer = opReceives(op) ? 1 : -1;
    s.sendPeer = opSends(op) ? 1 : -1;
    s.src = src;
    s.dst = dst;
    s.count = count;
    return s;
  };
  Plan p;
  p.key = PlanKey{Collective::AllReduce, 2, 0, 100, 4, 0, false};
  p.steps = {
      step(Op::Copy, {Buf::Send, 0}, {Buf::Recv, 0}, 10),         // 0: writes recv[0,10)
      step(Op::Send, {Buf::Recv, 0}, {}, 10),                     // 1: aligned with 0's write: stable
      step(Op::Send, {Buf::Recv, 5}, {}, 10),                     // 2: 0 writes [5,10) in other slices: not
      step(Op::Send, {Buf::Recv, 20}, {}, 10),                    // 3: step 4 writes [25,30) after it: not
      step(Op::Recv, {}, {Buf::Recv, 25}, 10),                    // 4
      step(Op::Send, {Buf::Send, 0}, {}, 50),                     // 5: nothing writes Send: stable
      step(Op::RecvCopySend, {}, {Buf::Recv, 40}, 10),            // 6: sends recv[40,50); phase 2 writes 45: not
      step(Op::RecvReduceSend, {Buf::Send, 0}, {}, 10),           // 7: computed into the slot: never
      step(Op::RecvReduceCopySend, {Buf::Send, 0}, {Buf::Scratch, 0}, 10),  // 8: scratch, untouched later: stable
      step(Op::Recv, {}, {Buf::Recv, 45}, 5),                     // 9 (phase 2)
      step(Op::Send, {Buf::Recv, 60}, {}, 10),                    // 10: the last writer of [60,70) is in phase 1
  };
  p.steps.insert(p.steps.begin(), step(Op::Recv, {}, {Buf::Recv, 60}, 10));  // phase 1's first step
  p.phaseStarts = {10};
  markReferenceSends(p);
  std::vector<bool> got;
  for (const Step& st : p.steps) got.push_back(st.mayReference);
  // (index 0 is the inserted Recv into [60,70); step 10 of the list above is index 11)
  EXPECT_EQ(got, (std::vector<bool>{false, false, true, false, false, false, true, false, false, true, false, true}));

  // In place, Send aliases Recv as the collective says: AllGather's rank 1
  // sends from recv[count, 2 count), which a later write there reaches.
  Plan ag;
  ag.key = PlanKey{Collective::AllGather, 2, 1, 8, 4, 0, true};
  ag.steps = {step(Op::Send, {Buf::Send, 0}, {}, 8), step(Op::Recv, {}, {Buf::Recv, 0}, 8)};
  markReferenceSends(ag);
  EXPECT_TRUE(ag.steps[0].mayReference) << "rank 1's own block, recv[8,16), is not written by its recv into [0,8)";
  ag.steps[1].dst = {Buf::Recv, 12};
  markReferenceSends(ag);
  EXPECT_FALSE(ag.steps[0].mayReference) << "recv[12,20) overlaps the block rank 1 sends in place";
  ag.key.inPlace = false;
  markReferenceSends(ag);
  EXPECT_TRUE(ag.steps[0].mayReference) << "out of place the send buffer is apart";

  // Point-to-point sends are never left by reference (they would wait for
  // their receiver), nor plans past the step limit.
  Plan send;
  send.key = PlanKey{Collective::Send, 2, 0, 8, 4, 1, false};
  send.steps = {step(Op::Send, {Buf::Send, 0}, {}, 8)};
  markReferenceSends(send);
  EXPECT_FALSE(send.steps[0].mayReference);
  markReferenceSends(ag, 1);
  EXPECT_FALSE(ag.steps[0].mayReference);

  // What the tuner builds: a ring AllGather sends every block from where it
  // lies, in place or not.
  for (bool inPlace : {false, true}) {
    Plan ring;
    ring.key = PlanKey{Collective::AllGather, 5, 2, 1000, 4, 0, inPlace};
    PlanContext ctx;
    ctx.sliceBytes = 1024;
    ctx.slots = 8;
    ASSERT_TRUE(findAlgorithm("ring")->build(ring.key, ctx, ring).isOk());
    markReferenceSends(ring);
    for (const Step& st : ring.steps) {
      if (!opSends(st.op)) continue;
      EXPECT_TRUE(st.mayReference) << describe(ring);
    }
    // ... and lets peer processes read them from there (shm's process_vm_readv).
    EXPECT_TRUE(ring.referencesAcross);
  }
  // Only AllGather's sends go by reference to other processes, and a
  // 2-rank Broadcast's up to kMaxBroadcastReferenceBytes: AllReduce's
  // receives reduce; a longer Broadcast chain's ranks (its root, its
  // forwarders), and a larger 2-rank one, copied faster through the slots.
  for (Collective c : {Collective::AllReduce, Collective::Broadcast, Collective::ReduceScatter}) {
    Plan ring;
    ring.key = PlanKey{c, 3, 1, 3000, 4, 0, false};
    PlanContext ctx;
    ctx.sliceBytes = 1024;
    ctx.slots = 8;
    ASSERT_TRUE(findAlgorithm(c == Collective::Broadcast ? "chain" : "ring")->build(ring.key, ctx, ring).isOk());
    markReferenceSends(ring);
    EXPECT_FALSE(ring.referencesAcross) << collectiveName(c);
  }
  for (bool inPlace : {false, true}) {
    for (int rank : {0, 1}) {
      const uint64_t limit = kMaxBroadcastReferenceBytes / 4;
      for (uint64_t count : {uint64_t{8192}, limit, limit + 1}) {
        Plan chain;
        chain.key = PlanKey{Collective::Broadcast, 2, rank, count, 4, 0, inPlace};
        PlanContext ctx;
        ctx.sliceBytes = 131072;
        ctx.slots = 8;
        ASSERT_TRUE(findAlgorithm("chain")->build(chain.key, ctx, chain).isOk());
        markReferenceSends(chain);
        // Decided by size alone, so both ranks cut the call alike.
        EXPECT_EQ(chain.referencesAcross, count <= limit) << count << " rank " << rank << " inPlace " << inPlace;
      }
    }
  }
  // An AllGather rank with nothing to copy or receive (one rank, in place)
  // has nothing to save.
  Plan alone;
  alone.key = PlanKey{Collective::AllGather, 1, 0, 8, 4, 0, true};
  alone.steps = {step(Op::Copy, {Buf::Send, 0}, {Buf::Recv, 0}, 8)};
  markReferenceSends(alone);
  EXPECT_FALSE(alone.referencesAcross);
  alone.key.inPlace = false;
  markReferenceSends(alone);
  EXPECT_TRUE(alone.referencesAcross);
}

// Every rank count 1..64, split so ctest runs the parts in parallel. Up to 16
// ranks: every count of countsFor() and every root; beyond, the counts that
// exercise empty, single-element and uneven blocks, with a few roots.
class VerifierRanks : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(VerifierRanks, AllAlgorithms) {
  for (int p = GetParam().first; p <= GetParam().second; ++p) {
    SCOPED_TRACE("p=" + std::to_string(p));
    if (p <= 16) {
      verifyAll(p, countsFor(p), tightContext(), p <= 8);
    } else {
      PlanContext ctx = tightContext();
      ctx.sliceBytes = 8 * 4;
      const uint64_t up = static_cast<uint64_t>(p);
      verifyAll(p, {0, 1, up - 1, 3 * up + 2}, ctx, false);
    }
  }
}

// The executor's own order: rounds of NODUS_ROUND_SLICES slices per step
// (at most half the slots), with slices of 3 elements so that every step
// spans several rounds and steps end inside a round.
class VerifierRounds : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(VerifierRounds, AllAlgorithms) {
  for (auto [slots, round] : {std::pair<uint32_t, uint32_t>{4, 2}, {8, 4}}) {
    PlanContext ctx = tightContext();
    ctx.slots = slots;
    ctx.roundSlices = round;
    for (int p = GetParam().first; p <= GetParam().second; ++p) {
      SCOPED_TRACE("p=" + std::to_string(p) + " slots=" + std::to_string(slots) + " round=" + std::to_string(round));
      const uint64_t up = static_cast<uint64_t>(p);
      verifyAll(p, {0, 1, up + 1, 3 * up + 2, 25 * up + 7}, ctx, false);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, VerifierRounds,
                         ::testing::Values(std::make_pair(1, 8), std::make_pair(9, 16), std::make_pair(17, 24)),
                         [](const auto& info) {
                           return std::to_string(info.param.first) + "to" + std::to_string(info.param.second);
                         });

INSTANTIATE_TEST_SUITE_P(Ranks, VerifierRanks,
                         ::testing::Values(std::make_pair(1, 8), std::make_pair(9, 16), std::make_pair(17, 32),
                                           std::make_pair(33, 48), std::make_pair(49, 64)),
                         [](const auto& info) {
                           return std::to_string(info.param.first) + "to" + std::to_string(info.param.second);
                         });

// Ring channels (NODUS_CHANNELS): the data in two parts, one around the ring
// each way, steps interleaved; more asked for than the ring runs (capped),
// more channels than elements (empty parts), 2 ranks (one channel), the
// fewest slots a ring runs with and rounds of several slices.
class VerifierChannels : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(VerifierChannels, Ring) {
  const Algorithm* ring = findAlgorithm("ring");
  ASSERT_NE(ring, nullptr);
  for (uint32_t channels : {2u, 8u}) {
    for (auto [slots, round] : {std::pair<uint32_t, uint32_t>{2, 1}, {8, 4}}) {
      PlanContext ctx = tightContext();
      ctx.channels = channels;
      ctx.slots = slots;
      ctx.roundSlices = round;
      for (int p = GetParam().first; p <= GetParam().second; ++p) {
        const uint64_t up = static_cast<uint64_t>(p);
        for (Collective coll : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter})
          for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{channels} - 1, up + 1, 3 * up + 2, 25 * up + 7})
            for (bool inPlace : {false, true}) {
              Status s = verifyAlgorithm(*ring, VerifyCase{coll, p, n, 0, inPlace, 4}, ctx);
              ASSERT_TRUE(s.isOk()) << channels << " channels, slots " << slots << " round " << round << ", "
                                    << collectiveName(coll) << " p=" << p << " n=" << n
                                    << (inPlace ? " in-place" : "") << ": " << s.message();
            }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, VerifierChannels,
                         ::testing::Values(std::make_pair(1, 9), std::make_pair(10, 17)),
                         [](const auto& info) {
                           return std::to_string(info.param.first) + "to" + std::to_string(info.param.second);
                         });

// A sample of large rank counts, one test each.
class VerifierSample : public ::testing::TestWithParam<int> {};

TEST_P(VerifierSample, AllAlgorithms) {
  const int p = GetParam();
  PlanContext ctx;
  ctx.sliceBytes = 64 * 4;
  ctx.slots = 4;
  ctx.roundSlices = 2;
  ctx.directMaxBytes = 0;
  verifyAll(p, {0, 1, 5, 1031, static_cast<uint64_t>(p) * 3 + 1}, ctx, false, 5);
}

INSTANTIATE_TEST_SUITE_P(Ranks, VerifierSample, ::testing::Values(96, 127, 128, 255, 256, 509, 512, 1000, 1024));

// Direct: ranks 0 and 1 fold their own contribution with the other's in the
// step that reads it (no copy before the fold); the last fold of every rank,
// and only it, finishes an average.
TEST(DirectPlan, RanksZeroAndOneFoldAsTheyRead) {
  for (int p : {2, 3, 5})
    for (bool inPlace : {false, true})
      for (int rank = 0; rank < p; ++rank) {
        Plan plan;
        plan.key = PlanKey{Collective::AllReduce, p, rank, 1000, 4, 0, inPlace};
        PlanContext ctx;
        ASSERT_TRUE(findAlgorithm("direct")->build(plan.key, ctx, plan).isOk());
        const Range own = inPlace ? Range{Buf::Scratch, 0} : Range{Buf::Send, 0};
        int folds = 0, avgs = 0, copiesToRecv = 0;
        const Step* firstIn = nullptr;
        for (const Step& st : plan.steps) {
          if (st.op == Op::Copy && st.dst.buf == Buf::Recv) ++copiesToRecv;
          if (st.op == Op::RecvReduceCopy || st.op == Op::Reduce) ++folds;
          avgs += st.finalAvg ? 1 : 0;
          if (!firstIn && (opReceives(st.op) || st.op == Op::Reduce)) firstIn = &st;
        }
        SCOPED_TRACE(describe(plan));
        EXPECT_EQ(copiesToRecv, 0);
        EXPECT_EQ(avgs, 1);
        EXPECT_TRUE(plan.steps.back().finalAvg);
        ASSERT_NE(firstIn, nullptr);
        // Every fold is acc op x_j: the received contribution comes second,
        // except on rank 1's first fold, where it is x0.
        for (const Step& st : plan.steps) {
          if (st.op != Op::RecvReduceCopy) continue;
          EXPECT_EQ(st.receivedLast, !(rank == 1 && &st == firstIn));
        }
        if (rank <= 1) {
          EXPECT_EQ(firstIn->op, Op::RecvReduceCopy);
          EXPECT_EQ(firstIn->recvPeer, 1 - rank);
          EXPECT_EQ(firstIn->src.buf, own.buf);
          EXPECT_EQ(folds, p - 1);
        } else {
          EXPECT_EQ(firstIn->op, Op::Recv);
          EXPECT_EQ(firstIn->recvPeer, 0);
          EXPECT_EQ(folds, p - 1);
        }
      }
  for (int p : {2, 3, 5})
    for (bool inPlace : {false, true}) {
      const Status s = verifyAlgorithm(*findAlgorithm("direct"), VerifyCase{Collective::AllReduce, p, 1000, 0, inPlace, 4},
                                       PlanContext{});
      EXPECT_TRUE(s.isOk()) << p << " ranks: " << s.message();
    }
}

TEST(Verifier, LargeSlicesAndManySlots) {
  PlanContext ctx;
  ctx.sliceBytes = 1 << 19;
  ctx.slots = 8;
  ctx.roundSlices = 4;
  ctx.directMaxBytes = 1 << 16;
  for (int p : {2, 3, 5, 8}) verifyAll(p, {0, 1, 100003}, ctx, false);
}

// The verifier itself must reject wrong plans, or the tests above prove nothing.
TEST(Verifier, RejectsBrokenPlans) {
  PlanContext ctx = tightContext();
  const Algorithm* ring = findAlgorithm("ring");
  ASSERT_NE(ring, nullptr);
  VerifyCase c{Collective::AllReduce, 4, 10, 0, false, 4};
  auto build = [&](std::vector<Plan>& plans) {
    plans.assign(4, Plan{});
    for (int r = 0; r < 4; ++r) {
      PlanKey key{c.coll, 4, r, c.count, 4, 0, false};
      plans[r].key = key;
      ASSERT_TRUE(ring->build(key, ctx, plans[r]).isOk());
    }
  };
  std::vector<Plan> plans;
  build(plans);
  ASSERT_TRUE(verifyPlans(c, ctx, plans).isOk());

  // A contribution counted twice: rank 1 reduces one of its blocks again.
  build(plans);
  plans[1].steps.push_back({Op::Reduce, -1, -1, {Buf::Send, 0}, {Buf::Recv, 0}, 1, false});
  EXPECT_FALSE(verifyPlans(c, ctx, plans).isOk());

  // A lost step: the last receive of rank 2 is dropped.
  build(plans);
  plans[2].steps.pop_back();
  Status s = verifyPlans(c, ctx, plans);
  EXPECT_FALSE(s.isOk());

  // A shifted range: rank 3 writes its last block one element off.
  build(plans);
  plans[3].steps.back().dst.offset += 1;
  EXPECT_FALSE(verifyPlans(c, ctx, plans).isOk());

  // No average finalisation (or two) is caught.
  build(plans);
  for (auto& st : plans[0].steps) st.finalAvg = false;
  EXPECT_FALSE(verifyPlans(c, ctx, plans).isOk());

  // Two ranks that each wait for the other before sending deadlock.
  VerifyCase two{Collective::Broadcast, 2, 5, 0, false, 4};
  std::vector<Plan> cross(2);
  for (int r = 0; r < 2; ++r) {
    cross[r].steps.push_back({Op::Recv, 1 - r, -1, {}, {Buf::Recv, 0}, 5, false});
    cross[r].steps.push_back({Op::Send, -1, 1 - r, {Buf::Send, 0}, {}, 5, false});
  }
  s = verifyPlans(two, ctx, cross);
  EXPECT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s.message();

  // Why NODUS_SLOTS must be at least 2: with one slot a ring deadlocks.
  PlanContext one = ctx;
  one.slots = 1;
  s = verifyAlgorithm(*ring, VerifyCase{Collective::AllReduce, 3, 30, 0, false, 4}, one);
  EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s.message();

  // Why NODUS_ROUND_SLICES is at most half the slots: a ring step that takes
  // every slot in a row waits for its successor, which waits the same way.
  PlanContext full = ctx;
  full.slots = 4;
  full.roundSlices = 4;
  s = verifyAlgorithm(*ring, VerifyCase{Collective::AllReduce, 3, 300, 0, false, 4}, full);
  EXPECT_NE(s.message().find("deadlock"), std::string::npos) << s.message();
  full.roundSlices = 2;
  EXPECT_TRUE(verifyAlgorithm(*ring, VerifyCase{Collective::AllReduce, 3, 300, 0, false, 4}, full).isOk());
}

TEST(Algorithms, ChooserHonoursForcedAndRejectsUnknown) {
  PlanContext ctx;
  ctx.sliceBytes = 1 << 19;
  ctx.slots = 8;
  ctx.directMaxBytes = 1 << 16;
  Choice c;
  AlgoSpec none, ring;
  ASSERT_TRUE(AlgoSpec::parse("ring", &ring).isOk());
  PlanKey small{Collective::AllReduce, 4, 0, 2, 4, 0, false};
  ASSERT_TRUE(chooseAlgorithm(small, ctx, none, &c).isOk());
  EXPECT_STREQ(c.algo->name, "direct");
  PlanKey large{Collective::AllReduce, 4, 0, 1 << 24, 4, 0, false};
  ASSERT_TRUE(chooseAlgorithm(large, ctx, none, &c).isOk());
  EXPECT_STREQ(c.algo->name, "ring");
  ASSERT_TRUE(chooseAlgorithm(small, ctx, ring, &c).isOk());
  EXPECT_STREQ(c.algo->name, "ring");
  EXPECT_TRUE(c.forced);
  AlgoSpec bad;
  Status s = AlgoSpec::parse("nosuch", &bad);
  EXPECT_EQ(s.code(), nodusInvalidArgument);
  EXPECT_NE(s.message().find("nosuch"), std::string::npos);
}

// ---- Topology-aware algorithms ------------------------------------------------------

namespace {

// `hosts` hosts of `local` ranks each (rank r on host r / local), on `fabric`.
Topology makeTopology(const FabricConfig& fabric, int hosts, int local) {
  std::vector<std::string> names;
  std::vector<int> numa;
  for (int h = 0; h < hosts; ++h)
    for (int l = 0; l < local; ++l) names.push_back("h" + std::to_string(h)), numa.push_back(l % 2);
  Topology t;
  Status s = Topology::build(fabric, names, numa, &t);
  EXPECT_TRUE(s.isOk()) << s.message();
  return t;
}

FabricConfig torus(std::vector<int> dims) {
  FabricConfig f;
  f.kind = FabricKind::Torus;
  f.wrap.assign(dims.size(), true);
  f.dims = std::move(dims);
  return f;
}

// Every algorithm and collective on this topology (the topology-aware ones
// included), checking that `expect` algorithms did run.
void verifyOnTopology(const Topology& t, const std::vector<uint64_t>& counts, const std::vector<std::string>& expect,
                      uint64_t perRankCap = UINT64_MAX) {
  PlanContext ctx = tightContext();
  ctx.sliceBytes = 8 * 4;
  ctx.topo = &t;
  for (const std::string& name : expect) {
    PlanKey key{Collective::AllReduce, t.nranks, 0, 1, 4, 0, false};
    EXPECT_TRUE(findAlgorithm(name.c_str())->supports(key, ctx)) << name << " on " << t.describe();
  }
  verifyAll(t.nranks, counts, ctx, false, perRankCap);
}

}  // namespace

TEST(Topology, SnakeOrderStepsToANeighbour) {
  for (const std::vector<int>& dims : std::vector<std::vector<int>>{{5}, {3, 4}, {3, 5, 7}, {4, 4, 4}, {2, 3, 2}}) {
    const std::vector<uint64_t> order = snakeOrder(dims);
    std::vector<bool> seen(order.size());
    for (size_t i = 0; i < order.size(); ++i) {
      ASSERT_LT(order[i], order.size());
      EXPECT_FALSE(seen[order[i]]);
      seen[order[i]] = true;
      if (i == 0) continue;
      // Exactly one coordinate changes, by one.
      uint64_t a = order[i - 1], b = order[i];
      int changed = 0;
      for (int d : dims) {
        const int64_t da = static_cast<int64_t>(a % d), db = static_cast<int64_t>(b % d);
        if (da != db) {
          ++changed;
          EXPECT_EQ(std::abs(da - db), 1);
        }
        a /= d, b /= d;
      }
      EXPECT_EQ(changed, 1);
    }
  }
}

TEST(Topology, DoubleBinaryTreesShareNoInnerRank) {
  for (int p = 2; p <= 4096; p = p < 64 ? p + 1 : p * 2 - 1) {
    // Tree 2 labels position i as (i + 1) % p + 1; inner labels are even in both.
    int roots = 0;
    for (int pos = 0; pos < p; ++pos) {
      const int x1 = pos + 1, x2 = (pos + 1) % p + 1;
      const bool inner1 = (x1 & 1) == 0 && p > 1, inner2 = (x2 & 1) == 0 && p > 1;
      EXPECT_FALSE(inner1 && inner2) << "p=" << p << " pos=" << pos;
      roots += binaryTreeParent(x1, p) == 0;
      // Inner nodes have a child: the left one, x - lowbit(x)/2.
      if (inner1) {
        EXPECT_EQ(binaryTreeParent(x1 - (x1 & -x1) / 2, p), x1);
      }
    }
    EXPECT_EQ(roots, 1) << "p=" << p;
    EXPECT_LE(binaryTreeDepth(p), static_cast<int>(std::log2(p)) + 1);
  }
}

class VerifierTorus : public ::testing::TestWithParam<std::tuple<std::vector<int>, int>> {};

TEST_P(VerifierTorus, AllAlgorithms) {
  const auto& [dims, local] = GetParam();
  int hosts = 1;
  for (int d : dims) hosts *= d;
  const Topology t = makeTopology(torus(dims), hosts, local);
  const uint64_t p = static_cast<uint64_t>(t.nranks);
  verifyOnTopology(t, {0, 1, 7, p - 1, 2 * p + 3}, {"torus"}, p > 64 ? 5 : UINT64_MAX);
  // The ring in two and three channels over the torus's ring order.
  PlanContext ctx = tightContext();
  ctx.sliceBytes = 8 * 4;
  ctx.topo = &t;
  for (uint32_t channels : {2u, 3u})
    for (Collective coll : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter})
      for (uint64_t n : {uint64_t{1}, p - 1, 2 * p + 3}) {
        if (p > 64 && coll != Collective::AllReduce && n > 5) continue;
        ctx.channels = channels;
        Status s = verifyAlgorithm(*findAlgorithm("ring"), VerifyCase{coll, t.nranks, n, 0, false, 4}, ctx);
        ASSERT_TRUE(s.isOk()) << channels << " channels " << collectiveName(coll) << " n=" << n << ": " << s.message();
      }
}

INSTANTIATE_TEST_SUITE_P(
    Tori, VerifierTorus,
    ::testing::Values(std::make_tuple(std::vector<int>{2}, 1), std::make_tuple(std::vector<int>{5}, 2),
                      std::make_tuple(std::vector<int>{3, 3}, 1), std::make_tuple(std::vector<int>{2, 3}, 2),
                      std::make_tuple(std::vector<int>{3, 3, 3}, 1), std::make_tuple(std::vector<int>{2, 2, 2}, 3),
                      std::make_tuple(std::vector<int>{3, 5, 7}, 1), std::make_tuple(std::vector<int>{4, 4, 4}, 2),
                      std::make_tuple(std::vector<int>{8, 8, 8}, 1)),
    [](const auto& info) {
      std::string name;
      for (int d : std::get<0>(info.param)) name += (name.empty() ? "" : "x") + std::to_string(d);
      return name + "_" + std::to_string(std::get<1>(info.param)) + "local";
    });

class VerifierHierarchical : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(VerifierHierarchical, AllAlgorithms) {
  const auto& [hosts, local] = GetParam();
  FabricConfig fat;
  fat.kind = FabricKind::FatTree;
  fat.radix = {4, 64};
  fat.oversubscription = {4, 1};
  const Topology t = makeTopology(fat, hosts, local);
  const uint64_t p = static_cast<uint64_t>(t.nranks);
  verifyOnTopology(t, {0, 1, 7, p - 1, 2 * p + 3}, {"hierarchical"}, p > 64 ? 5 : UINT64_MAX);
}

INSTANTIATE_TEST_SUITE_P(Hosts, VerifierHierarchical,
                         ::testing::Values(std::make_tuple(2, 2), std::make_tuple(3, 2), std::make_tuple(2, 3),
                                           std::make_tuple(5, 4), std::make_tuple(7, 3), std::make_tuple(32, 8)),
                         [](const auto& info) {
                           return std::to_string(std::get<0>(info.param)) + "hosts_" +
                                  std::to_string(std::get<1>(info.param)) + "local";
                         });

// The largest machines the project targets: 4096 ranks on a 16x16x16 torus
// (torus AllReduce) and flat (every algorithm), at counts that keep it quick.
TEST(VerifierLarge, Torus16x16x16) {
  const Topology t = makeTopology(torus({16, 16, 16}), 4096, 1);
  PlanContext ctx;
  ctx.sliceBytes = 64 * 4;
  ctx.slots = 4;
  ctx.topo = &t;
  const Algorithm* torusAlgo = findAlgorithm("torus");
  for (uint64_t n : {uint64_t{1}, uint64_t{3 * 4096 + 1}}) {
    Status s = verifyAlgorithm(*torusAlgo, VerifyCase{Collective::AllReduce, 4096, n, 0, false, 4}, ctx);
    EXPECT_TRUE(s.isOk()) << "n=" << n << ": " << s.message();
  }
}

TEST(VerifierLarge, Flat4096) {
  PlanContext ctx;
  ctx.sliceBytes = 64 * 4;
  ctx.slots = 4;
  ctx.directMaxBytes = 0;
  verifyAll(4096, {1}, ctx, false, 1);
}
