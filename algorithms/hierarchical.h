#pragma once
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/dimension_wise.h"
namespace nodus {
extern const Algorithm kHierarchicalAlgorithm;
// This rank's two rings: the ranks of its host, and the ranks with its local
// index on every host. False where the hosts are fewer than two or unequal.
bool hierarchicalRings(const PlanKey& k, const PlanContext& ctx, std::vector<DimensionRing>* out);
// The two streams, one each way round both rings.
const std::vector<Stream>& hierarchicalStreams();
}  // namespace nodus
