// Thin RAII wrappers over POSIX TCP sockets with deadlines; the bootstrap's
// only way to the network.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <string>

#include "core/status.h"

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
// The IPv4 address to listen on: NODUS_BOOTSTRAP_ADDR, else the first
// non-loopback interface that is up, else 127.0.0.1.
Status defaultListenAddress(in_addr* out);
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
