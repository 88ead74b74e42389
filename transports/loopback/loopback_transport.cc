#include "transports/loopback/loopback_transport.h"

#include <sys/mman.h>

#include <cstring>

#include "base/bootstrap.h"
#include "transports/slot_ring.h"

namespace nodus {
namespace {

// One rank's receiving side: its doorbell and one ring per sending peer.
// Shared by the peers that send to it (they keep it alive while they may
// still touch it), freed when the last of them lets go.
class Endpoint : public std::enable_shared_from_this<Endpoint> {
 public:
  Endpoint(int nranks, size_t ringSize) : ringSize_(ringSize), rings_(nranks, nullptr) {}
  ~Endpoint() {
    for (void* r : rings_)
      if (r) munmap(r, ringSize_);
  }
  Status addRing(int from) {
    // Untouched pages cost nothing: a ring's memory is faulted in by its first use.
    void* p = mmap(nullptr, ringSize_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return systemError("mmap(%zu bytes for a loopback ring)", ringSize_);
    new (p) RingHeader();
    rings_[from] = p;
    return Status::ok();
  }
  void* ring(int from) { return rings_[from]; }
  Doorbell bell;

 private:
  size_t ringSize_;
  std::vector<void*> rings_;
};

class LoopbackTransport final : public Transport {
 public:
  const char* name() const override { return "loopback"; }

  Status connect(const ConnectRequest& req, Connections& out) override {
    const size_t size = ringBytes(req.slots, req.slotBytes);
    auto me = std::make_shared<Endpoint>(req.nranks, size);
    for (int peer : req.peers) NODUS_TRY(me->addRing(peer));
    std::vector<Endpoint*> all(req.nranks);
    all[req.rank] = me.get();
    NODUS_TRY(req.bootstrap->allGather(all.data(), sizeof(Endpoint*)));
    out.send.resize(req.nranks);
    out.recv.resize(req.nranks);
    out.peerDoorbells.assign(req.nranks, nullptr);
    for (int peer : req.peers) {
      auto other = all[peer]->shared_from_this();
      // Threads of one process: slots may carry addresses (postReference).
      out.send[peer] = std::make_unique<RingSender>(other->ring(req.rank), req.slots, req.slotBytes, &other->bell, true);
      out.recv[peer] = std::make_unique<RingReceiver>(me->ring(peer), req.slots, req.slotBytes, &other->bell, true);
      out.peerDoorbells[peer] = &other->bell;
      held_.push_back(std::move(other));
    }
    // The peers' threads ring the bell inside the shared endpoint, which
    // outlives this rank while they may still touch it: provide that one.
    if (!req.peers.empty()) out.doorbell = &me->bell;
    held_.push_back(me);
    // Nobody may return (and possibly be destroyed) before every peer holds its references.
    return req.bootstrap->barrier();
  }

  Status checkPeer(int) override { return Status::ok(); }  // threads do not die alone

 private:
  std::vector<std::shared_ptr<Endpoint>> held_;
};

}  // namespace

std::unique_ptr<Transport> makeLoopbackTransport() { return std::make_unique<LoopbackTransport>(); }

}  // namespace nodus
