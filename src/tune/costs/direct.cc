// What the direct exchange costs (algorithms/direct.cc builds it).
#include <algorithm>

#include "algorithms/direct.h"
#include "tune/cost_formula.h"

namespace nodus {
namespace {

double cost(const PlanKey& k, const PlanContext&, const CostModel& model) {
  // Every rank sends and receives at once: CostModel::exchanging.
  const CostModel m = model.exchanging();
  const double p = k.nranks;
  const double bytes = static_cast<double>(k.count) * k.typeSize;
  double alpha = m.alphaUs;
  for (int r = 1; r < k.nranks; ++r) alpha = std::max(alpha, m.alphaBetween(0, r));
  // A rank folds each contribution as it reads it out of the slot (one pass,
  // recvReduceCopy; ranks 0 and 1 fold their own in the same pass), so with
  // a core each, reading and reducing overlap: the slower of the two sets
  // the pace. 2 ranks on shm, 64 and 128 KiB: 7.9 and 18.6 us measured
  // (medians of 8 runs of nodus-perf -a all --rounds 3, 2026-12-04), priced
  // 7.2 and 13.7; beta + gamma would price 12.6 and 24.6.
  // Every rank folds p-1 whole vectors at once: where ranks share cores,
  // they share that work too: CostModel::busyShare. There a rank's copies
  // into its peers' slots and its folds no longer overlap with anything but
  // each other on the same cores, so they add up: 8 ranks on 2 cores, 8 KiB,
  // measured 46.1 us (median of the 8 runs above), priced 26.5 by the slower
  // of beta and gamma and 45.6 by their sum (halving-doubling: 28.9
  // measured, 32.2 priced, takes it); 4 ranks, 16 KiB: 14.4, 12.3 and 20.5
  // (halving-doubling: 13.4 measured, 19.4 priced).
  const double perByte =
      m.busyShare > 1.0 ? m.betaUsPerByte + m.gammaUsPerByte : std::max(m.betaUsPerByte, m.gammaUsPerByte);
  return alpha + (p - 1) * bytes * perByte * m.busyShare;
}

}  // namespace

extern const CostFormula kDirectCost = {&kDirectAlgorithm, cost};

}  // namespace nodus
