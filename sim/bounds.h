// Bandwidth lower bounds: no schedule on this fabric can finish the call
// faster, whatever the algorithm (latency ignored).
//
// A set of ranks with one joint bottleneck (a host's links, a rank's link, a
// fat-tree leaf's or pod's uplinks) must move at least V(k) bytes through it,
// k being how many such sets share the call:
//   AllReduce of N bytes            V(k) = 2(k-1)/k * N   (reduce-scatter + all-gather;
//                                                          optimal even when sets combine inside)
//   AllGather / ReduceScatter, N in total (nodus-perf's size)  V(k) = (k-1)/k * N
//   Broadcast / Reduce              V(k) = N when k > 1   (the root's set sends / receives it all)
// and the bound is the largest V(k) / bandwidth over:
//   - hosts (k = H): a torus host injects on 2 links per dimension of size >= 2
//     (2*D x link bandwidth); a fat-tree or flat host on its one link;
//   - ranks (k = p), when a host holds several: each rank's own link inside its host;
//   - fat-tree levels below the top (k = leaves used, pods used): the group's
//     uplinks, up[1] x ... x up[l] links (see FatTreeShape), which is where
//     oversubscription binds.
#pragma once

#include <string>

#include "plan/plan.h"
#include "sim/platform.h"
#include "topo/topology.h"

namespace nodus::sim {

struct Bound {
  double us = 0;
  std::string formula;  // which bottleneck binds, e.g. "host: 2(H-1)/H*N / (6 x 25 GB/s)"
};

// `bytes` as nodus-perf counts a call (AllGather: the gathered output;
// ReduceScatter: the input; else the buffer).
Bound bandwidthBound(Collective c, uint64_t bytes, const Topology& t, const LinkModel& m);

}  // namespace nodus::sim
