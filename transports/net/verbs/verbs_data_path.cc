// VerbsComm's data path. A receive posts a receive work request for the
// immediate and sends the sender a clear-to-send naming its buffer; the
// sender RDMA-writes the message there with its size as the immediate.
#include <arpa/inet.h>

#include <cstring>

#include "transports/net/verbs/verbs_comm.h"

namespace nodus::net::verbs {

namespace {

// Work request ids: the kind in the top byte, a sequence number or CTS
// buffer index below.
enum : uint64_t { kWrWrite = 1ull << 56, kWrImmRecv = 2ull << 56, kWrCtsRecv = 3ull << 56, kWrCtsSend = 4ull << 56 };
constexpr uint64_t kWrKindMask = 0xffull << 56;

}  // namespace

Status VerbsComm::post(std::byte* data, size_t bytes, const VerbsMemory& mr, Request** out) {
  if (!error_.isOk()) return error_;
  if (bytes > kMaxMessageBytes)
    return makeError(nodusInvalidArgument, "verbs: a message of %zu bytes to %s exceeds the %llu-byte limit", bytes,
                     who().c_str(), static_cast<unsigned long long>(kMaxMessageBytes));
  if (requests_.size() >= kMaxInflight)
    return makeError(nodusInternalError, "verbs: more than %u requests in flight with %s", kMaxInflight, who().c_str());
  const uintptr_t a = reinterpret_cast<uintptr_t>(data);
  if (a < mr.region->begin || a + bytes > mr.region->end)
    return makeError(nodusInvalidArgument, "verbs: a buffer for %s lies outside the memory region given with it",
                     who().c_str());
  requests_.emplace_back();
  VerbsRequest& r = requests_.back();
  r.owner = this;
  r.seq = nextSeq_++;
  r.data = data;
  r.bytes = bytes;
  r.lkey = mr.mr()->lkey;
  r.rkey = mr.mr()->rkey;
  *out = &r;
  Status s = sending_ ? Status::ok() : postReceive(r);
  if (!s.isOk()) fail(s);
  return s.isOk() ? Status::ok() : error_;
}

Status VerbsComm::test(VerbsRequest* r, bool* done, size_t* bytes) {
  *done = false;
  if (!r->done && error_.isOk()) {
    Status s = progress();
    if (!s.isOk()) fail(s);
  }
  if (r->done) {
    *done = true;
    *bytes = r->bytes;
    r->reported = true;
    while (!requests_.empty() && requests_.front().reported) {
      requests_.pop_front();
      ++frontSeq_;
    }
    return Status::ok();
  }
  return error_;
}

Status VerbsComm::postCtsRecv(uint32_t slot) {
  ibv_sge sge{reinterpret_cast<uintptr_t>(&ctsBuf_[slot * kCtsBytes]), kCtsBytes, ctsMr_->lkey};
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = kWrCtsRecv | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  if (int e = ibv_post_recv(qp_, &wr, &bad); e != 0)
    return makeError(nodusSystemError, "verbs: ibv_post_recv(CTS, %s): %s", dev_->where().c_str(), strerror(e));
  return Status::ok();
}

Status VerbsComm::postReceive(VerbsRequest& r) {
  ibv_recv_wr wr{};
  ibv_recv_wr* bad = nullptr;
  wr.wr_id = kWrImmRecv | r.seq;
  wr.num_sge = 0;  // the data comes by RDMA write; only the immediate lands here
  if (int e = ibv_post_recv(qp_, &wr, &bad); e != 0)
    return makeError(nodusSystemError, "verbs: ibv_post_recv(%s, from %s): %s", dev_->where().c_str(), who().c_str(),
                     strerror(e));
  return ready_ ? sendCts(r) : Status::ok();
}

Status VerbsComm::sendCts(VerbsRequest& r) {
  Cts cts;
  cts.seq = r.seq;
  cts.rkey = r.rkey;
  cts.addr = reinterpret_cast<uintptr_t>(r.data);
  cts.capacity = static_cast<uint32_t>(r.bytes);
  uint8_t* buf = &ctsBuf_[(r.seq % kMaxInflight) * kCtsBytes];
  encodeCts(cts, buf);
  ibv_sge sge{reinterpret_cast<uintptr_t>(buf), kCtsBytes, ctsMr_->lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = kWrCtsSend | r.seq;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED | (inline_ ? IBV_SEND_INLINE : 0);
  if (int e = ibv_post_send(qp_, &wr, &bad); e != 0)
    return makeError(nodusSystemError, "verbs: ibv_post_send(CTS to %s on %s): %s", who().c_str(),
                     dev_->where().c_str(), strerror(e));
  r.posted = true;
  return Status::ok();
}

Status VerbsComm::postWrite(VerbsRequest& r, const Cts& cts) {
  if (r.bytes > cts.capacity)
    return makeError(nodusInvalidUsage, "verbs: a message of %zu bytes to %s exceeds the %u bytes its receive accepts",
                     r.bytes, who().c_str(), cts.capacity);
  ibv_sge sge{reinterpret_cast<uintptr_t>(r.data), static_cast<uint32_t>(r.bytes), r.lkey};
  ibv_send_wr wr{};
  ibv_send_wr* bad = nullptr;
  wr.wr_id = kWrWrite | r.seq;
  wr.sg_list = &sge;
  wr.num_sge = r.bytes ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(static_cast<uint32_t>(r.bytes));
  wr.wr.rdma.remote_addr = cts.addr;
  wr.wr.rdma.rkey = cts.rkey;
  if (int e = ibv_post_send(qp_, &wr, &bad); e != 0)
    return makeError(nodusSystemError, "verbs: ibv_post_send(RDMA write to %s on %s): %s", who().c_str(),
                     dev_->where().c_str(), strerror(e));
  r.posted = true;
  return Status::ok();
}

VerbsRequest* VerbsComm::bySeq(uint32_t seq) {
  const uint32_t i = seq - frontSeq_;
  return i < requests_.size() ? &requests_[i] : nullptr;
}

Status VerbsComm::completion(const ibv_wc& wc) {
  const uint64_t kind = wc.wr_id & kWrKindMask;
  const uint32_t low = static_cast<uint32_t>(wc.wr_id & 0xffffffffu);
  if (wc.status != IBV_WC_SUCCESS) {
    if (wc.status == IBV_WC_WR_FLUSH_ERR)
      return makeError(nodusRemoteError, "verbs: the connection with %s on %s was shut down", who().c_str(),
                       dev_->where().c_str());
    return makeError(nodusRemoteError, "verbs: %s with %s on %s failed: %s (status %d, vendor error 0x%x)",
                     kind == kWrWrite ? "an RDMA write" : kind == kWrImmRecv ? "a receive" : "a clear-to-send",
                     who().c_str(), dev_->where().c_str(), ibv().wc_status_str(wc.status), static_cast<int>(wc.status),
                     wc.vendor_err);
  }
  if (kind == kWrCtsSend) return Status::ok();
  if (kind == kWrCtsRecv) {
    if (!sending_ || low >= kMaxInflight) return makeError(nodusInternalError, "verbs: a stray CTS completion");
    Cts cts;
    NODUS_TRY(decodeCts(&ctsBuf_[low * kCtsBytes], wc.byte_len, ctsExpected_, who().c_str(), &cts));
    ++ctsExpected_;
    ctsReady_.push_back(cts);
    return postCtsRecv(low);  // before any write: the receiver may send the next CTS once it completes
  }
  VerbsRequest* r = bySeq(low);
  if (r == nullptr || r->done)
    return makeError(nodusRemoteError, "verbs: a completion from %s for no request in flight", who().c_str());
  if (kind == kWrImmRecv) {
    if (wc.opcode != IBV_WC_RECV_RDMA_WITH_IMM || (wc.wc_flags & IBV_WC_WITH_IMM) == 0)
      return makeError(nodusRemoteError, "verbs: %s sent a message that is not an RDMA write with immediate", who().c_str());
    const uint32_t size = ntohl(wc.imm_data);
    if (size > r->bytes)
      return makeError(nodusRemoteError, "verbs: %s wrote %u bytes into a receive of %zu", who().c_str(), size, r->bytes);
    r->bytes = size;
  }
  r->done = true;
  return Status::ok();
}

Status VerbsComm::progress() {
  const IbvApi& api = ibv();
  // Edge-triggered like the sockets: consume the channel's events, re-arm,
  // then drain the CQ, so that any completion after the drain raises a new
  // event (and an epoll edge).
  for (;;) {
    ibv_cq* cq = nullptr;
    void* cqContext = nullptr;
    if (api.get_cq_event(channel_, &cq, &cqContext) != 0) break;
    ++unacked_;
    armed_ = false;
  }
  if (unacked_ >= 64) {
    api.ack_cq_events(cq_, unacked_);
    unacked_ = 0;
  }
  if (!armed_) {
    if (int e = ibv_req_notify_cq(cq_, 0); e != 0)
      return makeError(nodusSystemError, "verbs: ibv_req_notify_cq(%s): %s", dev_->name.c_str(), strerror(e));
    armed_ = true;
  }
  ibv_wc wc[16];
  for (;;) {
    const int n = ibv_poll_cq(cq_, 16, wc);
    if (n < 0) return makeError(nodusSystemError, "verbs: ibv_poll_cq(%s) failed", dev_->name.c_str());
    for (int i = 0; i < n; ++i) NODUS_TRY(completion(wc[i]));
    if (n < 16) break;
  }
  if (sending_) {
    for (VerbsRequest& r : requests_) {
      if (r.posted) continue;
      if (ctsReady_.empty()) break;
      NODUS_TRY(postWrite(r, ctsReady_.front()));
      ctsReady_.pop_front();
    }
  }
  return progressSocket();
}

void VerbsComm::fail(const Status& s) {
  if (!error_.isOk()) return;
  error_ = s;
  shutdownNow();  // the peer sees it at once
}

}  // namespace nodus::net::verbs
