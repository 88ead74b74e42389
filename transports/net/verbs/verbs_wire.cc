#include "transports/net/verbs/verbs_wire.h"

#include <string>

namespace nodus::net::verbs {
namespace {

// Little-endian field writers and readers over a byte cursor.
struct Writer {
  uint8_t* p;
  template <typename T>
  void put(T v) {
    for (size_t i = 0; i < sizeof(T); ++i) *p++ = static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
  }
  void bytes(const uint8_t* b, size_t n) {
    memcpy(p, b, n);
    p += n;
  }
};

struct Reader {
  const uint8_t* p;
  template <typename T>
  T get() {
    uint64_t v = 0;
    for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(*p++) << (8 * i);
    return static_cast<T>(v);
  }
  void bytes(uint8_t* b, size_t n) {
    memcpy(b, p, n);
    p += n;
  }
};

void putQp(Writer& w, const QpInfo& q) {
  w.put(kQpInfoMagic);
  w.put(q.qpn);
  w.put(q.psn);
  w.put(q.lid);
  w.put(q.port);
  w.put(q.mtu);
  w.put(q.linkLayer);
  w.put(q.gidIndex);
  w.put(uint16_t{0});
  w.bytes(q.gid.data(), q.gid.size());
}

Status getQp(Reader& r, const char* who, QpInfo* out) {
  QpInfo q;
  const uint32_t magic = r.get<uint32_t>();
  q.qpn = r.get<uint32_t>();
  q.psn = r.get<uint32_t>();
  q.lid = r.get<uint16_t>();
  q.port = r.get<uint8_t>();
  q.mtu = r.get<uint8_t>();
  q.linkLayer = r.get<uint8_t>();
  q.gidIndex = r.get<uint8_t>();
  const uint16_t reserved = r.get<uint16_t>();
  r.bytes(q.gid.data(), q.gid.size());
  if (magic != kQpInfoMagic) return makeError(nodusRemoteError, "verbs: %s sent no verbs queue pair description", who);
  if (reserved != 0) return makeError(nodusRemoteError, "verbs: %s sent a queue pair description of another version", who);
  if (q.qpn == 0 || q.qpn >= (1u << 24))
    return makeError(nodusRemoteError, "verbs: %s sent an invalid queue pair number %u", who, q.qpn);
  if (q.psn >= (1u << 24)) return makeError(nodusRemoteError, "verbs: %s sent an invalid packet sequence number %u", who, q.psn);
  if (q.port == 0) return makeError(nodusRemoteError, "verbs: %s sent port 0 (ports count from 1)", who);
  if (q.mtu < 1 || q.mtu > 5) return makeError(nodusRemoteError, "verbs: %s sent an invalid MTU code %u", who, q.mtu);
  bool gidZero = true;
  for (uint8_t b : q.gid) gidZero &= b == 0;
  if (q.linkLayer == kLinkEthernet) {
    if (gidZero) return makeError(nodusRemoteError, "verbs: %s is on RoCE but sent no GID", who);
  } else if (q.linkLayer == kLinkInfiniband) {
    if (q.lid == 0 && gidZero) return makeError(nodusRemoteError, "verbs: %s is on InfiniBand but sent neither LID nor GID", who);
  } else {
    return makeError(nodusRemoteError, "verbs: %s sent an unknown link layer %u", who, q.linkLayer);
  }
  *out = q;
  return Status::ok();
}

}  // namespace

void encodeQpInfo(const QpInfo& q, uint8_t out[kQpInfoBytes]) {
  Writer w{out};
  putQp(w, q);
}

Status decodeQpInfo(const uint8_t* in, size_t bytes, const char* who, QpInfo* out) {
  if (in == nullptr || bytes != kQpInfoBytes)
    return makeError(nodusRemoteError, "verbs: %s sent a queue pair description of %zu bytes (expected %zu)", who, bytes,
                     kQpInfoBytes);
  Reader r{in};
  return getQp(r, who, out);
}

void encodeHello(const Hello& h, uint8_t out[kHelloBytes]) {
  Writer w{out};
  w.put(kHelloMagic);
  w.put(kWireVersion);
  w.put(uint16_t{0});
  w.bytes(h.secret.data(), h.secret.size());
  w.put(static_cast<uint32_t>(h.rank));
  putQp(w, h.qp);
}

Status decodeHello(const uint8_t* in, size_t bytes, Hello* out) {
  if (in == nullptr || bytes != kHelloBytes)
    return makeError(nodusRemoteError, "verbs: a greeting of %zu bytes (expected %zu)", bytes, kHelloBytes);
  Reader r{in};
  Hello h;
  const uint32_t magic = r.get<uint32_t>();
  const uint16_t version = r.get<uint16_t>();
  const uint16_t reserved = r.get<uint16_t>();
  r.bytes(h.secret.data(), h.secret.size());
  h.rank = static_cast<int32_t>(r.get<uint32_t>());
  if (magic != kHelloMagic) return makeError(nodusRemoteError, "verbs: not a nodus verbs greeting");
  if (version != kWireVersion || reserved != 0)
    return makeError(nodusRemoteError, "verbs: a greeting of wire version %u (this is %u)", version, kWireVersion);
  if (h.rank < 0) return makeError(nodusRemoteError, "verbs: a greeting from negative rank %d", h.rank);
  const std::string who = "rank " + std::to_string(h.rank);
  NODUS_TRY(getQp(r, who.c_str(), &h.qp));
  *out = h;
  return Status::ok();
}

void encodeCts(const Cts& c, uint8_t out[kCtsBytes]) {
  Writer w{out};
  w.put(kCtsMagic);
  w.put(c.seq);
  w.put(c.rkey);
  w.put(c.addr);
  w.put(c.capacity);
}

Status decodeCts(const uint8_t* in, size_t bytes, uint32_t expectSeq, const char* who, Cts* out) {
  if (in == nullptr || bytes != kCtsBytes)
    return makeError(nodusRemoteError, "verbs: %s sent a clear-to-send of %zu bytes (expected %zu)", who, bytes, kCtsBytes);
  Reader r{in};
  Cts c;
  const uint32_t magic = r.get<uint32_t>();
  c.seq = r.get<uint32_t>();
  c.rkey = r.get<uint32_t>();
  c.addr = r.get<uint64_t>();
  c.capacity = r.get<uint32_t>();
  if (magic != kCtsMagic) return makeError(nodusRemoteError, "verbs: %s sent a message that is not a clear-to-send", who);
  if (c.seq != expectSeq)
    return makeError(nodusRemoteError, "verbs: %s sent a clear-to-send for receive %u, expected %u (out of order or replayed)",
                     who, c.seq, expectSeq);
  if (c.addr == 0 && c.capacity != 0)
    return makeError(nodusRemoteError, "verbs: %s sent a clear-to-send for %u bytes at address 0", who, c.capacity);
  if (c.addr + c.capacity < c.addr)
    return makeError(nodusRemoteError, "verbs: %s sent a clear-to-send whose buffer wraps the address space", who);
  *out = c;
  return Status::ok();
}

}  // namespace nodus::net::verbs
