// Net: the interface between the net transport and a network library, shaped
// after NCCL's net plugin (devices, listen / connect / accept, registered
// memory, isend / irecv / test) so that TCP sockets and verbs (RDMA) sit
// behind the same calls and the transport above never knows which runs.
//
// A connection is one direction: the receiving rank listens and accepts, the
// sending rank connects with the opaque handle the listener produced (the
// transport carries handles through the bootstrap). Messages on a connection
// arrive whole and in the order sent; each irecv names the largest message it
// accepts. Everything after set-up is non-blocking: isend / irecv post, test
// polls, and eventFds tells a caller what to sleep on.
//
// Errors are Status values: a peer that closes, resets or sends something
// that is not a valid frame fails the request being tested (and every later
// one on that connection) with nodusRemoteError / nodusSystemError.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/bootstrap.h"
#include "base/status.h"

namespace nodus {
struct NodeInfo;
}

namespace nodus::net {

using Clock = std::chrono::steady_clock;

inline constexpr size_t kHandleBytes = 64;
// What a listener tells its connecting peers (an address, a queue pair
// number...); opaque above the implementation.
struct Handle {
  std::byte bytes[kHandleBytes];
};

struct DeviceProperties {
  std::string name;     // "eth0"
  std::string address;  // "192.0.2.2"
  int speedMbps = 0;    // as the kernel reports it (a guess where it does not)
};

// Who is connecting: the job's secret and the connecting rank. The accepting
// side refuses any connection that cannot prove the secret.
struct Identity {
  JobSecret secret{};
  int rank = -1;
};

class Listener {
 public:
  virtual ~Listener() = default;
};

// One direction of one connection. Destroying it closes it.
class SendComm {
 public:
  virtual ~SendComm() = default;
};
class RecvComm {
 public:
  virtual ~RecvComm() = default;
  virtual int peerRank() const = 0;  // as proven at accept
};

// Memory a request may use (a no-op for sockets; pinned and keyed for verbs).
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
};

// An operation in flight. Owned by its comm; valid until test() reports it
// done or failed, or the comm is destroyed.
class Request {
 public:
  virtual ~Request() = default;
};

class Net {
 public:
  virtual ~Net() = default;
  virtual const char* name() const = 0;
  virtual int deviceCount() const = 0;
  virtual DeviceProperties device(int dev) const = 0;

  virtual Status listen(int dev, Handle* handle, std::unique_ptr<Listener>* out) = 0;
  // Connects to the listener `handle` names, proving `self`.
  virtual Status connect(int dev, const Handle& handle, const Identity& self, Clock::time_point deadline,
                         std::unique_ptr<SendComm>* out) = 0;
  // The next connection whose peer proves `secret`; strangers and garbage
  // are logged and refused while it keeps waiting, up to the deadline.
  virtual Status accept(Listener& listener, const JobSecret& secret, Clock::time_point deadline,
                        std::unique_ptr<RecvComm>* out) = 0;

  virtual Status regMr(void* data, size_t bytes, std::unique_ptr<MemoryRegion>* out) = 0;
  virtual Status isend(SendComm& comm, const void* data, size_t bytes, const MemoryRegion& mr, Request** req) = 0;
  // Receives one message of at most `bytes` into data.
  virtual Status irecv(RecvComm& comm, void* data, size_t bytes, const MemoryRegion& mr, Request** req) = 0;
  // Makes progress on the request's comm; *done once it completed, with
  // *bytes the message size (receives). An error ends the request.
  virtual Status test(Request* req, bool* done, size_t* bytes) = 0;

  // Descriptors that become ready (edge-triggered: EPOLLIN / EPOLLOUT) when
  // the comm can progress; poll with epoll, then call test again. Which
  // readiness a send comm's descriptors signal is sendReadiness().
  virtual void eventFds(const SendComm& comm, std::vector<int>* fds) const = 0;
  virtual void eventFds(const RecvComm& comm, std::vector<int>* fds) const = 0;
  // Ends the connection at once (the peer sees it closed), from any thread;
  // later tests fail.
  virtual void shutdown(SendComm& comm) = 0;
  virtual void shutdown(RecvComm& comm) = 0;

  // Whether isend / irecv take memory that regMr() never saw (sockets): the
  // transport then sends from and receives into the collective's own
  // buffers instead of copying through its slots.
  virtual bool anyMemory() const { return false; }
  // Points a posted receive that has not written any data yet at other
  // memory (anyMemory() nets); false once it has begun. A message larger
  // than `bytes` that fits the receive's own buffer still goes there: the
  // caller tells which by the size test() reports.
  virtual bool retarget(Request* req, void* data, size_t bytes) {
    (void)req;
    (void)data;
    (void)bytes;
    return false;
  }

  // A socket of a send comm progresses when it becomes writable; a verbs
  // completion channel becomes readable whichever way the data goes.
  enum class SendReadiness { Writable, Readable };
  virtual SendReadiness sendReadiness() const { return SendReadiness::Writable; }
};

// What the net transport tells a factory about the rank it serves.
struct NetContext {
  int rank = -1;
  const NodeInfo* node = nullptr;  // this host's hwloc picture (may be null)
  int numa = -1;                   // the rank's NUMA node, -1 when unknown
  const Settings* settings = nullptr;  // the communicator's (never null)
};
// Makes the Net a transport runs over (one per communicator).
using NetFactory = Status (*)(const NetContext& ctx, std::unique_ptr<Net>* out);

}  // namespace nodus::net
