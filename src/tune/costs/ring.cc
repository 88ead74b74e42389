// What the ring costs (algorithms/ring.cc builds it).
#include <algorithm>

#include "algorithms/ring.h"
#include "tune/cost_formula.h"

namespace nodus {
namespace {

double cost(const PlanKey& k, const PlanContext& ctx, const CostModel& m) {
  const double p = k.nranks;
  const double bytes = static_cast<double>(k.count) * k.typeSize;
  const uint32_t channels = ringChannels(k, ctx);
  // Per rank and pass: p-1 messages of 1/p of the data (AllReduce: two
  // passes). AllGather's and ReduceScatter's count is one rank's share.
  const double passData = (k.coll == Collective::AllReduce) ? bytes : bytes * p;
  const double passes = (k.coll == Collective::AllReduce) ? 2.0 : 1.0;
  const double reduced = (k.coll == Collective::AllGather) ? 0.0 : (p - 1) / p * passData;
  // A round walks p-1 of the ring's hops (nodus-sim: exact for a
  // contention-free ring, docs/sim-findings.md); pipelinedPass says when
  // the rounds' chains hide behind the data.
  const std::vector<int> order = ringOrder(ctx, k.nranks);
  // Bandwidth: every hop carries the same bytes, so the slowest hop sets the
  // pace. Inside a host, and through a host's one fabric port, a rank's
  // forward and backward channels add up to the bytes of one ring; on a
  // torus each direction of a link is a wire of its own, so a link carries
  // only its direction's channels, and a hop of several links (a ring order
  // that cannot close with neighbours, e.g. odd dimensions) shares them.
  double hops = 0, beta = 0;
  std::vector<std::pair<int, int>> flows;
  const bool torus = m.topo != nullptr && m.topo->fabric.kind == FabricKind::Torus;
  for (size_t i = 0; i < order.size(); ++i) {
    const int a = order[i], b = order[(i + 1) % order.size()];
    hops += m.alphaBetween(a, b);
    if (torus && m.topo->hops(a, b) > 0) {
      // Forward channels (even) a -> b, backward ones (odd) b -> a.
      const int ha = m.topo->hostOf[static_cast<size_t>(a)], hb = m.topo->hostOf[static_cast<size_t>(b)];
      for (uint32_t j = 0; j < channels; ++j) flows.emplace_back(j % 2 ? hb : ha, j % 2 ? ha : hb);
    } else {
      beta = std::max(beta, m.busyBetaBetween(a, b));
    }
  }
  if (!flows.empty()) beta = std::max(beta, m.interBetaUsPerByte * m.topo->maxLinkLoad(flows) / channels);
  // Every channel's step is a step of its own for the rank's executor: one
  // more slice's work a hop per extra channel, on the chain.
  const double chain = (p - 1) / p * hops + (channels - 1) * (p - 1) * m.intraSliceUs;
  // The channels' chains walk side by side: a round moves a slice of each.
  const double stepBytes = passData / p / channels;
  return passes * pipelinedPass(chain, (p - 1) / p * passData * beta, stepBytes, ctx) +
         reduced * m.gammaUsPerByte * m.busyShare;
}

}  // namespace

extern const CostFormula kRingCost = {&kRingAlgorithm, cost, /*slicesPriced=*/true};

}  // namespace nodus
