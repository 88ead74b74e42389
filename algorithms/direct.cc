// Direct: every rank sends its whole input to every other rank and folds all
// contributions locally in rank order. One message latency instead of 2(p-1):
// the small-message AllReduce. Every rank folds the contributions in the same
// order, each operation's operands too, so every rank gets bitwise the same
// result, min and max of signed zeros and NaNs included.
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

}  // namespace

const Algorithm kDirectAlgorithm = {
    "direct", "Small AllReduce: all-to-all exchange, local fold in rank order (one round).",
    supports, build};

}  // namespace nodus
