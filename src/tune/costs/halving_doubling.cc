// What halving-doubling and Bruck costs (algorithms/halving_doubling.cc builds it).
#include <algorithm>
#include <bit>

#include "algorithms/halving_doubling.h"
#include "tune/cost_formula.h"

namespace nodus {
namespace {

using halving::Fold;
using halving::Order;

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

extern const CostFormula kHalvingDoublingCost = {&kHalvingDoublingAlgorithm, cost};

}  // namespace nodus
