// What Bruck's AllToAll costs (algorithms/bruck.cc builds it): a latency and
// a packed message a round, half the data each, every rank at once; a local
// pass over each block packed and one over every block at the end.
#include "algorithms/bruck.h"
#include "tune/cost_formula.h"

namespace nodus {
namespace {

double cost(const PlanKey& k, const PlanContext&, const CostModel& model) {
  const CostModel m = model.exchanging();
  const int p = k.nranks;
  double alpha = m.alphaUs;
  for (int r = 1; r < p; ++r) alpha = std::max(alpha, m.alphaBetween(0, r));
  const double blockBytes = static_cast<double>(k.count) * k.typeSize;
  const double pass = m.passUsPerByte * m.busyShare;
  double us = p * blockBytes * pass;  // the last copies
  for (int round = 0; round < bruckRounds(p); ++round) {
    const double bytes = bruckBlocks(p, round) * blockBytes;
    us += alpha + m.intraSliceUs + bytes * (m.betaUsPerByte * m.busyShare + pass);
  }
  return us;
}

}  // namespace

extern const CostFormula kBruckCost = {&kBruckAlgorithm, cost};

}  // namespace nodus
