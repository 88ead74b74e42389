// nodus-topo: what nodus sees and would do. Prints the node (hwloc), the
// fabric (NODUS_TOPO_FILE / NODUS_TORUS_DIMS / NODUS_FATTREE), where ranks go,
// and for each collective and size the algorithm the tuner picks with its
// predicted time. --json for scripts, --dot / --svg for a picture.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/settings.h"
#include "base/size.h"
#include "topo/fabric.h"
#include "topo/grid.h"
#include "topo/node.h"
#include "topo/topology.h"
#include "transports/registry.h"
#include "tune/planner.h"

using namespace nodus;

namespace {

struct Options {
  int hosts = 0;          // 0: as many as the fabric holds (flat: 1)
  int ranksPerHost = 0;   // 0: 1 on a multi-host fabric, the node's cores on a flat one
  std::vector<std::string> names;
  uint64_t minBytes = 8, maxBytes = 1ULL << 30;
  bool json = false;
  std::string dot, svg;
  std::string grid;       // --grid dp=..,tp=..,pp=..
  std::string gridOrder;  // --grid-order; empty: chosen
};

void usage(FILE* f) {
  fprintf(f,
          "nodus-topo: the node, the fabric, rank placement and the tuner's choices\n\n"
          "  --hosts N            hosts in the job (default: every place of the fabric; flat: 1)\n"
          "  --ranks-per-host L   ranks on each host (default: 1, or the node's cores on a flat fabric)\n"
          "  --hostnames a,b,...  host names in rank order (default: the fabric's list, else host0, host1, ...)\n"
          "  -b SIZE, -e SIZE     size range for the tuner table (default 8 to 1G, x4 steps)\n"
          "  --json               everything as JSON on stdout\n"
          "  --dot FILE           the fabric and rank placement as a Graphviz graph\n"
          "  --svg FILE           the same drawn as SVG (needs Graphviz's dot)\n"
          "  --grid dp=D,tp=T,pp=P  data x tensor x pipeline groups (nodusCommSplitGrid) over the\n"
          "                       D*T*P ranks: each group's members, hosts and AllReduce algorithm\n"
          "  --grid-order ORDER   axes fastest first, e.g. tp-pp-dp (Megatron's; default: chosen)\n"
          "  -h, --help           this text\n\n"
          "The fabric comes from NODUS_TOPO_FILE, NODUS_TORUS_DIMS or NODUS_FATTREE, the node\n"
          "from hwloc (NODUS_HWLOC_XML to load an export); NODUS_ALGO applies as in a job.\n");
}

// A size option: one of base/size.h's, and more than zero.
bool parsePositiveSize(const char* s, uint64_t* out) { return parseUnsignedSize(s, out) && *out > 0; }

std::string jsonString(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (c == '\n') o += "\\n";
    else if (static_cast<unsigned char>(c) < 0x20) o += ' ';
    else o += c;
  }
  return o + "\"";
}

const Collective kColls[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                             Collective::Broadcast, Collective::Reduce};

// The tuner's choice for a call of `bytes` (nccl-tests sizes) on rank 0.
struct Row {
  Collective coll;
  uint64_t bytes;
  Choice choice;
};

std::string dotGraph(const Topology& t) {
  std::string g = "graph nodus {\n  graph [overlap=false, splines=true, fontname=\"Helvetica\"];\n"
                  "  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=10];\n";
  g += "  label=" + jsonString(t.fabric.describe()) + ";\n";
  auto hostLabel = [&](size_t h) {
    std::string l = t.hosts[h];
    if (t.fabric.kind == FabricKind::Torus) {
      l += "\\n(";
      for (size_t d = 0; d < t.fabric.dims.size(); ++d) l += (d ? "," : "") + std::to_string(t.coords[h][d]);
      l += ")";
    }
    l += "\\nranks";
    for (int r : t.ranksOf[h]) l += " " + std::to_string(r);
    return l;
  };
  for (size_t h = 0; h < t.hosts.size(); ++h) g += "  h" + std::to_string(h) + " [label=\"" + hostLabel(h) + "\"];\n";
  if (t.fabric.kind == FabricKind::Torus) {
    std::vector<int> at(t.fabric.capacity(), -1);
    auto index = [&](const HostCoord& c) {
      uint64_t i = 0, stride = 1;
      for (size_t d = 0; d < t.fabric.dims.size(); ++d) i += c[d] * stride, stride *= t.fabric.dims[d];
      return i;
    };
    for (size_t h = 0; h < t.hosts.size(); ++h) at[index(t.coords[h])] = static_cast<int>(h);
    for (size_t h = 0; h < t.hosts.size(); ++h) {
      for (size_t d = 0; d < t.fabric.dims.size(); ++d) {
        HostCoord c = t.coords[h];
        if (t.fabric.dims[d] < 2) continue;
        if (c[d] + 1 == t.fabric.dims[d] && (!t.fabric.wrap[d] || t.fabric.dims[d] == 2)) continue;
        c[d] = (c[d] + 1) % t.fabric.dims[d];
        const int other = at[index(c)];
        if (other >= 0) g += "  h" + std::to_string(h) + " -- h" + std::to_string(other) + ";\n";
      }
    }
  } else if (t.fabric.kind == FabricKind::FatTree) {
    int maxLeaf = 0;
    for (const HostCoord& c : t.coords) maxLeaf = std::max(maxLeaf, c[0]);
    const int perPod = t.fabric.radix.size() > 1 ? t.fabric.radix[1] : maxLeaf + 1;
    for (int l = 0; l <= maxLeaf; ++l) {
      g += "  leaf" + std::to_string(l) + " [shape=ellipse, label=\"leaf " + std::to_string(l) + "\"];\n";
      g += "  leaf" + std::to_string(l) + " -- spine" + std::to_string(l / perPod) + ";\n";
    }
    for (int s = 0; s <= maxLeaf / perPod; ++s)
      g += "  spine" + std::to_string(s) + " [shape=ellipse, label=\"spine " + std::to_string(s) + "\"];\n";
    for (size_t h = 0; h < t.hosts.size(); ++h) g += "  h" + std::to_string(h) + " -- leaf" + std::to_string(t.coords[h][0]) + ";\n";
  } else {
    g += "  net [shape=ellipse, label=\"network\"];\n";
    for (size_t h = 0; h < t.hosts.size(); ++h) g += "  h" + std::to_string(h) + " -- net;\n";
  }
  return g + "}\n";
}

// Writes `graph` to o.dot, or draws it into o.svg with Graphviz's `engine`.
int writeGraph(const Options& o, const std::string& graph, const std::string& engine) {
  const std::string dotPath = o.dot.empty() ? o.svg + ".dot" : o.dot;
  FILE* f = fopen(dotPath.c_str(), "w");
  if (f == nullptr || fwrite(graph.data(), 1, graph.size(), f) != graph.size()) {
    fprintf(stderr, "nodus-topo: cannot write %s\n", dotPath.c_str());
    if (f) fclose(f);
    return 1;
  }
  fclose(f);
  if (!o.svg.empty()) {
    const std::string cmd = engine + " -Tsvg -o '" + o.svg + "' '" + dotPath + "'";
    if (system(cmd.c_str()) != 0) {
      fprintf(stderr, "nodus-topo: '%s' failed (is Graphviz installed?)\n", cmd.c_str());
      return 1;
    }
    if (o.dot.empty()) remove(dotPath.c_str());
  }
  return 0;
}

// The grid on its hosts: a box per host holding its ranks, each rank filled
// with its tensor group's colour and labelled (dp, tp, pp); pipeline groups
// are chains of bold arrows, data groups dashed lines.
std::string gridGraph(const Topology& topo, const GridShape& shape, const GridOrder& order, const std::string& title) {
  static const char* const kColours[] = {"#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
                                         "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"};
  std::string g = "digraph grid {\n  graph [fontname=\"Helvetica\", rankdir=LR, label=" + jsonString(title) +
                  ", labelloc=t];\n  node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n";
  const auto tensor = gridGroups(shape, order, kGridTensor);
  std::vector<size_t> colourOf(static_cast<size_t>(topo.nranks));
  for (size_t i = 0; i < tensor.size(); ++i)
    for (int r : tensor[i]) colourOf[static_cast<size_t>(r)] = i % (sizeof(kColours) / sizeof(kColours[0]));
  for (size_t h = 0; h < topo.hosts.size(); ++h) {
    g += "  subgraph cluster_h" + std::to_string(h) + " {\n    label=" + jsonString(topo.hosts[h]) + "; style=rounded;\n";
    for (int r : topo.ranksOf[h]) {
      const auto c = gridCoords(shape, order, r);
      g += "    r" + std::to_string(r) + " [label=\"rank " + std::to_string(r) + "\\n(dp " + std::to_string(c[0]) + ", tp " +
           std::to_string(c[1]) + ", pp " + std::to_string(c[2]) + ")\", fillcolor=\"" + kColours[colourOf[static_cast<size_t>(r)]] +
           "\"];\n";
    }
    g += "  }\n";
  }
  for (const auto& p : gridGroups(shape, order, kGridPipeline))
    for (size_t i = 0; i + 1 < p.size(); ++i)
      g += "  r" + std::to_string(p[i]) + " -> r" + std::to_string(p[i + 1]) + " [penwidth=2, color=\"#1f78b4\"];\n";
  for (const auto& d : gridGroups(shape, order, kGridData))
    for (size_t i = 0; i + 1 < d.size(); ++i)
      g += "  r" + std::to_string(d[i]) + " -> r" + std::to_string(d[i + 1]) +
           " [style=dashed, dir=none, color=\"#999999\", constraint=false];\n";
  return g + "}\n";
}

// --grid: every group of each axis, the hosts it spans, and the algorithm
// its AllReduce would run at a few sizes (the group's own layout, its hosts
// where the job placed them).
int printGrid(const Options& o, const Topology& topo, const PlanContext& parentCtx, const AlgoSpec& spec) {
  GridShape shape;
  for (const char* key : {"dp", "tp", "pp"}) {
    const std::string k = std::string(key) + "=";
    const size_t at = o.grid.find(k);
    const int axis = key[0] == 'd' ? kGridData : key[0] == 't' ? kGridTensor : kGridPipeline;
    shape.size[static_cast<size_t>(axis)] = at == std::string::npos ? 1 : atoi(o.grid.c_str() + at + k.size());
    if (shape.size[static_cast<size_t>(axis)] < 1) {
      fprintf(stderr, "nodus-topo: --grid %s: %s must be at least 1\n", o.grid.c_str(), key);
      return 2;
    }
  }
  if (shape.ranks() != topo.nranks) {
    fprintf(stderr, "nodus-topo: --grid %s is %d ranks; the job has %d (--hosts, --ranks-per-host)\n", o.grid.c_str(),
            shape.ranks(), topo.nranks);
    return 2;
  }
  GridOrder order;
  std::string why;
  if (!o.gridOrder.empty()) {
    const Status s = parseGridOrder(o.gridOrder, &order);
    if (!s.isOk()) return fprintf(stderr, "nodus-topo: %s\n", s.message().c_str()), 2;
    why = std::string(gridOrderName(order)) + " (--grid-order)";
  } else {
    order = chooseGridOrder(topo, shape, &why);
    why = "chosen " + why;
  }
  printf("# grid dp=%d tp=%d pp=%d over %d ranks, order %s\n", shape.size[0], shape.size[1], shape.size[2], topo.nranks,
         why.c_str());
  const uint64_t sizes[] = {4 << 10, 1 << 20, 64 << 20};
  const char* const names[3] = {"data (dp)", "tensor (tp)", "pipeline (pp)"};
  for (int axis : {kGridTensor, kGridPipeline, kGridData}) {
    printf("\n# %s groups: members | hosts | link cost | AllReduce algorithm at 4K, 1M, 64M\n", names[axis]);
    for (const std::vector<int>& g : gridGroups(shape, order, axis)) {
      Topology sub;
      Status s = topo.subset(g, &sub);
      if (!s.isOk()) return fprintf(stderr, "nodus-topo: %s\n", s.message().c_str()), 1;
      PlanContext ctx = parentCtx;
      ctx.topo = &sub;
      std::string members, hosts, algos;
      for (int r : g) members += (members.empty() ? "" : " ") + std::to_string(r);
      for (const std::string& h : sub.hosts) hosts += (hosts.empty() ? "" : ",") + h;
      for (uint64_t bytes : sizes) {
        Choice choice;
        s = chooseAlgorithm(PlanKey{Collective::AllReduce, sub.nranks, 0, bytes / 4, 4, 0, false}, ctx, spec, &choice);
        if (!s.isOk()) return fprintf(stderr, "nodus-topo: %s\n", s.message().c_str()), 1;
        algos += (algos.empty() ? "" : ", ") + std::string(choice.algo->name);
      }
      printf("  [%s] | %s | %d | %s\n", members.c_str(), hosts.c_str(), gridGroupCost(topo, g), algos.c_str());
    }
  }
  if (!o.dot.empty() || !o.svg.empty()) {
    const std::string title = "dp " + std::to_string(shape.size[0]) + " x tp " + std::to_string(shape.size[1]) + " x pp " +
                              std::to_string(shape.size[2]) + ", order " + gridOrderName(order) +
                              ": colour = tensor group, bold arrows = pipeline, dashed = data parallel";
    return writeGraph(o, gridGraph(topo, shape, order, title), "dot");
  }
  return 0;
}

int run(const Options& o) {
  Settings settings;
  Status s = Settings::fromEnvironment(&settings);
  if (!s.isOk()) {
    fprintf(stderr, "nodus-topo: %s\n", s.message().c_str());
    return 1;
  }
  NodeInfo node;
  s = detectNode(settings, &node);
  if (!s.isOk()) {
    fprintf(stderr, "nodus-topo: %s\n", s.message().c_str());
    return 1;
  }
  FabricConfig fabric;
  s = fabricFromSettings(settings, &fabric);
  if (!s.isOk()) {
    fprintf(stderr, "nodus-topo: %s\n", s.message().c_str());
    return 1;
  }
  int hosts = o.hosts;
  if (hosts == 0) {
    if (!o.names.empty()) hosts = static_cast<int>(o.names.size());
    else if (fabric.placement == FabricConfig::Placement::ByName) hosts = static_cast<int>(fabric.named.size());
    else hosts = fabric.kind == FabricKind::Flat ? 1 : static_cast<int>(std::min<uint64_t>(fabric.capacity(), 1 << 16));
  }
  const int local = o.ranksPerHost > 0 ? o.ranksPerHost : (fabric.kind == FabricKind::Flat ? std::max(1, node.cores) : 1);
  std::vector<std::string> names = o.names;
  if (names.empty() && fabric.placement == FabricConfig::Placement::ByName)
    for (const auto& [name, c] : fabric.named) names.push_back(name);
  if (names.empty())
    for (int h = 0; h < hosts; ++h) names.push_back("host" + std::to_string(h));
  if (static_cast<int>(names.size()) < hosts) {
    fprintf(stderr, "nodus-topo: %d hosts but only %zu host names\n", hosts, names.size());
    return 1;
  }
  std::vector<std::string> hostOfRank;
  std::vector<int> numaOfRank;
  const int numaCount = std::max<int>(1, static_cast<int>(node.numa.size()));
  for (int h = 0; h < hosts; ++h)
    for (int l = 0; l < local; ++l) {
      hostOfRank.push_back(names[static_cast<size_t>(h)]);
      numaOfRank.push_back(l * numaCount / local);  // ranks spread evenly over NUMA nodes
    }
  Topology topo;
  s = Topology::build(fabric, hostOfRank, numaOfRank, &topo);
  if (!s.isOk()) {
    fprintf(stderr, "nodus-topo: %s\n", s.message().c_str());
    return 1;
  }
  // As a job would price it: more ranks on a host than this node's logical
  // CPUs share them (the runtime counts the CPUs the ranks may use).
  if (node.pus > 0 && local > node.pus) {
    topo.oversubscribed = true;
    topo.coreShare = static_cast<double>(local) / node.pus;
  }
  AlgoSpec spec;
  s = AlgoSpec::parse(settings.get(param::kAlgo), &spec);
  if (!s.isOk()) {
    fprintf(stderr, "nodus-topo: %s\n", s.message().c_str());
    return 1;
  }
  PlanContext ctx;
  contextFromSettings(settings, &ctx, static_cast<int64_t>(modelledSlotBytes(topo)));
  ctx.topo = &topo;
  const int p = topo.nranks;
  std::vector<Row> rows;
  for (Collective c : kColls) {
    for (uint64_t bytes = o.minBytes; bytes <= o.maxBytes; bytes *= 4) {
      const uint64_t perRank = (c == Collective::AllGather || c == Collective::ReduceScatter) ? bytes / p : bytes;
      const uint64_t count = perRank / 4;
      if (count == 0) continue;
      Row row{c, bytes, {}};
      // The runtime's planner (a job that connects nothing extra: no slices
      // beyond a slot by reference), so the pick shown is the pick run.
      Plan plan;
      s = makePlan(PlanKey{c, p, 0, count, 4, 0, false}, ctx, spec, PlanCapabilities{}, &plan, &row.choice);
      if (!s.isOk()) {
        fprintf(stderr, "nodus-topo: %s\n", s.message().c_str());
        return 1;
      }
      rows.push_back(std::move(row));
      if (bytes > UINT64_MAX / 4) break;
    }
  }

  if (!o.grid.empty()) return printGrid(o, topo, ctx, spec);

  if (!o.dot.empty() || !o.svg.empty()) {
    const std::string g = dotGraph(topo);
    const std::string dotPath = o.dot.empty() ? o.svg + ".dot" : o.dot;
    FILE* f = fopen(dotPath.c_str(), "w");
    if (f == nullptr || fwrite(g.data(), 1, g.size(), f) != g.size()) {
      fprintf(stderr, "nodus-topo: cannot write %s\n", dotPath.c_str());
      if (f) fclose(f);
      return 1;
    }
    fclose(f);
    if (!o.svg.empty()) {
      const std::string engine = topo.fabric.kind == FabricKind::Torus ? "neato" : "dot";
      const std::string cmd = engine + " -Tsvg -o '" + o.svg + "' '" + dotPath + "'";
      if (system(cmd.c_str()) != 0) {
        fprintf(stderr, "nodus-topo: '%s' failed (is Graphviz installed?)\n", cmd.c_str());
        return 1;
      }
      if (o.dot.empty()) remove(dotPath.c_str());
    }
  }

  if (o.json) {
    printf("{\n  \"node\": {\"source\": %s, \"packages\": %d, \"numa\": %zu, \"cores\": %d, \"pus\": %d, \"l3_bytes\": %llu, \"nics\": [",
           jsonString(node.source).c_str(), node.packages, node.numa.size(), node.cores, node.pus,
           static_cast<unsigned long long>(node.l3Bytes));
    for (size_t i = 0; i < node.nics.size(); ++i)
      printf("%s{\"name\": %s, \"rdma\": %s, \"numa\": %d}", i ? ", " : "", jsonString(node.nics[i].name).c_str(),
             node.nics[i].rdma ? "true" : "false", node.nics[i].numa);
    printf("]},\n  \"fabric\": {\"kind\": \"%s\", \"description\": %s},\n", fabricKindName(fabric.kind),
           jsonString(fabric.describe()).c_str());
    printf("  \"hosts\": [");
    for (size_t h = 0; h < topo.hosts.size(); ++h) {
      printf("%s\n    {\"name\": %s, \"coord\": [%d, %d, %d], \"ranks\": [", h ? "," : "", jsonString(topo.hosts[h]).c_str(),
             topo.coords[h][0], topo.coords[h][1], topo.coords[h][2]);
      for (size_t i = 0; i < topo.ranksOf[h].size(); ++i) printf("%s%d", i ? ", " : "", topo.ranksOf[h][i]);
      printf("]}");
    }
    printf("\n  ],\n  \"ring\": [");
    for (size_t i = 0; i < topo.ringOrder.size(); ++i) printf("%s%d", i ? ", " : "", topo.ringOrder[i]);
    printf("],\n  \"choices\": [");
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row& r = rows[i];
      printf("%s\n    {\"collective\": \"%s\", \"bytes\": %llu, \"algorithm\": \"%s\", \"slice_bytes\": %llu, "
             "\"channels\": %u, \"forced\": %s, \"estimates_us\": {", i ? "," : "",
             collectiveName(r.coll), static_cast<unsigned long long>(r.bytes), r.choice.algo->name,
             static_cast<unsigned long long>(r.choice.sliceBytes), r.choice.channels,
             r.choice.forced ? "true" : "false");
      for (size_t e = 0; e < r.choice.estimates.size(); ++e)
        printf("%s\"%s\": %.6g", e ? ", " : "", r.choice.estimates[e].algo->name, r.choice.estimates[e].us);
      printf("}}");
    }
    printf("\n  ]\n}\n");
    return 0;
  }

  printf("%s\n", node.describe().c_str());
  printf("%s\n\n", topo.describe().c_str());
  printf("# tuner (rank 0 of %d; float32; predicted time at the algorithm's best slice)\n", p);
  printf("# %-14s %12s  %-16s %6s %4s %12s   %s\n", "collective", "bytes", "algorithm", "slice", "ch", "time (us)",
         "all estimates (us)");
  for (const Row& r : rows) {
    double t = 0;
    std::string all;
    for (const Estimate& e : r.choice.estimates) {
      if (e.algo == r.choice.algo) t = e.us;
      char buf[64];
      snprintf(buf, sizeof(buf), "%s%s=%.4g", all.empty() ? "" : " ", e.algo->name, e.us);
      all += buf;
    }
    printf("  %-14s %12llu  %-16s %6s %4u %12.4g   %s\n", collectiveName(r.coll),
           static_cast<unsigned long long>(r.bytes),
           (std::string(r.choice.algo->name) + (r.choice.forced ? " (forced)" : "")).c_str(),
           formatBytes(r.choice.sliceBytes).c_str(), r.choice.channels, t, all.c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "nodus-topo: %s needs %s\n", a.c_str(), what);
        exit(2);
      }
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      usage(stdout);
      return 0;
    } else if (a == "--hosts") {
      o.hosts = atoi(value("a number"));
      if (o.hosts < 1) return fprintf(stderr, "nodus-topo: --hosts must be at least 1\n"), 2;
    } else if (a == "--ranks-per-host") {
      o.ranksPerHost = atoi(value("a number"));
      if (o.ranksPerHost < 1) return fprintf(stderr, "nodus-topo: --ranks-per-host must be at least 1\n"), 2;
    } else if (a == "--hostnames") {
      std::string list = value("a comma-separated list");
      size_t start = 0;
      for (size_t c; (c = list.find(',', start)) != std::string::npos; start = c + 1) o.names.push_back(list.substr(start, c - start));
      o.names.push_back(list.substr(start));
    } else if (a == "-b" || a == "-e") {
      uint64_t v = 0;
      if (!parsePositiveSize(value("a size"), &v)) return fprintf(stderr, "nodus-topo: %s: not a size\n", a.c_str()), 2;
      (a == "-b" ? o.minBytes : o.maxBytes) = v;
    } else if (a == "--grid") {
      o.grid = value("dp=D,tp=T,pp=P");
    } else if (a == "--grid-order") {
      o.gridOrder = value("an order such as tp-pp-dp");
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--dot") {
      o.dot = value("a file name");
    } else if (a == "--svg") {
      o.svg = value("a file name");
    } else {
      fprintf(stderr, "nodus-topo: unknown option %s\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }
  return run(o);
}
