// What the ranks of a communicator tell each other at init (Comm::init's
// exchanges), kept for the communicators made from it (nodusCommSplit),
// which inherit it instead of asking again.
#pragma once

#include <cstdint>

#include "topo/binding.h"

namespace nodus {

// What every rank tells every other first: where it runs and on which CPUs
// it may, before nodus binds anything (binding needs to know who shares the
// machine, and the NUMA node a rank reports must be where it will run).
struct RankPlacement {
  // The kernel it runs under (boot id): processes of one kernel share its
  // CPUs, even where UTS namespaces make them different machines to the
  // transports (the netns harness: four "hosts" on this machine's 2 cores).
  char kernel[40] = {};
  // The machine transports see (kernel hostname and boot id: a UTS
  // namespace makes another machine), which decides whether a probe of the
  // transports that reach other machines matters.
  char machine[80] = {};
  uint64_t processToken = 0;
  CpuMask cpus;
};

// What every rank tells every other once it is bound (Comm::exchangeRankInfo).
struct RankInfo {
  char host[64];     // where the topology places the rank (NODUS_HOSTID, else the hostname)
  uint64_t fabricFingerprint;
  int32_t numa;
  int32_t cores;        // CPUs the ranks under its kernel may run on between them
  int32_t kernelRanks;  // the ranks of the communicator under its kernel
  int32_t pid;
  uint32_t slots;
  int32_t forcedTransport;  // index into the transport table, -1: none forced
  uint32_t usableTransports;  // bit t: transport t can run on this host (TransportEntry::usable)
  uint64_t slotBytes;
  // What the plans are made of, which every rank must build alike
  // (kPlanSettings names them; NODUS_ALGO as a hash of its text).
  int64_t planSettings[5];
};

}  // namespace nodus
