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

#include "algorithms/cost_model.h"
#include "algorithms/plan_builder.h"

namespace nodus {
namespace {

struct Fold {
  int p, pp, r;  // ranks, largest power of two <= p, p - pp
  explicit Fold(int nranks)
      : p(nranks), pp(static_cast<int>(std::bit_floor(static_cast<unsigned>(nranks)))), r(nranks - pp) {}
  // Virtual rank of a real rank, -1 for the even rank of a pair.
  int virt(int q) const { return q < 2 * r ? (q % 2 ? q / 2 : -1) : q - r; }
  int real(int v) const { return v < r ? 2 * v + 1 : v + r; }
  // Real ranks a virtual rank stands for: [first, first + size).
  int firstReal(int v) const { return v < r ? 2 * v : v + r; }
  int realCount(int v) const { return v < r ? 2 : 1; }
};

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

// The order of the exchanges. Step s (0 .. log2(pp)-1) of the halving
// splits the rank's range of segments in two halves of half(s) segments and
// trades one of them with the virtual rank that differs in bit(s).
// Near first (AllReduce): bit 0 first, so the largest half goes to the
// nearest partner (ranks of one host or leaf are numbered together) and the
// farthest exchange moves the least; a rank ends with segment bitreverse(v),
// which the doubling retraces. Far first (ReduceScatter): the top bit first,
// so that rank v ends with segment v, its own block.
struct Order {
  int pp;
  bool nearFirst;
  int bit(int s) const { return nearFirst ? 1 << s : pp >> (s + 1); }
  int half(int s) const { return pp >> (s + 1); }
  int steps() const { return std::countr_zero(static_cast<unsigned>(pp)); }
  // The first segment of virtual rank v's range before step s.
  int base(int v, int s) const {
    int b = 0;
    for (int i = 0; i < s; ++i)
      if (v & bit(i)) b += half(i);
    return b;
  }
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

// How long, in slice times, Bruck's step d keeps its slowest rank busy,
// against the slices it moves. The executor paces a phase per step (each
// round moves up to roundSlices slices of every step), and a range that
// wraps past the last rank is two steps: a rank whose receive comes in two
// pieces takes up to two rounds' worth a round while its one-piece send goes
// at one round's, and its rounds stretch to the longer side (nodus-sim, 4
// hosts, 16 MiB: the step of 16 slices took 24 slice times; 687 us against
// 527 priced without this). Returns the slowest rank's bytes of busy
// rounds (each round as long as its larger side) over the step's bytes.
double bruckPacing(int p, int d, uint64_t blockBytes, const PlanContext& ctx) {
  if (ctx.sliceBytes == 0 || blockBytes == 0) return 1.0;
  const int count = std::min(d, p - d);
  const uint64_t round = ctx.roundBytes();  // what a step moves a round
  auto pieces = [&](int first, uint64_t out[2]) {
    const int head = std::min(count, p - first);
    out[0] = static_cast<uint64_t>(head) * blockBytes;
    out[1] = static_cast<uint64_t>(count - head) * blockBytes;
  };
  const uint64_t whole = static_cast<uint64_t>(count) * blockBytes;
  uint64_t worst = whole;
  for (int q = 0; q < p; ++q) {
    uint64_t send[2], recv[2];
    pieces(q, send);
    pieces(modRank(q + d, p), recv);
    if (send[1] == 0 && recv[1] == 0) continue;  // one piece each way: paced alike
    uint64_t busy = 0;
    for (uint64_t done = 0;; done += round) {
      uint64_t out = 0, in = 0;
      for (int i = 0; i < 2; ++i) {
        out += send[i] > done ? std::min(round, send[i] - done) : 0;
        in += recv[i] > done ? std::min(round, recv[i] - done) : 0;
      }
      if (out == 0 && in == 0) break;
      busy += std::max(out, in);
    }
    worst = std::max(worst, busy);
  }
  return static_cast<double>(worst) / static_cast<double>(whole);
}

double cost(const PlanKey& k, const PlanContext& ctx, const CostModel& model) {
  // Every rank works at once: its local passes and reductions pay the
  // host's busyShare (concurrentBeta and busyBetaBetween its copies).
  // All at once also ends a round only when every rank has run.
  CostModel m = model.exchanging();
  m.passUsPerByte *= m.busyShare;
  m.gammaUsPerByte *= m.busyShare;
  const Fold f(k.nranks);
  const double bytes = static_cast<double>(k.count) * k.typeSize;
  const double frac = (f.pp - 1.0) / f.pp;
  const double fold = f.r > 0 ? 1.0 : 0.0;
  // Unlike a ring, a send is not fused with the reduction before it and a
  // phase waits for the whole previous one: each byte sent costs a second
  // pass (CostModel::passUsPerByte). Every rank exchanges at once, so an
  // exchange that leaves the host shares its fabric link and, off the leaf,
  // the leaf's uplinks (CostModel::concurrentBeta).
  auto exchangeBeta = [&](int mask) {
    return m.passUsPerByte + m.concurrentBeta(f.real(0), [&](int q) {
      const int v = f.virt(q);
      return v < 0 ? -1 : f.real(v ^ mask);
    });
  };
  // Virtual rank 0's exchanges, one per step: each pays its latency once per
  // slice round (sliceRounds). AllReduce trades data/2 with the partner at
  // distance 1 first (Order, near first), ReduceScatter with the farthest.
  auto exchanges = [&](double data, bool nearFirst) {
    const Order o{f.pp, nearFirst};
    double us = 0;
    for (int s = 0; s < o.steps(); ++s) {
      const int mask = o.bit(s);
      const double moved = data * o.half(s) / f.pp;
      us += sliceRounds(moved, ctx.roundBytes()) * m.alphaBetween(f.real(0), f.real(mask)) + moved * exchangeBeta(mask);
    }
    return us;
  };
  const double foldBeta = m.passUsPerByte + m.concurrentBeta(0, [&](int q) { return q < 2 * f.r ? q ^ 1 : -1; });
  auto folding = [&](double data) {
    return f.r > 0 ? sliceRounds(data, ctx.roundBytes()) * m.alphaBetween(0, 1) + data * foldBeta : 0.0;
  };
  switch (k.coll) {
    case Collective::AllReduce:
      return 2 * (exchanges(bytes, true) + folding(bytes)) + (frac + fold) * bytes * m.gammaUsPerByte;
    case Collective::ReduceScatter: {
      const double total = bytes * k.nranks;
      // The fold sends the whole vector in and the folded rank's block back.
      return exchanges(total, false) + folding(total) + folding(bytes) + (frac + fold) * total * m.gammaUsPerByte;
    }
    default: {
      // Bruck: step d sends min(d, p - d) blocks to rank - d.
      double bruck = 0;
      for (int d = 1; d < k.nranks; d *= 2) {
        const double moved = std::min(d, k.nranks - d) * bytes;
        const double beta = m.passUsPerByte + m.concurrentBeta(0, [&](int q) { return (q + k.nranks - d) % k.nranks; });
        const double paced = bruckPacing(k.nranks, d, static_cast<uint64_t>(bytes), ctx);
        // Both stretch a step, the busiest link and the uneven rounds, and the
        // slower of the two sets its pace (nodus-sim: their product
        // over-priced 4x4x4 to 8x8x8 tori by 20-27% from 16 MiB).
        const double pacedBeta = (m.passUsPerByte + m.busyBetaBetween(0, (k.nranks - d) % k.nranks)) * paced;
        bruck += sliceRounds(moved, ctx.roundBytes()) * m.alphaBetween(0, d) + moved * std::max(beta, pacedBeta);
      }
      return bruck;
    }
  }
}

}  // namespace

const Algorithm kHalvingDoublingAlgorithm = {
    "halving-doubling",
    "Recursive halving-doubling (AllReduce, ReduceScatter; any rank count) and Bruck (AllGather): log2(p) steps.",
    supports, build, cost};

}  // namespace nodus
