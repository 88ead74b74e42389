#include "transports/net/verbs/ibv_loader.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>

namespace nodus::net::verbs {
namespace {

constexpr const char* kLibrary = "libibverbs.so.1";

struct Loaded {
  IbvApi api{};
  Status status;
};

// Resolves `name` into `*fn`; false (with the reason in *why) if absent.
template <typename Fn>
bool resolve(void* lib, const char* name, Fn* fn, std::string* why) {
  dlerror();
  void* sym = dlsym(lib, name);
  if (sym == nullptr) {
    const char* err = dlerror();
    if (why->empty()) *why = std::string(name) + ": " + (err ? err : "not found");
    return false;
  }
  // POSIX guarantees object and function pointers convert through dlsym.
  *fn = reinterpret_cast<Fn>(sym);
  return true;
}

Loaded load() {
  Loaded l;
  // RTLD_LOCAL: nothing of rdma-core leaks into the global namespace of the
  // application (which may load another copy of its own).
  void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* err = dlerror();
    l.status = makeError(nodusSystemError, "cannot load %s (%s)", kLibrary, err ? err : "unknown error");
    return l;
  }
  IbvApi& a = l.api;
  std::string why;
  bool ok = true;
  ok &= resolve(lib, "ibv_get_device_list", &a.get_device_list, &why);
  ok &= resolve(lib, "ibv_free_device_list", &a.free_device_list, &why);
  ok &= resolve(lib, "ibv_get_device_name", &a.get_device_name, &why);
  ok &= resolve(lib, "ibv_open_device", &a.open_device, &why);
  ok &= resolve(lib, "ibv_close_device", &a.close_device, &why);
  ok &= resolve(lib, "ibv_query_port", &a.query_port_compat, &why);
  ok &= resolve(lib, "ibv_query_device", &a.query_device, &why);
  ok &= resolve(lib, "ibv_query_gid", &a.query_gid, &why);
  ok &= resolve(lib, "ibv_alloc_pd", &a.alloc_pd, &why);
  ok &= resolve(lib, "ibv_dealloc_pd", &a.dealloc_pd, &why);
  ok &= resolve(lib, "ibv_reg_mr", &a.reg_mr, &why);
  ok &= resolve(lib, "ibv_dereg_mr", &a.dereg_mr, &why);
  ok &= resolve(lib, "ibv_create_comp_channel", &a.create_comp_channel, &why);
  ok &= resolve(lib, "ibv_destroy_comp_channel", &a.destroy_comp_channel, &why);
  ok &= resolve(lib, "ibv_create_cq", &a.create_cq, &why);
  ok &= resolve(lib, "ibv_destroy_cq", &a.destroy_cq, &why);
  ok &= resolve(lib, "ibv_get_cq_event", &a.get_cq_event, &why);
  ok &= resolve(lib, "ibv_ack_cq_events", &a.ack_cq_events, &why);
  ok &= resolve(lib, "ibv_create_qp", &a.create_qp, &why);
  ok &= resolve(lib, "ibv_modify_qp", &a.modify_qp, &why);
  ok &= resolve(lib, "ibv_destroy_qp", &a.destroy_qp, &why);
  ok &= resolve(lib, "ibv_wc_status_str", &a.wc_status_str, &why);
  if (!ok) {
    l.status = makeError(nodusSystemError, "%s lacks a verbs entry point nodus needs (%s)", kLibrary, why.c_str());
    dlclose(lib);
    return l;
  }
  std::string ignored;
  if (!resolve(lib, "_ibv_query_gid_ex", &a.query_gid_ex, &ignored)) a.query_gid_ex = nullptr;
  return l;
}

}  // namespace

int IbvApi::queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const {
  // What verbs.h's ___ibv_query_port does: the extended op when the
  // provider has one (it fills the whole struct), else the compat call.
  verbs_context* vctx = verbs_get_ctx_op(context, query_port);
  if (vctx != nullptr) return vctx->query_port(context, port, attr, sizeof(*attr));
  memset(attr, 0, sizeof(*attr));
  return query_port_compat(context, port, reinterpret_cast<_compat_ibv_port_attr*>(attr));
}

Status loadIbv(const IbvApi** out) {
  // Loaded once per process and never unloaded: a documented process-wide
  // singleton, immutable after its first initialisation.
  static const Loaded loaded = load();
  if (!loaded.status.isOk()) return loaded.status;
  *out = &loaded.api;
  return Status::ok();
}

}  // namespace nodus::net::verbs
