#include "transports/net/verbs/qp_setup.h"

#include <algorithm>
#include <cstdlib>

#include "topo/node.h"

namespace nodus::net::verbs {

Status parseHcaSpec(const std::string& text, HcaSpec* out) {
  HcaSpec s;
  const size_t colon = text.find(':');
  s.name = text.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string port = text.substr(colon + 1);
    char* end = nullptr;
    const long p = strtol(port.c_str(), &end, 10);
    if (port.empty() || *end != '\0' || p < 1 || p > 255)
      return makeError(nodusInvalidArgument, "NODUS_IB_HCA=%s: the port after ':' must be a number from 1 to 255",
                       text.c_str());
    s.port = static_cast<int>(p);
  }
  if (!text.empty() && s.name.empty())
    return makeError(nodusInvalidArgument, "NODUS_IB_HCA=%s names no device (expected mlx5_0 or mlx5_0:1)", text.c_str());
  *out = s;
  return Status::ok();
}

namespace {

std::string listDevices(const std::vector<DeviceDesc>& devices) {
  std::string s;
  for (const DeviceDesc& d : devices) {
    if (!s.empty()) s.append(", ");
    s.append(d.name).append(" (");
    if (d.ports.empty()) s.append("no ports");
    for (size_t i = 0; i < d.ports.size(); ++i) {
      if (i) s.append(" ");
      s.append("port ").append(std::to_string(d.ports[i].num)).append(d.ports[i].active ? " active" : " down");
    }
    s.append(")");
  }
  return s.empty() ? std::string("none") : s;
}

const PortDesc* firstActive(const DeviceDesc& d) {
  for (const PortDesc& p : d.ports)
    if (p.active) return &p;
  return nullptr;
}

}  // namespace

Status chooseDevice(const std::vector<DeviceDesc>& devices, const NodeInfo* node, int numa, const HcaSpec& spec,
                    DeviceChoice* out) {
  if (devices.empty()) return makeError(nodusSystemError, "verbs: no RDMA device (libibverbs lists none)");
  if (!spec.name.empty()) {
    for (size_t i = 0; i < devices.size(); ++i) {
      const DeviceDesc& d = devices[i];
      if (d.name != spec.name) continue;
      for (const PortDesc& p : d.ports) {
        if ((spec.port == 0 && p.active) || p.num == spec.port) {
          if (!p.active)
            return makeError(nodusSystemError, "verbs: NODUS_IB_HCA names %s port %d, which is not active (devices: %s)",
                             d.name.c_str(), spec.port, listDevices(devices).c_str());
          std::string why = "NODUS_IB_HCA=";
          why.append(spec.name);
          if (spec.port) why.append(":").append(std::to_string(spec.port));
          *out = {i, p.num, std::move(why)};
          return Status::ok();
        }
      }
      if (spec.port)
        return makeError(nodusSystemError, "verbs: NODUS_IB_HCA names %s port %d, which it does not have (devices: %s)",
                         d.name.c_str(), spec.port, listDevices(devices).c_str());
      return makeError(nodusSystemError, "verbs: NODUS_IB_HCA names %s, which has no active port (devices: %s)",
                       d.name.c_str(), listDevices(devices).c_str());
    }
    return makeError(nodusSystemError, "verbs: NODUS_IB_HCA names %s, which libibverbs does not list (devices: %s)",
                     spec.name.c_str(), listDevices(devices).c_str());
  }
  // Topology order first, then the rest as libibverbs lists them.
  std::vector<size_t> order;
  std::vector<std::string> reasons;
  if (node != nullptr) {
    for (const NicInfo* nic : node->nicsNear(numa)) {
      if (!nic->rdma) continue;
      for (size_t i = 0; i < devices.size(); ++i) {
        if (devices[i].name != nic->name || std::find(order.begin(), order.end(), i) != order.end()) continue;
        order.push_back(i);
        std::string why = nic->numa == numa ? "on the rank's NUMA node " : "nearest up to NUMA ";
        why.append(std::to_string(numa));
        reasons.push_back(std::move(why));
      }
    }
  }
  for (size_t i = 0; i < devices.size(); ++i) {
    if (std::find(order.begin(), order.end(), i) != order.end()) continue;
    order.push_back(i);
    reasons.push_back("not in the topology; first with an active port");
  }
  for (size_t k = 0; k < order.size(); ++k) {
    if (const PortDesc* p = firstActive(devices[order[k]])) {
      *out = {order[k], p->num, reasons[k]};
      return Status::ok();
    }
  }
  return makeError(nodusSystemError, "verbs: no active port on any RDMA device (devices: %s)", listDevices(devices).c_str());
}

namespace {

bool isZero(const std::array<uint8_t, 16>& g) {
  return std::all_of(g.begin(), g.end(), [](uint8_t b) { return b == 0; });
}
bool isLinkLocal(const std::array<uint8_t, 16>& g) { return g[0] == 0xfe && (g[1] & 0xc0) == 0x80; }
bool isIpv4Mapped(const std::array<uint8_t, 16>& g) {
  return std::all_of(g.begin(), g.begin() + 10, [](uint8_t b) { return b == 0; }) && g[10] == 0xff && g[11] == 0xff;
}

}  // namespace

Status chooseGid(const std::vector<GidDesc>& table, uint8_t linkLayer, int forced, const std::string& where,
                 GidDesc* out) {
  if (forced >= 0) {
    for (const GidDesc& g : table) {
      if (g.index != forced) continue;
      if (isZero(g.gid))
        return makeError(nodusInvalidArgument, "verbs: NODUS_IB_GID_INDEX=%d: GID %d of %s is not set", forced, forced,
                         where.c_str());
      *out = g;
      return Status::ok();
    }
    return makeError(nodusInvalidArgument, "verbs: NODUS_IB_GID_INDEX=%d: %s has no GID %d (%zu in its table)", forced,
                     where.c_str(), forced, table.size());
  }
  if (linkLayer == kLinkInfiniband) {
    // LID routing; GID 0 (the port GID) only for a GRH across subnets.
    for (const GidDesc& g : table)
      if (g.index == 0) {
        *out = g;
        return Status::ok();
      }
    *out = GidDesc{};
    return Status::ok();
  }
  auto rank = [](const GidDesc& g) {
    if (isZero(g.gid)) return 99;
    const int scope = isIpv4Mapped(g.gid) ? 0 : isLinkLocal(g.gid) ? 2 : 1;
    switch (g.type) {
      case GidType::RoceV2: return scope;
      case GidType::RoceV1: return 10 + scope;
      default: return 20 + scope;
    }
  };
  const GidDesc* best = nullptr;
  for (const GidDesc& g : table)
    if (rank(g) < 99 && (best == nullptr || rank(g) < rank(*best))) best = &g;
  if (best == nullptr)
    return makeError(nodusSystemError, "verbs: %s is on RoCE but has no GID set (no IP address on its interface?)",
                     where.c_str());
  *out = *best;
  return Status::ok();
}

uint8_t pathMtu(uint8_t localMtu, uint8_t remoteMtu) { return std::min(localMtu, remoteMtu); }

int mtuBytes(uint8_t mtu) { return mtu >= 1 && mtu <= 5 ? 128 << mtu : 0; }

QpTransition qpToInit(const LocalPath& local) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_INIT;
  t.attr.pkey_index = 0;
  t.attr.port_num = local.port;
  t.attr.qp_access_flags = kRemoteAccess;
  t.mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  return t;
}

QpTransition qpToRtr(const LocalPath& local, const QpInfo& remote) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTR;
  t.attr.path_mtu = static_cast<ibv_mtu>(pathMtu(local.mtu, remote.mtu));
  t.attr.dest_qp_num = remote.qpn;
  t.attr.rq_psn = remote.psn;
  // We never serve RDMA reads or atomics (see kRemoteAccess); one keeps the
  // attribute valid on every provider.
  t.attr.max_dest_rd_atomic = 1;
  t.attr.min_rnr_timer = kMinRnrTimer;
  ibv_ah_attr& ah = t.attr.ah_attr;
  ah.port_num = local.port;
  ah.sl = 0;
  ah.src_path_bits = 0;
  ah.dlid = remote.lid;
  // RoCE has no LIDs: every packet carries a GRH addressed by GID. On
  // InfiniBand a GRH is needed only when the peer has no LID to route by.
  if (local.linkLayer == kLinkEthernet || remote.lid == 0) {
    ah.is_global = 1;
    memcpy(ah.grh.dgid.raw, remote.gid.data(), remote.gid.size());
    ah.grh.sgid_index = static_cast<uint8_t>(local.gidIndex);
    ah.grh.hop_limit = 255;
    ah.grh.flow_label = 0;
    ah.grh.traffic_class = 0;
  }
  t.mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
           IBV_QP_MIN_RNR_TIMER;
  return t;
}

QpTransition qpToRts(uint32_t localPsn) {
  QpTransition t;
  t.attr.qp_state = IBV_QPS_RTS;
  t.attr.sq_psn = localPsn;
  t.attr.timeout = kAckTimeout;
  t.attr.retry_cnt = kRetryCount;
  t.attr.rnr_retry = kRnrRetry;
  t.attr.max_rd_atomic = 1;
  t.mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
  return t;
}

}  // namespace nodus::net::verbs
