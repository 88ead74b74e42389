#include "transports/net/verbs/verbs_device.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/log.h"
#include "base/settings.h"

namespace nodus::net::verbs {

const IbvApi& ibv() {
  const IbvApi* api = nullptr;
  (void)loadIbv(&api);  // only called once a net exists, i.e. after a successful load
  return *api;
}

Status describeDevices(const IbvApi& api, DeviceList* raw, std::vector<DeviceDesc>* out) {
  errno = 0;
  raw->list = api.get_device_list(&raw->count);
  // Without kernel RDMA support the list is null (ENOSYS) rather than empty.
  if (raw->list == nullptr)
    return makeError(nodusSystemError, "verbs: no RDMA device (ibv_get_device_list: %s)",
                     errno ? strerror(errno) : "no list");
  for (int i = 0; i < raw->count; ++i) {
    DeviceDesc d;
    const char* name = api.get_device_name(raw->list[i]);
    d.name = name ? name : "?";
    if (ibv_context* ctx = api.open_device(raw->list[i])) {
      ibv_device_attr attr{};
      if (api.query_device(ctx, &attr) == 0) {
        for (uint8_t p = 1; p <= attr.phys_port_cnt; ++p) {
          ibv_port_attr pa{};
          if (api.queryPort(ctx, p, &pa) != 0) continue;
          d.ports.push_back({p, pa.state == IBV_PORT_ACTIVE, static_cast<uint8_t>(pa.active_mtu),
                             pa.link_layer == IBV_LINK_LAYER_ETHERNET ? kLinkEthernet : kLinkInfiniband});
        }
      }
      api.close_device(ctx);
    }
    out->push_back(std::move(d));
  }
  return Status::ok();
}

namespace {

GidType sysfsGidType(const std::string& dev, int port, int index) {
  const std::string path =
      "/sys/class/infiniband/" + dev + "/ports/" + std::to_string(port) + "/gid_attrs/types/" + std::to_string(index);
  char text[32] = {};
  if (FILE* f = fopen(path.c_str(), "r")) {
    if (fgets(text, sizeof(text), f) == nullptr) text[0] = '\0';
    fclose(f);
  }
  if (strncmp(text, "RoCE v2", 7) == 0) return GidType::RoceV2;
  if (strncmp(text, "IB/RoCE v1", 10) == 0) return GidType::RoceV1;
  return GidType::Unknown;
}

}  // namespace

Status openDevice(const NetContext& ctx, std::shared_ptr<Device>* out) {
  const IbvApi* api = nullptr;
  NODUS_TRY(loadIbv(&api));
  HcaSpec spec;
  NODUS_TRY(parseHcaSpec(ctx.settings->get(param::kIbHca), &spec));
  DeviceList raw;
  std::vector<DeviceDesc> devices;
  NODUS_TRY(describeDevices(*api, &raw, &devices));
  DeviceChoice choice;
  NODUS_TRY(chooseDevice(devices, ctx.node, ctx.numa, spec, &choice));
  auto d = std::make_shared<Device>();
  d->name = devices[choice.device].name;
  d->port = choice.port;
  d->ctx = api->open_device(raw.list[choice.device]);
  if (d->ctx == nullptr) return systemError("verbs: ibv_open_device(%s)", d->name.c_str());
  if (api->queryPort(d->ctx, d->port, &d->attr) != 0) return systemError("verbs: ibv_query_port(%s)", d->where().c_str());
  d->pd = api->alloc_pd(d->ctx);
  if (d->pd == nullptr) return systemError("verbs: ibv_alloc_pd(%s)", d->name.c_str());
  std::vector<GidDesc> table;
  for (int i = 0; i < std::min(d->attr.gid_tbl_len, 256); ++i) {
    GidDesc g;
    g.index = i;
    ibv_gid raw{};
    if (api->query_gid(d->ctx, d->port, i, &raw) != 0) continue;
    memcpy(g.gid.data(), raw.raw, 16);
    ibv_gid_entry e{};
    if (api->query_gid_ex && api->query_gid_ex(d->ctx, d->port, static_cast<uint32_t>(i), &e, 0, sizeof(e)) == 0)
      g.type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? GidType::RoceV2
               : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? GidType::RoceV1
                                                    : GidType::Ib;
    else
      g.type = sysfsGidType(d->name, d->port, i);
    table.push_back(g);
  }
  const uint8_t link = d->path().linkLayer;
  NODUS_TRY(chooseGid(table, link, static_cast<int>(ctx.settings->get(param::kIbGidIndex)), d->where(), &d->gid));
  NODUS_INFO(ctx.rank, "verbs: %s (%s), %s, MTU %d, GID index %d%s", d->where().c_str(), choice.why.c_str(),
             link == kLinkEthernet ? "RoCE" : "InfiniBand", mtuBytes(static_cast<uint8_t>(d->attr.active_mtu)),
             d->gid.index,
             link != kLinkEthernet               ? ""
             : d->gid.type == GidType::RoceV2 ? " (RoCE v2)"
             : d->gid.type == GidType::RoceV1 ? " (RoCE v1)"
                                              : "");
  *out = std::move(d);
  return Status::ok();
}

}  // namespace nodus::net::verbs
