// Direct: every rank sends its whole input to every other rank and folds all
// contributions locally in rank order. One message latency instead of 2(p-1):
// the small-message AllReduce. Every rank folds in the same order, so every
// rank gets bitwise the same result.
#include "algorithms/direct.h"

#include <algorithm>

#include "algorithms/plan_builder.h"

namespace nodus {
namespace {

// Each rank sends p-1 copies of its data: only sensible for few ranks.
constexpr int kMaxRanks = 64;

bool supports(const PlanKey& k, const PlanContext&) {
  return k.coll == Collective::AllReduce && k.nranks <= kMaxRanks;
}

Status build(const PlanKey& k, const PlanContext&, Plan& plan) {
  PlanBuilder b(plan);
  const int p = k.nranks;
  const uint64_t n = k.count;
  if (p == 1) {
    buildSelf(k, plan);
    return Status::ok();
  }
  // In place, the receive buffer is overwritten by the fold while the own
  // contribution is still needed: keep it in scratch.
  Range own{Buf::Send, 0};
  if (k.inPlace) {
    own = {Buf::Scratch, 0};
    plan.scratchElems = n;
    b.copy({Buf::Send, 0}, own, n);
  }
  for (int i = 1; i < p; ++i) b.send(modRank(k.rank + i, p), own, n);
  const Range out{Buf::Recv, 0};
  if (k.rank == 0)
    b.copy(own, out, n);
  else
    b.recv(0, out, n);
  for (int j = 1; j < p; ++j) {
    const bool last = (j == p - 1);
    if (j == k.rank)
      b.reduce(own, out, n, last);
    else
      b.recvReduceCopy(j, out, out, n, last);
  }
  return Status::ok();
}

double cost(const PlanKey& k, const PlanContext&, const CostModel& m) {
  const double p = k.nranks;
  const double bytes = static_cast<double>(k.count) * k.typeSize;
  double alpha = m.alphaUs;
  for (int r = 1; r < k.nranks; ++r) alpha = std::max(alpha, m.alphaBetween(0, r));
  // A rank folds each contribution as it reads it out of the slot (one pass,
  // recvReduceCopy), so reading and reducing overlap: the slower of the two
  // sets the pace. Measured, 2 ranks on shm, 128 KiB: 11.6 us, where beta
  // alone prices 13.7 and beta + gamma 24.6 (the ring: 15.6 measured).
  // Every rank folds p-1 whole vectors at once: where ranks share cores,
  // they share that work too (4 ranks on 2 cores, 128 KiB: 130 us measured,
  // 54 priced without the share, 93.6 with it): CostModel::busyShare.
  return alpha + (p - 1) * bytes * std::max(m.betaUsPerByte, m.gammaUsPerByte) * m.busyShare;
}

}  // namespace

const Algorithm kDirectAlgorithm = {
    "direct", "Small AllReduce: all-to-all exchange, local fold in rank order (one round).",
    supports, build, cost};

}  // namespace nodus
