#pragma once
#include "algorithms/algorithm.h"
namespace nodus {
// AllToAll in ceil(log2 p) rounds of one message each (store and forward).
extern const Algorithm kBruckAlgorithm;
// Rounds of Bruck's AllToAll on p ranks, and how many blocks move in round k
// (the positions 1..p-1 with bit k set): what its cost formula walks.
int bruckRounds(int p);
int bruckBlocks(int p, int round);
}  // namespace nodus
