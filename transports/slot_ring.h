// SlotRing: the single-producer single-consumer FIFO of slots that both the
// loopback and the shm transport use; only where its memory lives differs.
//
// Layout of one ring in memory (header, then `slots` slots of slotBytes):
// head counts posted slots and is written by the sender only; tail counts
// released slots and is written by the receiver only; each sits on its own
// cache line so the two sides never write the same line.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transports/doorbell.h"
#include "transports/transport.h"

namespace nodus {

constexpr uint32_t kMaxSlots = 64;
// The smallest slice a RingSender posts by reference (postFrom).
constexpr size_t kMinReferenceBytes = 8192;

struct alignas(64) RingHeader {
  alignas(64) std::atomic<uint64_t> head{0};
  alignas(64) std::atomic<uint64_t> tail{0};
  alignas(64) uint64_t sizes[kMaxSlots] = {};
};

// Bytes one ring occupies, header included; a multiple of the page size.
size_t ringBytes(uint32_t slots, size_t slotBytes);

// Slot `index` (a head or tail count, taken modulo `slots`) of the ring at
// `mem`: for a side that moves slots itself rather than through RingSender /
// RingReceiver (the net transport's proxy, which keeps several in flight).
std::byte* ringSlot(void* mem, size_t slotBytes, uint64_t index, uint32_t slots);

// `mem` points at ringBytes() bytes shared by both sides. Where both sides
// are threads of one process (`sameProcess`, loopback), postFrom() puts the
// address of the bytes in the slot and the receiver reads them from the
// sender's memory: one copy instead of two, and the sender's memory is read
// as late as the receiver gets to it (a plan that wrote it again too early
// shows in the loopback tests' results).
class RingSender final : public SendConnection {
 public:
  RingSender(void* mem, uint32_t slots, size_t slotBytes, Doorbell* receiverBell, bool sameProcess = false);
  std::byte* tryAcquire() override;
  void post(size_t bytes) override;
  size_t slotBytes() const override { return slotBytes_; }
  bool postFrom(const std::byte* src, size_t bytes) override;
  bool referencesDone() override;
  uint64_t posted() const { return head_; }  // slots posted so far (the next one's index)

 private:
  RingHeader* hdr_;
  std::byte* data_;
  uint32_t slots_;
  size_t slotBytes_;
  Doorbell* peer_;
  uint64_t head_ = 0;        // our copy: only we write head
  uint64_t cachedTail_ = 0;  // last tail we read
  bool sameProcess_;
  uint64_t referenced_ = 0;  // slots up to the last postFrom
};

class RingReceiver final : public RecvConnection {
 public:
  RingReceiver(void* mem, uint32_t slots, size_t slotBytes, Doorbell* senderBell, bool sameProcess = false);
  const std::byte* tryPeek(size_t* bytes) override;
  void release() override;
  uint64_t released() const { return tail_; }  // slots released so far (the next one's index)

 private:
  RingHeader* hdr_;
  const std::byte* data_;
  uint32_t slots_;
  size_t slotBytes_;
  Doorbell* peer_;
  uint64_t tail_ = 0;
  uint64_t cachedHead_ = 0;
  bool sameProcess_;
};

// Faults in the pages of [p, p+bytes) for this process (write: allocate too).
void prefault(void* p, size_t bytes, bool write);

// prefault(ring, bytes, true) for a ring's memory, and then a write to
// every slot page from this process. In this project's VMs the first write
// a process makes to a page of shared memory costs about 15 us even after
// MADV_POPULATE_WRITE (64 KiB into a peer's populated segment: 200-270 us
// the first time, 115-135 populated by the writer too, 3.9 once it had
// written a byte of each page, still 5.2 three seconds later). Without it,
// nodus-perf's first AllGathers of 128 KiB through each of the 8 slots took
// about 210 us, the next ones 5-6. Both ends of a ring call it before the
// ring carries anything: the bytes written are slot contents, which mean
// nothing until posted.
void prefaultRing(void* ring, size_t bytes);

}  // namespace nodus
