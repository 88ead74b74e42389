// Hierarchical AllReduce: reduce-scatter among the ranks of each host (shm),
// AllReduce of each piece among the ranks with the same local index on every
// host (one "rail" per local rank, all at once), then all-gather inside each
// host. Inter-host steps drop from p-1 to hosts-1, and each rank's piece
// crosses the fabric on its own rail. Two streams walk the rings in opposite
// directions so both directions of every link carry data.
#include "algorithms/hierarchical.h"

#include <algorithm>

#include "algorithms/dimension_wise.h"

namespace nodus {

bool hierarchicalRings(const PlanKey& k, const PlanContext& ctx, std::vector<DimensionRing>* out) {
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

const std::vector<Stream>& hierarchicalStreams() {
  static const std::vector<Stream> s = {{{0, 1}, false}, {{0, 1}, true}};
  return s;
}

namespace {

bool supports(const PlanKey& k, const PlanContext& ctx) {
  std::vector<DimensionRing> r;
  return k.coll == Collective::AllReduce && hierarchicalRings(k, ctx, &r);
}

Status build(const PlanKey& k, const PlanContext& ctx, Plan& plan) {
  std::vector<DimensionRing> r;
  if (!hierarchicalRings(k, ctx, &r)) return makeError(nodusInternalError, "hierarchical needs several hosts with equal ranks each");
  PlanBuilder b(plan);
  buildDimensionWise(k, r, hierarchicalStreams(), b);
  return Status::ok();
}

}  // namespace

const Algorithm kHierarchicalAlgorithm = {
    "hierarchical", "AllReduce: reduce-scatter inside hosts, AllReduce across hosts per local rank, all-gather inside.",
    supports, build};

}  // namespace nodus
