// Runs every rank's Plan as a SimGrid actor: the executor's semantics with
// simulated time instead of data.
//
// A rank walks its plan with PlanCursor, exactly as src/exec does: phase by
// phase, slice-major within a phase, one slice of one step at a time, and it
// blocks where the executor would spin: on a receive until the slice from
// recvPeer is there, on a send until the connection has a free slot.
//
// Connections (one per ordered pair of ranks, as in the transports) are
// modelled like an RDMA queue pair feeding a slot ring:
// - credits: `slots` per connection; a send takes one, the receiver returns
//   it once it has consumed the slice (after its own send of that slice), so
//   at most `slots` slices are in flight or unconsumed per connection;
// - a FIFO wire: a per-connection daemon actor moves the posted slices one
//   after the other over the route between the two ranks' hosts (a put on
//   the connection's mailbox, whose permanent receiver is the receiving rank,
//   so the transfer starts at once). SimGrid shares each link's bandwidth
//   between all transfers on it (max-min fairness: two connections on one
//   link get half each), but one connection's slices do not overtake or
//   share with each other, as a NIC serves a queue pair in order;
// - latency: the engine runs with SimGrid's latency factor at 0 (transfers
//   cost bytes/bandwidth only) and a slice becomes visible to the receiver
//   the route's latency (sum of its links) plus `softwareUs` (between hosts)
//   after its last byte left. That keeps a link busy while earlier slices are
//   still in flight, which SimGrid's per-message latency phase would not:
//   time = latency + bytes/bandwidth for one slice, and back-to-back slices
//   pipeline at the link's bandwidth.
//
// Reductions (steps that reduce) optionally wait bytes x gamma; copies are free.
// The runner checks what the executor checks at run time: peers in range,
// the size of every slice received, and that the plans finish (a rank
// blocked for ever is a deadlock) leaving no slice unreceived.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "plan/plan.h"
#include "sim/platform.h"

namespace nodus::sim {

struct RunOptions {
  uint64_t sliceBytes = 128 * 1024;
  uint32_t slots = 8;
  double softwareUs = 2.0;      // per message between two hosts, on top of link latencies
  double gammaUsPerByte = 0.0;  // reduction cost; 0 = network only
  // The cursor moves by roundSlices consecutive slices of a step, as the
  // executor does (Plan::roundSlices), so a round pays the latency chain
  // once for several slices.
  uint32_t roundSlices = 1;
  bool linkStats = false;
};

struct LinkUse {
  std::string name;
  double bytes = 0;
  double bandwidth = 0;  // bytes per second
  bool fabric = true;
};

struct RunResult {
  Status status;
  double seconds = 0;          // simulated: the last rank's finish time
  uint64_t messages = 0;       // slices moved
  uint64_t connections = 0;
  std::vector<LinkUse> links;  // with linkStats: every link some slice crossed
};

// Within one rank: slice s of lane `to`'s step `toStep` waits until lane
// `from` has done slice s of its step `fromStep` (it reads what that wrote).
struct LaneDep {
  int from = 0;
  size_t fromStep = 0;
  int to = 0;
  size_t toStep = 0;
};

// Call in a process whose SimGrid engine holds `platform` and has not run yet
// (SimGrid allows one engine per process; see simulation.h for the fork).
// `plans` holds L plans per rank (plans[rank * L + lane], L = plans / ranks;
// L = 1 is what the executor does): each lane is its own actor on the rank's
// host with its own connections (a message's lane is its sender's), as
// independent tasks or channels would be; `deps[rank]` orders lanes of one
// rank where they share data.
RunResult runPlans(const std::vector<Plan>& plans, const Platform& platform, const RunOptions& o,
                   const std::vector<std::vector<LaneDep>>& deps = {});

}  // namespace nodus::sim
