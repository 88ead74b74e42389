// The transport table: tried in order for each peer; one line per transport.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "transports/transport.h"

namespace nodus {

// What the communicator knows about two ranks when choosing a transport.
struct PeerPlacement {
  bool sameProcess = false;  // both are threads of one process (nodusCommInitAll)
  bool sameHost = false;     // both run on one machine (kernel hostname and boot id), whatever NODUS_HOSTID says
};

struct TransportEntry {
  const char* name;
  // Whether this transport can connect two ranks placed like this.
  bool (*reaches)(const PeerPlacement& where);
  std::unique_ptr<Transport> (*make)();
  // It runs a thread of its own per communicator (the net proxy), which
  // needs a core as much as the rank's executor does.
  bool ownThread = false;
  // Whether this host can run it at all (verbs: an RDMA device is up), or
  // null when it always can; *why says why not. A local fact: the
  // communicator uses the transport for a pair only when both ranks can.
  bool (*usable)(std::string* why) = nullptr;
};

std::span<const TransportEntry> transportTable();

}  // namespace nodus
