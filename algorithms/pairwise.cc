// Pairwise exchange: the block collectives (AllToAll, AllToAllV, Gather,
// Scatter, AllGatherV, ReduceScatterV) as direct messages between the pairs
// that have a block for each other, one partner a round: in round i rank r
// pairs with (i - r) mod p, which pairs with r in the same round, so both
// send, then receive, and no round waits on a third rank. All rounds are one
// phase: their slices interleave, so every partner's messages are in flight
// at once, the next round's while this one's wait. p - 1 messages a rank
// (the root: p - 1, everyone else 1, for Gather and Scatter).
//
// Blocks of zero elements still go, as empty messages, so that a rank whose
// counts disagree with a peer's fails on the size of what it got instead of
// waiting for a message that never comes.
//
// In place a block leaves from where the block from the same partner lands
// (AllToAll(V)); its send comes before its receive in the round, slice by
// slice, so each slice goes out before the reply overwrites it.
// ReduceScatterV folds the contributions to its own block as they arrive,
// its own first, then in round order.
#include "algorithms/pairwise.h"

#include "algorithms/plan_builder.h"

namespace nodus {
namespace {

bool supports(const PlanKey& k, const PlanContext&) { return isBlockCollective(k.coll); }

Status build(const PlanKey& k, const PlanContext&, Plan& plan) {
  PlanBuilder b(plan, /*keepEmpty=*/true);
  const int p = k.nranks, r = k.rank;
  const bool reduce = k.coll == Collective::ReduceScatterV;
  const PeerBlock mine = blockTo(k, r);
  // ReduceScatterV: the fold so far is in Recv once the first contribution arrived.
  bool folded = false;
  int lastFold = -1;
  for (int i = 0; i < p; ++i) {
    const int j = modRank(i - r, p);
    if (j == r) {
      if (reduce || !mine.exists) continue;
      // Own block: in place it is where it belongs already.
      if (!k.inPlace && mine.count > 0) b.copy({Buf::Send, mine.offset}, {Buf::Recv, blockFrom(k, r).offset}, mine.count);
      continue;
    }
    const PeerBlock out = blockTo(k, j), in = blockFrom(k, j);
    if (out.exists) b.send(j, {Buf::Send, out.offset}, out.count);
    if (!in.exists) continue;
    if (!reduce) {
      b.recv(j, {Buf::Recv, in.offset}, in.count);
      continue;
    }
    const Range own = folded ? Range{Buf::Recv, 0} : Range{Buf::Send, mine.offset};
    b.recvReduceCopy(j, own, {Buf::Recv, 0}, in.count);
    folded = true;
    lastFold = static_cast<int>(plan.steps.size()) - 1;
  }
  if (reduce) {
    if (lastFold >= 0) plan.steps[static_cast<size_t>(lastFold)].finalAvg = true;
    else if (mine.count > 0 || k.inPlace) b.copy({Buf::Send, mine.offset}, {Buf::Recv, 0}, mine.count, /*avg=*/true);
  }
  // Empty local copies go; empty messages stay (headers).
  std::erase_if(plan.steps, [](const Step& s) { return s.count == 0 && !opSends(s.op) && !opReceives(s.op); });
  return Status::ok();
}

}  // namespace

const Algorithm kPairwiseAlgorithm = {
    "pairwise",
    "AllToAll(V), Gather, Scatter, AllGatherV, ReduceScatterV: direct messages between pairs, one partner a round.",
    supports, build};

}  // namespace nodus
