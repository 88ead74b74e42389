// Direct: every rank sends its whole input to every other rank and folds all
// contributions locally in rank order. One message latency instead of 2(p-1):
// the small-message AllReduce. Every rank folds the contributions in the same
// order, each operation's operands too, so every rank gets bitwise the same
// result, min and max of signed zeros and NaNs included.
#include "algorithms/direct.h"

#include <algorithm>

#include "algorithms/cost_model.h"
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
  // Every rank computes (((x0 op x1) op x2) op ...) with the operands in
  // that order (Step::receivedLast where the received one comes second).
  // Ranks 0 and 1 fold their own contribution with the other's as they read
  // it (one pass where a copy and a fold were two); the others start from
  // rank 0's contribution.
  int next = 2;
  if (k.rank <= 1) {
    b.recvReduceCopy(1 - k.rank, own, out, n, p == 2, /*receivedLast=*/k.rank == 0);
  } else {
    b.recv(0, out, n);
    next = 1;
  }
  for (int j = next; j < p; ++j) {
    const bool last = (j == p - 1);
    if (j == k.rank)
      b.reduce(own, out, n, last);  // out op own
    else
      b.recvReduceCopy(j, out, out, n, last, /*receivedLast=*/true);
  }
  return Status::ok();
}

double cost(const PlanKey& k, const PlanContext&, const CostModel& model) {
  // Every rank sends and receives at once: CostModel::exchanging.
  const CostModel m = model.exchanging();
  const double p = k.nranks;
  const double bytes = static_cast<double>(k.count) * k.typeSize;
  double alpha = m.alphaUs;
  for (int r = 1; r < k.nranks; ++r) alpha = std::max(alpha, m.alphaBetween(0, r));
  // A rank folds each contribution as it reads it out of the slot (one pass,
  // recvReduceCopy; ranks 0 and 1 fold their own in the same pass), so with
  // a core each, reading and reducing overlap: the slower of the two sets
  // the pace. 2 ranks on shm, 64 and 128 KiB: 7.9 and 18.6 us measured
  // (medians of 8 runs of nodus-perf -a all --rounds 3, 2026-12-04), priced
  // 7.2 and 13.7; beta + gamma would price 12.6 and 24.6.
  // Every rank folds p-1 whole vectors at once: where ranks share cores,
  // they share that work too: CostModel::busyShare. There a rank's copies
  // into its peers' slots and its folds no longer overlap with anything but
  // each other on the same cores, so they add up: 8 ranks on 2 cores, 8 KiB,
  // measured 46.1 us (median of the 8 runs above), priced 26.5 by the slower
  // of beta and gamma and 45.6 by their sum (halving-doubling: 28.9
  // measured, 32.2 priced, takes it); 4 ranks, 16 KiB: 14.4, 12.3 and 20.5
  // (halving-doubling: 13.4 measured, 19.4 priced).
  const double perByte =
      m.busyShare > 1.0 ? m.betaUsPerByte + m.gammaUsPerByte : std::max(m.betaUsPerByte, m.gammaUsPerByte);
  return alpha + (p - 1) * bytes * perByte * m.busyShare;
}

}  // namespace

const Algorithm kDirectAlgorithm = {
    "direct", "Small AllReduce: all-to-all exchange, local fold in rank order (one round).",
    supports, build, cost};

}  // namespace nodus
