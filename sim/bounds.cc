#include "sim/bounds.h"

#include <algorithm>
#include <cstdio>
#include <set>

namespace nodus::sim {

namespace {

// Bytes a set of ranks must move through its bottleneck when k such sets share the call.
double volume(Collective c, double bytes, double k) {
  if (k <= 1) return 0;
  switch (c) {
    case Collective::AllReduce: return 2 * (k - 1) / k * bytes;
    case Collective::AllGather:
    case Collective::ReduceScatter: return (k - 1) / k * bytes;
    default: return bytes;
  }
}

const char* volumeText(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "2(k-1)/k*N";
    case Collective::AllGather:
    case Collective::ReduceScatter: return "(k-1)/k*N";
    default: return "N";
  }
}

}  // namespace

Bound bandwidthBound(Collective c, uint64_t bytes, const Topology& t, const LinkModel& m) {
  Bound best;
  const double n = static_cast<double>(bytes);
  auto consider = [&](const char* what, double k, double links, double gbs) {
    const double us = volume(c, n, k) / (links * gbs * 1e3);
    if (us <= best.us && !best.formula.empty()) return;
    char buf[160];
    snprintf(buf, sizeof(buf), "%s: k=%.0f, %s / (%.0f x %.4g GB/s)", what, k, volumeText(c), links, gbs);
    best.us = us;
    best.formula = buf;
  };
  const double hosts = static_cast<double>(t.hosts.size());
  double hostLinks = 1;
  if (t.fabric.kind == FabricKind::Torus) {
    hostLinks = 0;
    for (int d : t.fabric.dims) hostLinks += d >= 2 ? 2 : 0;
    hostLinks = std::max(1.0, hostLinks);
  }
  consider("host links", hosts, hostLinks, m.fabricGBs);
  size_t local = 0;
  for (const auto& r : t.ranksOf) local = std::max(local, r.size());
  if (local > 1) consider("rank links", t.nranks, 1, m.intraGBs);
  if (t.fabric.kind == FabricKind::FatTree) {
    const FatTreeShape s = fatTreeShape(t.fabric, static_cast<int>(t.hosts.size()));
    double uplinks = 1;
    int span = 1;  // leaves per group at this level
    for (size_t l = 1; l < s.down.size(); ++l) {
      uplinks *= s.up[l];
      std::set<int> groups;
      for (const HostCoord& hc : t.coords) groups.insert(hc[0] / span);
      consider(l == 1 ? "leaf uplinks" : "pod uplinks", static_cast<double>(groups.size()), uplinks, m.fabricGBs);
      span *= static_cast<int>(s.down[l]);
    }
  }
  return best;
}

}  // namespace nodus::sim
