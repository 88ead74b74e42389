#include "topo/topology.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <numeric>
#include <sstream>

namespace nodus {

std::vector<uint64_t> snakeOrder(const std::vector<int>& dims) {
  uint64_t total = 1;
  for (int d : dims) total *= static_cast<uint64_t>(d);
  std::vector<uint64_t> order(total);
  for (uint64_t i = 0; i < total; ++i) {
    uint64_t index = 0, stride = 1, below = 1;
    for (size_t k = 0; k < dims.size(); ++k) {
      const uint64_t dk = static_cast<uint64_t>(dims[k]);
      uint64_t digit = (i / below) % dk;
      // Reverse this digit on every other pass of the digits above it.
      if ((i / (below * dk)) % 2 == 1) digit = dk - 1 - digit;
      index += digit * stride;
      stride *= dk;
      below *= dk;
    }
    order[i] = index;
  }
  return order;
}

FabricConfig Topology::placedFabric() const {
  FabricConfig f = fabric;
  if (f.kind != FabricKind::Flat) {
    f.placement = FabricConfig::Placement::ByName;
    f.named.clear();
    for (size_t h = 0; h < hosts.size(); ++h) f.named.emplace_back(hosts[h], coords[h]);
  }
  return f;
}

Status Topology::subset(const std::vector<int>& members, Topology* out) const {
  std::vector<std::string> names;
  std::vector<int> numa;
  for (int m : members) {
    names.push_back(hosts[static_cast<size_t>(hostOf[static_cast<size_t>(m)])]);
    numa.push_back(numaOf[static_cast<size_t>(m)]);
  }
  NODUS_TRY(build(placedFabric(), names, numa, out));
  out->oversubscribed = oversubscribed;
  out->coreShare = coreShare;
  return Status::ok();
}

int Topology::hops(int a, int b) const {
  const int ha = hostOf[static_cast<size_t>(a)], hb = hostOf[static_cast<size_t>(b)];
  if (ha == hb) return 0;
  const HostCoord& ca = coords[static_cast<size_t>(ha)];
  const HostCoord& cb = coords[static_cast<size_t>(hb)];
  switch (fabric.kind) {
    case FabricKind::Torus: {
      int h = 0;
      for (size_t d = 0; d < fabric.dims.size(); ++d) {
        const int diff = std::abs(ca[d] - cb[d]);
        h += fabric.wrap[d] ? std::min(diff, fabric.dims[d] - diff) : diff;
      }
      return h;
    }
    case FabricKind::FatTree: {
      // Up to the lowest switch both hosts hang under, and down again.
      int la = ca[0], lb = cb[0];
      for (size_t level = 1; level < fabric.radix.size() + 1; ++level) {
        if (la == lb) return static_cast<int>(2 * level);
        if (level < fabric.radix.size()) la /= fabric.radix[level], lb /= fabric.radix[level];
      }
      return static_cast<int>(2 * (fabric.radix.size() + 1));
    }
    case FabricKind::Flat: return 1;
  }
  return 1;
}

int Topology::maxLinkLoad(const std::vector<std::pair<int, int>>& hostFlows) const {
  if (fabric.kind != FabricKind::Torus || hostFlows.empty()) return 1;
  const size_t nd = fabric.dims.size();
  size_t places = 1;
  for (int d : fabric.dims) places *= static_cast<size_t>(d);
  // One counter per place, dimension and direction: the link leaving it.
  std::vector<int> load(places * nd * 2, 0);
  int most = 0;
  for (const auto& [from, to] : hostFlows) {
    HostCoord at = coords[static_cast<size_t>(from)];
    const HostCoord& dst = coords[static_cast<size_t>(to)];
    for (size_t d = 0; d < nd; ++d) {
      const int n = fabric.dims[d];
      const int forward = ((dst[d] - at[d]) % n + n) % n;  // hops going + (with wrap-around)
      if (forward == 0) continue;
      const bool plus = fabric.wrap[d] ? forward <= n - forward : dst[d] > at[d];
      int steps = fabric.wrap[d] ? std::min(forward, n - forward) : std::abs(dst[d] - at[d]);
      for (; steps > 0; --steps) {
        size_t place = 0;
        for (size_t e = nd; e-- > 0;) place = place * static_cast<size_t>(fabric.dims[e]) + static_cast<size_t>(at[e]);
        most = std::max(most, ++load[(place * nd + d) * 2 + (plus ? 0 : 1)]);
        at[d] = ((at[d] + (plus ? 1 : -1)) % n + n) % n;
      }
    }
  }
  return std::max(most, 1);
}

int Topology::ranksPerHost() const {
  if (ranksOf.empty()) return 0;
  const size_t n = ranksOf[0].size();
  for (const auto& r : ranksOf)
    if (r.size() != n) return 0;
  return static_cast<int>(n);
}

bool Topology::rankGrid(RankGrid* grid) const {
  if (fabric.kind != FabricKind::Torus) return false;
  const int local = ranksPerHost();
  if (local == 0 || hosts.size() != fabric.capacity()) return false;
  RankGrid g;
  if (local > 1) {
    g.dims.push_back(local);
    g.wrap.push_back(true);  // every pair of ranks in a host is connected
    g.intraHost.push_back(true);
  }
  for (size_t d = 0; d < fabric.dims.size(); ++d) {
    if (fabric.dims[d] == 1) continue;
    g.dims.push_back(fabric.dims[d]);
    g.wrap.push_back(fabric.wrap[d]);
    g.intraHost.push_back(false);
  }
  g.rankAt.assign(static_cast<size_t>(nranks), -1);
  g.indexOf.assign(static_cast<size_t>(nranks), -1);
  for (size_t h = 0; h < hosts.size(); ++h) {
    uint64_t hostIndex = 0, stride = 1;
    for (size_t d = 0; d < fabric.dims.size(); ++d) {
      hostIndex += static_cast<uint64_t>(coords[h][d]) * stride;
      stride *= static_cast<uint64_t>(fabric.dims[d]);
    }
    for (int l = 0; l < local; ++l) {
      const uint64_t idx = hostIndex * static_cast<uint64_t>(local) + static_cast<uint64_t>(l);
      const int r = ranksOf[h][l];
      g.rankAt[idx] = r;
      g.indexOf[r] = static_cast<int>(idx);
    }
  }
  *grid = std::move(g);
  return true;
}

std::string Topology::describe() const {
  std::ostringstream o;
  o << "fabric: " << fabric.describe() << "\n";
  o << nranks << " rank(s) on " << hosts.size() << " host(s)";
  if (int l = ranksPerHost()) o << ", " << l << " per host";
  if (oversubscribed) o << ", " << coreShare << " per logical CPU (oversubscribed: no rank polls)";
  o << "\n";
  for (size_t h = 0; h < hosts.size(); ++h) {
    o << "  " << hosts[h];
    if (fabric.kind == FabricKind::Torus) {
      o << " (";
      for (size_t d = 0; d < fabric.dims.size(); ++d) o << (d ? "," : "") << coords[h][d];
      o << ")";
    } else if (fabric.kind == FabricKind::FatTree) {
      o << " (leaf " << coords[h][0] << ")";
    }
    o << ": ranks";
    for (int r : ranksOf[h]) o << " " << r << (numaOf[r] ? "@numa" + std::to_string(numaOf[r]) : "");
    o << "\n";
  }
  o << "ring:";
  for (int r : ringOrder) o << " " << r;
  return o.str();
}

Topology Topology::flat(int nranks) {
  Topology t;
  std::vector<std::string> hosts(static_cast<size_t>(nranks), "localhost");
  std::vector<int> numa(static_cast<size_t>(nranks), 0);
  Status s = build(FabricConfig{}, hosts, numa, &t);
  (void)s;  // a flat fabric places any number of hosts
  return t;
}

Status Topology::build(const FabricConfig& fabric, const std::vector<std::string>& hostOfRank,
                       const std::vector<int>& numaOfRank, Topology* out) {
  Topology t;
  t.nranks = static_cast<int>(hostOfRank.size());
  t.fabric = fabric;
  t.numaOf = numaOfRank;
  std::map<std::string, int> index;
  for (const std::string& h : hostOfRank) {
    auto [it, fresh] = index.emplace(h, static_cast<int>(t.hosts.size()));
    if (fresh) t.hosts.push_back(h);
    t.hostOf.push_back(it->second);
  }
  NODUS_TRY(placeHosts(fabric, t.hosts, &t.coords));
  t.ranksOf.resize(t.hosts.size());
  for (int r = 0; r < t.nranks; ++r) t.ranksOf[t.hostOf[r]].push_back(r);
  for (auto& ranks : t.ranksOf)
    std::stable_sort(ranks.begin(), ranks.end(), [&](int a, int b) { return t.numaOf[a] < t.numaOf[b]; });

  // Hosts in ring order: a snake through the torus, leaf by leaf on a
  // fat-tree, first-rank order on a flat fabric.
  t.hostOrder.resize(t.hosts.size());
  std::iota(t.hostOrder.begin(), t.hostOrder.end(), 0);
  if (fabric.kind == FabricKind::Torus) {
    std::map<uint64_t, int> hostAt;
    for (size_t h = 0; h < t.hosts.size(); ++h) {
      uint64_t idx = 0, stride = 1;
      for (size_t d = 0; d < fabric.dims.size(); ++d) {
        idx += static_cast<uint64_t>(t.coords[h][d]) * stride;
        stride *= static_cast<uint64_t>(fabric.dims[d]);
      }
      hostAt[idx] = static_cast<int>(h);
    }
    t.hostOrder.clear();
    for (uint64_t idx : snakeOrder(fabric.dims)) {
      auto it = hostAt.find(idx);
      if (it != hostAt.end()) t.hostOrder.push_back(it->second);
    }
  } else if (fabric.kind == FabricKind::FatTree) {
    std::stable_sort(t.hostOrder.begin(), t.hostOrder.end(),
                     [&](int a, int b) { return t.coords[a][0] < t.coords[b][0]; });
  }
  for (int h : t.hostOrder)
    for (int r : t.ranksOf[h]) t.ringOrder.push_back(r);
  *out = std::move(t);
  return Status::ok();
}

}  // namespace nodus
