// What the TCP net puts on the wire; shared with the tests that play a
// hostile or broken peer. Little-endian hosts only (as every rank of a job).
//
// Connection set-up: the connecting side opens `nsocks` sockets to the
// listener and sends a Hello on each, proving the job secret and naming its
// rank, the socket's index and a nonce that groups the sockets of one
// connection. Then every message is, on socket 0, a FrameHeader and its
// first part; on socket i > 0, when the striping rule gives it a non-empty
// part, a FrameHeader and that part. The receiver checks each header's magic,
// its sequence number (the message count on the connection) and its length
// against what the posted receive accepts.
#pragma once

#include <cstddef>
#include <cstdint>

namespace nodus::net::tcp {

inline constexpr uint32_t kHandleMagic = 0x6e64544b;  // "ndTK"
inline constexpr uint32_t kHelloMagic = 0x6e645448;   // "ndTH"
inline constexpr uint32_t kFrameMagic = 0x6e645446;   // "ndTF"
inline constexpr uint32_t kVersion = 1;
inline constexpr int kMaxSockets = 16;
// Below this a message goes on socket 0 alone: striping costs a syscall and
// a header per socket, which small messages do not repay.
inline constexpr size_t kMinStripeBytes = 64 * 1024;

struct WireHandle {
  uint32_t magic;
  uint32_t ip;    // network order
  uint16_t port;  // network order
  uint16_t pad;
};

struct Hello {
  uint32_t magic;
  uint32_t version;
  uint8_t secret[16];
  int32_t rank;
  uint16_t socket;
  uint16_t nsocks;
  uint64_t nonce;
};

struct FrameHeader {
  uint32_t magic;
  uint32_t seq;
  uint64_t bytes;  // the whole message (every socket's header carries the same)
};
static_assert(sizeof(FrameHeader) == 16);

// Socket `s`'s part [*offset, *offset + *length) of a `total`-byte message.
inline void stripe(uint64_t total, int nsocks, int s, uint64_t* offset, uint64_t* length) {
  if (nsocks <= 1 || total < kMinStripeBytes) {
    *offset = 0;
    *length = s == 0 ? total : 0;
    return;
  }
  const uint64_t n = static_cast<uint64_t>(nsocks);
  const uint64_t per = ((total + n - 1) / n + 63) / 64 * 64;
  const uint64_t begin = per * static_cast<uint64_t>(s);
  *offset = begin < total ? begin : total;
  *length = begin < total ? (total - begin < per ? total - begin : per) : 0;
}

}  // namespace nodus::net::tcp
