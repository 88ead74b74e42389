#include "tune/planner.h"

#include <algorithm>

namespace nodus {
namespace {

void countSlices(Plan& p) {
  p.maxSlices = 0;
  for (const Step& s : p.steps) p.maxSlices = std::max(p.maxSlices, (s.count + p.sliceElems - 1) / p.sliceElems);
}

// Which sends go by reference, and in what slices (the last stage of makePlan).
void finalizeReferences(const PlanKey& key, const PlanContext& ctx, const PlanCapabilities& caps, Plan& p) {
  markReferenceSends(p);
  const bool oversubscribed = ctx.topo != nullptr && ctx.topo->oversubscribed;
  if (p.referencesAcross && oversubscribed) {
    // Ranks that share cores: a sender by reference waits for its reader,
    // which may not be running. Only slices of 64 KiB or more pay for that
    // (4 ranks on 2 cores, AllGather of 128 KiB, i.e. 32 KiB slices: 24 us
    // through the slots, 31 by reference; 256 KiB: even).
    uint64_t largest = 0;
    for (const Step& s : p.steps)
      if (opSends(s.op) && s.mayReference) largest = std::max(largest, std::min(s.count, p.sliceElems) * key.typeSize);
    p.referencesAcross = largest >= (64u << 10);
  }
  if (p.referencesAcross && caps.referencesOfAnySize && !key.listRecv && !ctx.sliceForced) {
    // Every connection reads references from its sender's memory and this
    // plan sends only by reference (every send stable), so a slice need
    // not fit a slot: fewer, larger process_vm_readv calls. 2 processes,
    // AllGather 1-16 MiB: 0.90-0.95 of Open MPI's time in 128 KiB slices,
    // 0.95-1.04 in 512 KiB-2 MiB ones. kMaxReferenceSliceBytes bounds one
    // read.
    bool allStable = true;
    uint64_t longest = 0;
    for (const Step& s : p.steps) {
      if (opSends(s.op)) allStable &= s.mayReference;
      longest = std::max(longest, s.count);
    }
    const uint64_t cap = std::max<uint64_t>(1, kMaxReferenceSliceBytes / key.typeSize);
    if (allStable && longest > p.sliceElems) {
      p.sliceElems = std::min(longest, cap);
      countSlices(p);
    }
  }
}

}  // namespace

Status makePlan(const PlanKey& key, const PlanContext& ctx, const AlgoSpec& rules, const PlanCapabilities& caps,
                Plan* out, Choice* choiceOut) {
  Choice local;
  Choice& choice = choiceOut ? *choiceOut : local;
  NODUS_TRY(chooseAlgorithm(key, ctx, rules, &choice));
  const Algorithm* algo = choice.algo;
  PlanContext chosen = ctx;
  chosen.sliceBytes = choice.sliceBytes;
  chosen.channels = choice.channels;
  Plan p;
  p.key = key;
  p.algorithm = algo->name;
  NODUS_TRY(algo->build(key, chosen, p));
  p.sliceElems = std::max<uint64_t>(1, choice.sliceBytes / key.typeSize);
  p.roundSlices = ctx.roundSlices;
  countSlices(p);
  finalizeReferences(key, ctx, caps, p);
  *out = std::move(p);
  return Status::ok();
}

VerifyLimits verifyLimitsOf(const PlanContext& ctx) {
  VerifyLimits l;
  l.slots = ctx.slots;
  l.roundSlices = ctx.roundSlices;
  l.sliceBytes = ctx.sliceBytes;
  return l;
}

Status verifyAlgorithm(const Algorithm& algo, const VerifyCase& c, const PlanContext& ctx) {
  std::vector<Plan> plans(static_cast<size_t>(c.nranks));
  for (int r = 0; r < c.nranks; ++r) {
    const PlanKey key = c.keyOf(r);
    if (!algo.supports(key, ctx))
      return makeError(nodusInvalidArgument, "%s does not support %s", algo.name, collectiveName(c.coll));
    Plan& plan = plans[static_cast<size_t>(r)];
    plan.key = key;
    plan.algorithm = algo.name;
    NODUS_TRY(algo.build(key, ctx, plan));
  }
  return verifyPlans(c, verifyLimitsOf(ctx), plans);
}

Status verifyPlans(const VerifyCase& c, const PlanContext& ctx, const std::vector<Plan>& plans) {
  return verifyPlans(c, verifyLimitsOf(ctx), plans);
}

}  // namespace nodus
