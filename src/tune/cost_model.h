// The tuner's alpha-beta-gamma machine model: the constants measured on
// this project's machines and derived from the topology (CostModel::of), and
// the pricing helpers every algorithm's cost formula (src/tune/costs/) is
// written with.
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "algorithms/algorithm.h"

namespace nodus {

// Alpha-beta-gamma machine model the costs are written in (microseconds and
// bytes). `alphaUs`/`betaUsPerByte` are the slowest link an algorithm that
// ignores the topology crosses: between hosts when there are several, else
// between ranks of one host. The intra/inter pairs let topology-aware
// algorithms price each hop.
struct CostModel {
  double alphaUs = 0.5;
  double betaUsPerByte = 1.0 / 8000.0;
  double gammaUsPerByte = 1.0 / 16000.0;  // per byte reduced
  double intraAlphaUs = 0.5, intraBetaUsPerByte = 1.0 / 8000.0;  // ranks of one host (shm)
  double interAlphaUs = 1.0, interBetaUsPerByte = 1.0 / 25000.0;  // a fabric link
  // A connection between hosts keeps windowSlots slices of windowSliceBytes
  // in flight, and a slice holds its slot for its route's latency and its
  // transfer, so a connection moves at most windowSlots slices per (route
  // latency + slice x link beta): routeBeta. interBetaUsPerByte is that for
  // a route of one link; a route of several links (between fat-tree leaves:
  // 4) runs slower in small slices (nodus-sim: a chain Broadcast of 16 MiB
  // on 16 hosts under 4 leaves in 4 KiB slices, 0.79 us a slice, as
  // routeBeta of its 6 us leaf-to-leaf hops says, against 0.40 priced at
  // one link's 3 us).
  double linkBetaUsPerByte = 1.0 / 25000.0;
  double windowSliceBytes = 0;
  uint32_t windowSlots = 0;
  double routeBeta(double routeAlphaUs) const {
    if (windowSlots == 0 || windowSliceBytes <= 0) return linkBetaUsPerByte;
    return std::max(linkBetaUsPerByte, (routeAlphaUs / windowSliceBytes + linkBetaUsPerByte) / windowSlots);
  }
  // Work a rank does per slice on top of its bytes (posting, polling, the
  // hand-off of a slot) inside a host: CostModel::of folds it into
  // intraBetaUsPerByte as intraSliceUs / sliceBytes, so a pass in smaller
  // slices pays more of it, and the tuner weighs it against pipeline fill.
  double intraSliceUs = 0;
  // intraBetaUsPerByte as measured, in 128 KiB slices: the speed of the
  // links nodus-sim gives ranks of one host (it simulates no per-slice work).
  double intraLinkBetaUsPerByte = 1.0 / 8000.0;
  // A local pass over each byte an unfused step sends (it reads back what a
  // finished phase wrote instead of forwarding a slice as it arrives): memory
  // traffic, not network: nodus-sim does not simulate it, and prices its
  // machine without it (PlanContext::passUsPerByte).
  double passUsPerByte = 0;
  // How many flows share a leaf's uplinks when every host of a leaf sends
  // off-leaf at once (fat-tree oversubscription; 1 elsewhere).
  double uplinkSharing = 1.0;
  // Latency of one message from rank a to rank b: intraAlphaUs inside a
  // host, else software overhead plus the fabric latency of every link crossed.
  const Topology* topo = nullptr;
  double softwareUs = 2.0, hopUs = 1.0;
  // What a hand-off between two ranks of one host adds to an algorithm in
  // which every rank has a single step that streams (a chain): no rank ever
  // waits for an answer, so back-to-back calls overlap and a hand-off costs
  // its share of the CPUs rather than a wake-up. intraAlphaUs unless the
  // host is oversubscribed (CostModel::of).
  double streamHandoffUs = 0.5;
  // How much slower a rank copies and reduces when every rank of its host
  // does at once (a ring pass, a halving-doubling or Bruck exchange, direct,
  // a tree's levels, the torus and hierarchical algorithms' host axes): the
  // ranks per core of an oversubscribed host, else 1.
  // A chain keeps two ranks busy at a time and does not pay it (8 ranks on
  // 2 cores, 128 KiB Broadcast: chain 62 us, 7 hops of 8.9; tree 143, 3
  // levels of 48).
  double busyShare = 1.0;
  // How much longer a hand-off inside an oversubscribed host takes in a
  // round where every rank exchanges at once (halving-doubling, Bruck,
  // direct): the round ends only when every rank has run. 1 elsewhere;
  // CostModel::of. exchanging() prices those rounds.
  double exchangeAlphaShare = 1.0;
  CostModel exchanging() const {
    CostModel m = *this;
    // On one host alphaUs is the intra-host alpha (CostModel::of).
    if (topo == nullptr || topo->hosts.size() <= 1) m.alphaUs *= exchangeAlphaShare;
    m.intraAlphaUs *= exchangeAlphaShare;
    return m;
  }
  double alphaBetween(int a, int b) const;
  // alphaBetween for such a streaming step: streamHandoffUs inside a host.
  double streamAlphaBetween(int a, int b) const;
  // Per-byte cost of the link from rank a to rank b (intra- or inter-host).
  double betaBetween(int a, int b) const;
  // betaBetween while every rank works at once (busyShare inside a host).
  double busyBetaBetween(int a, int b) const;
  // Per-byte cost of rank's transfer to partnerOf(rank) when every rank of
  // its host makes the same kind of transfer at once (a halving-doubling
  // exchange, a Bruck step): those that leave the host share its fabric
  // link, those that leave a leaf share its oversubscribed uplinks (on a
  // torus: every rank's transfer shares the links on its route), and on a
  // multi-rank host every byte also goes through the rank's shared-memory
  // copies. partnerOf returns -1 for a rank that sits the step out.
  template <typename PartnerOf>
  double concurrentBeta(int rank, PartnerOf partnerOf) const {
    if (topo == nullptr) return betaUsPerByte;
    const int partner = partnerOf(rank);
    if (partner < 0 || partner == rank) return betaUsPerByte;
    const int host = topo->hostOf[static_cast<size_t>(rank)];
    if (topo->hostOf[static_cast<size_t>(partner)] == host) return intraBetaUsPerByte * busyShare;
    double shared;
    if (topo->fabric.kind == FabricKind::Torus) {
      // A torus host has a link per direction per dimension, and a transfer
      // of several hops shares the links on its way with everyone else's:
      // the busiest link sets the pace (nodus-sim, 8x8x8, halving-doubling
      // AllReduce of 1 GiB: 1.74x its one-link time, with partners 2 and 4
      // hops away along each dimension loading links 2 and 4 times).
      std::vector<std::pair<int, int>> flows;
      for (int q = 0; q < topo->nranks; ++q) {
        const int p = partnerOf(q);
        if (p < 0 || topo->hostOf[static_cast<size_t>(p)] == topo->hostOf[static_cast<size_t>(q)]) continue;
        flows.emplace_back(topo->hostOf[static_cast<size_t>(q)], topo->hostOf[static_cast<size_t>(p)]);
      }
      shared = interBetaUsPerByte * topo->maxLinkLoad(flows);
    } else {
      int leaving = 0;
      bool offLeaf = false;
      for (int q : topo->ranksOf[static_cast<size_t>(host)]) {
        const int p = partnerOf(q);
        if (p < 0 || topo->hostOf[static_cast<size_t>(p)] == host) continue;
        ++leaving;
        offLeaf = offLeaf || crossesLeaf(q, p);
      }
      shared = interBetaUsPerByte * std::max(leaving, 1) * (offLeaf ? uplinkSharing : 1.0);
    }
    return topo->ranksOf[static_cast<size_t>(host)].size() > 1 ? std::max(shared, intraBetaUsPerByte) : shared;
  }
  // Ranks a and b sit under different fat-tree leaf switches.
  bool crossesLeaf(int a, int b) const;
  // The model for a communicator: measured intra-host constants, the fabric's links.
  static CostModel of(const PlanContext& ctx);
};

// Rounds of a pipelined step that moves `bytes`, with `roundBytes` moved per
// round (PlanContext::roundBytes): the executor runs a phase round-major
// (Plan::roundSlices slices of every step, then the next ones), so a chain
// of steps pays its latency once per round (at least one).
inline double sliceRounds(double bytes, uint64_t sliceBytes);
// A pipelined pass: a chain of steps whose hop latencies add up to chainUs,
// each step moving stepBytes, the busiest link busy for dataUs. With one
// slice a round (or one slice a step) every round waits for the whole chain
// and then its data; with several a round and several a step, the next
// slices travel while the first ones walk the chain, and the pass takes the
// longer of the two (nodus-sim: a 64-host ring at 1.00x the bound from two
// slices a step, and exactly rounds x chain where latency dominates), plus
// fillUs where the pass is a phase of its own that starts empty. Nor can it
// beat its first slice: that one walks the chain and crosses a link at every
// hop, and the others follow it over the last link, so the pass takes at
// least chainUs + dataUs / (slices a step) (nodus-sim, a ring of 8 hosts, 2
// slices a step: 42.0 us simulated, 36.7 without this term, 39.4 with it).
inline double pipelinedPass(double chainUs, double dataUs, double stepBytes, const PlanContext& ctx,
                            double fillUs = 0) {
  const double rounds = sliceRounds(stepBytes, ctx.roundBytes());
  const double slices = sliceRounds(stepBytes, ctx.sliceBytes);
  if (ctx.roundSlices >= 2 && slices >= 2)
    return std::max({rounds * chainUs, dataUs, chainUs + dataUs / slices}) + fillUs;
  return rounds * chainUs + dataUs;
}
inline double sliceRounds(double bytes, uint64_t sliceBytes) {
  if (sliceBytes == 0 || bytes <= static_cast<double>(sliceBytes)) return 1.0;
  return std::ceil(bytes / static_cast<double>(sliceBytes));
}

}  // namespace nodus
