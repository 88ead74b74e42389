// What the chain costs (algorithms/chain.cc builds it).
#include <algorithm>

#include "algorithms/chain.h"
#include "tune/cost_formula.h"

namespace nodus {
namespace {

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

extern const CostFormula kChainCost = {&kChainAlgorithm, cost, /*slicesPriced=*/true};

}  // namespace nodus
