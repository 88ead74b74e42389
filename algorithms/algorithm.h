// Algorithm: a pure function from a call signature to a Plan, plus the cost
// the tuner uses to choose between algorithms.
//
// Adding an algorithm = one file in algorithms/ defining an Algorithm and one
// line in algorithms/registry.cc.
#pragma once

#include <span>

#include "core/status.h"
#include "plan/plan.h"
#include "topo/topology.h"

namespace nodus {

// What an algorithm may know besides the signature.
struct PlanContext {
  uint64_t sliceBytes = 0;  // bytes per pipelined slice (the transport's slot size)
  uint32_t slots = 0;       // slices a connection buffers before the sender waits
  uint64_t directMaxBytes = 0;  // largest call the automatic choice gives to `direct`
  // Where the ranks are; null means one host, ranks in order.
  const Topology* topo = nullptr;
};

// The ranks in the order a ring should visit them.
std::vector<int> ringOrder(const PlanContext& ctx, int nranks);

// Alpha-beta-gamma machine model the costs are written in.
struct CostModel {
  double alphaUs = 0.5;      // per message latency, microseconds
  double betaUsPerByte = 1.0 / 8000.0;   // per byte on a link (8 GB/s)
  double gammaUsPerByte = 1.0 / 16000.0; // per byte reduced (16 GB/s)
};

struct Algorithm {
  const char* name;
  const char* help;
  // Whether this algorithm can run this signature within this context.
  bool (*supports)(const PlanKey& key, const PlanContext& ctx);
  Status (*build)(const PlanKey& key, const PlanContext& ctx, Plan& plan);
  // Predicted time in microseconds.
  double (*cost)(const PlanKey& key, const PlanContext& ctx, const CostModel& model);
};

// Every registered algorithm, in registry order.
std::span<const Algorithm* const> algorithms();
const Algorithm* findAlgorithm(const char* name);

// Picks the algorithm for a call: the one `forced` names (error if it cannot
// run the call), else the cheapest supported one.
Status chooseAlgorithm(const PlanKey& key, const PlanContext& ctx, const char* forced,
                       const Algorithm** chosen);

}  // namespace nodus
