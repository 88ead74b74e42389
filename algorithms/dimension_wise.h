// The engine behind the torus and hierarchical algorithms: AllReduce as a
// reduce-scatter along one dimension after another, then an all-gather back
// through them in reverse. A "dimension" is a set of rings that partition the
// ranks (a torus axis, the ranks of a host, same-local-rank peers across
// hosts); each rank lies on one ring per dimension.
//
// The data is split into streams; each stream visits the dimensions in its
// own order and direction, so that at any stage different streams use
// different links. A stage is a phase: its reduce-scatter needs the whole
// block the previous stage left.
#pragma once

#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/cost_model.h"
#include "algorithms/plan_builder.h"

namespace nodus {

struct DimensionRing {
  std::vector<int> ranks;  // this rank's ring in this dimension, in forward order
  int pos = 0;             // this rank's place in it
};

struct Stream {
  std::vector<int> dims;  // dimension order (indexes into the rings)
  bool backward = false;  // walk every ring the other way round
};

void buildDimensionWise(const PlanKey& k, const std::vector<DimensionRing>& rings, const std::vector<Stream>& streams,
                        PlanBuilder& b);

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
