#include "tune/cost_model.h"

#include <algorithm>
#include <cmath>

namespace nodus {

// Intra-host constants measured on this project's 2-core VMs over shm with
// nodus-perf (-a all) and the default 128 KiB slices: a step costs about
// 0.6 us of handshake, a pipelined slot copy moves about 10 GB/s per rank, a
// reduction about 12 GB/s.
constexpr double kMeasuredSliceBytes = 128 << 10;

CostModel CostModel::of(const PlanContext& ctx) {
  CostModel m;
  m.intraAlphaUs = 0.6;
  m.intraBetaUsPerByte = 1.0 / 10000.0;
  m.gammaUsPerByte = 1.0 / 12000.0;
  // What a smaller slice costs: 2 ranks, AllReduce and AllGather of 64 KiB-
  // 4 MiB, NODUS_SLICE_BYTES=16K/32K/64K against the 128 KiB slot in one
  // command, 0.56-0.77 us more per extra slice (nothing smaller was faster).
  m.intraSliceUs = 0.6;
  const Topology* t = ctx.topo;
  if (t != nullptr && t->oversubscribed) {
    // No rank polls: a hand-off is a yield to the rank that waits or a
    // futex wake. nodus-perf -a all --rounds 3 on 2 cores (AllGather and
    // AllReduce, 4 KiB-4 MiB, best of two runs): the ring's steps and
    // halving-doubling's rounds cost 2.0-3.3 us each on 4 and 8 ranks (8 B
    // AllReduce on 4 ranks: ring 8.8 us for 6 steps, halving-doubling 9.1
    // for 4). The 15 us this was before priced the ring AllGather 2x over
    // measurement at 32-128 KiB and handed those sizes to Bruck (pick/best
    // 0.30-0.77).
    m.intraAlphaUs = 2.5;
    // 4 ranks on 2 cores, measured as above: 2.6-3.8 us per extra slice.
    m.intraSliceUs = 3.0;
    // Ranks that share a core share its copies and reductions where they
    // all work at once (busyShare): the ring AllGather moved 6.2 GB/s a
    // rank on 4 ranks and 1.6 on 8 (4 MiB), 10 with a core each.
    m.busyShare = std::max(1.0, t->coreShare);
    // A ring step hands a slice to one neighbour: 2.6-2.7 us on 8 ranks as
    // on 4 (AllReduce and AllGather, 256 B-2 KiB, medians of 8 runs of -a
    // all --rounds 3, 2026-12-04). A round in which every rank exchanges at once ends
    // only when every rank has run: halving-doubling 3.8 us and Bruck 5.4 on
    // 8 ranks, 1.7 and 2.9 on 4. The square root of the ranks a core over 2
    // (1 on 4 ranks, 1.41 on 8) puts each pick of those runs right: 8 ranks,
    // AllReduce of 8 KiB to halving-doubling (direct 46.1 us, 28.9), and
    // AllGather of 32 KiB still to Bruck, 64 KiB to the ring.
    m.exchangeAlphaShare = std::sqrt(std::max(1.0, t->coreShare / 2.0));
  }
  // The 10 GB/s above already pays the per-slice work of 128 KiB slices.
  m.intraLinkBetaUsPerByte = m.intraBetaUsPerByte;
  const double slice = ctx.sliceBytes ? static_cast<double>(ctx.sliceBytes) : kMeasuredSliceBytes;
  m.intraBetaUsPerByte += m.intraSliceUs * (1.0 / slice - 1.0 / kMeasuredSliceBytes);
  // Halving-doubling against the ring on one host: its sends cost 1.5x a
  // fused ring step's bytes.
  m.passUsPerByte = 0.5 * m.intraBetaUsPerByte;
  if (ctx.gammaUsPerByte >= 0) m.gammaUsPerByte = ctx.gammaUsPerByte;
  if (ctx.passUsPerByte >= 0) m.passUsPerByte = ctx.passUsPerByte;
  m.alphaUs = m.intraAlphaUs;
  m.betaUsPerByte = m.intraBetaUsPerByte;
  m.streamHandoffUs = m.intraAlphaUs;
  if (t == nullptr) return m;
  m.topo = t;
  if (t->oversubscribed) {
    // Except along a chain: measured with nodus-perf -a all (back-to-back
    // calls, 2 cores), an 8 B Broadcast took 2.6 us on 4 ranks and 5.3 us on
    // 8, about 0.75 us per hop, while the tree took 7.4 and 26 us.
    m.streamHandoffUs = 0.75;
  }
  const LinkSpec& link = t->fabric.link;
  // A message on the fabric pays the latency of each link it crosses plus
  // about a microsecond of software on each side.
  m.hopUs = link.latencyUs;
  m.interAlphaUs = m.softwareUs + link.latencyUs;
  // A connection has `slots` slices in flight, and a slice holds its slot
  // for the link's latency and its transfer: in small slices a link runs
  // below its bandwidth once the slots no longer cover its latency.
  m.linkBetaUsPerByte = 1.0 / (link.bandwidthGBs * 1000.0);
  m.windowSliceBytes = slice;
  m.windowSlots = ctx.slots;
  m.interBetaUsPerByte = m.routeBeta(m.interAlphaUs);
  if (t->hosts.size() > 1) {
    m.alphaUs = m.interAlphaUs;
    m.betaUsPerByte = m.interBetaUsPerByte;
  }
  if (t->fabric.kind == FabricKind::FatTree && !t->fabric.oversubscription.empty()) {
    int minLeaf = INT32_MAX, maxLeaf = -1;
    for (const HostCoord& c : t->coords) minLeaf = std::min(minLeaf, c[0]), maxLeaf = std::max(maxLeaf, c[0]);
    if (maxLeaf > minLeaf) m.uplinkSharing = t->fabric.oversubscription[0];
  }
  return m;
}

double CostModel::alphaBetween(int a, int b) const {
  if (topo == nullptr || a == b) return alphaUs;
  const int h = topo->hops(a, b);
  return h == 0 ? intraAlphaUs : softwareUs + h * hopUs;
}

double CostModel::streamAlphaBetween(int a, int b) const {
  if (a == b) return alphaUs;
  return topo == nullptr || topo->hops(a, b) == 0 ? streamHandoffUs : alphaBetween(a, b);
}

double CostModel::betaBetween(int a, int b) const {
  if (topo == nullptr || a == b) return betaUsPerByte;
  return topo->hops(a, b) == 0 ? intraBetaUsPerByte : interBetaUsPerByte;
}

double CostModel::busyBetaBetween(int a, int b) const {
  const bool intra = topo == nullptr || a == b || topo->hops(a, b) == 0;
  return betaBetween(a, b) * (intra ? busyShare : 1.0);
}

bool CostModel::crossesLeaf(int a, int b) const {
  if (topo == nullptr || topo->fabric.kind != FabricKind::FatTree) return false;
  const auto& ca = topo->coords[static_cast<size_t>(topo->hostOf[static_cast<size_t>(a)])];
  const auto& cb = topo->coords[static_cast<size_t>(topo->hostOf[static_cast<size_t>(b)])];
  return ca[0] != cb[0];
}

}  // namespace nodus
