// Torus: AllReduce dimension by dimension over the rings of each torus axis
// (and of the ranks inside each host, as one more axis), with the data split
// into 2*D streams: stream j starts on axis j mod D and walks the rings
// forward or backward, so at every stage each axis carries two streams in
// opposite directions and every link of every node is busy. A single ring
// uses 2 of a node's 2*D links; this uses all of them.
#include "algorithms/torus.h"

#include "algorithms/dimension_wise.h"

namespace nodus {

bool torusLayout(const PlanKey& k, const PlanContext& ctx, TorusLayout* out) {
  if (ctx.topo == nullptr || ctx.topo->nranks != k.nranks || !ctx.topo->rankGrid(&out->grid)) return false;
  const RankGrid& g = out->grid;
  const size_t D = g.dims.size();
  if (D == 0 || g.size() != k.nranks) return false;
  // This rank's coordinates, dims[0] fastest.
  std::vector<int> coord(D);
  int rest = g.indexOf[static_cast<size_t>(k.rank)];
  for (size_t d = 0; d < D; ++d) {
    coord[d] = rest % g.dims[d];
    rest /= g.dims[d];
  }
  out->rings.assign(D, {});
  for (size_t d = 0; d < D; ++d) {
    DimensionRing& r = out->rings[d];
    for (int c = 0; c < g.dims[d]; ++c) {
      std::vector<int> at = coord;
      at[d] = c;
      int idx = 0, stride = 1;
      for (size_t e = 0; e < D; ++e) idx += at[e] * stride, stride *= g.dims[e];
      r.ranks.push_back(g.rankAt[static_cast<size_t>(idx)]);
    }
    r.pos = coord[d];
  }
  out->streams.clear();
  for (size_t j = 0; j < 2 * D; ++j) {
    Stream s;
    for (size_t t = 0; t < D; ++t) s.dims.push_back(static_cast<int>((j + t) % D));
    s.backward = j >= D;
    out->streams.push_back(std::move(s));
  }
  return true;
}

namespace {

bool supports(const PlanKey& k, const PlanContext& ctx) {
  TorusLayout t;
  return k.coll == Collective::AllReduce && k.nranks > 1 && torusLayout(k, ctx, &t);
}

Status build(const PlanKey& k, const PlanContext& ctx, Plan& plan) {
  TorusLayout t;
  if (!torusLayout(k, ctx, &t)) return makeError(nodusInternalError, "torus needs a full torus of hosts with equal ranks each");
  PlanBuilder b(plan);
  buildDimensionWise(k, t.rings, t.streams, b);
  return Status::ok();
}

}  // namespace

const Algorithm kTorusAlgorithm = {
    "torus",
    "AllReduce dimension-wise over a torus (host axes plus the ranks of a host), 2*D rotated bidirectional streams.",
    supports, build};

}  // namespace nodus
