// The tuner: picks the algorithm for each call from the cost model over the
// topology, unless NODUS_ALGO says otherwise for that collective and size.
//
// NODUS_ALGO is one string of rules, first match wins:
//   ring                                   every collective ring supports
//   allreduce:0-64K:tree,64K-:torus;allgather:ring
// A rule is [collective:] entries; an entry is [lo-hi:] algorithm, the range
// in bytes as nodus-perf's "size" column counts them (K/M/G = 1024^n), lo
// included, hi excluded, either end open. A forced algorithm that cannot run a
// call (e.g. tree for AllGather) leaves that call to the automatic choice.
#pragma once

#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "tune/cost_formula.h"
#include "base/settings.h"

namespace nodus {

struct AlgoRule {
  int coll = -1;  // a Collective, or -1 for every collective
  uint64_t lo = 0, hi = UINT64_MAX;
  const Algorithm* algo = nullptr;
};

struct AlgoSpec {
  std::string text;
  std::vector<AlgoRule> rules;
  static Status parse(const std::string& text, AlgoSpec* out);
  // The algorithm the rules force on this call, or null.
  const Algorithm* forcedFor(const PlanKey& key) const;
};

// Bytes of a call as nccl-tests and nodus-perf report them (AllGather: the
// gathered output; ReduceScatter: the input to scatter; AllToAll, Gather,
// Scatter: the nranks blocks; AllGatherV, ReduceScatterV: every block;
// AllToAllV: 0, since ranks differ; else count x type).
uint64_t callBytes(const PlanKey& key);

// The algorithm's predicted time at the slice that prices lowest for it.
struct Estimate {
  const Algorithm* algo;
  double us;
  uint64_t sliceBytes;
  uint32_t channels = 1;
};

struct Choice {
  const Algorithm* algo = nullptr;
  uint64_t sliceBytes = 0;  // the pipelining slice the plan runs with
  uint32_t channels = 1;    // the channels it runs (PlanContext::channels)
  bool forced = false;
  std::vector<Estimate> estimates;  // every algorithm that supports the call
  std::string explain() const;      // "ring 12.3us/128Kx2ch*, tree 15.0us/32K, ..." for logs
  // The slice `a` runs in: its estimate's (0 if `a` does not support the call).
  uint64_t sliceFor(const Algorithm* a) const;
  // The channels `a` runs with: its estimate's (1 if it does not support the call).
  uint32_t channelsFor(const Algorithm* a) const;
};

// The smallest slice the tuner tries.
constexpr uint64_t kMinSliceBytes = 4096;
// The most channels NODUS_CHANNELS may ask for.
constexpr int64_t kMaxChannels = 16;

// Picks the algorithm, its slice and its channels: each algorithm is priced
// at ctx.sliceBytes (the slot) and, where its cost prices slices
// (CostFormula::slicesPriced), at halves of it down to kMinSliceBytes; only
// at ctx.sliceBytes when ctx.sliceForced; and, where it runs channels
// (Algorithm::maxChannels), at 1, 2, 4, ... of them up to its most, only at
// ctx.channels when ctx.channelsForced. The lowest price wins.
// NODUS_ALGO's rules then force the algorithm (at its own best slice).
Status chooseAlgorithm(const PlanKey& key, const PlanContext& ctx, const AlgoSpec& spec, Choice* out);

// What a PlanContext takes from the settings (CommConfig checks the same
// values first): the slice (NODUS_SLOT_BYTES, else `transportSlot`, the slot
// of the transports the plans run over, else kDefaultSlotBytes;
// NODUS_SLICE_BYTES forced when set, at most the slot), NODUS_SLOTS,
// NODUS_ROUND_SLICES (0: half the slots), NODUS_DIRECT_MAX_BYTES and
// NODUS_CHANNELS (0: the tuner's choice). A communicator passes
// slotBytesFor() the transports it connected, nodus-topo and nodus-sim
// modelledSlotBytes().
void contextFromSettings(const Settings& settings, PlanContext* ctx, int64_t transportSlot = 0);
// The same with the environment as it is now (tests).
inline void contextFromEnvironment(PlanContext* ctx, int64_t transportSlot = 0) {
  Settings s;
  (void)Settings::fromEnvironment(&s);
  contextFromSettings(s, ctx, transportSlot);
}

std::string formatBytes(uint64_t bytes);  // 131072 -> "128K"

}  // namespace nodus
