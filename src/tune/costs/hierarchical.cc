// What the hierarchical AllReduce costs (algorithms/hierarchical.cc builds it).
#include <algorithm>

#include "algorithms/hierarchical.h"
#include "tune/cost_formula.h"
#include "tune/costs/dimension_wise.h"

namespace nodus {
namespace {

double cost(const PlanKey& k, const PlanContext& ctx, const CostModel& m) {
  std::vector<DimensionRing> r;
  if (!hierarchicalRings(k, ctx, &r)) return 1e30;
  const int local = static_cast<int>(r[0].ranks.size());
  // Inside a host both streams go through the same port, a rank's
  // shared-memory copies. Between hosts the rails of all `local` ranks share
  // the host's fabric links (beta x local); on a torus the host ring's two
  // directions use different links, elsewhere the host has one link and
  // both streams' bytes add up on it.
  const bool torus = ctx.topo->fabric.kind == FabricKind::Torus;
  // A step of the host ring waits for its slowest hop, but the chain of q-1
  // steps adds up the ring's hops: price it with their mean latency.
  const std::vector<int>& hostRing = r[1].ranks;
  double hopSum = 0;
  for (size_t i = 0; i < hostRing.size(); ++i) hopSum += m.alphaBetween(hostRing[i], hostRing[(i + 1) % hostRing.size()]);
  const double interAlpha = hopSum / static_cast<double>(hostRing.size());
  // Every rank of a host copies and reduces at once (CostModel::busyShare).
  const double intraBeta = m.intraBetaUsPerByte * m.busyShare;
  const std::vector<DimCost> links = {{m.intraAlphaUs, intraBeta, /*directional=*/false},
                                      {interAlpha, m.interBetaUsPerByte * local, /*directional=*/torus}};
  return dimensionWiseCost(static_cast<double>(k.count) * k.typeSize,
                           {local, static_cast<int>(r[1].ranks.size())}, hierarchicalStreams(), links,
                           m.gammaUsPerByte * m.busyShare, ctx, intraBeta);
}

}  // namespace

extern const CostFormula kHierarchicalCost = {&kHierarchicalAlgorithm, cost};

}  // namespace nodus
