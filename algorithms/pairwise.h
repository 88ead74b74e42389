#pragma once
#include "algorithms/algorithm.h"
namespace nodus {
// Every pair of ranks exchanges its blocks directly, one partner a round.
extern const Algorithm kPairwiseAlgorithm;
}  // namespace nodus
