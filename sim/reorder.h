// Plan rewrites the simulator can try (nodus-sim --reorder): what an
// algorithm's plans would gain from a different step order, measured before
// anyone changes algorithms/. A rewrite keeps every step and only moves
// steps within their phase; nodus-sim runs the verifier on the result.
//
// Why (streams): the executor runs a phase slice-major and stops at the first step
// that cannot move (PlanCursor). Plans that list each stream's ring steps one
// stream after the other make a rank wait, within a slice round, for stream
// 0's whole ring chain, then stream 1's, ...: the 2*D streams' waits add up
// instead of overlapping, and each link is busy about 1/(2*D) of the time.
// The torus and hierarchical builders (algorithms/dimension_wise.cc) now
// interleave their streams themselves, as this rewrite found they should; it
// stays as the check that they do (the rewrite must gain nothing).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "plan/plan.h"
#include "sim/runner.h"

namespace nodus::sim {

// Within each phase, cuts the steps into chains and interleaves them step
// by step: the first step of every chain, then the second, ... A chain is
// every step on a set of connections that steps link (a step receiving from
// Y and sending to X joins Y's and X's): one stream's ring. Each connection
// stays within one chain, so every connection's messages keep their order
// and sizes on both sides, whatever steps the builder dropped as empty. Each
// slice round then posts every stream's send before it waits for any.
void interleaveChains(Plan& plan);

// Splits a double binary tree AllReduce plan into four lanes (runner.h):
// each tree's reduce up and its broadcast down, the root's sends down
// waiting slice by slice for its final reduction (a lane dependency). This
// is how NCCL runs its trees (two channels, each split into an up and a
// down thread group). In one plan, a rank's steps for one tree wait behind
// its steps for the other, and a slice round cannot end before the slice
// went up to the root and back down, so rounds never overlap. False if a
// step straddles the two halves.
bool splitTreeLanes(const Plan& plan, std::vector<Plan>* lanes, std::vector<LaneDep>* deps);

// By name: "streams" (interleaveChains on torus and hierarchical plans),
// "tree" (splitTreeLanes on tree AllReduce plans: *lanes and *deps get the
// lanes, else they are left empty), "all", or "none"/"". Sets *changed
// when the plan was rewritten; unknown names are errors.
Status reorderPlan(const std::string& how, Plan& plan, std::vector<Plan>* lanes, std::vector<LaneDep>* deps,
                   bool* changed);

}  // namespace nodus::sim
