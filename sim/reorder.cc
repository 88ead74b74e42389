#include "sim/reorder.h"

#include <algorithm>

namespace nodus::sim {

namespace {

std::vector<std::pair<size_t, size_t>> phases(const Plan& plan) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t begin = 0;
  for (uint32_t s : plan.phaseStarts) {
    out.emplace_back(begin, s);
    begin = s;
  }
  out.emplace_back(begin, plan.steps.size());
  return out;
}

}  // namespace

void interleaveChains(Plan& plan) {
  std::vector<Step> steps;
  steps.reserve(plan.steps.size());
  const int p = plan.key.nranks;
  // Union-find over connections: node Y = "receives from Y", p + X = "sends to X".
  std::vector<int> parent(2 * static_cast<size_t>(std::max(p, 1)));
  auto find = [&](int x) {
    while (parent[static_cast<size_t>(x)] != x) x = parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
    return x;
  };
  for (const auto& [begin, end] : phases(plan)) {
    for (size_t i = 0; i < parent.size(); ++i) parent[i] = static_cast<int>(i);
    for (size_t i = begin; i < end; ++i) {
      const Step& s = plan.steps[i];
      if (opReceives(s.op) && opSends(s.op)) parent[static_cast<size_t>(find(s.recvPeer))] = find(p + s.sendPeer);
    }
    // Chains in order of first appearance; local steps (no peer) join the chain before them.
    std::vector<int> chainOf(end - begin, -1);
    std::vector<int> rootChain(parent.size(), -1);
    int chains = 0, last = 0;
    for (size_t i = begin; i < end; ++i) {
      const Step& s = plan.steps[i];
      int c = last;
      if (opReceives(s.op) || opSends(s.op)) {
        const int root = find(opReceives(s.op) ? s.recvPeer : p + s.sendPeer);
        if (rootChain[static_cast<size_t>(root)] < 0) rootChain[static_cast<size_t>(root)] = chains++;
        c = rootChain[static_cast<size_t>(root)];
      } else if (chains == 0) {
        chains = 1;
      }
      chainOf[i - begin] = last = c;
    }
    std::vector<std::vector<const Step*>> byChain(static_cast<size_t>(std::max(chains, 1)));
    for (size_t i = begin; i < end; ++i) byChain[static_cast<size_t>(chainOf[i - begin])].push_back(&plan.steps[i]);
    size_t longest = 0;
    for (const auto& c : byChain) longest = std::max(longest, c.size());
    for (size_t k = 0; k < longest; ++k)
      for (const auto& c : byChain)
        if (k < c.size()) steps.push_back(*c[k]);
  }
  plan.steps = std::move(steps);  // each phase kept its steps, so its boundaries stay put
}

bool splitTreeLanes(const Plan& plan, std::vector<Plan>* lanes, std::vector<LaneDep>* deps) {
  lanes->clear();
  deps->clear();
  if (!plan.phaseStarts.empty()) return false;  // the tree AllReduce is one phase
  const uint64_t half = plan.key.count - plan.key.count / 2;  // tree 1 takes [0, half), tree 2 the rest
  std::vector<Plan> out(4);  // lane 2t: tree t up; 2t+1: tree t down
  for (Plan& l : out) {
    l.key = plan.key;
    l.algorithm = plan.algorithm;
    l.scratchElems = plan.scratchElems;
    l.sliceElems = plan.sliceElems;
  }
  auto usesSrc = [](Op op) { return op != Op::Recv && op != Op::RecvCopySend; };
  auto usesDst = [](Op op) { return op != Op::Send && op != Op::RecvReduceSend; };
  // Where each step goes, and (for the root's sends down) what it waits for.
  struct Placed {
    int lane;
    size_t index;
  };
  std::vector<Placed> placed;
  for (const Step& s : plan.steps) {
    int tree = -1;
    for (const auto& [used, r] : {std::pair{usesSrc(s.op), s.src}, std::pair{usesDst(s.op), s.dst}}) {
      if (!used) continue;
      const int t = r.offset >= half ? 1 : 0;
      if ((t == 0 && r.offset + s.count > half) || (tree >= 0 && tree != t)) return false;
      tree = t;
    }
    if (tree < 0) return false;
    const bool down = s.op == Op::Recv || s.op == Op::RecvCopySend || (s.op == Op::Send && s.src.buf == Buf::Recv);
    const int lane = 2 * tree + (down ? 1 : 0);
    placed.push_back({lane, out[static_cast<size_t>(lane)].steps.size()});
    out[static_cast<size_t>(lane)].steps.push_back(s);
  }
  // A down step that reads data an up step of its tree wrote waits for it, slice by slice.
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& s = plan.steps[i];
    if (placed[i].lane % 2 == 0 || !usesSrc(s.op)) continue;
    for (size_t j = i; j-- > 0;) {
      const Step& w = plan.steps[j];
      if (placed[j].lane != placed[i].lane - 1 || !usesDst(w.op) || w.dst.buf != s.src.buf) continue;
      if (w.dst.offset < s.src.offset + s.count && s.src.offset < w.dst.offset + w.count) {
        if (w.dst.offset != s.src.offset || w.count != s.count) return false;  // slices would not line up
        deps->push_back({placed[j].lane, placed[j].index, placed[i].lane, placed[i].index});
        break;
      }
    }
  }
  *lanes = std::move(out);
  return true;
}

Status reorderPlan(const std::string& how, Plan& plan, std::vector<Plan>* lanes, std::vector<LaneDep>* deps,
                   bool* changed) {
  *changed = false;
  lanes->clear();
  deps->clear();
  const bool streams = how == "streams" || how == "all";
  const bool tree = how == "tree" || how == "all";
  if (!streams && !tree && !how.empty() && how != "none")
    return makeError(nodusInvalidArgument, "--reorder %s: expected streams, tree, all or none", how.c_str());
  if (streams && (plan.algorithm == "torus" || plan.algorithm == "hierarchical")) {
    interleaveChains(plan);
    *changed = true;
  }
  if (tree && plan.algorithm == "tree" && plan.key.coll == Collective::AllReduce && plan.key.nranks > 1) {
    if (!splitTreeLanes(plan, lanes, deps))
      return makeError(nodusInternalError, "rank %d: the tree plan does not split into its two trees", plan.key.rank);
    *changed = true;
  }
  return Status::ok();
}

}  // namespace nodus::sim
