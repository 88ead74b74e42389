// The simulated machine: a SimGrid platform built from the same fabric
// description the runtime reads (FabricConfig), with every rank of a
// Topology on the SimGrid host that sits where the runtime would put it.
//
// Torus: create_torus_zone, one leaf per place of the torus. Fat-tree:
// create_fatTree_zone, levels and switch radixes from the fabric's radix,
// uplink counts from its oversubscription. Flat: a one-level fat-tree (one
// switch, a link per host). Links are split-duplex (each direction its own
// bandwidth) with the fabric's bandwidth and latency.
//
// Several ranks per host: the leaf is a star zone holding one SimGrid host
// per rank, each joined to the leaf's router (the zone's gateway to the
// fabric) by its own split-duplex link with the intra-host constants. Two
// ranks of one host talk over both their links (latency = intraLatency), a
// rank reaching another host crosses its own link first.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "topo/topology.h"

namespace simgrid::s4u {
class Host;
class Link;
}  // namespace simgrid::s4u

namespace nodus::sim {

struct LinkModel {
  double fabricGBs = 25.0;  // per direction of one fabric link
  double fabricLatencyUs = 1.0;
  double intraGBs = 10.0;   // per direction of a rank's link inside its host
  double intraLatencyUs = 0.6;  // rank to rank inside one host (both links)
};

// SimGrid fat-tree parameters for a fabric: levels = radix.size(), down[l] =
// radix[l], up[0] = 1 (a host hangs under one leaf), up[l] = switches above a
// level-l switch = round(radix[l-1] / oversubscription[l-1]) (at least 1),
// one link each. A flat fabric is one switch with `hosts` ports.
struct FatTreeShape {
  std::vector<unsigned> down, up, count;
};
FatTreeShape fatTreeShape(const FabricConfig& f, int hosts);

// Where a topology host sits among the SimGrid cluster's leaves (its id in
// the zone): torus = row-major index of its coordinates, dims[0] fastest
// (SimGrid's ids follow the links that way; the coordinates it hands to the
// leaf callback do not, so they are not used); fat-tree = leaf * radix[0] +
// the host's slot on its leaf, slots given in host order.
std::vector<unsigned long> leafIds(const Topology& t);

struct Platform {
  std::vector<simgrid::s4u::Host*> rankHost;  // per rank
  std::vector<int> hostOf;                    // per rank: its topology host
  unsigned long leaves = 0;                   // places in the cluster (some may hold no host)
  bool starLeaves = false;                    // several ranks per host: leaves are star zones
  std::string describe;
};

// Builds the platform in the running SimGrid engine (call once, before
// Engine::run). Tori must wrap in every dimension (SimGrid's torus does).
Status buildPlatform(const Topology& t, const LinkModel& m, Platform* out);

// Whether a link belongs to the fabric (else it is a rank's link inside a host).
bool isFabricLink(const simgrid::s4u::Link* l);

}  // namespace nodus::sim
