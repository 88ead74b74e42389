// The transport table, in the order a peer is tried; one line per transport.
#include "transports/registry.h"

#include "transports/loopback/loopback_transport.h"
#include "transports/net/net_transport.h"
#include "transports/net/verbs/verbs_net.h"
#include "transports/shm/shm_transport.h"

namespace nodus {
namespace {
const TransportEntry kTable[] = {
    {"loopback", [](const PeerPlacement& w) { return w.sameProcess; }, makeLoopbackTransport},
    {"shm", [](const PeerPlacement& w) { return w.sameHost; }, makeShmTransport},
    {"verbs", [](const PeerPlacement& w) { return !w.sameHost; }, makeVerbsTransport, /*ownThread=*/true, net::verbsUsable},
    {"tcp", [](const PeerPlacement&) { return true; }, makeTcpTransport, /*ownThread=*/true},
};
}  // namespace

std::span<const TransportEntry> transportTable() { return kTable; }

}  // namespace nodus
