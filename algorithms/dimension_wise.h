// The engine behind the torus and hierarchical algorithms: AllReduce as a
// reduce-scatter along one dimension after another, then an all-gather back
// through them in reverse. A "dimension" is a set of rings that partition the
// ranks (a torus axis, the ranks of a host, same-local-rank peers across
// hosts); each rank lies on one ring per dimension. Its price is
// src/tune/costs/dimension_wise.h.
//
// The data is split into streams; each stream visits the dimensions in its
// own order and direction, so that at any stage different streams use
// different links. A stage is a phase: its reduce-scatter needs the whole
// block the previous stage left.
#pragma once

#include <vector>

#include "algorithms/algorithm.h"
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

}  // namespace nodus
