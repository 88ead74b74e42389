// What an algorithm costs: one formula per algorithm, written in the tuner's
// machine model (cost_model.h) from the shapes the algorithm's header exposes
// (the ring's channels, the tree's trees, the torus's layout, ...). The
// algorithms build plans; the tuner prices them. Adding a formula = one file
// in src/tune/costs/ and one line in src/tune/costs/registry.cc.
#pragma once

#include <span>

#include "algorithms/algorithm.h"
#include "tune/cost_model.h"

namespace nodus {

struct CostFormula {
  const Algorithm* algo;
  // Predicted time in microseconds.
  double (*cost)(const PlanKey& key, const PlanContext& ctx, const CostModel& model);
  // The tuner may run it in slices smaller than the slot: its cost prices
  // what the slice changes (checked against nodus-sim). Left false, it runs
  // in whole slots: e.g. the torus's streams share one cursor, and nodus-sim
  // shows them slower in smaller slices (8x8x8, 256 MiB: 1.14x the bound in
  // 128 KiB slices, 1.51x in 32 KiB) while its cost says faster.
  bool slicesPriced = false;
};

// Every registered formula, in registry order.
std::span<const CostFormula* const> costFormulas();
// The formula for `algo`, or null where it has none.
const CostFormula* costFormulaFor(const Algorithm* algo);
// `algo`'s predicted time for `key` under `model`; +infinity where it has no
// formula (the tuner then never picks it on its own).
double predictUs(const Algorithm& algo, const PlanKey& key, const PlanContext& ctx, const CostModel& model);

}  // namespace nodus
