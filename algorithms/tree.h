#pragma once
#include <bit>
#include <vector>

#include "algorithms/algorithm.h"
#include "algorithms/plan_builder.h"
namespace nodus {
extern const Algorithm kTreeAlgorithm;
// Parent of label x (1..p) in the binary tree over labels 1..p; 0 at the root.
int binaryTreeParent(int x, int p);
// Levels below the root of that tree.
int binaryTreeDepth(int p);

// The two trees as the tree algorithm builds them (its cost formula walks them too).
struct TreeNode {
  int parent = -1;            // rank, -1 at the root
  std::vector<int> children;  // ranks, at most two
};

// Rank at position `pos` of tree `t` (0 or 1); positions index `order`.
struct DoubleTree {
  int p;
  std::vector<int> order;  // position -> rank
  int label(int t, int pos) const { return t == 0 ? pos + 1 : (pos + 1) % p + 1; }
  int posOf(int t, int lab) const { return t == 0 ? lab - 1 : modRank(lab - 2, p); }
  TreeNode node(int t, int pos) const {
    TreeNode n;
    const int x = label(t, pos);
    const int par = binaryTreeParent(x, p);
    if (par != 0) n.parent = order[posOf(t, par)];
    // Children: x - lowbit/2 on the left (always present), and on the right
    // the first of x + lowbit/2, x + lowbit/4, ... that exists.
    const int b = x & -x;
    if (b > 1) n.children.push_back(order[posOf(t, x - b / 2)]);
    for (int d = b / 2; d >= 1; d /= 2) {
      if (x + d <= p) {
        n.children.push_back(order[posOf(t, x + d)]);
        break;
      }
    }
    return n;
  }
  int rootRank(int t) const {
    return order[posOf(t, static_cast<int>(std::bit_floor(static_cast<unsigned>(p))))];
  }
};

// The trees for this call: over the topology's ring order, rotated so that
// a Broadcast's or Reduce's root is tree 1's root.
DoubleTree makeTrees(const PlanKey& k, const PlanContext& ctx);
}  // namespace nodus
