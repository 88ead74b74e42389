// What the double binary tree costs (algorithms/tree.cc builds it).
#include <algorithm>
#include <bit>

#include "algorithms/tree.h"
#include "tune/cost_formula.h"

namespace nodus {
namespace {

// Latency from the deepest leaf of tree 1 to its root, hop by hop.
double pathLatency(const PlanKey& k, const PlanContext& ctx, const CostModel& m) {
  const DoubleTree dt = makeTrees(k, ctx);
  std::vector<double> lat(static_cast<size_t>(k.nranks) + 1, -1);
  double worst = 0;
  for (int x = 1; x <= k.nranks; ++x) {
    // Walk up until a label whose latency is known (the root: 0).
    std::vector<int> path;
    int y = x;
    while (lat[static_cast<size_t>(y)] < 0) {
      path.push_back(y);
      const int up = binaryTreeParent(y, k.nranks);
      if (up == 0) {
        lat[static_cast<size_t>(y)] = 0;
        path.pop_back();
        break;
      }
      y = up;
    }
    for (size_t i = path.size(); i-- > 0;) {
      const int c = path[i], par = binaryTreeParent(c, k.nranks);
      lat[static_cast<size_t>(c)] =
          lat[static_cast<size_t>(par)] + m.alphaBetween(dt.order[static_cast<size_t>(c - 1)], dt.order[static_cast<size_t>(par - 1)]);
    }
    worst = std::max(worst, lat[static_cast<size_t>(x)]);
  }
  return worst;
}

// The slowest link any edge of either tree crosses (per byte). A tree puts a
// flow or two on a leaf's uplinks, not a whole leaf's worth, so
// oversubscription does not enter; on multi-rank hosts most edges stay
// inside a host, where shared memory is the slower link.
double treeBeta(const PlanKey& k, const PlanContext& ctx, const CostModel& m) {
  if (m.topo == nullptr) return m.betaUsPerByte;
  const DoubleTree dt = makeTrees(k, ctx);
  double beta = 0;
  for (int t = 0; t < 2; ++t)
    for (int pos = 0; pos < k.nranks; ++pos) {
      const TreeNode n = dt.node(t, pos);
      if (n.parent >= 0) beta = std::max(beta, m.busyBetaBetween(dt.order[static_cast<size_t>(pos)], n.parent));
    }
  return beta > 0 ? beta : m.betaUsPerByte;
}

double cost(const PlanKey& k, const PlanContext& ctx, const CostModel& m) {
  const double bytes = static_cast<double>(k.count) * k.typeSize;
  const double depth = binaryTreeDepth(k.nranks);
  const double path = pathLatency(k, ctx, m);
  const double slice = ctx.sliceBytes ? std::min<double>(bytes / 2, ctx.sliceBytes) : bytes / 2;
  // What a step moves in one round of the cursor (Plan::roundSlices slices).
  const double round = ctx.sliceBytes ? std::min<double>(bytes / 2, ctx.roundBytes()) : bytes / 2;
  // Each phase: a slice crosses `depth` levels, then the rest streams behind
  // it; an inner node forwards its half to two children.
  const double beta = treeBeta(k, ctx, m);
  // AllReduce: in one plan a rank walks its steps for the first tree before
  // those for the second, so the two trees' chains partly serialise: nodus-sim
  // measured the latency at 1.5x the one-tree path on every fabric.
  const double chain = k.coll == Collective::AllReduce ? 1.5 * path : path;
  // Each level of an AllReduce costs about three slice times, not one, where
  // a parent's one fabric port carries both children's slices and its own
  // send waits behind them (nodus-sim: 5.9-6.2 x depth x slice beta over
  // both phases on a 512-host fat-tree at 32-256 KiB); two on a torus, where
  // the children's slices come in on different links (nodus-sim, 8x8x8, 1
  // MiB in one slice a tree: +45% at three, +4% at two).
  const bool torus = m.topo != nullptr && m.topo->fabric.kind == FabricKind::Torus;
  const double levelSlices = torus ? 2.0 : 3.0;
  const double perLevel = k.coll == Collective::AllReduce ? levelSlices : 1.0;
  const double phase = chain + perLevel * depth * slice * beta + bytes * beta;
  const double phases = k.coll == Collective::AllReduce ? 2.0 : 1.0;
  const double hop = k.coll == Collective::AllReduce ? 0.0 : m.alphaUs + bytes / 2 * beta;
  double us = phases * phase + hop;
  const double rounds = sliceRounds(bytes / 2, ctx.roundBytes());
  // Several slices in one round (NODUS_ROUND_SLICES) behave like several rounds.
  const bool multiSlice = ctx.roundSlices >= 2 && ctx.sliceBytes && bytes / 2 > ctx.sliceBytes;
  if (k.coll == Collective::AllReduce && (rounds > 1 || multiSlice)) {
    // As built, one plan holds both trees and the trip up and back down, so
    // slice rounds do not overlap: every byte of a tree crosses each level
    // about (levelSlices + 1) times over, each round pays about 7 path
    // latencies, and the first slice fills the levels. Fitted to nodus-sim
    // (CM02, 512 KiB slices, 4 a round, 1.5-64 MiB): within 6% on 64- and
    // 512-host fat-trees and 13% on the 8x8x8 torus (the cost before, a
    // whole number of 4-5 trips a round, was -16% to +46% there).
    // With one slice a round (NODUS_ROUND_SLICES=1) the trips do not share
    // a round: 4.5-5.6x depth x (alpha + slice beta) a round (fat-trees of
    // 8 to 4096 hosts, docs/sim-findings.md). Running the trees as separate
    // lanes, as NCCL does, would bring the pipelined formula above back.
    const double oneSliceRounds = rounds * 5.0 * (path + depth * round * beta);
    const double manySliceRounds =
        1.35 * depth * slice * beta + (levelSlices + 1) * depth * (bytes / 2) * beta + 7.2 * rounds * path;
    us = std::max(us, ctx.roundSlices >= 2 ? manySliceRounds : oneSliceRounds);
  }
  if (k.coll != Collective::AllReduce) {
    // Broadcast and Reduce as built: both trees in one plan under the
    // slice-major cursor, so every slice round repeats the trip through the
    // tree instead of streaming behind the first. nodus-sim on a 512-host
    // fat-tree, 8 B to 16 MiB: about 1.9 x path + 3.7 x depth x slice beta a
    // round, within 10% at every size for both.
    // With several slices a round each trip carries a round's worth behind
    // it at about 2 slice times a level (3 in a single round; nodus-sim,
    // 64-host fat-tree, 4 a round); a round of one slice, nothing to
    // pipeline, about 3.9 for Broadcast and 3.4 for Reduce (512-host
    // fat-tree, 32-256 KiB in 512 KiB slices: -7% and -16% at 3). Reduce's
    // rounds also cost more than Broadcast's, 2.7 slice times a level (both
    // children's slices come in through the parent's one port: -23% at 16
    // MiB at 2; 2.35 on a torus). On a torus the levels cost
    // (levelSlices + 1) / 4 of that, as for AllReduce (8x8x8: +21% to +34%
    // before).
    // A Broadcast between the hosts of a torus or fat-tree in rounds of
    // several slices, refitted on nodus-sim at every size from 8 B to 1 GiB
    // (512 KiB slices, 4 a round): a level costs `base` slice times, plus
    // `first` per slice of the first round and `later` per slice of each
    // later round (their trips overlap more; `round` is the first round's
    // bytes). 512-host fat-tree: 1.8, 2.1, 1.83 (one slice 3.9 as before; 4
    // MiB priced +16% before, 1 GiB +8.8%; now within 3% from 8 B to 1 GiB
    // on 64-, 512- and 4096-host fat-trees); 8x8x8 torus: 0.41, 2.06, 1.465
    // (within 0.2% from 1 MiB, -5% at 8 B). Not refitted, so keeping the
    // per-level factors above: Reduce, one slice a round, one host, hosts
    // of several ranks, flat fabrics.
    const bool oneSlice = ctx.sliceBytes == 0 || bytes / 2 <= ctx.sliceBytes;
    const bool reduce = k.coll == Collective::Reduce;
    const bool fabricFit = !reduce && ctx.roundSlices >= 2 && m.topo != nullptr && m.topo->hosts.size() > 1 &&
                           static_cast<int>(m.topo->hosts.size()) == k.nranks && m.topo->fabric.kind != FabricKind::Flat;
    if (fabricFit) {
      const double base = torus ? 0.41 : 1.8, first = torus ? 2.06 : 2.1, later = torus ? 1.465 : 1.83;
      us = rounds * 1.9 * path + depth * beta * (base * slice + first * round + later * (bytes / 2 - round));
    } else {
      const double perLevel = (ctx.roundSlices < 2 ? 3.7
                               : rounds > 1       ? (reduce ? (torus ? 2.35 : 2.7) : 2.0)
                               : oneSlice         ? (reduce ? 3.4 : 3.9)
                                                  : 3.0) *
                              (levelSlices + 1) / 4;
      us = rounds * (1.9 * path + perLevel * depth * round * beta);
    }
  }
  return us + (k.coll == Collective::Broadcast ? 0.0 : bytes * m.gammaUsPerByte * m.busyShare);
}

}  // namespace

extern const CostFormula kTreeCost = {&kTreeAlgorithm, cost};

}  // namespace nodus
