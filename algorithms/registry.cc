// The algorithm registry: one line per algorithm.
#include <cstring>
#include <string>

#include "algorithms/algorithm.h"
#include "algorithms/bruck.h"
#include "algorithms/chain.h"
#include "algorithms/direct.h"
#include "algorithms/halving_doubling.h"
#include "algorithms/hierarchical.h"
#include "algorithms/p2p.h"
#include "algorithms/pairwise.h"
#include "algorithms/ring.h"
#include "algorithms/torus.h"
#include "algorithms/tree.h"

namespace nodus {
namespace {
const Algorithm* const kRegistry[] = {
    &kRingAlgorithm,
    &kDirectAlgorithm,
    &kChainAlgorithm,
    &kP2pAlgorithm,
    &kTreeAlgorithm,
    &kHalvingDoublingAlgorithm,
    &kTorusAlgorithm,
    &kHierarchicalAlgorithm,
    &kPairwiseAlgorithm,
    &kBruckAlgorithm,
};
}  // namespace

std::span<const Algorithm* const> algorithms() { return kRegistry; }

uint64_t directMaxFor(const PlanContext& ctx) {
  if (ctx.directMaxBytes != kDirectMaxAuto) return ctx.directMaxBytes;
  return ctx.topo != nullptr && ctx.topo->oversubscribed ? 16 << 10 : 128 << 10;
}

std::vector<int> ringOrder(const PlanContext& ctx, int nranks) {
  if (ctx.topo != nullptr && ctx.topo->nranks == nranks) return ctx.topo->ringOrder;
  std::vector<int> order(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) order[static_cast<size_t>(r)] = r;
  return order;
}

const Algorithm* findAlgorithm(const char* name) {
  for (const Algorithm* a : kRegistry)
    if (strcmp(a->name, name) == 0) return a;
  return nullptr;
}

}  // namespace nodus
