// The block collectives' plans proven by the verifier: AllToAll, AllToAllV,
// Gather, Scatter, AllGatherV and ReduceScatterV, every algorithm that runs
// them, 1..24 ranks with awkward counts, skewed V-layouts with zeros, gaps
// and blocks in reverse order, in place and out of place, every root, tight
// slot budgets, and a sample up to 1024 ranks. Plus: counts that disagree
// between two ranks fail on the message size (a zero block is a message).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "plan/plan.h"
#include "tune/planner.h"
#include "tune/tuner.h"

using namespace nodus;

namespace {

const Collective kBlockCollectives[] = {Collective::AllToAll,  Collective::AllToAllV,  Collective::Gather,
                                        Collective::Scatter,   Collective::AllGatherV, Collective::ReduceScatterV};

PlanContext tightContext(uint32_t slots = 2, uint32_t round = 1) {
  PlanContext ctx;
  ctx.sliceBytes = 3 * 4;
  ctx.slots = slots;
  ctx.roundSlices = round;
  return ctx;
}

uint64_t mix(uint64_t a, uint64_t b, uint64_t c) {
  uint64_t x = a * 0x9E3779B97F4A7C15ull ^ b * 0xD1B54A32D192ED03ull ^ c * 0x94D049BB133111EBull;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

// How many elements rank `from` sends `to`: up to `most`, a quarter zeros,
// rank 0 sending `most` to everyone (skew); symmetric where in place needs it.
uint64_t countOf(uint64_t seed, int from, int to, uint64_t most, bool symmetric) {
  if (symmetric && from > to) std::swap(from, to);
  if (most == 0) return 0;
  if (from == 0) return most;
  const uint64_t h = mix(seed, static_cast<uint64_t>(from), static_cast<uint64_t>(to));
  return h % 4 == 0 ? 0 : h % (most + 1);
}

// Displacements of `counts` laid out last peer first with a gap of `gap`
// elements before each block.
std::vector<uint64_t> reversedWithGaps(const std::vector<uint64_t>& counts, uint64_t gap) {
  std::vector<uint64_t> d(counts.size());
  uint64_t at = 0;
  for (size_t j = counts.size(); j-- > 0;) {
    at += gap;
    d[j] = at;
    at += counts[j];
  }
  return d;
}

// Every rank's PlanKey::blocks for a V-collective.
std::vector<std::vector<uint64_t>> vLayout(Collective coll, int p, uint64_t most, bool inPlace, uint64_t seed) {
  std::vector<std::vector<uint64_t>> all(static_cast<size_t>(p));
  std::vector<uint64_t> own(static_cast<size_t>(p));
  for (int j = 0; j < p; ++j) own[static_cast<size_t>(j)] = countOf(seed, j, j, most, false);
  for (int r = 0; r < p; ++r) {
    auto& b = all[static_cast<size_t>(r)];
    if (coll == Collective::AllToAllV) {
      std::vector<uint64_t> sc(static_cast<size_t>(p)), rc(static_cast<size_t>(p));
      for (int j = 0; j < p; ++j) {
        sc[static_cast<size_t>(j)] = countOf(seed, r, j, most, inPlace);
        rc[static_cast<size_t>(j)] = countOf(seed, j, r, most, inPlace);
      }
      const std::vector<uint64_t> rd = reversedWithGaps(rc, 2);
      // Out of place the send blocks are in rank order, packed, after a gap.
      std::vector<uint64_t> sd(static_cast<size_t>(p));
      for (int j = 0, at = 1; j < p; at += static_cast<int>(sc[static_cast<size_t>(j)]), ++j) sd[static_cast<size_t>(j)] = at;
      const auto& s1 = inPlace ? rc : sc;
      const auto& s2 = inPlace ? rd : sd;
      b.insert(b.end(), s1.begin(), s1.end());
      b.insert(b.end(), s2.begin(), s2.end());
      b.insert(b.end(), rc.begin(), rc.end());
      b.insert(b.end(), rd.begin(), rd.end());
    } else if (coll == Collective::AllGatherV) {
      const std::vector<uint64_t> d = reversedWithGaps(own, 1);
      b.insert(b.end(), own.begin(), own.end());
      b.insert(b.end(), d.begin(), d.end());
    } else {
      b = own;
    }
  }
  return all;
}

VerifyCase caseOf(Collective coll, int p, uint64_t n, int root, bool inPlace, uint64_t seed) {
  VerifyCase c{coll, p, n, root, inPlace, 4};
  if (isVCollective(coll)) {
    c.blocks = vLayout(coll, p, n, inPlace, seed);
    if (coll == Collective::AllGatherV) c.count = 0;  // per rank: its own block (keyOf fills it below)
  }
  return c;
}

Status verifyCase(const Algorithm& algo, VerifyCase c, const PlanContext& ctx) {
  // AllGatherV's and ReduceScatterV's count is the rank's own block: one key
  // per rank, which verifyAlgorithm builds from c.count, so prove them through
  // plans built here.
  if (c.coll != Collective::AllGatherV && c.coll != Collective::ReduceScatterV) return verifyAlgorithm(algo, c, ctx);
  std::vector<Plan> plans(static_cast<size_t>(c.nranks));
  for (int r = 0; r < c.nranks; ++r) {
    PlanKey key = c.keyOf(r);
    key.count = c.blocks[static_cast<size_t>(r)][static_cast<size_t>(r)];
    Plan& plan = plans[static_cast<size_t>(r)];
    plan.key = key;
    plan.algorithm = algo.name;
    NODUS_TRY(algo.build(key, ctx, plan));
  }
  return verifyPlans(c, ctx, plans);
}

void verifyBlocks(int p, const std::vector<uint64_t>& counts, const PlanContext& ctx, bool allRoots,
                  std::vector<bool> placements = {false, true}) {
  for (const Algorithm* algo : algorithms())
    for (Collective coll : kBlockCollectives)
      for (uint64_t n : counts)
        for (bool inPlace : placements) {
          std::vector<int> roots = {0};
          if (coll == Collective::Gather || coll == Collective::Scatter) {
            roots = {0, p / 2, p - 1};
            if (allRoots)
              for (int r = 0; r < p; ++r) roots.push_back(r);
          }
          for (int root : roots) {
            const VerifyCase c = caseOf(coll, p, n, root, inPlace, 17 + n);
            PlanKey key = c.keyOf(0);
            if (!algo->supports(key, ctx)) continue;
            const Status s = verifyCase(*algo, c, ctx);
            ASSERT_TRUE(s.isOk()) << algo->name << " " << collectiveName(coll) << " p=" << p << " n=" << n
                                  << " root=" << root << (inPlace ? " in-place" : "") << ": " << s.message();
          }
        }
}

}  // namespace

class VerifierBlocks : public ::testing::TestWithParam<std::pair<int, int>> {};

TEST_P(VerifierBlocks, AllAlgorithms) {
  for (int p = GetParam().first; p <= GetParam().second; ++p) {
    SCOPED_TRACE("p=" + std::to_string(p));
    const uint64_t up = static_cast<uint64_t>(p);
    verifyBlocks(p, {0, 1, 2, 7, up + 1, 3 * up + 2}, tightContext(), p <= 8);
    verifyBlocks(p, {5, 25 * up + 7}, tightContext(8, 4), false);
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, VerifierBlocks,
                         ::testing::Values(std::make_pair(1, 8), std::make_pair(9, 16), std::make_pair(17, 24)),
                         [](const auto& info) {
                           return std::to_string(info.param.first) + "to" + std::to_string(info.param.second);
                         });

PlanContext sampleContext() {
  PlanContext ctx;
  ctx.sliceBytes = 64 * 4;
  ctx.slots = 4;
  ctx.roundSlices = 2;
  return ctx;
}

// Named so that the sanitizer runs leave them out with the other samples
// (scripts/test.sh): pure computation, p^2 steps a collective.
class VerifierSampleBlocks : public ::testing::TestWithParam<int> {};

TEST_P(VerifierSampleBlocks, AllAlgorithms) { verifyBlocks(GetParam(), {0, 3}, sampleContext(), false); }

INSTANTIATE_TEST_SUITE_P(Ranks, VerifierSampleBlocks, ::testing::Values(100, 127, 256, 509));

TEST(VerifierLarge, Blocks1024) { verifyBlocks(1024, {3}, sampleContext(), false, {false}); }

// The planner picks an algorithm for each block collective, and the plan it
// makes is proven (the runtime's path: makePlan, finalised).
TEST(BlockPlans, PlannerPlansAreProven) {
  PlanContext ctx = tightContext(4, 2);
  for (Collective coll : kBlockCollectives)
    for (int p : {1, 2, 3, 4, 7, 8})
      for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{100}})
        for (bool inPlace : {false, true}) {
          VerifyCase c = caseOf(coll, p, n, p - 1, inPlace, 5);
          std::vector<Plan> plans(static_cast<size_t>(p));
          for (int r = 0; r < p; ++r) {
            PlanKey key = c.keyOf(r);
            if (coll == Collective::AllGatherV || coll == Collective::ReduceScatterV)
              key.count = c.blocks[static_cast<size_t>(r)][static_cast<size_t>(r)];
            ASSERT_TRUE(makePlan(key, ctx, AlgoSpec{}, PlanCapabilities{}, &plans[static_cast<size_t>(r)]).isOk());
          }
          const Status s = verifyPlans(c, ctx, plans);
          EXPECT_TRUE(s.isOk()) << collectiveName(coll) << " p=" << p << " n=" << n << ": " << s.message();
        }
}

// Both AllToAll algorithms are priced, and each wins somewhere: Bruck's few
// messages for small blocks on many ranks, pairwise's fewer bytes for large.
TEST(BlockPlans, TunerPicksBruckForSmallAndPairwiseForLargeAllToAll) {
  PlanContext ctx;
  ctx.sliceBytes = 128 << 10;
  ctx.slots = 8;
  auto pick = [&](int p, uint64_t n) {
    Choice choice;
    const PlanKey key{Collective::AllToAll, p, 0, n, 4, 0, false};
    EXPECT_TRUE(chooseAlgorithm(key, ctx, AlgoSpec{}, &choice).isOk());
    return std::string(choice.algo->name);
  };
  EXPECT_EQ(pick(64, 1), "bruck");
  EXPECT_EQ(pick(64, 1 << 16), "pairwise");
  EXPECT_EQ(pick(2, 1), "pairwise");  // one message either way
}

// Counts that disagree are a size mismatch, not a wait: rank 1 expects 5
// elements from rank 0, which sends none (an empty message still goes).
TEST(BlockPlans, ZeroAgainstNonZeroIsASizeMismatch) {
  const Algorithm* pairwise = findAlgorithm("pairwise");
  ASSERT_NE(pairwise, nullptr);
  VerifyCase c = caseOf(Collective::AllToAllV, 2, 5, 0, false, 1);
  // Rank 0 sends 0 to rank 1 ...
  auto& b0 = c.blocks[0];
  b0[1] = 0;
  // ... rank 1 still expects 5 from rank 0.
  c.blocks[1][2 * 2 + 0] = 5;
  const Status s = verifyAlgorithm(*pairwise, c, tightContext());
  ASSERT_FALSE(s.isOk());
  EXPECT_NE(s.message().find("expects"), std::string::npos) << s.message();
}
