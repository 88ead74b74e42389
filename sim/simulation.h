// One simulated collective call, end to end: the fabric from the environment
// (as the runtime reads it), the topology as nodus-topo builds it, the
// algorithm (forced or the tuner's pick), every rank's plan, the SimGrid
// platform, the run, the bound and the tuner's prediction.
//
// SimGrid allows one engine per process and no restart, so every simulation
// runs in a forked child that reports back through a pipe; simulateMany runs
// several children at once.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "base/settings.h"
#include "base/status.h"
#include "plan/plan.h"
#include "sim/runner.h"
#include "topo/topology.h"

namespace nodus::sim {

struct SimSpec {
  Collective coll = Collective::AllReduce;
  uint64_t bytes = 0;      // as nodus-perf counts them (AllGather: output; ReduceScatter: input)
  uint32_t typeSize = 4;   // float32, as nodus-perf and nodus-topo
  int root = 0;
  std::string algo = "auto";  // a registered algorithm, or auto (the tuner, NODUS_ALGO honoured)

  // Settings for the run, "NAME=value" over the environment's (settingsOf),
  // e.g. {"NODUS_TORUS_DIMS=8x8x8"}; "NAME=" puts NAME back to its default.
  // Applied to a Settings value, never to the process environment.
  std::vector<std::string> settings;
  int hosts = 0;         // 0: every place of the fabric (flat: 1)
  int ranksPerHost = 1;
  uint64_t sliceBytes = 0;  // forced slice; 0: as the runtime takes it (NODUS_SLICE_BYTES, else the tuner's pick)
  uint32_t slots = 0;       // 0: NODUS_SLOTS
  double softwareUs = -1;   // < 0: the cost model's per-message software overhead
  double intraGBs = -1, intraLatencyUs = -1;  // < 0: the cost model's intra-host constants
  // Reduction speed; 0: not modelled (network only); < 0: the cost model's.
  // The tuner prices the run the same way (contextFor).
  double gammaGBs = 0;
  bool linkStats = false;
  std::string reorder;     // plan rewrites to try (reorder.h): "", streams, tree, all
  uint32_t roundSlices = 0; // slices of a step per cursor round; 0: NODUS_ROUND_SLICES, else slots/2 (Plan::roundSlices)
  bool verify = false;     // run the verifier on the plans first (always after a rewrite up to 1024 ranks)
  std::vector<std::string> simgridConfig;  // extra --cfg=... items
  double timeoutS = 0;                     // kill the child after this many seconds (0: never)

  // The runtime's view of its hosts' cores: > 1, the ranks of a host share
  // cores this much (Topology::coreShare, oversubscribed); 0: a core each.
  double coreShare = 0;
  // Price as the runtime does (its measured reductions and local passes),
  // not as the simulated machine works (gammaGBs; no passes).
  bool priceAsRuntime = false;

  // Tests: replace the algorithm's plans (plans[r] for rank r, keys filled in).
  std::function<Status(const Topology&, std::vector<Plan>&)> editPlans;
};

// The PlanContext a spec runs with: the runtime's (contextFromEnvironment),
// with the spec's slice (forced), slots and round slices where it sets them,
// and the local work priced as the spec simulates it (gammaGBs; no passes).
PlanContext contextFor(const SimSpec& spec, const Settings& settings, const Topology& topo);
// The same with the spec's own settings (settingsOf; a bad one leaves its default).
PlanContext contextFor(const SimSpec& spec, const Topology& topo);
// The plans every rank of `spec` runs (plans[r] for rank r) for `count`
// elements a rank, made by the runtime's planner (makePlan) with the spec's
// settings, topology and context: what runChild simulates.
Status simulatedPlans(const SimSpec& spec, uint64_t count, bool inPlace, std::vector<Plan>* plans);
// The environment's settings with `overrides` ("NAME=value"; "NAME=": the default).
Status settingsOf(const std::vector<std::string>& overrides, Settings* out);

struct LinkSummary {
  int fabricLinks = 0;        // fabric links some slice crossed
  double maxUtil = 0;         // busiest fabric link: bytes / (bandwidth x time)
  double meanUtil = 0;        // over the fabric links used
  std::string busiest;
  double fabricBytes = 0;     // bytes x links crossed, fabric links
  double rankLinkMaxUtil = 0; // busiest link inside a host
};

struct SimOutcome {
  bool ok = false;
  std::string error;
  std::string coll, algo, pick;  // algorithm run, and the tuner's own pick
  bool reordered = false;        // the plans were rewritten (SimSpec::reorder)
  std::string fabric;            // one line
  int hosts = 0, ranks = 0;
  uint64_t bytes = 0;
  uint64_t sliceBytes = 0;  // the pipelining slice the plans ran with
  uint32_t channels = 1;    // the channels they ran (PlanContext::channels)
  double simUs = 0;
  double boundUs = 0;
  std::string boundFormula;
  // The tuner's estimates for `algo` in the slice it ran: as the run was
  // modelled (what chooseAlgorithm priced, PlanContext::gammaUsPerByte: the
  // reductions at the simulated speed, no local passes); with gamma = 0;
  // and as the runtime prices it on this project's machines (the measured
  // reductions and halving-doubling's local passes, CostModel::of).
  double tunerUs = 0;
  double tunerNetUs = 0;
  double tunerFullUs = 0;
  bool compute = false;   // whether the run modelled reductions
  uint64_t messages = 0, connections = 0;
  double wallS = 0;
  LinkSummary links;
};

// Runs one spec in a forked child.
SimOutcome simulate(const SimSpec& spec);
// Runs the specs, up to `jobs` at a time; `done(i, outcome)` as each finishes.
std::vector<SimOutcome> simulateMany(const std::vector<SimSpec>& specs, int jobs,
                                     const std::function<void(size_t, const SimOutcome&)>& done = {});

// The topology the runtime would build for `hosts` hosts of `ranksPerHost`
// ranks on the fabric the environment describes (nodus-topo's rules: host
// names host0, host1, ... unless the fabric lists names; in-order placement).
Status topologyFromSettings(const Settings& settings, int hosts, int ranksPerHost, Topology* out);
// The same with the environment as it is now (tests).
inline Status topologyFromEnvironment(int hosts, int ranksPerHost, Topology* out) {
  Settings s;
  NODUS_TRY(Settings::fromEnvironment(&s));
  return topologyFromSettings(s, hosts, ranksPerHost, out);
}

// Runs `fn` in a forked child and returns its Status (SimGrid allows one
// engine per process: tests that build platforms themselves use this).
Status inChild(const std::function<Status()>& fn);

// In a fresh engine (so: inside inChild), builds the platform for `t` and
// checks that the route between every pair of ranks (up to maxPairs, spread
// over all) crosses exactly Topology::hops fabric links: the runtime's
// placement and the simulated one agree.
Status checkRoutes(const Topology& t, const LinkModel& m, int maxPairs);

Collective parseCollective(const std::string& name, bool* ok);
std::string lowerName(Collective c);

}  // namespace nodus::sim
