// Ring: AllReduce as reduce-scatter then all-gather around one ring,
// AllGather and ReduceScatter as one pass. Bandwidth-optimal: each rank sends
// (p-1)/p of the data per pass, every slice pipelined through the ring.
#include "algorithms/ring.h"

#include "algorithms/plan_builder.h"

namespace nodus {
namespace {

struct Ring {
  int p, me, prev, next;
  explicit Ring(const PlanKey& k)
      : p(k.nranks), me(k.rank), prev(modRank(k.rank - 1, k.nranks)),
        next(modRank(k.rank + 1, k.nranks)) {}
};

void allReduce(const PlanKey& k, PlanBuilder& b) {
  Ring r(k);
  const uint64_t n = k.count;
  auto at = [&](int c) { return blockBegin(c, n, r.p); };
  auto len = [&](int c) { return blockSize(c, n, r.p); };
  // Reduce-scatter: at step s rank me sends block (me - s); after p-1 steps it
  // holds block (me + 1) reduced over every rank.
  int c = r.me;
  b.send(r.next, {Buf::Send, at(c)}, len(c));
  for (int s = 1; s < r.p - 1; ++s) {
    c = modRank(r.me - s, r.p);
    b.recvReduceSend(r.prev, r.next, {Buf::Send, at(c)}, len(c));
  }
  c = modRank(r.me + 1, r.p);
  b.recvReduceCopySend(r.prev, r.next, {Buf::Send, at(c)}, {Buf::Recv, at(c)}, len(c), true);
  // All-gather: forward each finished block around the ring.
  for (int s = 0; s < r.p - 2; ++s) {
    c = modRank(r.me - s, r.p);
    b.recvCopySend(r.prev, r.next, {Buf::Recv, at(c)}, len(c));
  }
  c = modRank(r.me + 2, r.p);
  b.recv(r.prev, {Buf::Recv, at(c)}, len(c));
}

void allGather(const PlanKey& k, PlanBuilder& b) {
  Ring r(k);
  const uint64_t n = k.count;
  // Send first, then the local copy: it overlaps the neighbour's work
  // instead of delaying the first message.
  b.send(r.next, {Buf::Send, 0}, n);
  b.copy({Buf::Send, 0}, {Buf::Recv, static_cast<uint64_t>(r.me) * n}, n);
  for (int s = 1; s < r.p - 1; ++s) {
    int c = modRank(r.me - s, r.p);
    b.recvCopySend(r.prev, r.next, {Buf::Recv, static_cast<uint64_t>(c) * n}, n);
  }
  int c = modRank(r.me + 1, r.p);
  b.recv(r.prev, {Buf::Recv, static_cast<uint64_t>(c) * n}, n);
}

void reduceScatter(const PlanKey& k, PlanBuilder& b) {
  Ring r(k);
  const uint64_t n = k.count;
  // At step s rank me sends block (me - s - 1); the last step leaves block me.
  int c = modRank(r.me - 1, r.p);
  b.send(r.next, {Buf::Send, static_cast<uint64_t>(c) * n}, n);
  for (int s = 1; s < r.p - 1; ++s) {
    c = modRank(r.me - s - 1, r.p);
    b.recvReduceSend(r.prev, r.next, {Buf::Send, static_cast<uint64_t>(c) * n}, n);
  }
  b.recvReduceCopy(r.prev, {Buf::Send, static_cast<uint64_t>(r.me) * n}, {Buf::Recv, 0}, n, true);
}

bool supports(const PlanKey& k, const PlanContext&) {
  return k.coll == Collective::AllReduce || k.coll == Collective::AllGather ||
         k.coll == Collective::ReduceScatter;
}

Status build(const PlanKey& k, const PlanContext&, Plan& plan) {
  PlanBuilder b(plan);
  if (k.nranks == 1) {
    buildSelf(k, plan);
    return Status::ok();
  }
  switch (k.coll) {
    case Collective::AllReduce: allReduce(k, b); break;
    case Collective::AllGather: allGather(k, b); break;
    case Collective::ReduceScatter: reduceScatter(k, b); break;
    default: return makeError(nodusInternalError, "ring cannot build %s", collectiveName(k.coll));
  }
  return Status::ok();
}

double cost(const PlanKey& k, const PlanContext&, const CostModel& m) {
  const double p = k.nranks;
  const double bytes = static_cast<double>(k.count) * k.typeSize;
  // Per rank and pass: p-1 messages of 1/p of the data (AllReduce: two passes).
  const double passData = (k.coll == Collective::AllReduce) ? bytes : bytes * (k.coll == Collective::AllGather ? p : 1.0);
  const double passes = (k.coll == Collective::AllReduce) ? 2.0 : 1.0;
  const double reduced = (k.coll == Collective::AllGather) ? 0.0 : (p - 1) / p * passData;
  return passes * ((p - 1) * m.alphaUs + (p - 1) / p * passData * m.betaUsPerByte) +
         reduced * m.gammaUsPerByte;
}

}  // namespace

const Algorithm kRingAlgorithm = {
    "ring", "Pipelined ring: reduce-scatter + all-gather (AllReduce), one pass otherwise.",
    supports, build, cost};

}  // namespace nodus
