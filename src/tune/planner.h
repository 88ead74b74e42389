// The planner: the one function that turns a call into the plan that runs.
// The communicator, the verifier's tests, nodus-sim and nodus-topo all call
// makePlan with the same settings, so the plan that is simulated, printed or
// proven is the plan the runtime runs:
//
//   choose (NODUS_ALGO's rules, else the lowest cost)  -> build (the algorithm)
//   -> finalize (slice, channels, round, by-reference sends)
#pragma once

#include <vector>

#include "algorithms/algorithm.h"
#include "base/status.h"
#include "plan/plan.h"
#include "plan/verifier.h"
#include "tune/tuner.h"

namespace nodus {

// What the connections under a communicator can do, known once they are
// connected (tools and the simulator say what they model: nothing extra).
struct PlanCapabilities {
  // Every connection on every rank reads references of any size from its
  // sender's memory (Transport::readsReferencesOfAnySize, agreed at init): a plan
  // that sends only by reference may cut slices larger than a slot.
  bool referencesOfAnySize = false;
};

// The plan for `key` within `ctx` (settings and topology) under `rules`.
// `choice`, when given, receives the tuner's choice and its estimates.
Status makePlan(const PlanKey& key, const PlanContext& ctx, const AlgoSpec& rules, const PlanCapabilities& caps,
                Plan* out, Choice* choice = nullptr);

// What the verifier must model of the connections for plans made in `ctx`.
VerifyLimits verifyLimitsOf(const PlanContext& ctx);

// Builds every rank's plan with `algo` (exactly that algorithm, in ctx's
// slice and channels, unfinalized as an algorithm returns it) and proves it.
Status verifyAlgorithm(const Algorithm& algo, const VerifyCase& c, const PlanContext& ctx);
// Proves plans made in `ctx`.
Status verifyPlans(const VerifyCase& c, const PlanContext& ctx, const std::vector<Plan>& plans);

}  // namespace nodus
