// The net transport: peers reached through a network library (net/net.h:
// tcp, verbs). To the executor each peer is an ordinary slot ring in this
// process's memory; one proxy thread per communicator moves posted send
// slots to the network and receives straight into free receive slots.
// Each network library is one registry entry: its name and Net factory.
#pragma once
#include <memory>
#include "transports/net/net.h"
#include "transports/transport.h"
namespace nodus {
// `name` (static storage) names the transport in logs and errors.
std::unique_ptr<Transport> makeNetTransport(const char* name, net::NetFactory factory);
std::unique_ptr<Transport> makeTcpTransport();
}
