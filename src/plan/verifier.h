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

#include "base/status.h"
#include "plan/plan.h"

namespace nodus {

struct VerifyCase {
  Collective coll = Collective::AllReduce;
  int nranks = 1;
  uint64_t count = 0;
  int root = 0;
  bool inPlace = false;
  uint32_t typeSize = 4;
  // V-collectives: rank r's PlanKey::blocks is blocks[r] (every rank's own
  // counts and displacements; the checks compare each rank's against its
  // peers').
  std::vector<std::vector<uint64_t>> blocks = {};
  // Rank r's key, as the runtime makes it for this case.
  PlanKey keyOf(int r) const;
};

// What the connections the plans run over buffer, as the executor cuts them.
struct VerifyLimits {
  uint32_t slots = 1;        // slices a connection buffers before its sender waits
  uint32_t roundSlices = 1;  // slices of a step moved in a row (Plan::roundSlices)
  uint64_t sliceBytes = 0;   // bytes per slice
};

// Checks the plans every rank would run (plans[r] for rank r). Building
// them is the planner's (src/tune/planner.h: verifyAlgorithm).
Status verifyPlans(const VerifyCase& c, const VerifyLimits& limits, const std::vector<Plan>& plans);

}  // namespace nodus
