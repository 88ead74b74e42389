// Data x tensor x pipeline grids (src/topo/grid.h): coordinates in
// Megatron's convention, every order, and the order chosen from the
// topology so tensor groups land on the fastest links.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "topo/grid.h"

using namespace nodus;

namespace {

Topology hostsOf(const FabricConfig& fabric, int hosts, int local) {
  std::vector<std::string> names;
  std::vector<int> numa;
  for (int h = 0; h < hosts; ++h)
    for (int l = 0; l < local; ++l) names.push_back("h" + std::to_string(h)), numa.push_back(0);
  Topology t;
  const Status s = Topology::build(fabric, names, numa, &t);
  EXPECT_TRUE(s.isOk()) << s.message();
  return t;
}

FabricConfig torus(std::vector<int> dims) {
  FabricConfig f;
  f.kind = FabricKind::Torus;
  f.wrap.assign(dims.size(), true);
  f.dims = std::move(dims);
  return f;
}

}  // namespace

// tp-pp-dp: rank = tp + TP * (pp + PP * dp), as Megatron-LM numbers them.
TEST(Grid, MegatronOrderNumbersRanksTensorFirst) {
  GridShape shape;
  shape.size = {2, 4, 3};  // dp, tp, pp
  GridOrder o;
  ASSERT_TRUE(parseGridOrder("tp-pp-dp", &o).isOk());
  for (int r = 0; r < shape.ranks(); ++r) {
    const auto c = gridCoords(shape, o, r);
    EXPECT_EQ(r, c[kGridTensor] + 4 * (c[kGridPipeline] + 3 * c[kGridData])) << r;
    EXPECT_EQ(gridRank(shape, o, c), r);
  }
  EXPECT_EQ(gridGroup(shape, o, kGridTensor, 5), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(gridGroup(shape, o, kGridPipeline, 5), (std::vector<int>{1, 5, 9}));
  EXPECT_EQ(gridGroup(shape, o, kGridData, 5), (std::vector<int>{5, 17}));
}

// Every order: each axis's groups partition the ranks, each group of that
// axis's size, and a rank's three groups meet only in the rank.
TEST(Grid, EveryOrderPartitionsTheRanksAlongEachAxis) {
  GridShape shape;
  shape.size = {3, 2, 2};
  for (const GridOrder& o : gridOrders()) {
    GridOrder back;
    ASSERT_TRUE(parseGridOrder(gridOrderName(o), &back).isOk());
    EXPECT_EQ(back, o);
    for (int axis = 0; axis < 3; ++axis) {
      std::set<int> seen;
      for (const auto& g : gridGroups(shape, o, axis)) {
        EXPECT_EQ(static_cast<int>(g.size()), shape.size[static_cast<size_t>(axis)]);
        for (int r : g) EXPECT_TRUE(seen.insert(r).second) << gridOrderName(o) << " rank " << r << " twice";
      }
      EXPECT_EQ(static_cast<int>(seen.size()), shape.ranks());
    }
    for (int r = 0; r < shape.ranks(); ++r) {
      const auto a = gridGroup(shape, o, kGridData, r), b = gridGroup(shape, o, kGridTensor, r),
                 c = gridGroup(shape, o, kGridPipeline, r);
      for (int x : a)
        if (x != r) {
          EXPECT_EQ(std::count(b.begin(), b.end(), x), 0);
          EXPECT_EQ(std::count(c.begin(), c.end(), x), 0);
        }
    }
  }
  GridOrder o;
  EXPECT_FALSE(parseGridOrder("tp-tp-dp", &o).isOk());
  EXPECT_FALSE(parseGridOrder("", &o).isOk());
}

// Two hosts of four ranks, tp = 4: tensor groups within a host. Ranks
// numbered host-major make tp-pp-dp that order.
TEST(Grid, TensorGroupsLandOnOneHost) {
  const Topology t = hostsOf(FabricConfig{}, 2, 4);
  GridShape shape;
  shape.size = {2, 4, 1};
  std::string why;
  const GridOrder o = chooseGridOrder(t, shape, &why);
  for (const auto& g : gridGroups(shape, o, kGridTensor)) EXPECT_EQ(gridGroupCost(t, g), 0) << why;
  EXPECT_STREQ(gridOrderName(o), "tp-pp-dp") << why;
  // With tp = 2 and pp = 2 on hosts of 4, tensor and pipeline groups both fit a host.
  shape.size = {2, 2, 2};
  const GridOrder o2 = chooseGridOrder(t, shape, &why);
  for (int axis : {kGridTensor, kGridPipeline})
    for (const auto& g : gridGroups(shape, o2, axis)) EXPECT_EQ(gridGroupCost(t, g), 0) << why;
}

// Two ranks a host on a 2x4 torus of hosts, dp 2 x tp 2 x pp 4: the choice
// keeps each tensor pair on one host, and among the orders that do, its
// pipeline rings cross the fewest links.
TEST(Grid, OnATorusTensorPairsShareAHostAndPipelinesAreNeighbours) {
  const Topology t = hostsOf(torus({2, 4}), 8, 2);  // 16 ranks, 2 a host
  GridShape shape;
  shape.size = {2, 2, 4};  // dp 2, tp 2, pp 4
  std::string why;
  const GridOrder o = chooseGridOrder(t, shape, &why);
  for (const auto& g : gridGroups(shape, o, kGridTensor)) EXPECT_EQ(gridGroupCost(t, g), 0) << why;
  // dp-fastest would split every tensor pair across hosts: costlier.
  GridOrder dpFirst;
  ASSERT_TRUE(parseGridOrder("dp-tp-pp", &dpFirst).isOk());
  int cost = 0;
  for (const auto& g : gridGroups(shape, dpFirst, kGridTensor)) cost += gridGroupCost(t, g);
  EXPECT_GT(cost, 0);
  EXPECT_NE(why.find(gridOrderName(o)), std::string::npos);
  auto axisCost = [&](const GridOrder& order, int axis) {
    int c = 0;
    for (const auto& g : gridGroups(shape, order, axis)) c += gridGroupCost(t, g);
    return c;
  };
  for (const GridOrder& other : gridOrders())
    if (axisCost(other, kGridTensor) == 0) {
      EXPECT_LE(axisCost(o, kGridPipeline), axisCost(other, kGridPipeline));
    }
}
