// The algorithm registry: one line per algorithm.
#include <cstring>
#include <limits>
#include <string>

#include "algorithms/algorithm.h"
#include "algorithms/chain.h"
#include "algorithms/direct.h"
#include "algorithms/halving_doubling.h"
#include "algorithms/p2p.h"
#include "algorithms/ring.h"
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
};
}  // namespace

std::span<const Algorithm* const> algorithms() { return kRegistry; }

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

Status chooseAlgorithm(const PlanKey& key, const PlanContext& ctx, const char* forced,
                       const Algorithm** chosen) {
  *chosen = nullptr;
  if (forced != nullptr && *forced != '\0') {
    const Algorithm* a = findAlgorithm(forced);
    if (a == nullptr) {
      std::string names;
      for (const Algorithm* x : kRegistry) names += std::string(names.empty() ? "" : ", ") + x->name;
      return makeError(nodusInvalidArgument, "NODUS_ALGO=%s names no algorithm (known: %s)",
                       forced, names.c_str());
    }
    // A forced algorithm applies to the collectives it implements; the
    // others keep the automatic choice.
    if (a->supports(key, ctx)) {
      *chosen = a;
      return Status::ok();
    }
  }
  const CostModel model;
  double best = std::numeric_limits<double>::infinity();
  for (const Algorithm* a : kRegistry) {
    if (!a->supports(key, ctx)) continue;
    if (a == &kDirectAlgorithm &&
        key.count * key.typeSize > ctx.directMaxBytes)
      continue;
    double t = a->cost(key, ctx, model);
    if (t < best) best = t, *chosen = a;
  }
  if (*chosen == nullptr)
    return makeError(nodusInternalError, "no algorithm implements %s", collectiveName(key.coll));
  return Status::ok();
}

}  // namespace nodus
