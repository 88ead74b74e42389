// What the verbs net puts on the wire, shared with the tests that play a
// hostile or broken peer. Every field is written byte by byte in
// little-endian order (no struct images: no padding, no host layout), and
// every decode checks magic, version, length and ranges: a handle or CTS
// that fails is refused with an error naming what is wrong, never used.
//
// Connection set-up runs over a TCP side channel (the 64-byte net::Handle
// holds its address): the connecting rank sends a Hello (job secret, its
// rank, its QpInfo), the accepting rank checks the secret, answers with its
// own QpInfo, and both move their queue pairs to RTS. The socket stays open
// afterwards so that either side sees the other die.
//
// Data: the receiver posts a receive for each irecv and sends the sender a
// clear-to-send (CTS: sequence number, address, rkey, capacity of the
// buffer) as a SEND; the sender answers with one RDMA WRITE WITH IMMEDIATE
// into that buffer, the immediate carrying the message size.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/status.h"

namespace nodus::net::verbs {

inline constexpr uint32_t kQpInfoMagic = 0x6e645651;  // "ndVQ"
inline constexpr uint32_t kHelloMagic = 0x6e645648;   // "ndVH"
inline constexpr uint32_t kCtsMagic = 0x6e645643;     // "ndVC"
inline constexpr uint16_t kWireVersion = 1;

// Link layers as ibv_port_attr::link_layer reports them.
inline constexpr uint8_t kLinkInfiniband = 1;  // IBV_LINK_LAYER_INFINIBAND
inline constexpr uint8_t kLinkEthernet = 2;    // IBV_LINK_LAYER_ETHERNET (RoCE)

// One side's queue pair, as its peer needs it to reach it.
struct QpInfo {
  uint32_t qpn = 0;       // 24 bits
  uint32_t psn = 0;       // 24 bits: the first packet sequence number it sends
  uint16_t lid = 0;       // InfiniBand; 0 on RoCE
  uint8_t port = 0;       // 1..255
  uint8_t mtu = 0;        // enum ibv_mtu of the port's active MTU (1: 256 .. 5: 4096)
  uint8_t linkLayer = 0;  // kLinkInfiniband or kLinkEthernet
  uint8_t gidIndex = 0;
  std::array<uint8_t, 16> gid{};
};
inline constexpr size_t kQpInfoBytes = 36;

struct Hello {
  std::array<uint8_t, 16> secret{};
  int32_t rank = -1;
  QpInfo qp;
};
inline constexpr size_t kHelloBytes = 4 + 2 + 2 + 16 + 4 + kQpInfoBytes;

// Clear to send: the receive `seq` of the connection may take `capacity`
// bytes at `addr` (rkey).
struct Cts {
  uint32_t seq = 0;
  uint32_t rkey = 0;
  uint64_t addr = 0;
  uint32_t capacity = 0;
};
inline constexpr size_t kCtsBytes = 4 + 4 + 4 + 8 + 4;
// The immediate is the message size: a message is at most this big.
inline constexpr uint64_t kMaxMessageBytes = UINT32_MAX;

void encodeQpInfo(const QpInfo& q, uint8_t out[kQpInfoBytes]);
// `who` names the peer in the error ("rank 3").
Status decodeQpInfo(const uint8_t* in, size_t bytes, const char* who, QpInfo* out);
void encodeHello(const Hello& h, uint8_t out[kHelloBytes]);
Status decodeHello(const uint8_t* in, size_t bytes, Hello* out);
void encodeCts(const Cts& c, uint8_t out[kCtsBytes]);
// A CTS must name the next receive (`expectSeq`) and a buffer that exists.
Status decodeCts(const uint8_t* in, size_t bytes, uint32_t expectSeq, const char* who, Cts* out);

}  // namespace nodus::net::verbs
