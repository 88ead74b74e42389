// Plans proven correct by the verifier: every algorithm, every collective it
// implements, rank counts 1..64 and a sample up to 1024, awkward counts,
// in place and out of place, every root, tight and loose slot budgets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "plan/plan.h"
#include "plan/verifier.h"

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

INSTANTIATE_TEST_SUITE_P(Ranks, VerifierRanks,
                         ::testing::Values(std::make_pair(1, 8), std::make_pair(9, 16), std::make_pair(17, 32),
                                           std::make_pair(33, 48), std::make_pair(49, 64)),
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
  ctx.directMaxBytes = 0;
  verifyAll(p, {0, 1, 5, 1031, static_cast<uint64_t>(p) * 3 + 1}, ctx, false, 5);
}

INSTANTIATE_TEST_SUITE_P(Ranks, VerifierSample, ::testing::Values(96, 127, 128, 255, 256, 509, 512, 1000, 1024));

TEST(Verifier, LargeSlicesAndManySlots) {
  PlanContext ctx;
  ctx.sliceBytes = 1 << 19;
  ctx.slots = 8;
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
}

TEST(Algorithms, ChooserHonoursForcedAndRejectsUnknown) {
  PlanContext ctx;
  ctx.sliceBytes = 1 << 19;
  ctx.slots = 8;
  ctx.directMaxBytes = 1 << 16;
  const Algorithm* a = nullptr;
  PlanKey small{Collective::AllReduce, 4, 0, 2, 4, 0, false};
  ASSERT_TRUE(chooseAlgorithm(small, ctx, "", &a).isOk());
  EXPECT_STREQ(a->name, "direct");
  PlanKey large{Collective::AllReduce, 4, 0, 1 << 24, 4, 0, false};
  ASSERT_TRUE(chooseAlgorithm(large, ctx, "", &a).isOk());
  EXPECT_STREQ(a->name, "ring");
  ASSERT_TRUE(chooseAlgorithm(small, ctx, "ring", &a).isOk());
  EXPECT_STREQ(a->name, "ring");
  Status s = chooseAlgorithm(small, ctx, "nosuch", &a);
  EXPECT_EQ(s.code(), nodusInvalidArgument);
  EXPECT_NE(s.message().find("nosuch"), std::string::npos);
}
