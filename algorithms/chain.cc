// Chain: Broadcast and Reduce pipelined along the ring that starts (Broadcast)
// or ends (Reduce) at the root. Every link carries the data once; slices keep
// all links busy at the same time.
#include "algorithms/chain.h"

#include <algorithm>

#include "algorithms/plan_builder.h"

namespace nodus {
namespace {

bool supports(const PlanKey& k, const PlanContext&) {
  return k.coll == Collective::Broadcast || k.coll == Collective::Reduce;
}

Status build(const PlanKey& k, const PlanContext& ctx, Plan& plan) {
  PlanBuilder b(plan);
  const int p = k.nranks;
  const uint64_t n = k.count;
  if (p == 1) {
    buildSelf(k, plan);
    return Status::ok();
  }
  // Walk the topology's ring order, starting at the root.
  const std::vector<int> order = ringOrder(ctx, p);
  auto place = [&](int r) { return static_cast<int>(std::find(order.begin(), order.end(), r) - order.begin()); };
  const int me = place(k.rank), rootPlace = place(k.root);
  const int pos = modRank(me - rootPlace, p);  // distance from the root along the ring
  const int next = order[modRank(me + 1, p)];
  const int prev = order[modRank(me - 1, p)];
  const Range in{Buf::Send, 0}, out{Buf::Recv, 0};
  if (k.coll == Collective::Broadcast) {
    if (pos == 0) {
      b.send(next, in, n);
      b.copy(in, out, n);
    } else if (pos < p - 1) {
      b.recvCopySend(prev, next, out, n);
    } else {
      b.recv(prev, out, n);
    }
  } else {
    // Reduce flows the other way round: from root+1 towards the root.
    if (pos == 1) {
      b.send(next, in, n);
    } else if (pos != 0) {
      b.recvReduceSend(prev, next, in, n);
    } else {
      b.recvReduceCopy(prev, in, out, n, true);
    }
  }
  return Status::ok();
}

}  // namespace

const Algorithm kChainAlgorithm = {
    "chain", "Broadcast / Reduce pipelined along a ring from / to the root.", supports, build};

}  // namespace nodus
