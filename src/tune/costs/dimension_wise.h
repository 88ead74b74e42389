// What the dimension-wise engine (algorithms/dimension_wise.h) costs: the
// torus and hierarchical formulas price their stages with it.
#pragma once

#include <vector>

#include "algorithms/dimension_wise.h"

namespace nodus {

// Predicted time, stage by stage. `links[d]` prices dimension d's links:
// alpha (us) and beta (us per byte, already multiplied by the number of
// rings that share one physical link, e.g. the ranks of a host on its NIC).
// `directional`: a ring's two directions run on different links (a torus
// axis), so streams walking it in opposite directions never meet; otherwise
// every stream on the dimension at one stage goes through one port (a rank's
// shared-memory copies, a host's single fabric link) and their bytes add up.
struct DimCost {
  double alphaUs, betaUsPerByte;
  bool directional = true;
};
// Each stage is a pipelined pass of its rings (pipelinedPass).
// portBetaUsPerByte, when not 0, is the rank's own port that every byte it
// sends crosses whatever the dimension (a rank of a multi-rank host copies
// each outgoing byte through shared memory or a staging ring): a stage takes
// at least its streams' bytes at that rate.
double dimensionWiseCost(double bytes, const std::vector<int>& sizes, const std::vector<Stream>& streams,
                         const std::vector<DimCost>& links, double gammaUsPerByte, const PlanContext& ctx,
                         double portBetaUsPerByte = 0);

}  // namespace nodus
