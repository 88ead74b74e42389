// The InfiniBand / RoCE implementation of the net interface (net/net.h):
// libibverbs loaded at run time (ibv_loader.h), one RC queue pair per
// connection, registrations cached (reg_cache.h), data moved by RDMA WRITE
// WITH IMMEDIATE straight into the buffer each receive advertises
// (verbs_wire.h), device / port / GID / MTU chosen as qp_setup.h says.
//
// Why write-with-immediate after a clear-to-send rather than send/recv: the
// receiver's buffers are the slots of its ring, any of which the executor
// may still be reading, so the receiver must say which slot is free anyway;
// once it does, a one-sided write lands the data where it is read with no
// bounce buffer, and the immediate carries the size and raises the
// receiver's completion (a plain RDMA write would not tell it).
#pragma once

#include <memory>
#include <string>

#include "transports/net/net.h"
#include "transports/transport.h"

namespace nodus::net {

// A verbs net on the device nearest ctx.numa (or NODUS_IB_HCA), with
// NODUS_IB_GID_INDEX honoured. Fails where libibverbs cannot be loaded
// ("cannot load libibverbs.so.1 ...") or has no usable device ("verbs: no
// RDMA device ..."), naming what it looked at.
Status makeVerbsNet(const NetContext& ctx, std::unique_ptr<Net>* out);

// Whether this host can run verbs at all: libibverbs loads and a device
// (NODUS_IB_HCA's, when set) has an active port. Probed once per process
// (a few milliseconds: the library and each device are opened); when not,
// *why says so.
bool verbsUsable(const Settings& settings, std::string* why);

}  // namespace nodus::net

namespace nodus {
std::unique_ptr<Transport> makeVerbsTransport();
}
