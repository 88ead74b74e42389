#include "topo/grid.h"

namespace nodus {

namespace {
const char* const kAxisNames[3] = {"dp", "tp", "pp"};
}

const std::vector<GridOrder>& gridOrders() {
  static const std::vector<GridOrder> orders = {
      {kGridTensor, kGridPipeline, kGridData}, {kGridTensor, kGridData, kGridPipeline},
      {kGridPipeline, kGridTensor, kGridData}, {kGridPipeline, kGridData, kGridTensor},
      {kGridData, kGridTensor, kGridPipeline}, {kGridData, kGridPipeline, kGridTensor}};
  return orders;
}

const char* gridOrderName(const GridOrder& order) {
  static const char* const names[] = {"tp-pp-dp", "tp-dp-pp", "pp-tp-dp", "pp-dp-tp", "dp-tp-pp", "dp-pp-tp"};
  const auto& all = gridOrders();
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] == order) return names[i];
  return "?";
}

Status parseGridOrder(const std::string& text, GridOrder* out) {
  for (const GridOrder& o : gridOrders())
    if (text == gridOrderName(o)) {
      *out = o;
      return Status::ok();
    }
  return makeError(nodusInvalidArgument,
                   "grid order '%s' is not three of dp, tp and pp joined by '-', fastest-varying first (e.g. tp-pp-dp)",
                   text.c_str());
}

std::array<int, 3> gridCoords(const GridShape& shape, const GridOrder& order, int rank) {
  std::array<int, 3> c{};
  for (int axis : order) {
    c[static_cast<size_t>(axis)] = rank % shape.size[static_cast<size_t>(axis)];
    rank /= shape.size[static_cast<size_t>(axis)];
  }
  return c;
}

int gridRank(const GridShape& shape, const GridOrder& order, const std::array<int, 3>& coords) {
  int rank = 0;
  for (int i = 2; i >= 0; --i) {
    const size_t axis = static_cast<size_t>(order[static_cast<size_t>(i)]);
    rank = rank * shape.size[axis] + coords[axis];
  }
  return rank;
}

std::vector<int> gridGroup(const GridShape& shape, const GridOrder& order, int axis, int rank) {
  std::array<int, 3> c = gridCoords(shape, order, rank);
  std::vector<int> members;
  for (int i = 0; i < shape.size[static_cast<size_t>(axis)]; ++i) {
    c[static_cast<size_t>(axis)] = i;
    members.push_back(gridRank(shape, order, c));
  }
  return members;
}

std::vector<std::vector<int>> gridGroups(const GridShape& shape, const GridOrder& order, int axis) {
  std::vector<std::vector<int>> groups;
  for (int r = 0; r < shape.ranks(); ++r)
    if (gridCoords(shape, order, r)[static_cast<size_t>(axis)] == 0) groups.push_back(gridGroup(shape, order, axis, r));
  return groups;
}

int gridGroupCost(const Topology& topo, const std::vector<int>& group) {
  const size_t n = group.size();
  if (n < 2) return 0;
  int cost = 0;
  for (size_t i = 0; i < (n == 2 ? 1 : n); ++i) {
    const int a = group[i], b = group[(i + 1) % n];
    if (topo.hostOf[static_cast<size_t>(a)] != topo.hostOf[static_cast<size_t>(b)]) cost += 1 + topo.hops(a, b);
  }
  return cost;
}

GridOrder chooseGridOrder(const Topology& topo, const GridShape& shape, std::string* why) {
  const int priority[3] = {kGridTensor, kGridPipeline, kGridData};
  GridOrder best = gridOrders()[0];
  std::array<int, 3> bestCost{};
  bool first = true;
  for (const GridOrder& o : gridOrders()) {
    std::array<int, 3> cost{};
    for (int i = 0; i < 3; ++i)
      for (const auto& g : gridGroups(shape, o, priority[i])) cost[static_cast<size_t>(i)] += gridGroupCost(topo, g);
    if (first || cost < bestCost) {
      best = o;
      bestCost = cost;
      first = false;
    }
  }
  if (why != nullptr) {
    *why = std::string(gridOrderName(best)) + ": links crossed by ";
    for (int i = 0; i < 3; ++i)
      *why += std::string(i ? ", " : "") + kAxisNames[priority[i]] + " groups " + std::to_string(bestCost[static_cast<size_t>(i)]);
    *why += " (0 on one host; 1 + fabric hops a pair of neighbours otherwise)";
  }
  return best;
}

}  // namespace nodus
