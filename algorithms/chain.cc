// Chain: Broadcast and Reduce pipelined along the ring that starts (Broadcast)
// or ends (Reduce) at the root. Every link carries the data once; slices keep
// all links busy at the same time.
#include "algorithms/chain.h"

#include <algorithm>

#include "algorithms/cost_model.h"
#include "algorithms/plan_builder.h"

namespace nodus {
namespace {

bool supports(const PlanKey& k, const PlanContext&) {
  return k.coll == Collective::Broadcast || k.coll == Collective::Reduce;
}

Status build(const PlanKey& k, const PlanContext& ctx, Plan& plan) {
  PlanBuilder b(plan);
  const int p = k.nranks;
  const uint64_t n = k.count;
  if (p == 1) {
    buildSelf(k, plan);
    return Status::ok();
  }
  // Walk the topology's ring order, starting at the root.
  const std::vector<int> order = ringOrder(ctx, p);
  auto place = [&](int r) { return static_cast<int>(std::find(order.begin(), order.end(), r) - order.begin()); };
  const int me = place(k.rank), rootPlace = place(k.root);
  const int pos = modRank(me - rootPlace, p);  // distance from the root along the ring
  const int next = order[modRank(me + 1, p)];
  const int prev = order[modRank(me - 1, p)];
  const Range in{Buf::Send, 0}, out{Buf::Recv, 0};
  if (k.coll == Collective::Broadcast) {
    if (pos == 0) {
      b.send(next, in, n);
      b.copy(in, out, n);
    } else if (pos < p - 1) {
      b.recvCopySend(prev, next, out, n);
    } else {
      b.recv(prev, out, n);
    }
  } else {
    // Reduce flows the other way round: from root+1 towards the root.
    if (pos == 1) {
      b.send(next, in, n);
    } else if (pos != 0) {
      b.recvReduceSend(prev, next, in, n);
    } else {
      b.recvReduceCopy(prev, in, out, n, true);
    }
  }
  return Status::ok();
}

double cost(const PlanKey& k, const PlanContext& ctx, const CostModel& m) {
  const int n = k.nranks;
  const std::vector<int> order = ringOrder(ctx, n);
  // The chain's p-1 hops as build() walks them: a Broadcast from the root
  // along the ring order, a Reduce from the root's successor round to it.
  const int rootPlace = static_cast<int>(std::find(order.begin(), order.end(), k.root) - order.begin());
  const int first = k.coll == Collective::Reduce ? rootPlace + 1 : rootPlace;
  const double bytes = static_cast<double>(k.count) * k.typeSize;
  const double slice = ctx.sliceBytes ? std::min<double>(bytes, ctx.sliceBytes) : bytes;
  // The first slice crosses every hop once: the sum of their latencies (a
  // rank has one step, so later slices stream behind it, and on an
  // oversubscribed host so do the next calls: streamAlphaBetween). The
  // slowest hop sets the pace: a slice streams behind the previous one on
  // every hop at once, and a hop between hosts moves no faster than its
  // connection's slots cover its route's latency (CostModel::routeBeta).
  double chain = 0, beta = m.betaUsPerByte;
  for (int i = 0; i + 1 < n; ++i) {
    const int a = order[static_cast<size_t>((first + i) % n)], b = order[static_cast<size_t>((first + i + 1) % n)];
    chain += m.streamAlphaBetween(a, b);
    if (m.topo != nullptr && m.topo->hops(a, b) > 0) beta = std::max(beta, m.routeBeta(m.alphaBetween(a, b)));
  }
  // Pipeline fill (p-2 slices) plus the whole message at the slowest hop's pace.
  return chain + (bytes + (n - 2) * slice) * beta +
         (k.coll == Collective::Reduce ? bytes * m.gammaUsPerByte : 0.0);
}

}  // namespace

const Algorithm kChainAlgorithm = {
    "chain", "Broadcast / Reduce pipelined along a ring from / to the root.", supports, build,
    cost, /*slicesPriced=*/true};

}  // namespace nodus
