#include "base/socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "base/settings.h"

namespace nodus {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}
Fd::~Fd() { reset(); }
void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {

int msLeft(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<int64_t>(left, 1000));
}

Status setNonBlocking(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return systemError("fcntl(O_NONBLOCK)");
  return Status::ok();
}

}  // namespace

std::string addrText(const sockaddr_in& a) {
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a.sin_addr, ip, sizeof(ip));
  return std::string(ip) + ":" + std::to_string(ntohs(a.sin_port));
}

namespace {

bool specMatches(const std::string& spec, const std::string& name) {
  size_t start = spec[0] == '^' ? 1 : 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    if (comma == std::string::npos) comma = spec.size();
    std::string item = spec.substr(start, comma - start);
    if (!item.empty()) {
      if (item[0] == '=') {
        if (name == item.substr(1)) return true;
      } else if (name.compare(0, item.size(), item) == 0) {
        return true;
      }
    }
    start = comma + 1;
  }
  return false;
}

}  // namespace

Status selectInterfaces(const Settings& settings, std::vector<NetInterface>* out) {
  out->clear();
  const std::string& spec = settings.get(param::kSocketIfName);
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) ifs = nullptr;  // as if there were none: loopback by default
  std::vector<NetInterface> all;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_UP) == 0) continue;
    NetInterface n;
    n.name = i->ifa_name;
    n.addr = reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr;
    n.loopback = (i->ifa_flags & IFF_LOOPBACK) != 0;
    all.push_back(n);
  }
  freeifaddrs(ifs);
  if (spec.empty()) {
    for (const NetInterface& n : all)
      if (!n.loopback) out->push_back(n);
    if (out->empty())
      for (const NetInterface& n : all)
        if (n.loopback) out->push_back(n);
    if (out->empty()) {
      NetInterface lo;
      lo.name = "lo";
      lo.addr.s_addr = htonl(INADDR_LOOPBACK);
      lo.loopback = true;
      out->push_back(lo);
    }
    return Status::ok();
  }
  const bool exclude = spec[0] == '^';
  std::string names;
  for (const NetInterface& n : all) {
    names += (names.empty() ? "" : ", ") + n.name;
    if (specMatches(spec, n.name) != exclude) out->push_back(n);
  }
  if (out->empty())
    return makeError(nodusInvalidArgument, "NODUS_SOCKET_IFNAME=%s selects no IPv4 interface that is up (there are: %s)",
                     spec.c_str(), names.empty() ? "none" : names.c_str());
  return Status::ok();
}

Status defaultListenAddress(const Settings& settings, in_addr* out) {
  const std::string& forced = settings.get(param::kSocketIfAddr);
  if (!forced.empty()) {
    if (inet_pton(AF_INET, forced.c_str(), out) != 1)
      return makeError(nodusInvalidArgument, "NODUS_BOOTSTRAP_ADDR=%s is not an IPv4 address", forced.c_str());
    return Status::ok();
  }
  std::vector<NetInterface> ifs;
  NODUS_TRY(selectInterfaces(settings, &ifs));
  *out = ifs.front().addr;
  return Status::ok();
}

void setNoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Status listenOn(const sockaddr_in& addr, Fd* out, sockaddr_in* bound) {
  Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return systemError("socket");
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0)
    return systemError("bind(%s)", addrText(addr).c_str());
  if (listen(fd.get(), 1024) != 0) return systemError("listen");
  NODUS_TRY(setNonBlocking(fd.get()));
  socklen_t len = sizeof(*bound);
  if (getsockname(fd.get(), reinterpret_cast<sockaddr*>(bound), &len) != 0) return systemError("getsockname");
  *out = std::move(fd);
  return Status::ok();
}

Status connectTo(const sockaddr_in& addr, Clock::time_point deadline, Fd* out) {
  auto backoff = std::chrono::milliseconds(1);
  for (;;) {
    Fd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return systemError("socket");
    NODUS_TRY(setNonBlocking(fd.get()));
    int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd.get(), POLLOUT, 0};
      while ((rc = poll(&p, 1, msLeft(deadline))) == 0 && Clock::now() < deadline) {}
      if (rc > 0) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
        errno = err;
        rc = err == 0 ? 0 : -1;
      } else {
        errno = ETIMEDOUT;
        rc = -1;
      }
    }
    if (rc == 0) {
      int one = 1;
      setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      *out = std::move(fd);
      return Status::ok();
    }
    if (Clock::now() >= deadline) {
      Status s = systemError("connect(%s)", addrText(addr).c_str());
      return Status(nodusTimeout, s.message() + " (gave up at the deadline)");
    }
    if (errno != ECONNREFUSED && errno != ETIMEDOUT && errno != EAGAIN && errno != ECONNRESET &&
        errno != EHOSTUNREACH && errno != ENETUNREACH)
      return systemError("connect(%s)", addrText(addr).c_str());
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(100));
  }
}

Status acceptOne(int listenFd, Clock::time_point deadline, Fd* out, sockaddr_in* peer) {
  for (;;) {
    socklen_t len = sizeof(*peer);
    int fd = accept4(listenFd, reinterpret_cast<sockaddr*>(peer), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      *out = Fd(fd);
      return Status::ok();
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
      return systemError("accept");
    if (Clock::now() >= deadline) return makeError(nodusTimeout, "no connection arrived before the deadline");
    pollfd p{listenFd, POLLIN, 0};
    poll(&p, 1, msLeft(deadline));
  }
}

Status sendRecv(int sendFd, const void* sbuf, size_t sn, int recvFd, void* rbuf, size_t rn,
                Clock::time_point deadline) {
  const char* s = static_cast<const char*>(sbuf);
  char* r = static_cast<char*>(rbuf);
  size_t sent = 0, got = 0;
  while (sent < sn || got < rn) {
    pollfd p[2];
    int np = 0, si = -1, ri = -1;
    if (sent < sn) si = np, p[np++] = {sendFd, POLLOUT, 0};
    if (got < rn) ri = np, p[np++] = {recvFd, POLLIN, 0};
    int rc = poll(p, np, msLeft(deadline));
    if (rc < 0 && errno != EINTR) return systemError("poll");
    if (rc <= 0) {
      if (Clock::now() >= deadline) return makeError(nodusTimeout, "bootstrap peer did not answer before the deadline");
      continue;
    }
    if (si >= 0 && (p[si].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t k = ::send(sendFd, s + sent, sn - sent, MSG_NOSIGNAL);
      if (k < 0 && errno != EAGAIN && errno != EINTR) return makeError(nodusRemoteError, "bootstrap peer closed the connection (send: %s)", strerror(errno));
      if (k > 0) sent += static_cast<size_t>(k);
    }
    if (ri >= 0 && (p[ri].revents & (POLLIN | POLLERR | POLLHUP))) {
      ssize_t k = ::recv(recvFd, r + got, rn - got, 0);
      if (k == 0) return makeError(nodusRemoteError, "bootstrap peer closed the connection");
      if (k < 0 && errno != EAGAIN && errno != EINTR) return makeError(nodusRemoteError, "bootstrap peer failed (recv: %s)", strerror(errno));
      if (k > 0) got += static_cast<size_t>(k);
    }
  }
  return Status::ok();
}

Status sendAll(int fd, const void* buf, size_t n, Clock::time_point deadline) {
  return sendRecv(fd, buf, n, -1, nullptr, 0, deadline);
}

Status recvAll(int fd, void* buf, size_t n, Clock::time_point deadline) {
  return sendRecv(-1, nullptr, 0, fd, buf, n, deadline);
}

}  // namespace nodus
