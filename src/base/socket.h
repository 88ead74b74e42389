// Thin RAII wrappers over POSIX TCP sockets with deadlines; the bootstrap's
// only way to the network.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <string>
#include <vector>

#include "base/settings.h"
#include "base/status.h"

namespace nodus {

using Clock = std::chrono::steady_clock;

class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }
  bool valid() const { return fd_ >= 0; }
  void reset();

 private:
  int fd_ = -1;
};

std::string addrText(const sockaddr_in& a);

// An IPv4 interface that is up.
struct NetInterface {
  std::string name;
  in_addr addr{};
  bool loopback = false;
};
// The interfaces NODUS_SOCKET_IFNAME selects, in the kernel's order: by
// default every non-loopback one that is up, or loopback alone when there is
// none. A spec is comma-separated name prefixes ("eth,ens"), "=name" for an
// exact name, a leading "^" to exclude instead ("^docker,lo"). An empty
// result is an error naming the spec and what exists.
Status selectInterfaces(const Settings& settings, std::vector<NetInterface>* out);
// The IPv4 address to listen on: NODUS_BOOTSTRAP_ADDR, else the first
// interface of selectInterfaces.
Status defaultListenAddress(const Settings& settings, in_addr* out);
void setNoDelay(int fd);
// A listening socket on addr (port 0: any); `bound` receives the real address.
Status listenOn(const sockaddr_in& addr, Fd* out, sockaddr_in* bound);
// Connects, retrying refused connections until the deadline.
Status connectTo(const sockaddr_in& addr, Clock::time_point deadline, Fd* out);
// Accepts one connection (or times out).
Status acceptOne(int listenFd, Clock::time_point deadline, Fd* out, sockaddr_in* peer);
Status sendAll(int fd, const void* buf, size_t n, Clock::time_point deadline);
Status recvAll(int fd, void* buf, size_t n, Clock::time_point deadline);
// Sends to one socket while receiving from another (a ring step never
// deadlocks on full socket buffers).
Status sendRecv(int sendFd, const void* sbuf, size_t sn, int recvFd, void* rbuf, size_t rn,
                Clock::time_point deadline);

}  // namespace nodus
