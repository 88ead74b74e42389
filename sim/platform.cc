#include "sim/platform.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <simgrid/kernel/routing/NetPoint.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>

namespace nodus::sim {

namespace sg4 = simgrid::s4u;
using simgrid::kernel::routing::NetPoint;

namespace {

// Host speed does not matter: reductions are modelled as waits (see runner.h).
constexpr double kHostFlops = 1e9;
constexpr const char* kRankLinkPrefix = "rank-link-";

}  // namespace

FatTreeShape fatTreeShape(const FabricConfig& f, int hosts) {
  FatTreeShape s;
  if (f.kind != FabricKind::FatTree) {
    s.down = {static_cast<unsigned>(std::max(1, hosts))};
    s.up = {1};
    s.count = {1};
    return s;
  }
  for (size_t l = 0; l < f.radix.size(); ++l) {
    s.down.push_back(static_cast<unsigned>(f.radix[l]));
    s.count.push_back(1);
    if (l == 0) {
      s.up.push_back(1);
    } else {
      const double over = l - 1 < f.oversubscription.size() ? f.oversubscription[l - 1] : 1.0;
      s.up.push_back(static_cast<unsigned>(std::max(1.0, std::round(f.radix[l - 1] / std::max(over, 1e-9)))));
    }
  }
  return s;
}

std::vector<unsigned long> leafIds(const Topology& t) {
  std::vector<unsigned long> ids(t.hosts.size());
  if (t.fabric.kind == FabricKind::Torus) {
    for (size_t h = 0; h < t.hosts.size(); ++h) {
      unsigned long idx = 0, stride = 1;
      for (size_t d = 0; d < t.fabric.dims.size(); ++d) {
        idx += static_cast<unsigned long>(t.coords[h][d]) * stride;
        stride *= static_cast<unsigned long>(t.fabric.dims[d]);
      }
      ids[h] = idx;
    }
  } else if (t.fabric.kind == FabricKind::FatTree) {
    std::map<int, unsigned long> used;  // leaf -> slots taken
    const unsigned long perLeaf = static_cast<unsigned long>(t.fabric.radix[0]);
    for (size_t h = 0; h < t.hosts.size(); ++h) {
      const int leaf = t.coords[h][0];
      ids[h] = static_cast<unsigned long>(leaf) * perLeaf + used[leaf]++;
    }
  } else {
    for (size_t h = 0; h < t.hosts.size(); ++h) ids[h] = h;
  }
  return ids;
}

bool isFabricLink(const sg4::Link* l) { return l->get_name().rfind(kRankLinkPrefix, 0) != 0; }

Status buildPlatform(const Topology& t, const LinkModel& m, Platform* out) {
  Platform p;
  const std::vector<unsigned long> ids = leafIds(t);
  std::map<unsigned long, int> hostAtLeaf;
  for (size_t h = 0; h < ids.size(); ++h) hostAtLeaf[ids[h]] = static_cast<int>(h);
  for (const auto& ranks : t.ranksOf) p.starLeaves |= ranks.size() > 1;
  p.rankHost.assign(static_cast<size_t>(t.nranks), nullptr);
  p.hostOf = t.hostOf;

  const double bw = m.fabricGBs * 1e9, lat = m.fabricLatencyUs * 1e-6;
  const double intraBw = m.intraGBs * 1e9, intraLat = m.intraLatencyUs * 1e-6 / 2;  // two links per intra-host route
  if (!(bw > 0) || !(intraBw > 0) || lat < 0 || intraLat < 0)
    return makeError(nodusInvalidArgument, "link bandwidths must be positive and latencies not negative");

  // The leaf callback: a plain host, or a star zone of one host per rank.
  auto leaf = [&](sg4::NetZone* zone, const std::vector<unsigned long>& /*coord: see leafIds*/,
                  unsigned long id) -> std::pair<NetPoint*, NetPoint*> {
    auto it = hostAtLeaf.find(id);
    const int h = it == hostAtLeaf.end() ? -1 : it->second;
    const std::string base = h >= 0 ? t.hosts[static_cast<size_t>(h)] : "idle" + std::to_string(id);
    if (!p.starLeaves) {
      sg4::Host* host = zone->create_host(base, kHostFlops);
      if (h >= 0)
        for (int r : t.ranksOf[static_cast<size_t>(h)]) p.rankHost[static_cast<size_t>(r)] = host;
      return {host->get_netpoint(), nullptr};
    }
    sg4::NetZone* star = sg4::create_star_zone(base);
    star->set_parent(zone);
    NetPoint* gateway = star->create_router(base + "-router");
    if (h >= 0) {
      const auto& ranks = t.ranksOf[static_cast<size_t>(h)];
      for (size_t l = 0; l < ranks.size(); ++l) {
        const std::string name = base + "-rank" + std::to_string(l);
        sg4::Host* host = star->create_host(name, kHostFlops);
        sg4::Link* link = star->create_split_duplex_link(kRankLinkPrefix + name, intraBw)->set_latency(intraLat);
        link->seal();
        star->add_route(host->get_netpoint(), nullptr, nullptr, nullptr,
                        {sg4::LinkInRoute(link, sg4::LinkInRoute::Direction::UP)}, true);
        p.rankHost[static_cast<size_t>(ranks[l])] = host;
      }
    }
    star->add_route(gateway, nullptr, nullptr, nullptr, {}, true);
    star->seal();
    return {star->get_netpoint(), gateway};
  };
  const sg4::ClusterCallbacks callbacks(leaf);

  sg4::NetZone* cluster = nullptr;
  if (t.fabric.kind == FabricKind::Torus) {
    std::vector<unsigned long> dims;
    p.leaves = 1;
    for (size_t d = 0; d < t.fabric.dims.size(); ++d) {
      if (d < t.fabric.wrap.size() && !t.fabric.wrap[d] && t.fabric.dims[d] > 2)
        return makeError(nodusInvalidArgument,
                         "%s: dimension %zu does not wrap; SimGrid's torus always wraps (meshes are not simulated)",
                         t.fabric.source.c_str(), d);
      dims.push_back(static_cast<unsigned long>(t.fabric.dims[d]));
      p.leaves *= dims.back();
    }
    cluster = sg4::create_torus_zone("torus", nullptr, dims, callbacks, bw, lat, sg4::Link::SharingPolicy::SPLITDUPLEX);
  } else {
    const FatTreeShape s = fatTreeShape(t.fabric, static_cast<int>(t.hosts.size()));
    p.leaves = 1;
    for (unsigned d : s.down) p.leaves *= d;
    cluster = sg4::create_fatTree_zone("fat-tree", nullptr,
                                       sg4::FatTreeParams(static_cast<unsigned>(s.down.size()), s.down, s.up, s.count),
                                       callbacks, bw, lat, sg4::Link::SharingPolicy::SPLITDUPLEX);
  }
  cluster->seal();
  for (int r = 0; r < t.nranks; ++r)
    if (p.rankHost[static_cast<size_t>(r)] == nullptr)
      return makeError(nodusInternalError, "rank %d has no simulated host", r);

  char buf[256];
  snprintf(buf, sizeof(buf), "%s: %lu places, %zu hosts, %d ranks; fabric links %.4g GB/s %.4g us%s", 
           t.fabric.describe().c_str(), p.leaves, t.hosts.size(), t.nranks, m.fabricGBs, m.fabricLatencyUs,
           p.starLeaves ? "" : "; one rank per host");
  p.describe = buf;
  if (p.starLeaves) {
    snprintf(buf, sizeof(buf), "; rank links %.4g GB/s, %.4g us rank to rank", m.intraGBs, m.intraLatencyUs);
    p.describe += buf;
  }
  *out = std::move(p);
  return Status::ok();
}

}  // namespace nodus::sim
