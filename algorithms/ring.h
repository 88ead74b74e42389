#pragma once
#include "algorithms/algorithm.h"
namespace nodus {
extern const Algorithm kRingAlgorithm;
// The channels a ring runs for this call (at most two, one each way; one on 2 ranks).
uint32_t ringChannels(const PlanKey& k, const PlanContext& ctx);
}  // namespace nodus
