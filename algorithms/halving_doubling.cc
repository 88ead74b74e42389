// Recursive halving-doubling (Rabenseifner): AllReduce as a reduce-scatter
// by recursive halving then an all-gather by recursive doubling, and
// ReduceScatter as the first half alone: 2 log2(p) steps, each rank sending
// 2(p-1)/p of the data, as a ring does, but in log2(p) instead of p-1 steps.
// AllGather uses Bruck's algorithm: ceil(log2 p) steps for any p.
//
// Any rank count: with p' the largest power of two <= p and r = p - p', the
// first 2r ranks pair up; the even one of each pair hands its data to the odd
// one first and gets the result back at the end, so p' "virtual" ranks do the
// power-of-two exchange. Each exchange needs the whole range the one before
// wrote, so every exchange is a phase of its own (pipelined within itself).
// AllReduce halves with its nearest partner first (Order), so the biggest
// exchanges stay inside a host or a leaf.
#include "algorithms/halving_doubling.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "algorithms/plan_builder.h"

namespace nodus {
namespace {

using halving::Fold;
using halving::Order;

// AllReduce and ReduceScatter share the exchange; `start(v)` is where
// virtual rank v's final segment begins in the full vector (start(pp) = its end).
struct Segments {
  const Fold& f;
  uint64_t n;         // AllReduce: count; ReduceScatter: count per rank
  bool perRealRank;   // ReduceScatter: segments follow the real ranks' blocks
  uint64_t start(int v) const {
    if (!perRealRank) return blockBegin(static_cast<uint64_t>(v), n, static_cast<uint64_t>(f.pp));
    return static_cast<uint64_t>(v == f.pp ? f.p : f.firstReal(v)) * n;
  }
  uint64_t len(int v0, int v1) const { return start(v1) - start(v0); }
};

// Recursive halving among virtual ranks. Reads `src` (the input, or the
// folded partial) and accumulates into `acc`. The last exchange is cut at
// real-rank blocks for ReduceScatter so each block can land where it belongs.
void halve(PlanBuilder& b, const Fold& f, const Order& o, const Segments& seg, int v, Buf src, Buf acc, Buf last,
           const PlanKey& k) {
  for (int s = 0; s < o.steps(); ++s) {
    b.phase();
    const int m = o.bit(s), h = o.half(s), base = o.base(v, s);
    const int lo = (v & m) ? base + h : base;  // the half this rank keeps
    const int other = (v & m) ? base : base + h;
    const int partner = f.real(v ^ m);
    const Buf from = s == 0 ? src : acc;
    const bool final = h == 1;
    if (!final || !seg.perRealRank) {
      b.send(partner, {from, seg.start(other)}, seg.len(other, other + h));
      b.recvReduceCopy(partner, {from, seg.start(lo)}, {final ? last : acc, seg.start(lo)}, seg.len(lo, lo + h), final);
    } else {
      // Last exchange of a ReduceScatter: one message per real rank's block.
      const uint64_t n = seg.n;
      for (int q = f.firstReal(other); q < f.firstReal(other) + f.realCount(other); ++q)
        b.send(partner, {from, static_cast<uint64_t>(q) * n}, n);
      for (int q = f.firstReal(lo); q < f.firstReal(lo) + f.realCount(lo); ++q) {
        // This rank's own block goes to its receive buffer; its pair's to scratch.
        const Range dst = q == k.rank ? Range{Buf::Recv, 0} : Range{Buf::Scratch, static_cast<uint64_t>(q) * n};
        b.recvReduceCopy(partner, {from, static_cast<uint64_t>(q) * n}, dst, n, true);
      }
    }
  }
}

void allReduce(const PlanKey& k, PlanBuilder& b) {
  const Fold f(k.nranks);
  const Order o{f.pp, /*nearFirst=*/true};
  const uint64_t n = k.count;
  const int v = f.virt(k.rank);
  const Segments seg{f, n, false};
  const Range all{Buf::Recv, 0};
  if (v < 0) {  // the even rank of a pair: hand over, then get the result
    b.send(k.rank + 1, {Buf::Send, 0}, n);
    b.phase();
    b.recv(k.rank + 1, all, n);
    return;
  }
  const bool folded = k.rank < 2 * f.r;
  if (folded) b.recvReduceCopy(k.rank - 1, {Buf::Send, 0}, all, n);
  halve(b, f, o, seg, v, folded ? Buf::Recv : Buf::Send, Buf::Recv, Buf::Recv, k);
  // Recursive doubling of the finished segments: the halving's steps in
  // reverse, each trading the range this rank holds for its partner's.
  for (int s = o.steps(); s-- > 0;) {
    b.phase();
    const int m = o.bit(s), h = o.half(s), base = o.base(v, s);
    const int mine = (v & m) ? base + h : base;
    const int theirs = (v & m) ? base : base + h;
    const int partner = f.real(v ^ m);
    b.send(partner, {Buf::Recv, seg.start(mine)}, seg.len(mine, mine + h));
    b.recv(partner, {Buf::Recv, seg.start(theirs)}, seg.len(theirs, theirs + h));
  }
  if (folded) {
    b.phase();
    b.send(k.rank - 1, all, n);
  }
}

void reduceScatter(const PlanKey& k, Plan& plan, PlanBuilder& b) {
  const Fold f(k.nranks);
  const uint64_t n = k.count;
  const uint64_t total = n * static_cast<uint64_t>(k.nranks);
  const int v = f.virt(k.rank);
  const Segments seg{f, n, true};
  plan.scratchElems = total;
  if (v < 0) {
    b.send(k.rank + 1, {Buf::Send, 0}, total);
    b.phase();
    b.recv(k.rank + 1, {Buf::Recv, 0}, n);
    return;
  }
  const bool folded = k.rank < 2 * f.r;
  if (folded) b.recvReduceCopy(k.rank - 1, {Buf::Send, 0}, {Buf::Scratch, 0}, total);
  halve(b, f, Order{f.pp, /*nearFirst=*/false}, seg, v, folded ? Buf::Scratch : Buf::Send, Buf::Scratch,
        Buf::Scratch, k);
  if (folded) {
    b.phase();
    b.send(k.rank - 1, {Buf::Scratch, static_cast<uint64_t>(k.rank - 1) * n}, n);
  }
}

// Bruck: after step d a rank holds the blocks of ranks q .. q+2d-1; it sends
// what it has to q-d and gets q+d's. Blocks go straight to their final place,
// so no rotation is needed; a range that wraps past the last rank is two messages.
void allGather(const PlanKey& k, PlanBuilder& b) {
  const int p = k.nranks;
  const uint64_t n = k.count;
  const int q = k.rank;
  b.copy({Buf::Send, 0}, {Buf::Recv, static_cast<uint64_t>(q) * n}, n);
  auto pieces = [&](int first, int count, auto&& fn) {
    const int head = std::min(count, p - first);
    fn(static_cast<uint64_t>(first) * n, static_cast<uint64_t>(head) * n);
    if (count > head) fn(0, static_cast<uint64_t>(count - head) * n);
  };
  for (int d = 1; d < p; d *= 2) {
    b.phase();
    const int count = std::min(d, p - d);
    pieces(q, count, [&](uint64_t off, uint64_t len) { b.send(modRank(q - d, p), {Buf::Recv, off}, len); });
    pieces(modRank(q + d, p), count,
           [&](uint64_t off, uint64_t len) { b.recv(modRank(q + d, p), {Buf::Recv, off}, len); });
  }
}

bool supports(const PlanKey& k, const PlanContext&) {
  return k.coll == Collective::AllReduce || k.coll == Collective::ReduceScatter || k.coll == Collective::AllGather;
}

Status build(const PlanKey& k, const PlanContext&, Plan& plan) {
  PlanBuilder b(plan);
  if (k.nranks == 1) {
    buildSelf(k, plan);
    return Status::ok();
  }
  switch (k.coll) {
    case Collective::AllReduce: allReduce(k, b); break;
    case Collective::ReduceScatter: reduceScatter(k, plan, b); break;
    case Collective::AllGather: allGather(k, b); break;
    default: return makeError(nodusInternalError, "halving-doubling cannot build %s", collectiveName(k.coll));
  }
  return Status::ok();
}

}  // namespace

const Algorithm kHalvingDoublingAlgorithm = {
    "halving-doubling",
    "Recursive halving-doubling (AllReduce, ReduceScatter; any rank count) and Bruck (AllGather): log2(p) steps.",
    supports, build};

}  // namespace nodus
