// The TCP implementation of the net interface: non-blocking sockets on the
// interfaces NODUS_SOCKET_IFNAME selects, `nsocks` sockets per connection
// striping large messages, validated frame headers (tcp_wire.h).
#pragma once

#include <memory>

#include "transports/net/net.h"

namespace nodus::net {

// nsocks: sockets per connection this side opens (1..kMaxSockets).
// NODUS_NSOCKS sockets a connection, on the interfaces NODUS_SOCKET_IFNAME selects.
Status makeTcpNet(const Settings& settings, std::unique_ptr<Net>* out);

}  // namespace nodus::net
