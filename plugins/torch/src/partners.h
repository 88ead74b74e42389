// The pairwise exchange schedule of all-to-all.
#pragma once

#include <vector>

namespace nodus_torch {

// `rank`'s partner in each round of a round-robin tournament among `nranks`
// ranks: in each round every rank has at most one partner, so a sequence of
// (send, recv) pairs issued in round order, lower rank sending first, never
// waits in a cycle. -1: idle this round.
std::vector<int> partners(int nranks, int rank);

}  // namespace nodus_torch
