// Data x tensor x pipeline parallel groups over a communicator's ranks
// (nodusCommSplitGrid, nodus_torch.hybrid_groups, nodus-topo --grid).
//
// An order names the axes from the fastest-varying to the slowest, as
// Megatron's "tp-pp-dp": rank = tp + TP * (pp + PP * dp). Without one, the
// order that puts tensor-parallel groups on the fastest links the topology
// knows (one host, then few fabric hops), then pipeline groups, then data
// groups, is chosen (every rank computes the same one from the same topology).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "base/status.h"
#include "topo/topology.h"

namespace nodus {

enum GridAxis : int { kGridData = 0, kGridTensor = 1, kGridPipeline = 2 };

struct GridShape {
  std::array<int, 3> size{1, 1, 1};  // by GridAxis: dp, tp, pp
  int ranks() const { return size[0] * size[1] * size[2]; }
};

// Axes, fastest-varying first.
using GridOrder = std::array<int, 3>;

// "tp-pp-dp" and the other five permutations of dp, tp and pp.
Status parseGridOrder(const std::string& text, GridOrder* out);
const char* gridOrderName(const GridOrder& order);  // a static string
// Every order, Megatron's tp-pp-dp first (what a tie keeps).
const std::vector<GridOrder>& gridOrders();

// Rank `rank`'s coordinates (by GridAxis) and back.
std::array<int, 3> gridCoords(const GridShape& shape, const GridOrder& order, int rank);
int gridRank(const GridShape& shape, const GridOrder& order, const std::array<int, 3>& coords);
// The ranks of `axis`'s group through `rank`, by that axis's coordinate.
std::vector<int> gridGroup(const GridShape& shape, const GridOrder& order, int axis, int rank);
// Every group of `axis`, each once, ordered by its first member.
std::vector<std::vector<int>> gridGroups(const GridShape& shape, const GridOrder& order, int axis);

// What a group's ring of links costs: per consecutive pair (around the
// ring), 0 on one host, else 1 + the fabric hops between them.
int gridGroupCost(const Topology& topo, const std::vector<int>& group);
// The order whose tensor groups cost least, then pipeline groups, then data
// groups; *why says what each axis costs in it.
GridOrder chooseGridOrder(const Topology& topo, const GridShape& shape, std::string* why);

}  // namespace nodus
