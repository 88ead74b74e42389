// Ring: AllReduce as reduce-scatter then all-gather around one ring,
// AllGather and ReduceScatter as one pass. Bandwidth-optimal: each rank sends
// (p-1)/p of the data per pass, every slice pipelined through the ring.
#include "algorithms/ring.h"

#include <algorithm>

#include "algorithms/plan_builder.h"

namespace nodus {

// The channels a ring runs: at most two, one each way, so that no two
// channels share a connection (a connection's slots then pace one ring, as
// NODUS_SLOTS and NODUS_ROUND_SLICES assume); on 2 ranks both ways are the
// same connection, so one.
uint32_t ringChannels(const PlanKey& k, const PlanContext& ctx) {
  return k.nranks > 2 ? channelsFor(kRingAlgorithm, ctx) : 1;
}

namespace {

// Ring positions follow the topology's ring order: position i sends to
// position i+1. AllReduce blocks are numbered by position; AllGather and
// ReduceScatter blocks belong to ranks, so those map positions to ranks. A
// backward ring walks the same order the other way round.
struct Ring {
  int p, pos, prev, next;
  std::vector<int> order;
  Ring(const PlanKey& k, const PlanContext& ctx, bool backward) : p(k.nranks), order(ringOrder(ctx, k.nranks)) {
    if (backward) std::reverse(order.begin(), order.end());
    pos = static_cast<int>(std::find(order.begin(), order.end(), k.rank) - order.begin());
    prev = order[modRank(pos - 1, p)];
    next = order[modRank(pos + 1, p)];
  }
  int rankAt(int64_t position) const { return order[modRank(position, p)]; }
};

// One channel's part of the data: elements [first, first + n) of the vector
// (AllReduce) or of every rank's block (AllGather, ReduceScatter: the block
// of count elements; `count` is the block's length).
struct Part {
  uint64_t first, n, count;
};

void allReduce(const Ring& r, const Part& part, PlanBuilder& b) {
  const uint64_t n = part.n;
  auto at = [&](int c) { return part.first + blockBegin(c, n, r.p); };
  auto len = [&](int c) { return blockSize(c, n, r.p); };
  // Reduce-scatter: at step s position i sends block (i - s); after p-1 steps
  // it holds block (i + 1) reduced over every rank.
  int c = r.pos;
  b.send(r.next, {Buf::Send, at(c)}, len(c));
  for (int s = 1; s < r.p - 1; ++s) {
    c = modRank(r.pos - s, r.p);
    b.recvReduceSend(r.prev, r.next, {Buf::Send, at(c)}, len(c));
  }
  c = modRank(r.pos + 1, r.p);
  b.recvReduceCopySend(r.prev, r.next, {Buf::Send, at(c)}, {Buf::Recv, at(c)}, len(c), true);
  // All-gather: forward each finished block around the ring.
  for (int s = 0; s < r.p - 2; ++s) {
    c = modRank(r.pos - s, r.p);
    b.recvCopySend(r.prev, r.next, {Buf::Recv, at(c)}, len(c));
  }
  c = modRank(r.pos + 2, r.p);
  b.recv(r.prev, {Buf::Recv, at(c)}, len(c));
}

void allGather(const Ring& r, const Part& part, PlanBuilder& b) {
  const uint64_t n = part.n;
  auto slot = [&](int64_t position) { return static_cast<uint64_t>(r.rankAt(position)) * part.count + part.first; };
  // Send first, then the local copy: it overlaps the neighbour's work
  // instead of delaying the first message.
  b.send(r.next, {Buf::Send, part.first}, n);
  b.copy({Buf::Send, part.first}, {Buf::Recv, slot(r.pos)}, n);
  for (int s = 1; s < r.p - 1; ++s) b.recvCopySend(r.prev, r.next, {Buf::Recv, slot(r.pos - s)}, n);
  b.recv(r.prev, {Buf::Recv, slot(r.pos + 1)}, n);
}

void reduceScatter(const Ring& r, const Part& part, PlanBuilder& b) {
  const uint64_t n = part.n;
  auto slot = [&](int64_t position) { return static_cast<uint64_t>(r.rankAt(position)) * part.count + part.first; };
  // At step s position i sends the block of position (i - s - 1); the last
  // step leaves its own block.
  b.send(r.next, {Buf::Send, slot(r.pos - 1)}, n);
  for (int s = 1; s < r.p - 1; ++s) b.recvReduceSend(r.prev, r.next, {Buf::Send, slot(r.pos - s - 1)}, n);
  b.recvReduceCopy(r.prev, {Buf::Send, slot(r.pos)}, {Buf::Recv, part.first}, n, true);
}

bool supports(const PlanKey& k, const PlanContext&) {
  return k.coll == Collective::AllReduce || k.coll == Collective::AllGather ||
         k.coll == Collective::ReduceScatter;
}

Status build(const PlanKey& k, const PlanContext& ctx, Plan& plan) {
  PlanBuilder b(plan);
  if (k.nranks == 1) {
    buildSelf(k, plan);
    return Status::ok();
  }
  void (*pass)(const Ring&, const Part&, PlanBuilder&) = nullptr;
  switch (k.coll) {
    case Collective::AllReduce: pass = allReduce; break;
    case Collective::AllGather: pass = allGather; break;
    case Collective::ReduceScatter: pass = reduceScatter; break;
    default: return makeError(nodusInternalError, "ring cannot build %s", collectiveName(k.coll));
  }
  // Channel j takes part j of the data around its own ring, forward for even
  // j and backward for odd j, so that on links with a wire each way (a
  // torus) both directions carry data. Every channel's steps are written in
  // full, empty ones included, and interleaved step by step: step s of each
  // rank's channels pairs with step s (or s+1) of its neighbours' before the
  // empty ones are dropped, so every connection sees its messages in the
  // same order at both ends.
  const uint32_t channels = ringChannels(k, ctx);
  plan.channels = channels;
  if (channels == 1) {
    pass(Ring(k, ctx, false), {0, k.count, k.count}, b);
    return Status::ok();
  }
  std::vector<Plan> parts(channels);
  for (uint32_t j = 0; j < channels; ++j) {
    PlanBuilder pb(parts[j], /*keepEmpty=*/true);
    pass(Ring(k, ctx, j % 2 == 1), {blockBegin(j, k.count, channels), blockSize(j, k.count, channels), k.count}, pb);
  }
  for (size_t s = 0; s < parts[0].steps.size(); ++s)
    for (const Plan& part : parts) b.step(part.steps[s]);
  return Status::ok();
}

}  // namespace

const Algorithm kRingAlgorithm = {
    "ring", "Pipelined ring: reduce-scatter + all-gather (AllReduce), one pass otherwise.",
    supports, build, /*maxChannels=*/2, ringChannels};

}  // namespace nodus
