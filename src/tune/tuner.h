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
// gathered output; ReduceScatter: the input to scatter; else count x type).
uint64_t callBytes(const PlanKey& key);

struct Estimate {
  const Algorithm* algo;
  double us;
};

struct Choice {
  const Algorithm* algo = nullptr;
  bool forced = false;
  std::vector<Estimate> estimates;  // every algorithm that supports the call
  std::string explain() const;      // "ring 12.3us* tree 15.0us ..." for logs
};

Status chooseAlgorithm(const PlanKey& key, const PlanContext& ctx, const AlgoSpec& spec, Choice* out);

}  // namespace nodus
