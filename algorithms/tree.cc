// Double binary tree: AllReduce, Broadcast and Reduce in O(log p) steps with
// the bandwidth of a pipeline. The data is cut in two halves; each half goes
// through its own binary tree, and the trees are built so that no rank is
// interior in both (the leaves of one are the inner nodes of the other), so
// every rank sends and receives about the same amount.
//
// Tree 1 labels ring positions 1..p and links label x to x +- lowbit(x)/2:
// the inner nodes are the even labels, the root the largest power of two
// <= p. Tree 2 is the same tree over positions shifted by one, so its inner
// nodes are tree 1's leaves. Broadcast and Reduce rotate the positions so
// the user's root is tree 1's root; tree 2's root hands its half to or from
// it over one extra hop.
#include "algorithms/tree.h"

#include <algorithm>
#include <bit>

#include "algorithms/plan_builder.h"

namespace nodus {

int binaryTreeParent(int x, int p) {
  const int root = static_cast<int>(std::bit_floor(static_cast<unsigned>(p)));
  int b = x & -x;
  for (;;) {
    if (x == root) return 0;
    // The parent in the complete tree has the next bit as its lowest; labels
    // past p do not exist, so climb through them.
    const int up = (x & (2 * b)) ? x - b : x + b;
    if (up <= p) return up;
    x = up;
    b *= 2;
  }
}

int binaryTreeDepth(int p) {
  int depth = 0;
  for (int x = 1; x <= p; ++x) {
    int d = 0;
    for (int y = x; (y = binaryTreeParent(y, p)) != 0;) ++d;
    depth = std::max(depth, d);
  }
  return depth;
}

DoubleTree makeTrees(const PlanKey& k, const PlanContext& ctx) {
  DoubleTree dt{k.nranks, ringOrder(ctx, k.nranks)};
  if (k.coll == Collective::Broadcast || k.coll == Collective::Reduce) {
    // Rotate so the user's root sits at tree 1's root.
    const int rootPos = static_cast<int>(std::find(dt.order.begin(), dt.order.end(), k.root) - dt.order.begin());
    const int want = static_cast<int>(std::bit_floor(static_cast<unsigned>(k.nranks))) - 1;
    std::vector<int> rotated(dt.order.size());
    for (int i = 0; i < k.nranks; ++i) rotated[modRank(i - rootPos + want, k.nranks)] = dt.order[i];
    dt.order = std::move(rotated);
  }
  return dt;
}

namespace {

// Reduce `n` elements at `off` up tree node `nd`. The rank's partial goes to
// its parent; at the root it lands in `out` (finalised), or goes to `sink`
// (another rank) when sink >= 0. `tmp` combines two children.
void reduceUp(PlanBuilder& b, const TreeNode& nd, uint64_t off, uint64_t n, Range tmp, Range out, int sink) {
  const Range in{Buf::Send, off};
  const int to = nd.parent >= 0 ? nd.parent : sink;
  const size_t c = nd.children.size();
  if (c == 0) {
    if (to >= 0) b.send(to, in, n);
    else b.copy(in, out, n, true);
    return;
  }
  if (c == 2) b.recvReduceCopy(nd.children[0], in, tmp, n);
  const Range acc = c == 2 ? tmp : in;
  if (to >= 0) b.recvReduceSend(nd.children[c - 1], to, acc, n);
  else b.recvReduceCopy(nd.children[c - 1], acc, out, n, true);
}

// Broadcast the `n` elements at `at` (in Recv) down tree node `nd`; the root
// reads them from `src`, a non-root receives them from its parent, or from
// `source` when it is the root of a tree whose data starts elsewhere.
void broadcastDown(PlanBuilder& b, const TreeNode& nd, Range src, Range at, uint64_t n, int source) {
  const int from = nd.parent >= 0 ? nd.parent : source;
  const size_t c = nd.children.size();
  if (from < 0) {
    for (int child : nd.children) b.send(child, src, n);
    b.copy(src, at, n);
    return;
  }
  if (c == 0) {
    b.recv(from, at, n);
    return;
  }
  b.recvCopySend(from, nd.children[0], at, n);
  if (c == 2) b.send(nd.children[1], at, n);
}

bool supports(const PlanKey& k, const PlanContext&) {
  return k.coll == Collective::AllReduce || k.coll == Collective::Broadcast || k.coll == Collective::Reduce;
}

Status build(const PlanKey& k, const PlanContext& ctx, Plan& plan) {
  PlanBuilder b(plan);
  if (k.nranks == 1) {
    buildSelf(k, plan);
    return Status::ok();
  }
  const DoubleTree dt = makeTrees(k, ctx);
  const int pos = static_cast<int>(std::find(dt.order.begin(), dt.order.end(), k.rank) - dt.order.begin());
  const uint64_t half[2] = {k.count - k.count / 2, k.count / 2};
  const uint64_t off[2] = {0, half[0]};
  TreeNode nodes[2] = {dt.node(0, pos), dt.node(1, pos)};
  if (k.coll == Collective::Broadcast) {
    // The user's root feeds its own children in tree 2: no one sends to it.
    auto& kids = nodes[1].children;
    kids.erase(std::remove(kids.begin(), kids.end(), k.root), kids.end());
  }
  switch (k.coll) {
    case Collective::AllReduce:
      // Reduce both halves up, then broadcast them down; Recv doubles as the
      // place where two children's contributions meet.
      for (int t = 0; t < 2; ++t)
        reduceUp(b, nodes[t], off[t], half[t], {Buf::Recv, off[t]}, {Buf::Recv, off[t]}, -1);
      for (int t = 0; t < 2; ++t) {
        if (nodes[t].parent < 0) {
          for (int child : nodes[t].children) b.send(child, {Buf::Recv, off[t]}, half[t]);
        } else {
          broadcastDown(b, nodes[t], {}, {Buf::Recv, off[t]}, half[t], -1);
        }
      }
      break;
    case Collective::Reduce: {
      // Only the root has a receive buffer: inner nodes combine in scratch.
      plan.scratchElems = k.count;
      const int root2 = dt.rootRank(1);
      for (int t = 0; t < 2; ++t) {
        const int sink = (t == 1 && root2 != k.root) ? k.root : -1;
        reduceUp(b, nodes[t], off[t], half[t], {Buf::Scratch, off[t]}, {Buf::Recv, off[t]}, sink);
      }
      if (k.rank == k.root && root2 != k.root) b.recv(root2, {Buf::Recv, off[1]}, half[1], true);
      break;
    }
    case Collective::Broadcast: {
      const int root2 = dt.rootRank(1);
      const bool handOff = root2 != k.root;  // tree 2's root gets its half from the user's root
      for (int t = 0; t < 2; ++t) {
        const Range src{Buf::Send, off[t]}, at{Buf::Recv, off[t]};
        if (k.rank != k.root) {
          broadcastDown(b, nodes[t], src, at, half[t], t == 1 && handOff ? k.root : -1);
          continue;
        }
        if (t == 1 && handOff) b.send(root2, src, half[t]);
        // In tree 2 the user's root may sit inside the tree: it feeds its
        // children itself.
        for (int child : nodes[t].children) b.send(child, src, half[t]);
        b.copy(src, at, half[t]);
      }
      break;
    }
    default:
      return makeError(nodusInternalError, "tree cannot build %s", collectiveName(k.coll));
  }
  return Status::ok();
}

}  // namespace

const Algorithm kTreeAlgorithm = {
    "tree", "Double binary tree: two pipelined trees, each rank inner in at most one (AllReduce, Broadcast, Reduce).",
    supports, build};

}  // namespace nodus
