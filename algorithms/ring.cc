// Ring: AllReduce as reduce-scatter then all-gather around one ring,
// AllGather and ReduceScatter as one pass. Bandwidth-optimal: each rank sends
// (p-1)/p of the data per pass, every slice pipelined through the ring.
#include "algorithms/ring.h"

#include <algorithm>

#include "algorithms/plan_builder.h"

namespace nodus {
namespace {

// Ring positions follow the topology's ring order: position i sends to
// position i+1. AllReduce blocks are numbered by position; AllGather and
// ReduceScatter blocks belong to ranks, so those map positions to ranks.
struct Ring {
  int p, pos, prev, next;
  std::vector<int> order;
  Ring(const PlanKey& k, const PlanContext& ctx) : p(k.nranks), order(ringOrder(ctx, k.nranks)) {
    pos = static_cast<int>(std::find(order.begin(), order.end(), k.rank) - order.begin());
    prev = order[modRank(pos - 1, p)];
    next = order[modRank(pos + 1, p)];
  }
  int rankAt(int64_t position) const { return order[modRank(position, p)]; }
};

void allReduce(const PlanKey& k, const PlanContext& ctx, PlanBuilder& b) {
  Ring r(k, ctx);
  const uint64_t n = k.count;
  auto at = [&](int c) { return blockBegin(c, n, r.p); };
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

void allGather(const PlanKey& k, const PlanContext& ctx, PlanBuilder& b) {
  Ring r(k, ctx);
  const uint64_t n = k.count;
  auto slot = [&](int64_t position) { return static_cast<uint64_t>(r.rankAt(position)) * n; };
  // Send first, then the local copy: it overlaps the neighbour's work
  // instead of delaying the first message.
  b.send(r.next, {Buf::Send, 0}, n);
  b.copy({Buf::Send, 0}, {Buf::Recv, slot(r.pos)}, n);
  for (int s = 1; s < r.p - 1; ++s) b.recvCopySend(r.prev, r.next, {Buf::Recv, slot(r.pos - s)}, n);
  b.recv(r.prev, {Buf::Recv, slot(r.pos + 1)}, n);
}

void reduceScatter(const PlanKey& k, const PlanContext& ctx, PlanBuilder& b) {
  Ring r(k, ctx);
  const uint64_t n = k.count;
  auto slot = [&](int64_t position) { return static_cast<uint64_t>(r.rankAt(position)) * n; };
  // At step s position i sends the block of position (i - s - 1); the last
  // step leaves its own block.
  b.send(r.next, {Buf::Send, slot(r.pos - 1)}, n);
  for (int s = 1; s < r.p - 1; ++s) b.recvReduceSend(r.prev, r.next, {Buf::Send, slot(r.pos - s - 1)}, n);
  b.recvReduceCopy(r.prev, {Buf::Send, slot(r.pos)}, {Buf::Recv, 0}, n, true);
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
  switch (k.coll) {
    case Collective::AllReduce: allReduce(k, ctx, b); break;
    case Collective::AllGather: allGather(k, ctx, b); break;
    case Collective::ReduceScatter: reduceScatter(k, ctx, b); break;
    default: return makeError(nodusInternalError, "ring cannot build %s", collectiveName(k.coll));
  }
  return Status::ok();
}

double cost(const PlanKey& k, const PlanContext& ctx, const CostModel& m) {
  const double p = k.nranks;
  const double bytes = static_cast<double>(k.count) * k.typeSize;
  // Per rank and pass: p-1 messages of 1/p of the data (AllReduce: two
  // passes). AllGather's and ReduceScatter's count is one rank's share.
  const double passData = (k.coll == Collective::AllReduce) ? bytes : bytes * p;
  const double passes = (k.coll == Collective::AllReduce) ? 2.0 : 1.0;
  const double reduced = (k.coll == Collective::AllGather) ? 0.0 : (p - 1) / p * passData;
  // A round walks p-1 of the ring's hops (nodus-sim: exact for a
  // contention-free ring, docs/sim-findings.md); pipelinedPass says when
  // the rounds' chains hide behind the data.
  const std::vector<int> order = ringOrder(ctx, k.nranks);
  // Bandwidth: every hop carries the same bytes, so the slowest hop sets the pace.
  double hops = 0, beta = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const int a = order[i], b = order[(i + 1) % order.size()];
    hops += m.alphaBetween(a, b);
    beta = std::max(beta, m.betaBetween(a, b));
  }
  return passes * pipelinedPass((p - 1) / p * hops, (p - 1) / p * passData * beta, passData / p, ctx) +
         reduced * m.gammaUsPerByte;
}

}  // namespace

const Algorithm kRingAlgorithm = {
    "ring", "Pipelined ring: reduce-scatter + all-gather (AllReduce), one pass otherwise.",
    supports, build, cost, /*slicesPriced=*/true};

}  // namespace nodus
