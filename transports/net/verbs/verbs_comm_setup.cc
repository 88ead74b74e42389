// VerbsComm's set-up: the queue pair, its completion queue and channel,
// the transitions to RTS, and the side channel until both ends are ready.
#include <fcntl.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "transports/net/verbs/verbs_comm.h"

namespace nodus::net::verbs {

VerbsComm::~VerbsComm() {
  const IbvApi& api = ibv();
  if (qp_) api.destroy_qp(qp_);
  if (cq_) {
    if (unacked_) api.ack_cq_events(cq_, unacked_);
    api.destroy_cq(cq_);
  }
  if (channel_) api.destroy_comp_channel(channel_);
  if (ctsMr_) api.dereg_mr(ctsMr_);
}

Status VerbsComm::create() {
  const IbvApi& api = ibv();
  channel_ = api.create_comp_channel(dev_->ctx);
  if (channel_ == nullptr) return systemError("verbs: ibv_create_comp_channel(%s)", dev_->name.c_str());
  const int flags = fcntl(channel_->fd, F_GETFL);
  if (flags < 0 || fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK) != 0)
    return systemError("verbs: making the completion channel of %s non-blocking", dev_->name.c_str());
  cq_ = api.create_cq(dev_->ctx, kCqEntries, nullptr, channel_, 0);
  if (cq_ == nullptr) return systemError("verbs: ibv_create_cq(%s, %d entries)", dev_->name.c_str(), kCqEntries);
  ibv_qp_init_attr init{};
  init.send_cq = cq_;
  init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = kMaxInflight;
  init.cap.max_recv_wr = kMaxInflight;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  init.cap.max_inline_data = kCtsBytes;
  qp_ = api.create_qp(dev_->pd, &init);
  if (qp_ == nullptr) {
    // Some providers refuse inline data: CTS then go from registered memory.
    init.cap.max_inline_data = 0;
    qp_ = api.create_qp(dev_->pd, &init);
  }
  if (qp_ == nullptr) return systemError("verbs: ibv_create_qp(%s, RC)", dev_->where().c_str());
  inline_ = init.cap.max_inline_data >= kCtsBytes;
  ctsBuf_.assign(static_cast<size_t>(kMaxInflight) * kCtsBytes, 0);
  ctsMr_ = api.reg_mr(dev_->pd, ctsBuf_.data(), ctsBuf_.size(), IBV_ACCESS_LOCAL_WRITE);
  if (ctsMr_ == nullptr) return systemError("verbs: ibv_reg_mr(%s, CTS buffers)", dev_->name.c_str());
  NODUS_TRY(modify(qpToInit(dev_->path()), "INIT"));
  if (sending_)
    for (uint32_t i = 0; i < kMaxInflight; ++i) NODUS_TRY(postCtsRecv(i));
  uint32_t psn = 0;
  if (getrandom(&psn, sizeof(psn), 0) != sizeof(psn)) return systemError("getrandom");
  local_.qpn = qp_->qp_num;
  local_.psn = psn & 0xffffff;
  local_.lid = dev_->attr.lid;
  local_.port = dev_->port;
  local_.mtu = static_cast<uint8_t>(dev_->attr.active_mtu);
  local_.linkLayer = dev_->path().linkLayer;
  local_.gidIndex = static_cast<uint8_t>(dev_->gid.index);
  local_.gid = dev_->gid.gid;
  return Status::ok();
}

Status VerbsComm::connectTo(const QpInfo& remote) {
  NODUS_TRY(modify(qpToRtr(dev_->path(), remote), "RTR"));
  NODUS_TRY(modify(qpToRts(local_.psn), "RTS"));
  NODUS_TRACE(-1, "verbs: QP %u on %s connected to QP %u of %s (path MTU %d)", local_.qpn, dev_->where().c_str(),
              remote.qpn, who().c_str(), mtuBytes(pathMtu(local_.mtu, remote.mtu)));
  return Status::ok();
}

void VerbsComm::fds(std::vector<int>* out) const {
  out->push_back(channel_->fd);
  out->push_back(sock_.get());
}

void VerbsComm::shutdownNow() {
  ::shutdown(sock_.get(), SHUT_RDWR);
  // To ERR: outstanding work is flushed and the peer's next packet fails.
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  if (qp_) (void)ibv().modify_qp(qp_, &attr, IBV_QP_STATE);
}

Status VerbsComm::modify(QpTransition t, const char* state) {
  if (ibv().modify_qp(qp_, &t.attr, t.mask) != 0)
    return systemError("verbs: moving QP %u on %s to %s (with %s)", qp_->qp_num, dev_->where().c_str(), state,
                       who().c_str());
  return Status::ok();
}

Status VerbsComm::progressSocket() {
  if (ready_) {
    char c;
    const ssize_t k = recv(sock_.get(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k == 0) return makeError(nodusRemoteError, "verbs: %s closed the connection (it exited, failed or was killed)", who().c_str());
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
      return makeError(nodusRemoteError, "verbs: the connection with %s failed (%s)", who().c_str(), strerror(errno));
    if (k > 0) return makeError(nodusRemoteError, "verbs: %s sent unexpected bytes on the side channel", who().c_str());
    return Status::ok();
  }
  const size_t want = sending_ ? kQpInfoBytes : 1;
  while (handshakeGot_ < want) {
    const ssize_t k = recv(sock_.get(), handshake_ + handshakeGot_, want - handshakeGot_, MSG_DONTWAIT);
    if (k > 0) {
      handshakeGot_ += static_cast<size_t>(k);
      continue;
    }
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return Status::ok();
    return makeError(nodusRemoteError, "verbs: %s closed the connection during set-up", who().c_str());
  }
  if (sending_) {
    QpInfo remote;
    NODUS_TRY(decodeQpInfo(handshake_, kQpInfoBytes, who().c_str(), &remote));
    NODUS_TRY(connectTo(remote));
    const uint8_t one = 1;  // our QP takes packets now: the receiver may send CTS
    NODUS_TRY(sendAll(sock_.get(), &one, 1, Clock::now() + kHelloTimeout));
  } else if (handshake_[0] != 1) {
    return makeError(nodusRemoteError, "verbs: %s sent a malformed ready signal", who().c_str());
  }
  ready_ = true;
  if (!sending_)
    for (VerbsRequest& r : requests_)
      if (!r.posted) NODUS_TRY(sendCts(r));
  return Status::ok();
}

}  // namespace nodus::net::verbs
