// What pairwise exchange costs (algorithms/pairwise.cc builds it). Every
// rank's messages are in flight at once: one latency, then the bytes the
// busiest rank moves at the slowest link's speed, and a hand-off a message
// (CostModel::intraSliceUs). Priced from what every rank knows alike (the
// counts of AllGatherV and ReduceScatterV are the same everywhere; an
// AllToAllV's are a rank's own, and pairwise is the only algorithm that runs
// it, in whole slots), so every rank makes the same choice.
#include <algorithm>

#include "algorithms/pairwise.h"
#include "tune/cost_formula.h"

namespace nodus {
namespace {

double cost(const PlanKey& k, const PlanContext&, const CostModel& model) {
  const CostModel m = model.exchanging();
  const int p = k.nranks;
  if (p == 1) return m.passUsPerByte * static_cast<double>(sendElems(k)) * k.typeSize;
  double alpha = m.alphaUs;
  for (int r = 1; r < p; ++r) alpha = std::max(alpha, m.alphaBetween(0, r));
  const double ts = k.typeSize, blockBytes = static_cast<double>(k.count) * ts;
  double bytes = 0, reduced = 0, messages = p - 1.0, share = m.busyShare;
  switch (k.coll) {
    case Collective::AllToAll: bytes = (p - 1) * blockBytes; break;
    case Collective::Gather:
    case Collective::Scatter:
      bytes = (p - 1) * blockBytes;  // the root's
      share = 1.0;                   // only the root is busy
      break;
    case Collective::AllGatherV:
    case Collective::ReduceScatterV: {
      // The busiest rank receives everyone's block (AllGatherV) or sends
      // everyone theirs and folds p - 1 of its own (ReduceScatterV).
      double total = 0, least = 0, most = 0;
      for (int j = 0; j < p; ++j) {
        const double b = static_cast<double>(k.blocks[static_cast<size_t>(j)]) * ts;
        total += b;
        least = j == 0 ? b : std::min(least, b);
        most = std::max(most, b);
      }
      bytes = total - least;
      if (k.coll == Collective::ReduceScatterV) reduced = (p - 1) * most;
      break;
    }
    default: {  // AllToAllV: this rank's own
      double out = 0, in = 0;
      for (int j = 0; j < p; ++j) {
        if (j == k.rank) continue;
        out += static_cast<double>(blockTo(k, j).count) * ts;
        in += static_cast<double>(blockFrom(k, j).count) * ts;
      }
      bytes = std::max(out, in);
      break;
    }
  }
  // Where ranks share cores, a message waits for its peer to be scheduled:
  // a hand-off each, not just a slot's. 4 ranks on 2 cores, AllToAll of 4
  // and 16 KiB (nodus-perf -a all --rounds 3 -n 100): pairwise 30 us, its
  // three messages priced 14 as slots; Bruck's two rounds 18 us.
  const double perMessage =
      m.busyShare > 1.0 ? (m.intraAlphaUs + m.intraSliceUs) * m.busyShare : m.intraSliceUs;
  return alpha + messages * perMessage + (bytes * m.betaUsPerByte + reduced * m.gammaUsPerByte) * share;
}

}  // namespace

extern const CostFormula kPairwiseCost = {&kPairwiseAlgorithm, cost};

}  // namespace nodus
