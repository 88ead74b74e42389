#include "sim/simulation.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <sstream>

#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>

#include "base/params.h"
#include "sim/bounds.h"
#include "tune/planner.h"
#include "sim/platform.h"
#include "sim/reorder.h"
#include "topo/fabric.h"
#include "transports/registry.h"
#include "tune/tuner.h"

namespace nodus::sim {

namespace sg4 = simgrid::s4u;

Collective parseCollective(const std::string& name, bool* ok) {
  std::string s;
  for (char c : name)
    if (c != '_' && c != '-') s += static_cast<char>(tolower(static_cast<unsigned char>(c)));
  *ok = true;
  for (Collective c : {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter, Collective::Broadcast,
                       Collective::Reduce})
    if (s == lowerName(c)) return c;
  *ok = false;
  return Collective::AllReduce;
}

std::string lowerName(Collective c) {
  std::string s = collectiveName(c);
  for (char& ch : s) ch = static_cast<char>(tolower(static_cast<unsigned char>(ch)));
  return s;
}

Status settingsOf(const std::vector<std::string>& overrides, Settings* out) {
  NODUS_TRY(Settings::fromEnvironment(out));
  for (const std::string& kv : overrides) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos) return makeError(nodusInvalidArgument, "setting '%s' is not NAME=value", kv.c_str());
    const std::string name = kv.substr(0, eq), value = kv.substr(eq + 1);
    const ParamInfo* p = findParam(name);
    if (p == nullptr) return makeError(nodusInvalidArgument, "%s is not a nodus parameter", name.c_str());
    if (value.empty()) out->reset(*p);
    else NODUS_TRY(out->set(*p, value));
  }
  return Status::ok();
}

PlanContext contextFor(const SimSpec& spec, const Topology& topo) {
  Settings settings;
  (void)settingsOf(spec.settings, &settings);
  return contextFor(spec, settings, topo);
}

PlanContext contextFor(const SimSpec& spec, const Settings& settings, const Topology& topo) {
  PlanContext ctx;
  contextFromSettings(settings, &ctx, static_cast<int64_t>(modelledSlotBytes(topo)));
  if (spec.sliceBytes) ctx.sliceBytes = spec.sliceBytes, ctx.sliceForced = true;
  if (spec.slots) ctx.slots = spec.slots;
  const int64_t round = settings.get(param::kRoundSlices);
  ctx.roundSlices = spec.roundSlices ? spec.roundSlices
                                     : static_cast<uint32_t>(round > 0 ? round : std::max<uint32_t>(1, ctx.slots / 2));
  ctx.topo = &topo;
  if (spec.priceAsRuntime) return ctx;
  // The tuner prices the machine simulated: reductions as the run models
  // them (SimSpec::gammaGBs), the local passes it does not model free.
  ctx.gammaUsPerByte = spec.gammaGBs < 0 ? CostModel::of(ctx).gammaUsPerByte
                       : spec.gammaGBs > 0 ? 1.0 / (spec.gammaGBs * 1e3)
                                           : 0.0;
  ctx.passUsPerByte = 0;
  return ctx;
}

Status topologyFromSettings(const Settings& settings, int hosts, int ranksPerHost, Topology* out) {
  FabricConfig fabric;
  NODUS_TRY(fabricFromSettings(settings, &fabric));
  if (hosts <= 0) {
    if (fabric.placement == FabricConfig::Placement::ByName) hosts = static_cast<int>(fabric.named.size());
    else hosts = fabric.kind == FabricKind::Flat ? 1 : static_cast<int>(std::min<uint64_t>(fabric.capacity(), 1 << 16));
  }
  const int local = std::max(1, ranksPerHost);
  std::vector<std::string> names;
  if (fabric.placement == FabricConfig::Placement::ByName)
    for (const auto& [name, c] : fabric.named) names.push_back(name);
  if (names.empty())
    for (int h = 0; h < hosts; ++h) names.push_back("host" + std::to_string(h));
  if (static_cast<int>(names.size()) < hosts)
    return makeError(nodusInvalidArgument, "%d hosts but the fabric names only %zu", hosts, names.size());
  std::vector<std::string> hostOfRank;
  std::vector<int> numaOfRank;
  for (int h = 0; h < hosts; ++h)
    for (int l = 0; l < local; ++l) {
      hostOfRank.push_back(names[static_cast<size_t>(h)]);
      numaOfRank.push_back(0);  // a simulated host has no NUMA picture; one node keeps the local order
    }
  return Topology::build(fabric, hostOfRank, numaOfRank, out);
}

namespace {

// ---- The child: one simulation ------------------------------------------------

// SimGrid: CM02 (plain max-min sharing, no TCP corrections), no cross
// traffic, latency applied by the runner (see runner.h). Small stacks (under
// malloc's mmap threshold, so they do not take a memory map each) and
// no guard pages: a run may hold 100k actors (rank + one per connection),
// and a guard page each would exceed the kernel's map count.
std::unique_ptr<sg4::Engine> startEngine(const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"nodus-sim",
                                   "--log=root.thres:critical",
                                   "--cfg=network/model:CM02",
                                   "--cfg=network/crosstraffic:0",
                                   "--cfg=network/latency-factor:0",
                                   "--cfg=contexts/stack-size:96",
                                   "--cfg=contexts/guard-size:0"};
  for (const std::string& c : extra) args.push_back("--cfg=" + c);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int argc = static_cast<int>(args.size());
  return std::make_unique<sg4::Engine>(&argc, argv.data());
}


LinkSummary summarize(const std::vector<LinkUse>& links, double seconds) {
  LinkSummary s;
  double sum = 0;
  for (const LinkUse& l : links) {
    const double util = seconds > 0 ? l.bytes / (l.bandwidth * seconds) : 0;
    if (!l.fabric) {
      s.rankLinkMaxUtil = std::max(s.rankLinkMaxUtil, util);
      continue;
    }
    s.fabricLinks++;
    s.fabricBytes += l.bytes;
    sum += util;
    if (util > s.maxUtil) s.maxUtil = util, s.busiest = l.name;
  }
  if (s.fabricLinks > 0) s.meanUtil = sum / s.fabricLinks;
  return s;
}

void applyCoreShare(const SimSpec& spec, Topology* topo) {
  if (spec.coreShare > 1) {
    topo->oversubscribed = true;
    topo->coreShare = spec.coreShare;
  }
}

// Every rank's plan, as the runtime's planner makes it, with the algorithm
// the spec asks for forced as NODUS_ALGO would force it.
Status planAll(const SimSpec& spec, const PlanContext& ctx, const AlgoSpec& rules, uint64_t count, bool inPlace,
               std::vector<Plan>* plans) {
  AlgoSpec runRules = rules;
  if (spec.algo != "auto") NODUS_TRY(AlgoSpec::parse(spec.algo, &runRules));
  const int p = ctx.topo->nranks;
  plans->assign(static_cast<size_t>(p), Plan{});
  for (int r = 0; r < p; ++r) {
    Plan& plan = (*plans)[static_cast<size_t>(r)];
    const PlanKey key{spec.coll, p, r, count, spec.typeSize, spec.root, inPlace};
    NODUS_TRY(makePlan(key, ctx, runRules, PlanCapabilities{}, &plan));
    if (spec.algo != "auto" && plan.algorithm != spec.algo)
      return makeError(nodusInternalError, "the planner made a %s plan where %s was asked for", plan.algorithm.c_str(),
                       spec.algo.c_str());
  }
  return Status::ok();
}

}  // namespace

namespace {

SimOutcome runChild(const SimSpec& spec) {
  SimOutcome out;
  out.coll = lowerName(spec.coll);
  out.bytes = spec.bytes;
  auto fail = [&](const Status& s) {
    out.ok = false;
    out.error = s.message();
    return out;
  };
  Settings settings;
  if (Status s = settingsOf(spec.settings, &settings); !s.isOk()) return fail(s);
  Topology topo;
  if (Status s = topologyFromSettings(settings, spec.hosts, spec.ranksPerHost, &topo); !s.isOk()) return fail(s);
  applyCoreShare(spec, &topo);
  const int p = topo.nranks;
  out.hosts = static_cast<int>(topo.hosts.size());
  out.ranks = p;
  out.fabric = topo.fabric.describe();

  PlanContext ctx = contextFor(spec, settings, topo);
  const PlanContext planned = ctx;  // what the planner is given, as the runtime's is

  const bool split = spec.coll == Collective::AllGather || spec.coll == Collective::ReduceScatter;
  const uint64_t perRank = split ? spec.bytes / static_cast<uint64_t>(p) : spec.bytes;
  const uint64_t count = perRank / spec.typeSize;
  if (count == 0) return fail(makeError(nodusInvalidArgument, "%llu bytes is less than one element per rank",
                                        static_cast<unsigned long long>(spec.bytes)));
  const PlanKey key0{spec.coll, p, 0, count, spec.typeSize, spec.root, false};

  AlgoSpec rules;
  if (Status s = AlgoSpec::parse(settings.get(param::kAlgo), &rules); !s.isOk()) return fail(s);
  Choice choice;
  if (Status s = chooseAlgorithm(key0, ctx, rules, &choice); !s.isOk()) return fail(s);
  out.pick = choice.algo->name;
  const Algorithm* algo = choice.algo;
  if (spec.algo != "auto") {
    algo = findAlgorithm(spec.algo.c_str());
    if (algo == nullptr) return fail(makeError(nodusInvalidArgument, "no algorithm named '%s'", spec.algo.c_str()));
    if (!algo->supports(key0, ctx))
      return fail(makeError(nodusInvalidArgument, "%s does not run %s on this topology", algo->name,
                            collectiveName(spec.coll)));
  }
  out.algo = algo->name;
  // The slice the runtime would run it with: the tuner's best for it.
  ctx.sliceBytes = choice.sliceFor(algo);
  ctx.channels = choice.channelsFor(algo);
  out.sliceBytes = ctx.sliceBytes;
  out.channels = channelsFor(*algo, key0, ctx);

  // The tuner's view: as chooseAlgorithm priced the simulated machine
  // (contextFor), without reductions, and as the runtime prices it with
  // this project's measured reductions and local passes.
  const CostModel model = CostModel::of(ctx);
  const double gamma = model.gammaUsPerByte;
  out.compute = gamma > 0;
  out.tunerUs = predictUs(*algo, key0, ctx, model);
  CostModel net = model;
  net.gammaUsPerByte = 0;
  out.tunerNetUs = predictUs(*algo, key0, ctx, net);
  PlanContext measured = ctx;
  measured.gammaUsPerByte = measured.passUsPerByte = -1;
  out.tunerFullUs = predictUs(*algo, key0, measured, CostModel::of(measured));

  LinkModel lm;
  lm.fabricGBs = topo.fabric.link.bandwidthGBs;
  lm.fabricLatencyUs = topo.fabric.link.latencyUs;
  lm.intraGBs = spec.intraGBs > 0 ? spec.intraGBs : 1.0 / (model.intraLinkBetaUsPerByte * 1e3);
  lm.intraLatencyUs = spec.intraLatencyUs >= 0 ? spec.intraLatencyUs : model.intraAlphaUs;
  const Bound bound = bandwidthBound(spec.coll, spec.bytes, topo, lm);
  out.boundUs = bound.us;
  out.boundFormula = bound.formula;

  // The plans are the runtime's (its planner).
  std::vector<Plan> plans;
  if (Status s = planAll(spec, planned, rules, count, false, &plans); !s.isOk()) return fail(s);
  if (spec.editPlans)
    if (Status s = spec.editPlans(topo, plans); !s.isOk()) return fail(s);
  std::vector<std::vector<Plan>> laneSplit(plans.size());
  std::vector<std::vector<LaneDep>> laneDeps(plans.size());
  for (size_t r = 0; r < plans.size(); ++r) {
    bool changed = false;
    if (Status s = reorderPlan(spec.reorder, plans[r], &laneSplit[r], &laneDeps[r], &changed); !s.isOk())
      return fail(s);
    out.reordered |= changed;
  }
  // The verifier runs on one plan per rank: the lanes are checked as the
  // plan they came from (they only split it along disjoint halves).
  if (spec.verify || (out.reordered && p <= 1024)) {
    const VerifyCase vc{spec.coll, p, count, spec.root, false, spec.typeSize};
    if (Status s = verifyPlans(vc, ctx, plans); !s.isOk())
      return fail(makeError(nodusInternalError, "the verifier rejects the plans%s: %s",
                            out.reordered ? " as rewritten" : "", s.message().c_str()));
  }
  const bool laned = !laneSplit.empty() && !laneSplit[0].empty();
  if (laned) {
    std::vector<Plan> lanes;
    for (auto& l : laneSplit) {
      if (l.size() != laneSplit[0].size()) return fail(makeError(nodusInternalError, "ranks split into different lanes"));
      for (Plan& x : l) lanes.push_back(std::move(x));
    }
    plans = std::move(lanes);
  }

  auto engine = startEngine(spec.simgridConfig);
  Platform platform;
  if (Status s = buildPlatform(topo, lm, &platform); !s.isOk()) return fail(s);
  RunOptions ro;
  ro.sliceBytes = ctx.sliceBytes;
  ro.slots = ctx.slots;
  ro.softwareUs = spec.softwareUs >= 0 ? spec.softwareUs : model.softwareUs;
  ro.gammaUsPerByte = gamma;
  ro.roundSlices = ctx.roundSlices;
  ro.linkStats = spec.linkStats;
  RunResult rr = laned ? runPlans(plans, platform, ro, laneDeps) : runPlans(plans, platform, ro);
  out.simUs = rr.seconds * 1e6;
  out.messages = rr.messages;
  out.connections = rr.connections;
  if (spec.linkStats) out.links = summarize(rr.links, rr.seconds);
  if (!rr.status.isOk()) return fail(rr.status);
  out.ok = true;
  return out;
}

// ---- Reporting through the pipe ------------------------------------------------

std::string clean(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

std::string serialize(const SimOutcome& o) {
  std::ostringstream s;
  s.precision(17);
  s << "ok=" << o.ok << "\nerror=" << clean(o.error) << "\ncoll=" << o.coll << "\nalgo=" << o.algo << "\nreordered=" << o.reordered
    << "\npick=" << o.pick << "\nfabric=" << clean(o.fabric) << "\nhosts=" << o.hosts << "\nranks=" << o.ranks
    << "\nbytes=" << o.bytes << "\nsim_us=" << o.simUs << "\nbound_us=" << o.boundUs
    << "\nbound_formula=" << clean(o.boundFormula) << "\nslice_bytes=" << o.sliceBytes << "\nchannels=" << o.channels << "\ntuner_us=" << o.tunerUs << "\ntuner_full_us=" << o.tunerFullUs
    << "\ntuner_net_us=" << o.tunerNetUs << "\ncompute=" << o.compute << "\nmessages=" << o.messages
    << "\nconnections=" << o.connections << "\nlinks_used=" << o.links.fabricLinks
    << "\nlinks_max=" << o.links.maxUtil << "\nlinks_mean=" << o.links.meanUtil
    << "\nlinks_busiest=" << o.links.busiest << "\nlinks_bytes=" << o.links.fabricBytes
    << "\nlinks_rank_max=" << o.links.rankLinkMaxUtil << "\n";
  return s.str();
}

SimOutcome parse(const std::string& text) {
  std::map<std::string, std::string> kv;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  auto num = [&](const char* k) { return kv.count(k) ? strtod(kv[k].c_str(), nullptr) : 0.0; };
  SimOutcome o;
  o.ok = kv["ok"] == "1";
  o.error = kv["error"];
  o.coll = kv["coll"];
  o.algo = kv["algo"];
  o.reordered = kv["reordered"] == "1";
  o.pick = kv["pick"];
  o.fabric = kv["fabric"];
  o.hosts = static_cast<int>(num("hosts"));
  o.ranks = static_cast<int>(num("ranks"));
  o.bytes = strtoull(kv["bytes"].c_str(), nullptr, 10);
  o.simUs = num("sim_us");
  o.boundUs = num("bound_us");
  o.boundFormula = kv["bound_formula"];
  o.tunerUs = num("tuner_us");
  o.sliceBytes = static_cast<uint64_t>(num("slice_bytes"));
  o.channels = static_cast<uint32_t>(num("channels"));
  o.tunerFullUs = num("tuner_full_us");
  o.tunerNetUs = num("tuner_net_us");
  o.compute = kv["compute"] == "1";
  o.messages = static_cast<uint64_t>(num("messages"));
  o.connections = static_cast<uint64_t>(num("connections"));
  o.links.fabricLinks = static_cast<int>(num("links_used"));
  o.links.maxUtil = num("links_max");
  o.links.meanUtil = num("links_mean");
  o.links.busiest = kv["links_busiest"];
  o.links.fabricBytes = num("links_bytes");
  o.links.rankLinkMaxUtil = num("links_rank_max");
  return o;
}

void writeAll(int fd, const std::string& s) {
  size_t at = 0;
  while (at < s.size()) {
    const ssize_t n = write(fd, s.data() + at, s.size() - at);
    if (n <= 0) return;
    at += static_cast<size_t>(n);
  }
}

struct Child {
  size_t index = 0;
  pid_t pid = -1;
  int outFd = -1, errFd = -1;
  std::string out, err;
  std::chrono::steady_clock::time_point start;
  bool killed = false;
};

bool launch(const SimSpec& spec, size_t index, Child* c) {
  int out[2], err[2];
  if (pipe(out) != 0) return false;
  if (pipe(err) != 0) {
    close(out[0]), close(out[1]);
    return false;
  }
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) {
    close(out[0]), close(out[1]), close(err[0]), close(err[1]);
    return false;
  }
  if (pid == 0) {
    close(out[0]);
    close(err[0]);
    dup2(err[1], STDERR_FILENO);  // SimGrid's own messages: shown only if the run fails
    dup2(err[1], STDOUT_FILENO);
    const SimOutcome o = runChild(spec);
    writeAll(out[1], serialize(o));
    close(out[1]);
    _exit(0);  // skip SimGrid's teardown: nothing is left to flush and it is slow for big platforms
  }
  close(out[1]);
  close(err[1]);
  c->index = index;
  c->pid = pid;
  c->outFd = out[0];
  c->errFd = err[0];
  c->start = std::chrono::steady_clock::now();
  return true;
}

SimOutcome finish(Child& c) {
  int status = 0;
  waitpid(c.pid, &status, 0);
  SimOutcome o = parse(c.out);
  o.wallS = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
  const bool exitedWell = WIFEXITED(status) && WEXITSTATUS(status) == 0 && c.out.find("ok=") != std::string::npos;
  if (!exitedWell) {
    o.ok = false;
    std::string tail = c.err.size() > 800 ? c.err.substr(c.err.size() - 800) : c.err;
    if (c.killed) o.error = "timed out after " + std::to_string(static_cast<int>(o.wallS)) + " s";
    else if (WIFSIGNALED(status)) o.error = std::string("simulation died: ") + strsignal(WTERMSIG(status));
    else o.error = "simulation failed";
    if (!tail.empty() && !c.killed) o.error += ": " + clean(tail);
  }
  return o;
}

}  // namespace

Status simulatedPlans(const SimSpec& spec, uint64_t count, bool inPlace, std::vector<Plan>* plans) {
  Settings settings;
  NODUS_TRY(settingsOf(spec.settings, &settings));
  Topology topo;
  NODUS_TRY(topologyFromSettings(settings, spec.hosts, spec.ranksPerHost, &topo));
  applyCoreShare(spec, &topo);
  const PlanContext ctx = contextFor(spec, settings, topo);
  AlgoSpec rules;
  NODUS_TRY(AlgoSpec::parse(settings.get(param::kAlgo), &rules));
  return planAll(spec, ctx, rules, count, inPlace, plans);
}


Status inChild(const std::function<Status()>& fn) {
  int fds[2];
  if (pipe(fds) != 0) return systemError("pipe");
  fflush(stdout);
  fflush(stderr);
  const pid_t pid = fork();
  if (pid < 0) return systemError("fork");
  if (pid == 0) {
    close(fds[0]);
    const Status s = fn();
    writeAll(fds[1], s.isOk() ? std::string() : "E" + s.message());
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) msg.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return makeError(nodusInternalError, "child process failed");
  if (!msg.empty()) return makeError(nodusInternalError, "%s", msg.c_str() + 1);
  return Status::ok();
}

Status checkRoutes(const Topology& t, const LinkModel& m, int maxPairs) {
  auto engine = startEngine({});
  Platform platform;
  NODUS_TRY(buildPlatform(t, m, &platform));
  const int p = t.nranks;
  const int64_t pairs = static_cast<int64_t>(p) * p;
  const int64_t stride = std::max<int64_t>(1, pairs / std::max(1, maxPairs));
  for (int64_t i = 0; i < pairs; i += stride) {
    const int a = static_cast<int>(i / p), b = static_cast<int>(i % p);
    if (a == b) continue;
    std::vector<sg4::Link*> links;
    double latency = 0;
    platform.rankHost[static_cast<size_t>(a)]->route_to(platform.rankHost[static_cast<size_t>(b)], links, &latency);
    int fabric = 0, rank = 0;
    for (const sg4::Link* l : links) (isFabricLink(l) ? fabric : rank)++;
    const int want = t.hops(a, b);
    const int wantRank = platform.starLeaves ? 2 : 0;
    if (fabric != want || rank != wantRank)
      return makeError(nodusInternalError, "rank %d -> %d: the route crosses %d fabric and %d rank links, the topology says %d hops",
                       a, b, fabric, rank, want);
  }
  return Status::ok();
}

std::vector<SimOutcome> simulateMany(const std::vector<SimSpec>& specs, int jobs,
                                     const std::function<void(size_t, const SimOutcome&)>& done) {
  std::vector<SimOutcome> results(specs.size());
  std::vector<Child> running;
  size_t next = 0;
  jobs = std::max(1, jobs);
  while (next < specs.size() || !running.empty()) {
    while (next < specs.size() && static_cast<int>(running.size()) < jobs) {
      Child c;
      if (!launch(specs[next], next, &c)) {
        results[next].error = std::string("fork: ") + strerror(errno);
        if (done) done(next, results[next]);
      } else {
        running.push_back(std::move(c));
      }
      ++next;
    }
    if (running.empty()) continue;
    std::vector<pollfd> fds;
    for (const Child& c : running) {
      fds.push_back({c.outFd, POLLIN, 0});
      fds.push_back({c.errFd, POLLIN, 0});
    }
    poll(fds.data(), fds.size(), 200);
    const auto now = std::chrono::steady_clock::now();
    for (size_t i = 0; i < running.size(); ++i) {
      Child& c = running[i];
      for (int k = 0; k < 2; ++k) {
        int& fd = k == 0 ? c.outFd : c.errFd;
        if (fd < 0 || !(fds[2 * i + k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        char buf[4096];
        const ssize_t n = read(fd, buf, sizeof(buf));
        if (n > 0) {
          std::string& into = k == 0 ? c.out : c.err;
          into.append(buf, static_cast<size_t>(n));
          if (into.size() > (1 << 20)) into.erase(0, into.size() - (1 << 19));  // keep the tail
        } else {
          close(fd);
          fd = -1;
        }
      }
      const SimSpec& spec = specs[c.index];
      if (!c.killed && spec.timeoutS > 0 && std::chrono::duration<double>(now - c.start).count() > spec.timeoutS) {
        kill(c.pid, SIGKILL);
        c.killed = true;
      }
    }
    for (size_t i = 0; i < running.size();) {
      Child& c = running[i];
      if (c.outFd >= 0 || c.errFd >= 0) {
        ++i;
        continue;
      }
      SimOutcome o = finish(c);
      if (o.coll.empty()) o.coll = lowerName(specs[c.index].coll);
      if (o.bytes == 0) o.bytes = specs[c.index].bytes;
      if (o.algo.empty()) o.algo = specs[c.index].algo;
      results[c.index] = o;
      if (done) done(c.index, o);
      running.erase(running.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return results;
}

SimOutcome simulate(const SimSpec& spec) {
  // NODUS_SIM_NOFORK=1: run in this process, for a debugger (one simulation per process).
  if (const char* e = getenv("NODUS_SIM_NOFORK"); e != nullptr && *e == '1') return runChild(spec);
  return simulateMany({spec}, 1).front();
}

}  // namespace nodus::sim
