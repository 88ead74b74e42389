// nodus-sim: runs the plans nodus would run on a fabric nobody here has —
// 3D tori and fat-trees of hundreds to thousands of hosts — in SimGrid, and
// compares the simulated time with the bandwidth lower bound and with the
// tuner's own prediction. See sim/README.md.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/settings.h"
#include "base/size.h"
#include "sim/simulation.h"
#include "tune/tuner.h"

using namespace nodus;
using namespace nodus::sim;

namespace {

struct Options {
  Collective coll = Collective::AllReduce;
  uint64_t minBytes = 0, maxBytes = 0;
  double factor = 2;
  std::vector<std::string> algos = {"auto"};  // names, "auto" or "all"
  std::vector<std::string> fabrics;           // --fabric specs; empty: the environment as is
  SimSpec base;
  bool json = false, sweep = false;
  bool estimates = false;  // --estimates: the tuner's prices only, nothing simulated
  int jobs = 1;
};

void usage(FILE* f) {
  fprintf(f,
          "nodus-sim: nodus's plans on a simulated fabric (SimGrid)\n\n"
          "  --coll C             allreduce (default), allgather, reducescatter, broadcast, reduce\n"
          "  -b SIZE [-e SIZE -f F]  sizes in bytes as nodus-perf counts them (K/M/G suffixes; F default 2)\n"
          "  -a ALGO[,ALGO...]    algorithms to run: names, auto (the tuner's pick, NODUS_ALGO honoured)\n"
          "                       or all (every algorithm that runs the call here); default auto\n"
          "  --fabric SPEC        torus:8x8x8 | fattree:16x32[:4x1] | file:fabric.yaml | flat; repeatable.\n"
          "                       Default: the fabric as the runtime takes it (NODUS_TOPO_FILE,\n"
          "                       NODUS_TORUS_DIMS, NODUS_FATTREE)\n"
          "  --hosts N            hosts in the job (default: every place of the fabric)\n"
          "  --ranks-per-host L   ranks on each host (default 1)\n"
          "  --slice-bytes B      pipelining slice (default NODUS_SLICE_BYTES, else the tuner's pick up to\n"
          "                       the slot: NODUS_SLOT_BYTES, else the modelled transports' own, 512K\n"
          "                       with one rank per host (verbs), 128K with several (shm))\n"
          "  --slots K            slices in flight per connection (default NODUS_SLOTS, 8)\n"
          "  --compute            model reductions at the tuner's speed (default: network only)\n"
          "  --gamma GBPS         model reductions at this speed\n"
          "  --software-us US     per-message overhead between hosts (default: the tuner's, 2 us)\n"
          "  --intra-bw GBPS, --intra-lat US   rank links inside a host (default: the tuner's shm constants)\n"
          "  --links              per-link utilisation summary\n"
          "  --reorder HOW        experiment with rewritten plans (sim/reorder.h): streams (torus, hierarchical:\n"
          "                       the streams' steps interleaved), tree (tree AllReduce: its two trees run as\n"
          "                       independent lanes with their own connections), all\n"
          "  --round-slices C     slices of a step the cursor takes per round (default NODUS_ROUND_SLICES, else slots/2)\n"
          "  --verify             run the verifier on the plans first (always after --reorder, up to 1024 ranks)\n"
          "  --cfg NAME:VALUE     extra SimGrid configuration\n"
          "  --sweep              tables of algorithms x sizes per fabric: best, the tuner's pick, its error\n"
          "  -j N                 simulations at once (default 1); --timeout S per simulation\n"
          "  --estimates          simulate nothing: per fabric and size, the tuner's pick and its estimate of every\n"
          "                       algorithm, priced as the simulation would run them (reductions per --compute)\n"
          "  --json               results as JSON (one array)\n\n"
          "Every result also prints a line for scripts:\n"
          "  RESULT coll=... algo=... bytes=... hosts=... ranks=... sim_us=... bound_us=... tuner_us=...\n");
}

// A size option: one of base/size.h's, and more than zero.
bool parsePositiveSize(const char* s, uint64_t* out) { return parseUnsignedSize(s, out) && *out > 0; }

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t c; (c = s.find(',', start)) != std::string::npos; start = c + 1) out.push_back(s.substr(start, c - start));
  out.push_back(s.substr(start));
  return out;
}

// A --fabric spec as the settings the runtime reads.
bool fabricSettings(const std::string& spec, std::vector<std::string>* env) {
  *env = {"NODUS_TOPO_FILE=", "NODUS_TORUS_DIMS=", "NODUS_FATTREE="};
  if (spec == "env") return env->clear(), true;
  if (spec == "flat") return true;
  const size_t colon = spec.find(':');
  if (colon == std::string::npos) return false;
  const std::string kind = spec.substr(0, colon), value = spec.substr(colon + 1);
  if (kind == "torus") (*env)[1] = "NODUS_TORUS_DIMS=" + value;
  else if (kind == "fattree" || kind == "fat-tree") (*env)[2] = "NODUS_FATTREE=" + value;
  else if (kind == "file") (*env)[0] = "NODUS_TOPO_FILE=" + value;
  else return false;
  return true;
}


std::string jsonString(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o + "\"";
}

double errPct(const SimOutcome& o) { return o.simUs > 0 ? (o.tunerUs - o.simUs) / o.simUs * 100 : 0; }

void printResultLine(const SimOutcome& o, const std::string& fabric) {
  if (!o.ok) {
    printf("RESULT coll=%s algo=%s bytes=%llu fabric=%s error=\"%s\"\n", o.coll.c_str(), o.algo.c_str(),
           static_cast<unsigned long long>(o.bytes), fabric.c_str(), o.error.c_str());
    return;
  }
  printf("RESULT coll=%s algo=%s bytes=%llu hosts=%d ranks=%d sim_us=%.6g bound_us=%.6g tuner_us=%.6g ratio=%.4f "
         "tuner_err_pct=%.2f pick=%s compute=%d fabric=%s slice=%llu channels=%u",
         o.coll.c_str(), o.algo.c_str(), static_cast<unsigned long long>(o.bytes), o.hosts, o.ranks, o.simUs,
         o.boundUs, o.tunerUs, o.boundUs > 0 ? o.simUs / o.boundUs : 0.0, errPct(o), o.pick.c_str(), o.compute ? 1 : 0,
         fabric.c_str(), static_cast<unsigned long long>(o.sliceBytes), o.channels);
  if (o.reordered) printf(" reordered=1");
  if (o.links.fabricLinks > 0)
    printf(" links_used=%d link_max_util=%.4f link_mean_util=%.4f", o.links.fabricLinks, o.links.maxUtil,
           o.links.meanUtil);
  printf("\n");
}

std::string jsonOf(const SimOutcome& o, const std::string& fabric) {
  char buf[4096];  // the error, fabric and bound strings are the long parts
  snprintf(buf, sizeof(buf),
           "{\"ok\": %s, \"error\": %s, \"fabric\": %s, \"fabric_description\": %s, \"coll\": %s, \"algo\": %s, "
           "\"pick\": %s, \"bytes\": %llu, \"slice_bytes\": %llu, \"channels\": %u, \"hosts\": %d, \"ranks\": %d, \"sim_us\": %.9g, \"bound_us\": %.9g, "
           "\"bound\": %s, \"ratio\": %.6g, \"tuner_us\": %.9g, \"tuner_full_us\": %.9g, \"tuner_net_us\": %.9g, "
           "\"tuner_err_pct\": %.4f, \"compute\": %s, \"reordered\": %s, \"messages\": %llu, \"wall_s\": %.3f",
           o.ok ? "true" : "false", jsonString(o.error).c_str(), jsonString(fabric).c_str(),
           jsonString(o.fabric).c_str(), jsonString(o.coll).c_str(), jsonString(o.algo).c_str(),
           jsonString(o.pick).c_str(), static_cast<unsigned long long>(o.bytes),
           static_cast<unsigned long long>(o.sliceBytes), o.channels, o.hosts, o.ranks, o.simUs, o.boundUs,
           jsonString(o.boundFormula).c_str(), o.boundUs > 0 ? o.simUs / o.boundUs : 0.0, o.tunerUs, o.tunerFullUs,
           o.tunerNetUs, errPct(o), o.compute ? "true" : "false", o.reordered ? "true" : "false", static_cast<unsigned long long>(o.messages), o.wallS);
  std::string s = buf;
  if (o.links.fabricLinks > 0) {
    snprintf(buf, sizeof(buf),
             ", \"links\": {\"fabric_links_used\": %d, \"max_util\": %.6g, \"mean_util\": %.6g, \"busiest\": %s, "
             "\"rank_link_max_util\": %.6g}",
             o.links.fabricLinks, o.links.maxUtil, o.links.meanUtil, jsonString(o.links.busiest).c_str(),
             o.links.rankLinkMaxUtil);
    s += buf;
  }
  return s + "}";
}

// What the parent needs to know about a fabric before simulating on it.
struct FabricJob {
  std::string name;              // the --fabric spec, or "env"
  std::vector<std::string> settings;  // "NAME=value" settings for the children
  Settings resolved;                  // the environment's with those applied
  Topology topo;
  PlanContext ctx;
  std::vector<size_t> specs;  // indexes into the spec list
};

std::vector<uint64_t> sizes(const Options& o) {
  std::vector<uint64_t> v;
  for (uint64_t b = o.minBytes; b <= o.maxBytes;) {
    v.push_back(b);
    const uint64_t next = static_cast<uint64_t>(std::llround(static_cast<double>(b) * o.factor));
    if (next <= b || next > (1ULL << 50)) break;
    b = next;
  }
  if (v.back() < o.maxBytes) v.push_back(o.maxBytes);  // -e is always one of the sizes
  return v;
}

std::string fmtUs(double us) {
  char buf[32];
  if (us >= 1e5) snprintf(buf, sizeof(buf), "%.0f", us);
  else snprintf(buf, sizeof(buf), "%.4g", us);
  return buf;
}

void printSweepTables(const FabricJob& fj, const std::vector<SimSpec>& specs, const std::vector<SimOutcome>& res,
                      const std::vector<std::string>& algos) {
  // rows: sizes; columns: algorithms.
  std::map<uint64_t, std::map<std::string, const SimOutcome*>> grid;
  std::map<uint64_t, std::string> pickOf;
  for (size_t i : fj.specs) {
    grid[specs[i].bytes][res[i].algo.empty() ? specs[i].algo : res[i].algo] = &res[i];
    if (res[i].ok) pickOf[specs[i].bytes] = res[i].pick;
  }
  const SimOutcome* any = nullptr;
  for (size_t i : fj.specs)
    if (res[i].ok) any = &res[i];
  printf("\n## %s: %s, %d hosts, %d ranks\n", fj.name.c_str(), fj.topo.fabric.describe().c_str(),
         static_cast<int>(fj.topo.hosts.size()), fj.topo.nranks);
  printf("## simulated time (us); * = the tuner's pick; best = fastest simulated\n");
  printf("%12s", "bytes");
  for (const std::string& a : algos) printf(" %14s", a.c_str());
  printf(" %14s %14s %9s %12s\n", "best", "pick", "pick/best", "bound_us");
  int within = 0, rows = 0;
  for (const auto& [bytes, cells] : grid) {
    printf("%12llu", static_cast<unsigned long long>(bytes));
    double best = 0, pickUs = 0;
    std::string bestName;
    const std::string pick = pickOf[bytes];
    double bound = 0;
    for (const std::string& a : algos) {
      auto it = cells.find(a);
      if (it == cells.end() || !it->second->ok) {
        printf(" %14s", it == cells.end() ? "-" : "fail");
        continue;
      }
      const SimOutcome& o = *it->second;
      bound = o.boundUs;
      printf(" %13s%s", fmtUs(o.simUs).c_str(), a == pick ? "*" : " ");
      if (bestName.empty() || o.simUs < best) best = o.simUs, bestName = a;
      if (a == pick) pickUs = o.simUs;
    }
    if (bestName.empty()) {
      printf("\n");
      continue;
    }
    ++rows;
    const double ratio = pickUs > 0 ? pickUs / best : 0;
    within += ratio > 0 && ratio <= 1.10;
    printf(" %14s %14s %9.3f %12s\n", bestName.c_str(), pick.c_str(), ratio, fmtUs(bound).c_str());
  }
  printf("## the pick is within 10%% of the best at %d of %d sizes\n", within, rows);
  printf("## tuner error (tuner_us - sim_us) / sim_us, %%%s\n",
         any && any->compute ? " (reductions modelled)" : " (network only; tuner without gamma)");
  printf("%12s", "bytes");
  for (const std::string& a : algos) printf(" %14s", a.c_str());
  printf("\n");
  std::map<std::string, double> worst;
  for (const auto& [bytes, cells] : grid) {
    printf("%12llu", static_cast<unsigned long long>(bytes));
    for (const std::string& a : algos) {
      auto it = cells.find(a);
      if (it == cells.end() || !it->second->ok) {
        printf(" %14s", "-");
        continue;
      }
      const double e = errPct(*it->second);
      if (std::fabs(e) > std::fabs(worst[a])) worst[a] = e;
      printf(" %13.1f%%", e);
    }
    printf("\n");
  }
  printf("%12s", "worst");
  for (const std::string& a : algos) printf(" %13.1f%%", worst[a]);
  printf("\n");
}

int run(Options& o) {
  if (o.minBytes == 0) return fprintf(stderr, "nodus-sim: -b SIZE is required\n"), 2;
  if (o.maxBytes < o.minBytes) o.maxBytes = o.minBytes;
  if (o.fabrics.empty()) o.fabrics.push_back("env");
  bool all = false, withAuto = false;
  std::vector<std::string> named;
  for (const std::string& a : o.algos) {
    if (a == "all") all = true;
    else if (a == "auto") withAuto = true;
    else if (findAlgorithm(a.c_str()) == nullptr) return fprintf(stderr, "nodus-sim: no algorithm named '%s'\n", a.c_str()), 2;
    else named.push_back(a);
  }
  Settings env;
  if (Status s = Settings::fromEnvironment(&env); !s.isOk()) return fprintf(stderr, "nodus-sim: %s\n", s.message().c_str()), 2;
  AlgoSpec rules;
  if (Status s = AlgoSpec::parse(env.get(param::kAlgo), &rules); !s.isOk())
    return fprintf(stderr, "nodus-sim: %s\n", s.message().c_str()), 2;

  std::vector<SimSpec> specs;
  std::vector<FabricJob> fabrics;
  std::vector<std::string> columns;  // algorithm names, for the sweep tables
  for (const std::string& f : o.fabrics) {
    FabricJob fj;
    fj.name = f;
    if (!fabricSettings(f, &fj.settings)) return fprintf(stderr, "nodus-sim: --fabric %s: expected torus:DIMS, fattree:RADIX[:OVER], file:PATH or flat\n", f.c_str()), 2;
    Status s = settingsOf(fj.settings, &fj.resolved);
    if (s.isOk()) s = topologyFromSettings(fj.resolved, o.base.hosts, o.base.ranksPerHost, &fj.topo);
    if (!s.isOk()) return fprintf(stderr, "nodus-sim: %s\n", s.message().c_str()), 1;
    if (f == "env") fj.name = fj.topo.fabric.describe();
    fabrics.push_back(std::move(fj));
  }
  for (FabricJob& fj : fabrics) {
    fj.ctx = contextFor(o.base, fj.resolved, fj.topo);
    const int p = fj.topo.nranks;
    for (uint64_t bytes : sizes(o)) {
      const bool split = o.coll == Collective::AllGather || o.coll == Collective::ReduceScatter;
      const uint64_t count = (split ? bytes / static_cast<uint64_t>(p) : bytes) / o.base.typeSize;
      if (count == 0) continue;
      const PlanKey key{o.coll, p, 0, count, o.base.typeSize, o.base.root, false};
      Choice choice;
      if (Status s = chooseAlgorithm(key, fj.ctx, rules, &choice); !s.isOk())
        return fprintf(stderr, "nodus-sim: %s\n", s.message().c_str()), 1;
      if (o.estimates) {
        printf("ESTIMATE fabric=%s coll=%s bytes=%llu hosts=%zu ranks=%d pick=%s slice=%llu estimates=\"%s\"\n",
               fj.name.c_str(), lowerName(o.coll).c_str(), static_cast<unsigned long long>(bytes), fj.topo.hosts.size(),
               p, choice.algo->name, static_cast<unsigned long long>(choice.sliceBytes), choice.explain().c_str());
        continue;
      }
      std::vector<std::string> run;
      if (all)
        for (const Estimate& e : choice.estimates) run.push_back(e.algo->name);
      for (const std::string& a : named)
        if (findAlgorithm(a.c_str())->supports(key, fj.ctx)) run.push_back(a);
      // The tuner's pick runs under its own name, so tables can compare it with the others.
      if (withAuto || o.sweep) run.push_back(choice.algo->name);
      std::set<std::string> seen;
      for (const std::string& a : run) {
        if (!seen.insert(a).second) continue;
        if (std::find(columns.begin(), columns.end(), a) == columns.end()) columns.push_back(a);
        SimSpec s = o.base;
        s.coll = o.coll;
        s.bytes = bytes;
        s.algo = a;
        s.settings = fj.settings;
        fj.specs.push_back(specs.size());
        specs.push_back(std::move(s));
      }
    }
  }
  if (o.estimates) return 0;
  // Registry order for the table columns.
  std::vector<std::string> ordered;
  for (const Algorithm* a : algorithms())
    if (std::find(columns.begin(), columns.end(), a->name) != columns.end()) ordered.push_back(a->name);

  const SimSpec& b = o.base;
  if (!o.json) {
    for (const FabricJob& fj : fabrics) {
      printf("# nodus-sim: %s; %zu hosts x %d rank(s) = %d ranks\n", fj.topo.fabric.describe().c_str(),
             fj.topo.hosts.size(), std::max(1, b.ranksPerHost), fj.topo.nranks);
    }
    printf("# CM02 network model, slice %s%llu B, %u slots per connection, reductions %s\n",
           fabrics[0].ctx.sliceForced ? "" : "the tuner's pick up to ",
           static_cast<unsigned long long>(fabrics[0].ctx.sliceBytes), fabrics[0].ctx.slots,
           b.gammaGBs == 0 ? "not modelled (network only; tuner_us without gamma)"
                           : (b.gammaGBs < 0 ? "at the tuner's gamma" : "at --gamma"));
    if (!o.sweep)
      printf("# %-13s %12s %-16s %12s %12s %9s %12s %8s %-16s %8s\n", "coll", "bytes", "algorithm", "sim_us", "bound_us",
             "sim/bound", "tuner_us", "err%", "tuner pick", "wall_s");
    fflush(stdout);
  }
  std::vector<std::string> fabricOf(specs.size());
  for (const FabricJob& fj : fabrics)
    for (size_t i : fj.specs) fabricOf[i] = fj.name;
  size_t finished = 0;
  std::vector<std::string> json(specs.size());
  auto done = [&](size_t i, const SimOutcome& r) {
    ++finished;
    if (o.json) {
      json[i] = jsonOf(r, fabricOf[i]);
      fprintf(stderr, "[%zu/%zu] %s %s %llu %s: %s (%.1f s)\n", finished, specs.size(), fabricOf[i].c_str(),
              r.coll.c_str(), static_cast<unsigned long long>(r.bytes), r.algo.c_str(),
              r.ok ? (fmtUs(r.simUs) + " us").c_str() : r.error.c_str(), r.wallS);
      return;
    }
    if (o.sweep)
      fprintf(stderr, "[%zu/%zu] %s %s %llu %s: %s (%.1f s)\n", finished, specs.size(), fabricOf[i].c_str(),
              r.coll.c_str(), static_cast<unsigned long long>(r.bytes), r.algo.c_str(),
              r.ok ? (fmtUs(r.simUs) + " us").c_str() : r.error.c_str(), r.wallS);
    if (!o.sweep) {
      if (r.ok)
        printf("  %-13s %12llu %-16s %12s %12s %9.3f %12s %7.1f%% %-16s %8.1f\n", r.coll.c_str(),
               static_cast<unsigned long long>(r.bytes), r.algo.c_str(), fmtUs(r.simUs).c_str(),
               fmtUs(r.boundUs).c_str(), r.boundUs > 0 ? r.simUs / r.boundUs : 0.0, fmtUs(r.tunerUs).c_str(),
               errPct(r), r.pick.c_str(), r.wallS);
      else
        printf("  %-13s %12llu %-16s failed: %s\n", r.coll.c_str(), static_cast<unsigned long long>(r.bytes),
               r.algo.c_str(), r.error.c_str());
      if (r.ok && r.links.fabricLinks > 0)
        printf("#   links: %d fabric links used, busiest %s at %.1f%%, mean %.1f%%%s\n", r.links.fabricLinks,
               r.links.busiest.c_str(), r.links.maxUtil * 100, r.links.meanUtil * 100,
               r.links.rankLinkMaxUtil > 0
                   ? (", rank links up to " + std::to_string(static_cast<int>(r.links.rankLinkMaxUtil * 100 + 0.5)) + "%").c_str()
                   : "");
    }
    printResultLine(r, fabricOf[i]);
    fflush(stdout);
  };
  std::vector<SimOutcome> res;
  if (const char* e = getenv("NODUS_SIM_NOFORK"); e != nullptr && *e == '1' && specs.size() == 1) {
    res.push_back(simulate(specs[0]));  // in this process, for a debugger
    done(0, res[0]);
  } else {
    res = simulateMany(specs, o.jobs, done);
  }
  if (o.json) {
    printf("[\n");
    for (size_t i = 0; i < json.size(); ++i) printf("  %s%s\n", json[i].c_str(), i + 1 < json.size() ? "," : "");
    printf("]\n");
  } else if (o.sweep) {
    for (const FabricJob& fj : fabrics) printSweepTables(fj, specs, res, ordered);
  }
  int failed = 0;
  for (const SimOutcome& r : res) failed += !r.ok;
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "nodus-sim: %s needs %s\n", a.c_str(), what);
        exit(2);
      }
      return argv[++i];
    };
    auto number = [&](const char* what) {
      const char* v = value(what);
      char* end = nullptr;
      const double d = strtod(v, &end);
      if (end == v || *end != '\0') {
        fprintf(stderr, "nodus-sim: %s: '%s' is not a number\n", a.c_str(), v);
        exit(2);
      }
      return d;
    };
    auto size = [&]() {
      uint64_t v = 0;
      if (!parsePositiveSize(value("a size"), &v)) {
        fprintf(stderr, "nodus-sim: %s: not a size\n", a.c_str());
        exit(2);
      }
      return v;
    };
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (a == "--coll" || a == "-c") {
      bool ok = false;
      o.coll = parseCollective(value("a collective"), &ok);
      if (!ok) return fprintf(stderr, "nodus-sim: unknown collective %s\n", argv[i]), 2;
    } else if (a == "-b") {
      o.minBytes = size();
    } else if (a == "-e") {
      o.maxBytes = size();
    } else if (a == "-f") {
      o.factor = number("a factor");
      if (o.factor <= 1) return fprintf(stderr, "nodus-sim: -f must be more than 1\n"), 2;
    } else if (a == "-a" || a == "--algo") {
      o.algos = splitList(value("algorithm names"));
    } else if (a == "--fabric") {
      o.fabrics.push_back(value("a fabric"));
    } else if (a == "--hosts") {
      o.base.hosts = static_cast<int>(number("a number"));
    } else if (a == "--ranks-per-host") {
      o.base.ranksPerHost = static_cast<int>(number("a number"));
      if (o.base.ranksPerHost < 1) return fprintf(stderr, "nodus-sim: --ranks-per-host must be at least 1\n"), 2;
    } else if (a == "--slice-bytes") {
      o.base.sliceBytes = size();
    } else if (a == "--slots") {
      o.base.slots = static_cast<uint32_t>(number("a number"));
    } else if (a == "--compute") {
      o.base.gammaGBs = -1;
    } else if (a == "--gamma") {
      o.base.gammaGBs = number("GB/s");
    } else if (a == "--software-us") {
      o.base.softwareUs = number("microseconds");
    } else if (a == "--intra-bw") {
      o.base.intraGBs = number("GB/s");
    } else if (a == "--intra-lat") {
      o.base.intraLatencyUs = number("microseconds");
    } else if (a == "--links") {
      o.base.linkStats = true;
    } else if (a == "--cfg") {
      o.base.simgridConfig.push_back(value("NAME:VALUE"));
    } else if (a.rfind("--cfg=", 0) == 0) {
      o.base.simgridConfig.push_back(a.substr(6));
    } else if (a == "--reorder") {
      o.base.reorder = value("streams, tree, all or none");
    } else if (a == "--round-slices") {
      o.base.roundSlices = static_cast<uint32_t>(number("a number"));
    } else if (a == "--verify") {
      o.base.verify = true;
    } else if (a == "--sweep") {
      o.sweep = true;
    } else if (a == "-j") {
      o.jobs = static_cast<int>(number("a number"));
    } else if (a == "--timeout") {
      o.base.timeoutS = number("seconds");
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--estimates") {
      o.estimates = true;
    } else {
      fprintf(stderr, "nodus-sim: unknown option %s\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  if (o.estimates && (o.json || o.sweep))
    return fprintf(stderr, "nodus-sim: --estimates prints ESTIMATE lines only; it does not combine with --json or --sweep\n"), 2;
  return run(o);
}
