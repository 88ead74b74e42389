// The cost-formula registry: one line per algorithm the tuner prices.
#include <limits>

#include "tune/cost_formula.h"

namespace nodus {

extern const CostFormula kRingCost;
extern const CostFormula kDirectCost;
extern const CostFormula kChainCost;
extern const CostFormula kP2pCost;
extern const CostFormula kTreeCost;
extern const CostFormula kHalvingDoublingCost;
extern const CostFormula kTorusCost;
extern const CostFormula kHierarchicalCost;
extern const CostFormula kPairwiseCost;
extern const CostFormula kBruckCost;

namespace {
const CostFormula* const kFormulas[] = {
    &kRingCost,
    &kDirectCost,
    &kChainCost,
    &kP2pCost,
    &kTreeCost,
    &kHalvingDoublingCost,
    &kTorusCost,
    &kHierarchicalCost,
    &kPairwiseCost,
    &kBruckCost,
};
}  // namespace

std::span<const CostFormula* const> costFormulas() { return kFormulas; }

const CostFormula* costFormulaFor(const Algorithm* algo) {
  for (const CostFormula* f : kFormulas)
    if (f->algo == algo) return f;
  return nullptr;
}

double predictUs(const Algorithm& algo, const PlanKey& key, const PlanContext& ctx, const CostModel& model) {
  const CostFormula* f = costFormulaFor(&algo);
  return f != nullptr ? f->cost(key, ctx, model) : std::numeric_limits<double>::infinity();
}

}  // namespace nodus
