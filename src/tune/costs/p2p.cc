// What a send or receive costs (algorithms/p2p.cc builds it).
#include <algorithm>

#include "algorithms/p2p.h"
#include "tune/cost_formula.h"

namespace nodus {
namespace {

double cost(const PlanKey& k, const PlanContext&, const CostModel& m) {
  return m.alphaUs + static_cast<double>(k.count) * k.typeSize * m.betaUsPerByte;
}

}  // namespace

extern const CostFormula kP2pCost = {&kP2pAlgorithm, cost};

}  // namespace nodus
