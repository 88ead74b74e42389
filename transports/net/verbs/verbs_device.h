// The RDMA device a verbs net runs on: the device and port chosen as
// qp_setup.h says (NODUS_IB_HCA, else the nearest to the rank), opened, with
// its GID (NODUS_IB_GID_INDEX honoured) and the protection domain every
// connection and registration of the net shares.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "transports/net/net.h"
#include "transports/net/verbs/ibv_loader.h"
#include "transports/net/verbs/qp_setup.h"
#include "transports/net/verbs/verbs_wire.h"

namespace nodus::net::verbs {

// The loaded libibverbs: only called once a net exists, i.e. after a
// successful load.
const IbvApi& ibv();

// The device list, released with it.
struct DeviceList {
  ibv_device** list = nullptr;
  int count = 0;
  DeviceList() = default;
  DeviceList(const DeviceList&) = delete;
  DeviceList& operator=(const DeviceList&) = delete;
  ~DeviceList() {
    if (list) ibv().free_device_list(list);
  }
};

// Lists the devices into *raw and describes each, with its ports, into *out
// (opening each for a moment). Fails where the host has no RDMA support.
Status describeDevices(const IbvApi& api, DeviceList* raw, std::vector<DeviceDesc>* out);

// One opened device and port, with the protection domain every connection
// and registration of the net shares. Destroyed last (comms hold it).
struct Device {
  std::string name;  // mlx5_0
  uint8_t port = 0;
  ibv_context* ctx = nullptr;
  ibv_pd* pd = nullptr;
  ibv_port_attr attr{};
  GidDesc gid;
  Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  ~Device() {
    if (pd) ibv().dealloc_pd(pd);
    if (ctx) ibv().close_device(ctx);
  }
  std::string where() const { return name + " port " + std::to_string(port); }
  LocalPath path() const {
    return {port, attr.link_layer == IBV_LINK_LAYER_ETHERNET ? kLinkEthernet : kLinkInfiniband,
            static_cast<uint8_t>(attr.active_mtu), gid.index};
  }
};

// Opens the device, port and GID the rank of `ctx` uses, and says which.
Status openDevice(const NetContext& ctx, std::shared_ptr<Device>* out);

}  // namespace nodus::net::verbs
