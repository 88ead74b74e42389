#include "transports/slot_ring.h"

#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <climits>
#include <cstring>
#include <ctime>

#include "base/dtype.h"
#include "base/log.h"
#include "kernels/copy.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#else
#include <chrono>
#endif

namespace nodus {

namespace {
constexpr size_t kPage = 4096;
// In RingHeader::sizes: the slot holds the address of the bytes (postReference).
constexpr uint64_t kReference = uint64_t{1} << 63;
size_t roundUp(size_t x, size_t a) { return (x + a - 1) / a * a; }

// A cheap clock for timing copies: the TSC where there is one (constant
// rate on the machines nodus runs on; both ways are timed in the same unit).
uint64_t ticks() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
#endif
}
}  // namespace

// ---- CopyChooser ---------------------------------------------------------------

// Auto where streamingCopy cannot stream would time memcpy against itself.
CopyChooser::CopyChooser(SlotCopy policy)
    : policy_(policy == SlotCopy::Auto && !streamingCopyStreams() ? SlotCopy::Cached : policy) {}

bool CopyChooser::streamNext(size_t bytes) {
  switch (policy_) {
    case SlotCopy::Cached:
      return false;
    case SlotCopy::Streaming:
      return true;
    case SlotCopy::Auto:
      break;
  }
  if (bytes < kMinBytes) return false;
  const uint64_t k = copies_++;
  if (k < kWarmup) return (k & 1) != 0;
  if (k % kProbeEvery == 0) return !streaming_;
  return streaming_;
}

void CopyChooser::record(bool streamed, size_t bytes, uint64_t ticks) {
  if (bytes == 0) return;
  const int w = streamed ? 1 : 0;
  double perByte = static_cast<double>(ticks) / static_cast<double>(bytes);
  if (samples_[w] > 0) perByte = std::min(perByte, kOutlier * cost_[w]);
  // The way in use is timed on every copy and averages over 8; the other
  // only on probes, so one probe moves it halfway.
  const double weight = samples_[w] == 0 ? 1.0 : (w == (streaming_ ? 1 : 0) && copies_ > kWarmup ? 0.125 : 0.5);
  cost_[w] += weight * (perByte - cost_[w]);
  ++samples_[w];
  if (samples_[0] == 0 || samples_[1] == 0 || copies_ < kWarmup) return;
  if (!streaming_ && cost_[0] > kStreamAbove * cost_[1]) streaming_ = true;
  else if (streaming_ && cost_[0] < kCachedBelow * cost_[1]) streaming_ = false;
}

// ---- Doorbell ------------------------------------------------------------------

void Doorbell::ring() {
#if defined(__SANITIZE_THREAD__)
  // ThreadSanitizer does not model fences; a seq_cst read-modify-write of
  // `sleepers` gives the same ordering (and costs a shared-line write).
  if (sleepers.fetch_add(0, std::memory_order_seq_cst) != 0) {
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (sleepers.load(std::memory_order_relaxed) != 0) {
#endif
    seq.fetch_add(1, std::memory_order_seq_cst);
    syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
    if (wakeFd >= 0) {
      const uint64_t one = 1;
      // A full eventfd counter (EAGAIN) already means "wake up".
      ssize_t ignored = write(wakeFd, &one, sizeof(one));
      (void)ignored;
    }
  }
}

void Doorbell::sleep(uint32_t expected, int64_t timeoutUs) {
  timespec ts{static_cast<time_t>(timeoutUs / 1000000), static_cast<long>(timeoutUs % 1000000) * 1000};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

// ---- Ring ----------------------------------------------------------------------

std::byte* ringSlot(void* mem, size_t slotBytes, uint64_t index, uint32_t slots) {
  return static_cast<std::byte*>(mem) + roundUp(sizeof(RingHeader), kPage) + (index % slots) * roundUp(slotBytes, 64);
}

size_t ringBytes(uint32_t slots, size_t slotBytes) {
  return roundUp(sizeof(RingHeader), kPage) + static_cast<size_t>(slots) * roundUp(slotBytes, 64);
}

RingSender::RingSender(void* mem, uint32_t slots, size_t slotBytes, Doorbell* receiverBell, bool sameProcess,
                       SlotCopy copy)
    : hdr_(static_cast<RingHeader*>(mem)),
      data_(static_cast<std::byte*>(mem) + roundUp(sizeof(RingHeader), kPage)),
      slots_(slots),
      slotBytes_(roundUp(slotBytes, 64)),
      peer_(receiverBell),
      sameProcess_(sameProcess),
      chooser_(copy),
      reduceChooser_(copy) {
  head_ = hdr_->head.load(std::memory_order_relaxed);
  cachedTail_ = hdr_->tail.load(std::memory_order_acquire);
}

std::byte* RingSender::tryAcquire() {
  if (head_ - cachedTail_ >= slots_) {
    cachedTail_ = hdr_->tail.load(std::memory_order_acquire);
    if (head_ - cachedTail_ >= slots_) return nullptr;
  }
  return data_ + (head_ % slots_) * slotBytes_;
}

void RingSender::post(size_t bytes) {
  hdr_->sizes[head_ % slots_] = bytes;
  ++head_;
  hdr_->head.store(head_, std::memory_order_release);
  peer_->ring();
}

RingSender::~RingSender() {
  if (logPeer_ < 0) return;
  for (const auto& [what, c] : {std::pair{"copied", &chooser_}, std::pair{"reduced", &reduceChooser_}})
    if (c->copies(false) + c->copies(true) > 0)
      NODUS_INFO(logRank_, "shm to rank %d: slices of %zu KiB or more %s %llu times cached, %llu streamed (%s at the end; "
                 "a cached byte took %.1fx a streamed one)", logPeer_, CopyChooser::kMinBytes >> 10, what,
                 static_cast<unsigned long long>(c->copies(false)), static_cast<unsigned long long>(c->copies(true)),
                 c->streaming() ? "streaming" : "cached", c->streamedCost() > 0 ? c->cachedCost() / c->streamedCost() : 0.0);
}

// Copies with `write(stream)` the way `chooser` picks for `bytes`, timing it
// where the chooser learns from it.
template <typename Write>
void chosenWrite(CopyChooser& chooser, size_t bytes, Write write) {
  const bool stream = chooser.streamNext(bytes);
  const bool timed = chooser.times(bytes);
  const uint64_t t0 = timed ? ticks() : 0;
  write(stream);
  if (timed) chooser.record(stream, bytes, ticks() - t0);
}

void RingSender::fill(std::byte* slot, const std::byte* src, size_t bytes) {
  chosenWrite(chooser_, bytes, [&](bool stream) {
    if (stream) streamingCopy(slot, src, bytes);
    else memcpy(slot, src, bytes);
  });
}

void RingSender::fillReduced(std::byte* slot, const Reduction& r) {
  const size_t ts = typeSize(r.type);
  const size_t bytes = r.count * ts;
  chosenWrite(reduceChooser_, bytes, [&](bool stream) {
    if (!stream) {
      reduce(r.type, r.op, slot, r.a, r.b, r.count);
      return;
    }
    // 16 KiB: a whole number of elements of every type, and well inside L1.
    constexpr size_t kChunk = 16 << 10;
    alignas(64) std::byte stage[kChunk];
    for (size_t off = 0; off < bytes; off += kChunk) {
      const size_t n = std::min(kChunk, bytes - off);
      reduce(r.type, r.op, stage, r.a + off, r.b + off, n / ts);
      streamingCopy(slot + off, stage, n);
    }
  });
}

bool RingSender::postReference(const std::byte* src, size_t bytes, bool acrossProcesses) {
  // Within a process the receiver reads our addresses; across processes only
  // where it can read our memory (crossRead: shm, its process_vm_readv
  // probe at connect). A sender of references waits at the end of the call
  // until its receiver has read them, which costs more than copying a small
  // slice (loopback, 2-4 ranks: 8-512 B AllReduce and AllGather 0.6-0.8x by
  // reference, 8 KiB 2-3x faster).
  // A slice larger than a slot (Comm::plan) goes by reference at any size.
  const size_t least = bytes > slotBytes_ ? 0 : sameProcess_ ? kMinReferenceBytes : kMinCrossReferenceBytes;
  if (bytes < least || (!sameProcess_ && (!acrossProcesses || hdr_->crossRead.load(std::memory_order_relaxed) == 0)))
    return false;
  memcpy(data_ + (head_ % slots_) * slotBytes_, &src, sizeof(src));
  hdr_->sizes[head_ % slots_] = bytes | kReference;
  ++head_;
  referenced_ = head_;
  hdr_->head.store(head_, std::memory_order_release);
  peer_->ring();
  return true;
}

bool RingSender::referencesDone() {
  if (cachedTail_ >= referenced_) return true;
  cachedTail_ = hdr_->tail.load(std::memory_order_acquire);
  return cachedTail_ >= referenced_;
}

RingReceiver::RingReceiver(void* mem, uint32_t slots, size_t slotBytes, Doorbell* senderBell, bool sameProcess,
                           int senderPid)
    : hdr_(static_cast<RingHeader*>(mem)),
      data_(static_cast<const std::byte*>(mem) + roundUp(sizeof(RingHeader), kPage)),
      slots_(slots),
      slotBytes_(roundUp(slotBytes, 64)),
      peer_(senderBell),
      sameProcess_(sameProcess),
      senderPid_(senderPid) {
  tail_ = hdr_->tail.load(std::memory_order_relaxed);
  cachedHead_ = hdr_->head.load(std::memory_order_acquire);
}

std::byte* RingReceiver::oldest(uint64_t* size) {
  if (cachedHead_ == tail_) {
    cachedHead_ = hdr_->head.load(std::memory_order_acquire);
    if (cachedHead_ == tail_) return nullptr;
  }
  const size_t i = tail_ % slots_;
  *size = hdr_->sizes[i];
  // The receiver owns a posted slot until it releases it: a reference read
  // from another process lands in it.
  return const_cast<std::byte*>(data_) + i * slotBytes_;
}

// One process_vm_readv of `bytes` at the sender's `from` into our `to`; the
// kernel may stop short (a page it could not pin), so it continues where the
// last call ended.
bool RingReceiver::readAcross(std::byte* to, const std::byte* from, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    iovec local{to + done, bytes - done};
    iovec remote{const_cast<std::byte*>(from) + done, bytes - done};
    const ssize_t got = process_vm_readv(senderPid_, &local, 1, &remote, 1, 0);
    if (got <= 0) {
      const int e = got == 0 ? EFAULT : errno;
      if (e == EINTR) continue;
      int32_t none = 0;
      hdr_->readError.compare_exchange_strong(none, e, std::memory_order_release);
      return false;
    }
    done += static_cast<size_t>(got);
  }
  return true;
}

const std::byte* RingReceiver::tryPeek(size_t* bytes) {
  if (hdr_->readError.load(std::memory_order_relaxed) != 0) return nullptr;
  uint64_t size = 0;
  std::byte* slot = oldest(&size);
  if (!slot) return nullptr;
  if ((size & kReference) == 0) {
    *bytes = size;
    return slot;
  }
  *bytes = size & ~kReference;
  const std::byte* src = nullptr;
  memcpy(&src, slot, sizeof(src));
  if (sameProcess_) return src;
  // Slices by reference fit a slot (a slice is at most a slot). A slot
  // peeked again before its release (the executor found no slot to send
  // on) was read already.
  if (readSlot_ == tail_ && readTo_ == slot) return slot;
  if (*bytes > slotBytes_) {
    int32_t none = 0;
    hdr_->readError.compare_exchange_strong(none, EMSGSIZE, std::memory_order_release);
    return nullptr;
  }
  if (!readAcross(slot, src, *bytes)) return nullptr;
  readSlot_ = tail_;
  readTo_ = slot;
  return slot;
}

const std::byte* RingReceiver::tryPeekTo(std::byte* dst, size_t dstBytes, size_t* bytes, bool* placed) {
  *placed = false;
  if (sameProcess_ || hdr_->readError.load(std::memory_order_relaxed) != 0) return tryPeek(bytes);
  uint64_t size = 0;
  std::byte* slot = oldest(&size);
  if (!slot) return nullptr;
  // A slot the sender filled, a message of another size than the caller
  // expects (it reports the mismatch), or a reference already read into the
  // slot (which no longer holds the address): as tryPeek.
  if ((size & kReference) == 0 || (size & ~kReference) != dstBytes || (readSlot_ == tail_ && readTo_ == slot))
    return tryPeek(bytes);
  *bytes = dstBytes;
  const std::byte* src = nullptr;
  memcpy(&src, slot, sizeof(src));
  if (!(readSlot_ == tail_ && readTo_ == dst) && !readAcross(dst, src, dstBytes)) return nullptr;
  readSlot_ = tail_;
  readTo_ = dst;
  *placed = true;
  return slot;
}

void RingReceiver::release() {
  ++tail_;
  hdr_->tail.store(tail_, std::memory_order_release);
  peer_->ring();
}

void prefault(void* p, size_t bytes, bool write) {
#ifdef MADV_POPULATE_WRITE
  if (madvise(p, bytes, write ? MADV_POPULATE_WRITE : MADV_POPULATE_READ) == 0) return;
#endif
  volatile char* c = static_cast<volatile char*>(p);
  for (size_t off = 0; off < bytes; off += kPage) {
    if (write) c[off] = c[off];
    else (void)c[off];
  }
}

void prefaultRing(void* ring, size_t bytes) {
  prefault(ring, bytes, true);
  // Not the header's page: head and tail live there.
  volatile auto* base = static_cast<volatile unsigned char*>(ring);
  for (size_t off = roundUp(sizeof(RingHeader), kPage); off < bytes; off += kPage) base[off] = 0;
}

}  // namespace nodus

namespace nodus {

int readAcrossProbe(int pid, uint64_t addr, uint64_t expect) {
  if (pid <= 0 || addr == 0) return EINVAL;
  uint64_t got = 0;
  iovec local{&got, sizeof(got)};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(addr)), sizeof(got)};
  const ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
  if (n < 0) return errno;
  return n == static_cast<ssize_t>(sizeof(got)) && got == expect ? 0 : EILSEQ;
}

}  // namespace nodus
