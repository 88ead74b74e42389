// The point-to-point operations of ProcessGroupNodus, and the single sends
// and receives the collectives are built from.
#include <string>
#include <utility>
#include <vector>

#include "errors.h"
#include "process_group_nodus.h"
#include "tensor_checks.h"

namespace nodus_torch {

using c10d::OpType;

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) {
  const std::string op = "send";
  at::Tensor t = single(tensors, op);
  auto w = work(OpType::SEND, "nodus:send", op, {t}, c10d::kUnsetTimeout);
#if TORCH_VERSION_MAJOR < 2
  if (coalescing_) {
    deferred_.push_back(Deferred{w, true, w->input(t).data_ptr(), t.nbytes(), dstRank});
    return w;
  }
#endif
  return launch(w, [&] { send(*w, w->input(t).data_ptr(), t.nbytes(), dstRank, op); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) {
  const std::string op = "recv";
  at::Tensor t = single(tensors, op);
  auto w = work(OpType::RECV, "nodus:recv", op, {t}, c10d::kUnsetTimeout);
#if TORCH_VERSION_MAJOR < 2
  if (coalescing_) {
    deferred_.push_back(Deferred{w, false, w->output(t, false).data_ptr(), t.nbytes(), srcRank});
    return w;
  }
#endif
  return launch(w, [&] { recv(*w, w->output(t, false).data_ptr(), t.nbytes(), srcRank, op); });
}

#if TORCH_VERSION_MAJOR < 2
void ProcessGroupNodus::endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /*reqs*/) {
  coalescing_ = false;
  std::vector<Deferred> ops = std::move(deferred_);
  deferred_.clear();
  if (ops.empty()) return;
  {
    std::lock_guard<std::mutex> lock(issueMu_);
    nodusGroupStart();
    for (Deferred& d : ops) {
      nodusRequest_t r = nullptr;
      nodusResult_t rc = d.isSend ? nodusIsend(d.buf, d.bytes, nodusUint8, d.peer, comm_, &r)
                                  : nodusIrecv(d.buf, d.bytes, nodusUint8, d.peer, comm_, &r);
      if (rc != nodusSuccess) d.work->issueFailed(nodusError(rc));
      else d.work->addRequest(r);
    }
    nodusResult_t rc = nodusGroupEnd();
    if (rc != nodusSuccess) {
      const std::string msg = nodusError(rc);
      for (Deferred& d : ops) d.work->issueFailed(msg);
    }
  }
  for (Deferred& d : ops) poller_->push(d.work);
}
#endif

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::recvAnysource(std::vector<at::Tensor>& /*tensors*/, int /*tag*/) {
  raise("recv", "receiving from any source is not supported: pass src");
}

void ProcessGroupNodus::send(NodusWork& w, const void* buf, size_t bytes, int peer, const std::string& op) {
  nodusRequest_t r;
  check(nodusIsend(buf, bytes, nodusUint8, peer, comm_, &r), op);
  w.addRequest(r);
}

void ProcessGroupNodus::recv(NodusWork& w, void* buf, size_t bytes, int peer, const std::string& op) {
  nodusRequest_t r;
  check(nodusIrecv(buf, bytes, nodusUint8, peer, comm_, &r), op);
  w.addRequest(r);
}

}  // namespace nodus_torch
