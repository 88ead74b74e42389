// libibverbs, loaded at run time: nodus compiles against the rdma-core
// headers (types, constants, the static inline verbs that dispatch through
// the device context's ops) but never links the library, so libnodus.so
// loads and runs tcp on hosts without it.
//
// Only the exported entry points the verbs net calls are resolved here.
// ibv_post_send, ibv_post_recv, ibv_poll_cq and ibv_req_notify_cq are
// static inline in verbs.h and call through context->ops: they need no
// symbol. The members drop the ibv_ prefix because verbs.h defines some of
// those names (ibv_reg_mr, ibv_query_port) as function-like macros.
#pragma once

#include <infiniband/verbs.h>

#include "base/status.h"

namespace nodus::net::verbs {

struct IbvApi {
  ibv_device** (*get_device_list)(int* num);
  void (*free_device_list)(ibv_device** list);
  const char* (*get_device_name)(ibv_device* device);
  ibv_context* (*open_device)(ibv_device* device);
  int (*close_device)(ibv_context* context);
  // The exported compat form; queryPort() below prefers the context's op.
  int (*query_port_compat)(ibv_context* context, uint8_t port, _compat_ibv_port_attr* attr);
  int (*query_device)(ibv_context* context, ibv_device_attr* attr);
  int (*query_gid)(ibv_context* context, uint8_t port, int index, ibv_gid* gid);
  // Optional (rdma-core >= v31, IBVERBS_1.11): the GID's type (IB, RoCE v1,
  // RoCE v2). Null when the library is older; the type is then read from sysfs.
  int (*query_gid_ex)(ibv_context* context, uint32_t port, uint32_t index, ibv_gid_entry* entry, uint32_t flags,
                      size_t entrySize);
  ibv_pd* (*alloc_pd)(ibv_context* context);
  int (*dealloc_pd)(ibv_pd* pd);
  ibv_mr* (*reg_mr)(ibv_pd* pd, void* addr, size_t length, int access);
  int (*dereg_mr)(ibv_mr* mr);
  ibv_comp_channel* (*create_comp_channel)(ibv_context* context);
  int (*destroy_comp_channel)(ibv_comp_channel* channel);
  ibv_cq* (*create_cq)(ibv_context* context, int cqe, void* cqContext, ibv_comp_channel* channel, int vector);
  int (*destroy_cq)(ibv_cq* cq);
  int (*get_cq_event)(ibv_comp_channel* channel, ibv_cq** cq, void** cqContext);
  void (*ack_cq_events)(ibv_cq* cq, unsigned int nevents);
  ibv_qp* (*create_qp)(ibv_pd* pd, ibv_qp_init_attr* attr);
  int (*modify_qp)(ibv_qp* qp, ibv_qp_attr* attr, int mask);
  int (*destroy_qp)(ibv_qp* qp);
  const char* (*wc_status_str)(ibv_wc_status status);

  // ibv_query_port as verbs.h's inline wrapper does it, without the symbol.
  int queryPort(ibv_context* context, uint8_t port, ibv_port_attr* attr) const;
};

// The process's libibverbs ("libibverbs.so.1"),
// loaded on first use and kept for the life of the process (providers it
// loads cannot be unloaded safely). Fails, naming the library and dlerror,
// where it is absent or lacks a required symbol; the answer is the same on
// every later call.
Status loadIbv(const IbvApi** out);

}  // namespace nodus::net::verbs
