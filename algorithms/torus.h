#pragma once
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/dimension_wise.h"
namespace nodus {
extern const Algorithm kTorusAlgorithm;
// A torus communicator's rings (one per axis, the host's ranks as one more)
// and its 2*D streams, as the torus algorithm builds them.
struct TorusLayout {
  RankGrid grid;
  std::vector<DimensionRing> rings;
  std::vector<Stream> streams;
};
// False where the ranks do not fill a torus of hosts with equal ranks each.
bool torusLayout(const PlanKey& k, const PlanContext& ctx, TorusLayout* out);
}  // namespace nodus
