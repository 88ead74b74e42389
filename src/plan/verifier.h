// The verifier: runs the plans of every rank symbolically and proves that
// each output element holds exactly the contributions it should, each once,
// from the right source element — with no data, for thousands of ranks.
//
// Every element carries (set of ranks whose input it combines, index of the
// source element, whether an average was finalised). Messages flow through
// bounded FIFOs of `slots` slices per connection, as in the transports, so a
// plan that could deadlock or mismatch message sizes is rejected too.
#pragma once

#include <functional>

#include "algorithms/algorithm.h"
#include "core/status.h"
#include "plan/plan.h"

namespace nodus {

struct VerifyCase {
  Collective coll = Collective::AllReduce;
  int nranks = 1;
  uint64_t count = 0;
  int root = 0;
  bool inPlace = false;
  uint32_t typeSize = 4;
};

// Builds every rank's plan with `algo` and checks the outcome.
Status verifyAlgorithm(const Algorithm& algo, const VerifyCase& c, const PlanContext& ctx);

// Same, over plans the caller provides (plans[r] for rank r).
Status verifyPlans(const VerifyCase& c, const PlanContext& ctx, const std::vector<Plan>& plans);

}  // namespace nodus
