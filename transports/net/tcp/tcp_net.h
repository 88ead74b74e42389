// The TCP implementation of the net interface: non-blocking sockets on the
// interfaces NODUS_SOCKET_IFNAME selects, `nsocks` sockets per connection
// striping large messages, validated frame headers (tcp_wire.h).
#pragma once

#include <memory>

#include "transports/net/net.h"

namespace nodus::net {

// nsocks: sockets per connection this side opens (1..kMaxSockets).
Status makeTcpNet(int nsocks, std::unique_ptr<Net>* out);

}  // namespace nodus::net
