// What the torus AllReduce costs (algorithms/torus.cc builds it).
#include <algorithm>

#include "algorithms/torus.h"
#include "tune/cost_formula.h"
#include "tune/costs/dimension_wise.h"

namespace nodus {
namespace {

double cost(const PlanKey& k, const PlanContext& ctx, const CostModel& m) {
  TorusLayout t;
  if (!torusLayout(k, ctx, &t)) return 1e30;
  // A host's ranks all cross its torus links: an axis's rings of the ranks
  // with the same place inside the host run over the same wires.
  double local = 1;
  for (size_t d = 0; d < t.grid.dims.size(); ++d)
    if (t.grid.intraHost[d]) local *= t.grid.dims[d];
  std::vector<DimCost> links;
  for (size_t d = 0; d < t.grid.dims.size(); ++d) {
    if (t.grid.intraHost[d]) {
      // Shared memory: a rank's copies in both directions compete.
      links.push_back({m.intraAlphaUs, m.intraBetaUsPerByte * m.busyShare, /*directional=*/false});
    } else {
      // Without wrap-around a ring's closing hop runs back along the line:
      // every link then carries two of the ring's flows.
      const double share = t.grid.wrap[d] || t.grid.dims[d] <= 2 ? 1.0 : 2.0;
      links.push_back({m.interAlphaUs, m.interBetaUsPerByte * share * local, /*directional=*/true});
    }
  }
  // Several ranks per host: each rank's every byte, on a host axis too,
  // goes through its shared-memory copies first.
  // Every rank copies and reduces at once (CostModel::busyShare).
  return dimensionWiseCost(static_cast<double>(k.count) * k.typeSize, t.grid.dims, t.streams, links,
                           m.gammaUsPerByte * m.busyShare, ctx, local > 1 ? m.intraBetaUsPerByte * m.busyShare : 0.0);
}

}  // namespace

extern const CostFormula kTorusCost = {&kTorusAlgorithm, cost};

}  // namespace nodus
