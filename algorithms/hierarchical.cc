// Hierarchical AllReduce: reduce-scatter among the ranks of each host (shm),
// AllReduce of each piece among the ranks with the same local index on every
// host (one "rail" per local rank, all at once), then all-gather inside each
// host. Inter-host steps drop from p-1 to hosts-1, and each rank's piece
// crosses the fabric on its own rail. Two streams walk the rings in opposite
// directions so both directions of every link carry data.
#include "algorithms/hierarchical.h"

#include <algorithm>

#include "algorithms/cost_model.h"
#include "algorithms/dimension_wise.h"

namespace nodus {
namespace {

bool rings(const PlanKey& k, const PlanContext& ctx, std::vector<DimensionRing>* out) {
  const Topology* t = ctx.topo;
  if (t == nullptr || t->nranks != k.nranks || t->hosts.size() < 2) return false;
  const int local = t->ranksPerHost();
  if (local < 2) return false;
  const int host = t->hostOf[static_cast<size_t>(k.rank)];
  const auto& mine = t->ranksOf[static_cast<size_t>(host)];
  const int li = static_cast<int>(std::find(mine.begin(), mine.end(), k.rank) - mine.begin());
  DimensionRing intra{mine, li}, inter;
  for (int h : t->hostOrder) {
    if (h == host) inter.pos = static_cast<int>(inter.ranks.size());
    inter.ranks.push_back(t->ranksOf[static_cast<size_t>(h)][static_cast<size_t>(li)]);
  }
  *out = {intra, inter};
  return true;
}

const std::vector<Stream>& streams() {
  static const std::vector<Stream> s = {{{0, 1}, false}, {{0, 1}, true}};
  return s;
}

bool supports(const PlanKey& k, const PlanContext& ctx) {
  std::vector<DimensionRing> r;
  return k.coll == Collective::AllReduce && rings(k, ctx, &r);
}

Status build(const PlanKey& k, const PlanContext& ctx, Plan& plan) {
  std::vector<DimensionRing> r;
  if (!rings(k, ctx, &r)) return makeError(nodusInternalError, "hierarchical needs several hosts with equal ranks each");
  PlanBuilder b(plan);
  buildDimensionWise(k, r, streams(), b);
  return Status::ok();
}

double cost(const PlanKey& k, const PlanContext& ctx, const CostModel& m) {
  std::vector<DimensionRing> r;
  if (!rings(k, ctx, &r)) return 1e30;
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
                           {local, static_cast<int>(r[1].ranks.size())}, streams(), links,
                           m.gammaUsPerByte * m.busyShare, ctx, intraBeta);
}

}  // namespace

const Algorithm kHierarchicalAlgorithm = {
    "hierarchical", "AllReduce: reduce-scatter inside hosts, AllReduce across hosts per local rank, all-gather inside.",
    supports, build, cost};

}  // namespace nodus
