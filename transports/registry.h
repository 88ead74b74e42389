// The transport table: tried in order for each peer; one line per transport.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "base/params.h"
#include "topo/topology.h"
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
  bool (*usable)(const Settings& settings, std::string* why) = nullptr;
  // The slot it wants unless NODUS_SLOT_BYTES sets one (slotBytesFor).
  size_t slotBytes = kDefaultSlotBytes;
};

std::span<const TransportEntry> transportTable();

// The slot of a communicator whose connections use the transports in
// `usedMask` (bit t: transportTable()[t]): NODUS_SLOT_BYTES aside, the
// smallest any of them wants, so that a plan's slice fits every slot;
// kDefaultSlotBytes when the mask is empty.
size_t slotBytesFor(uint32_t usedMask);

// The same for a job modelled on `topo` (nodus-topo, nodus-sim): each pair
// of ranks reached by the first transport in the table that reaches it, a
// device up where one is needed (the fabrics they model are RDMA fabrics).
size_t modelledSlotBytes(const Topology& topo);

}  // namespace nodus
