// The net transport: peers reached through a network library (net/net.h;
// TCP today). To the executor each peer is an ordinary slot ring in this
// process's memory; one proxy thread per communicator moves posted send
// slots to the network and receives straight into free receive slots.
#pragma once
#include <memory>
#include "transports/transport.h"
namespace nodus {
std::unique_ptr<Transport> makeTcpTransport();
}
