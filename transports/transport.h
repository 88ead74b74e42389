// Transport: how bytes move between two ranks. One small interface, so the
// executor never knows which transport runs.
//
// A connection is one direction between one pair of ranks: a FIFO of
// fixed-size slots. The sender acquires a free slot, fills it (the executor
// may reduce straight into it) and posts it; the receiver peeks the oldest
// posted slot, reads or reduces straight from it, and releases it. Both sides
// are non-blocking: nullptr means "not now", and the executor waits on the
// rank's Doorbell, which every post and release towards this rank rings.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "base/settings.h"
#include "base/status.h"
#include "kernels/reduce.h"
#include "transports/doorbell.h"

namespace nodus {

class Bootstrap;
struct NodeInfo;

class SendConnection {
 public:
  virtual ~SendConnection() = default;
  // A writable slot of slotBytes(), or nullptr while all slots are in flight.
  virtual std::byte* tryAcquire() = 0;
  // Publishes the acquired slot holding `bytes` bytes.
  virtual void post(size_t bytes) = 0;
  virtual size_t slotBytes() const = 0;
  // Copies `bytes` bytes from `src` into the acquired slot `slot`; a
  // transport may choose how (shm: past the cache where that is faster).
  virtual void fill(std::byte* slot, const std::byte* src, size_t bytes) { memcpy(slot, src, bytes); }
  // Writes a[i] (op) b[i], i < count, of `type` into the acquired slot, as
  // fill() writes a copy.
  struct Reduction {
    nodusDataType_t type;
    nodusRedOp_t op;
    const std::byte* a;
    const std::byte* b;
    size_t count;
  };
  virtual void fillReduced(std::byte* slot, const Reduction& r) { reduce(r.type, r.op, slot, r.a, r.b, r.count); }
  // Instead of filling the acquired slot, publishes `bytes` bytes at `src`,
  // this rank's memory, which the transport sends from directly (one copy
  // less: tcp hands the user's buffer to the kernel). The caller must leave
  // that memory unchanged until referencesDone(). False where the transport
  // cannot (the slot is still acquired: fill it and post()). `acrossProcesses`
  // (Plan::referencesAcross): the call gains from a receiver in another
  // process reading the bytes from here (shm: process_vm_readv); without it
  // shm fills the slot.
  virtual bool postReference(const std::byte* src, size_t bytes, bool acrossProcesses) {
    (void)src;
    (void)bytes;
    (void)acrossProcesses;
    return false;
  }
  // Whether the memory of every postReference() so far is no longer needed.
  virtual bool referencesDone() { return true; }
};

class RecvConnection {
 public:
  virtual ~RecvConnection() = default;
  // The oldest posted slot and its size, or nullptr if none is posted.
  virtual const std::byte* tryPeek(size_t* bytes) = 0;
  // Hands the peeked slot back to the sender.
  virtual void release() = 0;
  // tryPeek() for a caller that knows where the message goes (`dst`, room
  // for `dstBytes`): a transport that can receive it straight there does,
  // and then sets *placed (the returned slot holds nothing to read; release
  // it as usual). Until the message is in, the transport may write into
  // `dst`: a caller that gives up waiting calls cancelPlacement() before
  // it lets go of that memory.
  virtual const std::byte* tryPeekTo(std::byte* dst, size_t dstBytes, size_t* bytes, bool* placed) {
    (void)dst;
    (void)dstBytes;
    *placed = false;
    return tryPeek(bytes);
  }
  // Withdraws an outstanding tryPeekTo() destination: after it returns
  // nothing writes there (a message already partly in it breaks the
  // connection, which has failed anyway when this is called).
  virtual void cancelPlacement() {}
};

// What a communicator tells a transport when it connects ranks.
// How a sender copies slices into slots another process reads (shm):
// cached (memcpy), streaming (kernels/copy.h's streamingCopy: past the
// cache), or chosen per connection by timing both (slot_ring.h's
// CopyChooser). NODUS_SHM_COPY.
enum class SlotCopy { Cached, Streaming, Auto };
Status parseSlotCopy(const std::string& text, SlotCopy* out);

struct ConnectRequest {
  Bootstrap* bootstrap = nullptr;
  int rank = 0;
  int nranks = 0;
  std::vector<int> peers;  // the ranks this transport must connect to (both directions)
  size_t slotBytes = 0;
  uint32_t slots = 0;
  // The ranks before and after this one in the topology's ring order: rings
  // carry most of the traffic, so their connections are set up eagerly (the
  // pages of both ends faulted in and written, not in the first collectives).
  int ringPrev = -1;
  int ringNext = -1;
  // The doorbell this rank waits on, for transports that ring it from this
  // process (the net transport's proxy). The communicator makes a
  // process-local one; a transport that must place it elsewhere (shm: in
  // shared memory, where peer processes ring it; loopback: in the endpoint
  // its peer threads keep alive) returns its own in Connections::doorbell,
  // and the transports connected after it get that one here. Never null.
  Doorbell* bell = nullptr;
  int64_t timeoutMs = 0;  // NODUS_TIMEOUT_MS: bounds waits during set-up and teardown
  // This host and the rank's NUMA node, for transports that choose a device
  // by locality (verbs: the RDMA NIC nearest the rank).
  const NodeInfo* node = nullptr;
  int numa = -1;
  SlotCopy shmCopy = SlotCopy::Auto;
  // shm: a peer process may read this rank's slices from its memory
  // (process_vm_readv) where a probe at connect says it can. NODUS_SHM_CMA.
  bool shmCma = true;
  // The communicator's settings (NODUS_NSOCKS, NODUS_SOCKET_IFNAME, the
  // verbs device...): transports read them here, never the environment
  // (null, in unit tests of one transport: the environment's).
  const Settings* settings = nullptr;
};

// Per-rank result of connecting: connections indexed by peer rank (null for
// peers of other transports), the doorbell this rank waits on, and a way to
// tell whether a peer is still alive.
struct Connections {
  std::vector<std::unique_ptr<SendConnection>> send;
  std::vector<std::unique_ptr<RecvConnection>> recv;
  // Set only by a transport that provides this rank's doorbell itself (see
  // ConnectRequest::bell); it then must be the first, in table order, with peers.
  Doorbell* doorbell = nullptr;
  std::vector<Doorbell*> peerDoorbells;  // rung on abort; null for unconnected peers
};

// What the executor's thread is doing with a communicator's connections
// (Transport::callerPolling).
enum class CallerPolling {
  Polls,   // it runs a collective and polls every connection it waits on itself
  Sleeps,  // it waits for a doorbell: whatever moves the data now must not wait for it
  Done,    // the collective ended: only what it left unsent still has to move
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  // Collective over every rank of the communicator, even those with no peers
  // for this transport (the exchange goes through the bootstrap).
  virtual Status connect(const ConnectRequest& req, Connections& out) = 0;
  // Whether `peer` (connected by this transport) is still alive; called
  // while waiting, at most every few milliseconds. A peer that is gone but
  // left slots this rank has not read yet (it may have finished its part
  // and exited) is not a failure until they are read or a send to it finds
  // no free slot.
  virtual Status checkPeer(int peer) = 0;
  // This rank failed or aborted: let the peers know, for transports whose
  // peers cannot see the rank's doorbell (closing sockets ends their waits).
  virtual void notifyFailure() {}
  // For transports with a thread of their own (the net proxy), on machines
  // where that thread would take the core the executor polls on: while the
  // executor polls, it moves the data itself and the thread can stand aside
  // rather than wake for every message (each wake-up is a context switch on
  // the executor's core). Called only when the communicator decided so.
  virtual void callerPolling(CallerPolling) {}
  // While it polls (CallerPolling::Polls), the executor found nothing to do
  // on the connections it waits on: move what else is pending (a send to a
  // peer it has moved on from), since the thread stands aside.
  virtual void callerIdle() {}
  // Whether every connection into this rank takes references from its
  // sender's process of any size (shm: every probe at connect read the
  // peer's memory), so a plan may send slices larger than a slot by
  // reference (Comm::plan; the communicator agrees on it across ranks).
  virtual bool readsReferencesOfAnySize() const { return false; }
  // The speed of the device this rank's connections to other hosts leave
  // by, in GB/s (10^9 bytes a second), as the device reports it; 0 where the
  // transport has no such device or no peers.
  virtual double deviceGBs() const { return 0; }
};

}  // namespace nodus
