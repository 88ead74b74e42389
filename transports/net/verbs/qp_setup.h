// How a verbs connection is set up, as pure functions a test can inspect
// without a device: which device and port, which GID, which path MTU, and
// the attributes and masks of each queue pair transition
// (RESET -> INIT -> RTR -> RTS; verbs refuses a transition whose mask lacks
// a required attribute or carries one that state does not take).
#pragma once

#include <infiniband/verbs.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "transports/net/verbs/verbs_wire.h"

namespace nodus {
struct NodeInfo;
}

namespace nodus::net::verbs {

// ---- Device and port ------------------------------------------------------------

struct PortDesc {
  uint8_t num = 0;
  bool active = false;  // IBV_PORT_ACTIVE
  uint8_t activeMtu = 0;  // enum ibv_mtu
  uint8_t linkLayer = 0;  // kLinkInfiniband / kLinkEthernet
};
struct DeviceDesc {
  std::string name;  // ibv_get_device_name: mlx5_0
  std::vector<PortDesc> ports;
};

// NODUS_IB_HCA: "mlx5_0" or "mlx5_0:1"; empty: choose by locality.
struct HcaSpec {
  std::string name;
  int port = 0;  // 0: the first active one
};
Status parseHcaSpec(const std::string& text, HcaSpec* out);

struct DeviceChoice {
  size_t device = 0;  // index into the list
  uint8_t port = 0;
  std::string why;    // "nearest to NUMA 2", "NODUS_IB_HCA=mlx5_0:1"
};

// The device and port a rank on NUMA node `numa` uses: the forced one
// (spec), else the first device with an active port in the order of
// node.nicsNear(numa) (RDMA NICs on the rank's NUMA node first, matched by
// name to the verbs devices), then any other verbs device in list order.
// `node` may be null (no topology): list order. Errors name the devices and
// ports looked at.
Status chooseDevice(const std::vector<DeviceDesc>& devices, const NodeInfo* node, int numa, const HcaSpec& spec,
                    DeviceChoice* out);

// ---- GID and MTU ----------------------------------------------------------------

enum class GidType { Unknown, Ib, RoceV1, RoceV2 };
struct GidDesc {
  int index = 0;
  std::array<uint8_t, 16> gid{};
  GidType type = GidType::Unknown;
};
// The GID a port uses: `forced` (NODUS_IB_GID_INDEX, >= 0) if it exists and
// is set; else on RoCE a RoCE v2 GID that is not link-local (IPv4-mapped
// first: routable, what RoCE v2 fabrics are built for), then RoCE v2
// link-local, then RoCE v1, then whatever is set; on InfiniBand index 0.
Status chooseGid(const std::vector<GidDesc>& table, uint8_t linkLayer, int forced, const std::string& where,
                 GidDesc* out);

// The path MTU of a connection: the smaller of both ends' active MTUs.
uint8_t pathMtu(uint8_t localMtu, uint8_t remoteMtu);
int mtuBytes(uint8_t mtu);  // IBV_MTU_1024 -> 1024

// ---- Queue pair transitions -----------------------------------------------------

struct QpTransition {
  ibv_qp_attr attr{};
  int mask = 0;
};

// What the local side brings to a connection.
struct LocalPath {
  uint8_t port = 0;
  uint8_t linkLayer = 0;
  uint8_t mtu = 0;  // active MTU
  int gidIndex = 0;
};

// Access a remote peer has to our receive buffers: RDMA write only (no
// reads, no atomics: nothing of ours is readable from outside).
inline constexpr int kRemoteAccess = IBV_ACCESS_REMOTE_WRITE;
// The transport's retry policy: 7 = retry "forever" on receiver-not-ready
// (we post receives before any CTS, so RNR means a slow peer, not a bug);
// ack timeout 4.096 us * 2^18 ~ 1 s, 7 retries, so a dead peer shows in
// seconds, well inside NODUS_TIMEOUT_MS.
inline constexpr uint8_t kAckTimeout = 18;
inline constexpr uint8_t kRetryCount = 7;
inline constexpr uint8_t kRnrRetry = 7;
inline constexpr uint8_t kMinRnrTimer = 12;  // 0.64 ms

QpTransition qpToInit(const LocalPath& local);
// To ready-to-receive: the remote QP's number and PSN, the path (LID on
// InfiniBand, the GID through a GRH on RoCE or when the peer has no LID).
QpTransition qpToRtr(const LocalPath& local, const QpInfo& remote);
// To ready-to-send with our own starting PSN.
QpTransition qpToRts(uint32_t localPsn);

}  // namespace nodus::net::verbs
