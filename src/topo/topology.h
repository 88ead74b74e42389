// Topology: the global picture every rank of a communicator shares — which
// host and NUMA node each rank is on, where each host sits in the fabric, and
// the orders algorithms walk ranks in so that neighbours are close.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "topo/fabric.h"

namespace nodus {

// A torus of ranks: the fabric's host dimensions, preceded by a dimension of
// the ranks inside each host when there are several.
struct RankGrid {
  std::vector<int> dims;        // dims[0] varies fastest
  std::vector<bool> wrap;       // whether a dimension's ends are linked
  std::vector<bool> intraHost;  // whether a dimension runs inside a host (shm)
  std::vector<int> rankAt;      // grid index -> rank
  std::vector<int> indexOf;     // rank -> grid index
  int size() const { return static_cast<int>(rankAt.size()); }
};

struct Topology {
  int nranks = 1;
  FabricConfig fabric;
  std::vector<std::string> hosts;        // host names, in order of each host's first rank
  std::vector<HostCoord> coords;         // per host: torus coordinates or (leaf, -, -)
  std::vector<int> hostOf;               // per rank
  std::vector<int> numaOf;               // per rank
  std::vector<std::vector<int>> ranksOf; // per host, its ranks NUMA node by NUMA node
  std::vector<int> ringOrder;            // every rank once, neighbours close
  std::vector<int> hostOrder;            // hosts in the order the ring visits them
  // Some machine runs more ranks than it has cores: a rank waiting for a
  // peer must sleep and be woken, so each step costs a scheduler round trip.
  bool oversubscribed = false;
  // The most ranks per core on any machine (1 where each rank has a core of
  // its own): work every rank does at once takes this much longer there.
  double coreShare = 1.0;

  // Fabric links a message between two ranks crosses (0 inside a host):
  // torus Manhattan distance with wrap-around, fat-tree switch hops.
  int hops(int a, int b) const;
  // On a torus: the most of these flows (host to host, one entry each) that
  // cross any one directed link, routed dimension by dimension (x first)
  // the short way round, + on a tie, as tori route (and SimGrid's torus
  // zone). 1 on other fabrics, where a host's one port is what they share.
  int maxLinkLoad(const std::vector<std::pair<int, int>>& hostFlows) const;
  // Equal ranks on every host: that count, else 0.
  int ranksPerHost() const;
  // The rank torus, when the fabric is a torus whose every place holds one
  // host and every host has the same number of ranks.
  bool rankGrid(RankGrid* grid) const;
  std::string describe() const;
  // The fabric with every host where this topology placed it (by name), so
  // that a subset of the hosts keeps their places: a row of a torus stays a
  // row, not a corner.
  FabricConfig placedFabric() const;
  // The topology of `members` (ranks here, in the new order): their hosts
  // where they are, and this one's sharing of cores (what nodus-topo shows
  // for a split; a communicator counts its own).
  Status subset(const std::vector<int>& members, Topology* out) const;

  // One host, ranks in order: what tests and single-node runs see.
  static Topology flat(int nranks);
  // From what the bootstrap gathered: each rank's host name and NUMA node.
  static Status build(const FabricConfig& fabric, const std::vector<std::string>& hostOfRank,
                      const std::vector<int>& numaOfRank, Topology* out);
};

// The boustrophedon (reflected mixed-radix Gray code) walk of a grid:
// consecutive entries differ by one in one coordinate. Entry = row-major index
// with dims[0] fastest.
std::vector<uint64_t> snakeOrder(const std::vector<int>& dims);

}  // namespace nodus
