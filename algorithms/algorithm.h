// Algorithm: a pure function from a call signature to a Plan. What it costs
// is the tuner's business: its formula is src/tune/costs/<name>.cc, written in
// the tuner's machine model (src/tune/cost_model.h), from the shapes the
// algorithm's header exposes.
//
// Adding an algorithm = one file in algorithms/ defining an Algorithm and one
// line in algorithms/registry.cc, plus its cost formula: one file in
// src/tune/costs/ and one line in src/tune/costs/registry.cc (without one the
// tuner never picks it, NODUS_ALGO can still force it).
#pragma once

#include <algorithm>
#include <cmath>
#include <span>

#include "base/status.h"
#include "plan/plan.h"
#include "topo/topology.h"

namespace nodus {

// What an algorithm may know besides the signature.
struct PlanContext {
  // Bytes per pipelined slice. What the tuner is given is the largest slice
  // the connections take (their slot) unless sliceForced (NODUS_SLICE_BYTES):
  // it prices each algorithm at that slice and at halves of it and keeps the
  // best (Choice::sliceBytes); a cost function sees the slice it prices.
  uint64_t sliceBytes = 0;
  uint32_t slots = 0;       // slices a connection buffers before the sender waits
  uint32_t roundSlices = 1; // slices of a step the executor moves in a row (Plan::roundSlices)
  // Largest call the automatic choice gives to `direct` (kDirectMaxAuto:
  // directMaxFor() decides from the topology).
  uint64_t directMaxBytes = 0;
  // Where the ranks are; null means one host, ranks in order.
  const Topology* topo = nullptr;
  bool sliceForced = false;  // NODUS_SLICE_BYTES: sliceBytes is the only slice
  // Channels: the call's data split into this many parts, each run by its
  // own instance of the algorithm (a ring of its own, alternating direction),
  // their steps interleaved so that all advance together. An algorithm that
  // runs channels (Algorithm::maxChannels > 1) builds and prices this many,
  // capped at its maximum (channelsFor); the others ignore it. The tuner
  // tries 1, 2, 4, ... unless channelsForced (NODUS_CHANNELS).
  uint32_t channels = 1;
  bool channelsForced = false;
  // What one round of the executor's cursor moves per step: a chain of
  // steps pays its latency once per this many bytes (sliceRounds).
  uint64_t roundBytes() const { return sliceBytes * (roundSlices ? roundSlices : 1); }
  // What a host's local work costs, where the caller knows the hosts better
  // than the constants CostModel::of (src/tune) measured on this project's machines
  // (negative: those). nodus-sim sets what it simulates, so that the tuner
  // prices the machine it runs: the reductions at the simulated speed (0
  // when it simulates the network only) and no local passes.
  double gammaUsPerByte = -1;  // CostModel::gammaUsPerByte
  double passUsPerByte = -1;   // CostModel::passUsPerByte
};

// NODUS_DIRECT_MAX_BYTES=-1: 128 KiB where every rank has a core of its own,
// 16 KiB where ranks share cores. Measured on 2 ranks (nodus-perf -a all
// --rounds 5), direct is 1.2-1.37x the ring at 64-128 KiB and 0.72-0.84x at
// 256 KiB and more; on 4 ranks sharing 2 cores it is 0.27-0.77x the
// halving-doubling at 32-128 KiB, and on 8 such ranks its latency (33-36 us
// at 8 B, every rank waiting on 7 peers that share 2 cores) is not in its
// formula, so the model cannot tell where it stops paying there.
constexpr uint64_t kDirectMaxAuto = UINT64_MAX;
uint64_t directMaxFor(const PlanContext& ctx);

// The ranks in the order a ring should visit them.
std::vector<int> ringOrder(const PlanContext& ctx, int nranks);

struct Algorithm {
  const char* name;
  const char* help;
  // Whether this algorithm can run this signature within this context.
  bool (*supports)(const PlanKey& key, const PlanContext& ctx);
  Status (*build)(const PlanKey& key, const PlanContext& ctx, Plan& plan);
  // The most channels it runs (PlanContext::channels); 1: it has none.
  uint32_t maxChannels = 1;
  // The channels it really builds for this call, where that can be fewer
  // than channelsFor() (the ring on 2 ranks: 1); null: channelsFor().
  uint32_t (*channelsRun)(const PlanKey& key, const PlanContext& ctx) = nullptr;
};

// The channels `algo` runs within `ctx`: ctx.channels, at least 1 and at most
// the algorithm's maximum.
inline uint32_t channelsFor(const Algorithm& algo, const PlanContext& ctx) {
  return std::clamp<uint32_t>(ctx.channels, 1, std::max<uint32_t>(1, algo.maxChannels));
}
// What its plan for `key` will run: what logs and tools report.
inline uint32_t channelsFor(const Algorithm& algo, const PlanKey& key, const PlanContext& ctx) {
  return algo.channelsRun ? algo.channelsRun(key, ctx) : channelsFor(algo, ctx);
}

// Every registered algorithm, in registry order.
std::span<const Algorithm* const> algorithms();
const Algorithm* findAlgorithm(const char* name);

}  // namespace nodus
