// The transport table, in the order a peer is tried; one line per transport.
#include "transports/registry.h"

#include <algorithm>
#include <iterator>

#include "transports/loopback/loopback_transport.h"
#include "transports/net/net_transport.h"
#include "transports/net/verbs/verbs_net.h"
#include "transports/shm/shm_transport.h"

namespace nodus {
namespace {
// Between hosts each message costs a system call (tcp) or a work request and
// a completion (verbs) on both sides, so the net transports take larger
// slots, as NCCL's net buffers do (4 MiB in 8 steps). On loopback tcp 512
// KiB made a 1 MiB AllGather of 2 ranks 1.2-1.5x faster than 128 KiB and
// 256 KiB-16 MiB no slower; in nodus-sim the 8x8x8 torus AllReduce of 256
// MiB came to 1.05x its bound, against 1.14x in 128 KiB slices. shm keeps
// 128 KiB: larger slots were no faster there (docs/architecture.md).
constexpr size_t kNetSlotBytes = 512 << 10;

const TransportEntry kTable[] = {
    {"loopback", [](const PeerPlacement& w) { return w.sameProcess; }, makeLoopbackTransport},
    {"shm", [](const PeerPlacement& w) { return w.sameHost; }, makeShmTransport},
    {"verbs", [](const PeerPlacement& w) { return !w.sameHost; }, makeVerbsTransport, /*ownThread=*/true,
     net::verbsUsable, kNetSlotBytes},
    {"tcp", [](const PeerPlacement&) { return true; }, makeTcpTransport, /*ownThread=*/true, nullptr, kNetSlotBytes},
};

const TransportEntry* firstReaching(const PeerPlacement& where) {
  for (const TransportEntry& e : kTable)
    if (e.reaches(where)) return &e;
  return nullptr;
}
}  // namespace

std::span<const TransportEntry> transportTable() { return kTable; }

size_t slotBytesFor(uint32_t usedMask) {
  size_t slot = 0;
  for (size_t t = 0; t < std::size(kTable); ++t)
    if (usedMask & (1u << t)) slot = slot == 0 ? kTable[t].slotBytes : std::min(slot, kTable[t].slotBytes);
  return slot == 0 ? static_cast<size_t>(kDefaultSlotBytes) : slot;
}

size_t modelledSlotBytes(const Topology& topo) {
  uint32_t used = 0;
  auto use = [&](const PeerPlacement& w) {
    if (const TransportEntry* e = firstReaching(w)) used |= 1u << (e - kTable);
  };
  for (const std::vector<int>& ranks : topo.ranksOf)
    if (ranks.size() > 1) use(PeerPlacement{false, true});
  if (topo.ranksOf.size() > 1) use(PeerPlacement{false, false});
  return slotBytesFor(used);
}

Status parseSlotCopy(const std::string& text, SlotCopy* out) {
  if (text == "auto") *out = SlotCopy::Auto;
  else if (text == "cached") *out = SlotCopy::Cached;
  else if (text == "streaming") *out = SlotCopy::Streaming;
  else return makeError(nodusInvalidArgument, "NODUS_SHM_COPY=%s: expected auto, cached or streaming", text.c_str());
  return Status::ok();
}

}  // namespace nodus
