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
// The smallest slice a RingSender posts by reference (postReference): within a
// process (loopback), and across processes where the receiver reads the
// sender's memory with process_vm_readv (shm, RingHeader::crossRead).
constexpr size_t kMinReferenceBytes = 8192;
constexpr size_t kMinCrossReferenceBytes = 32768;

struct alignas(64) RingHeader {
  alignas(64) std::atomic<uint64_t> head{0};
  alignas(64) std::atomic<uint64_t> tail{0};
  alignas(64) uint64_t sizes[kMaxSlots] = {};
  // Written by the receiver once, at connect, before the ranks' barrier:
  // it can read the sender process's memory (process_vm_readv), so the
  // sender may post slices by reference (RingSender::postReference) across
  // processes too.
  alignas(64) std::atomic<uint32_t> crossRead{0};
  // Written by the receiver: the errno of a read of the sender's memory that
  // failed (the transport's checkPeer reports it; the ring is then broken).
  std::atomic<int32_t> readError{0};
};

// Bytes one ring occupies, header included; a multiple of the page size.
size_t ringBytes(uint32_t slots, size_t slotBytes);

// Slot `index` (a head or tail count, taken modulo `slots`) of the ring at
// `mem`: for a side that moves slots itself rather than through RingSender /
// RingReceiver (the net transport's proxy, which keeps several in flight).
std::byte* ringSlot(void* mem, size_t slotBytes, uint64_t index, uint32_t slots);

// The per-connection choice of SlotCopy::Auto. Where sender and receiver
// share a cache (cores of one L3), a slice copied with ordinary stores goes
// from the sender's cache to the receiver's: the fastest way. Where they do
// not (cores of two AMD CCDs or two sockets, or a VM whose vCPUs the host
// moves between them), every line of a slot crosses between the caches
// twice a round (the receiver reads it from the sender's cache; the sender
// then takes it back to write it again), and streaming stores, which leave
// the lines in memory, are 4-6x faster (2 processes on this project's VM,
// 128 KiB-4 MiB through 8 slots of 128 KiB: 1.7-3.0 GB/s cached against
// 7.4-13 streaming; 11-22 against 7-14 when the vCPUs share a cache).
//
// The sender times its own copies of slices of kMinBytes or more. A copy
// that has to take the lines back from another cache is slow on the
// sender's side already (10x a streamed copy between caches, 1-1.5x within
// one), while a streamed copy costs the sender the same either way (it pays
// at the reader); so the connection streams while its cached copies take
// kStreamAbove times as long as its streamed ones a byte, and goes back
// below kCachedBelow. It tries the other way every kProbeEvery copies, as
// the host may move a vCPU at any time.
class CopyChooser {
 public:
  static constexpr size_t kMinBytes = 32 << 10;
  static constexpr double kStreamAbove = 4.0;
  static constexpr double kCachedBelow = 3.0;
  static constexpr uint64_t kWarmup = 8;  // copies, alternating, before the first choice
  static constexpr uint64_t kProbeEvery = 128;

  explicit CopyChooser(SlotCopy policy = SlotCopy::Cached);
  SlotCopy policy() const { return policy_; }
  // Whether the next copy of `bytes` bytes streams.
  bool streamNext(size_t bytes);
  // Whether that copy should be timed and record()ed.
  bool times(size_t bytes) const { return policy_ == SlotCopy::Auto && bytes >= kMinBytes; }
  // The time a copy took, in any unit the caller keeps to (streamed: what
  // streamNext said for it). A sample over kOutlier times that way's
  // average so far (a preempted copy, a clock that stepped back when the
  // vCPU moved) counts as kOutlier times it: one sample cannot flip the
  // choice, several in a row can.
  void record(bool streamed, size_t bytes, uint64_t ticks);
  static constexpr double kOutlier = 16.0;
  bool streaming() const { return streaming_; }
  // Time per byte of each way so far (0: not yet timed), and how many
  // copies of each way were timed.
  double cachedCost() const { return cost_[0]; }
  double streamedCost() const { return cost_[1]; }
  uint64_t copies(bool streamed) const { return samples_[streamed ? 1 : 0]; }

 private:
  SlotCopy policy_;
  bool streaming_ = false;
  uint64_t copies_ = 0;  // of kMinBytes or more
  double cost_[2] = {0, 0};
  uint64_t samples_[2] = {0, 0};
};

// `mem` points at ringBytes() bytes shared by both sides. Where both sides
// are threads of one process (`sameProcess`, loopback), postReference() puts the
// address of the bytes in the slot and the receiver reads them from the
// sender's memory: one copy instead of two, and the sender's memory is read
// as late as the receiver gets to it (a plan that wrote it again too early
// shows in the loopback tests' results).
class RingSender final : public SendConnection {
 public:
  RingSender(void* mem, uint32_t slots, size_t slotBytes, Doorbell* receiverBell, bool sameProcess = false,
             SlotCopy copy = SlotCopy::Cached);
  ~RingSender() override;
  std::byte* tryAcquire() override;
  void post(size_t bytes) override;
  size_t slotBytes() const override { return slotBytes_; }
  void fill(std::byte* slot, const std::byte* src, size_t bytes) override;
  // Streamed: reduced a chunk at a time into a buffer in this core's cache,
  // and each chunk streamed into the slot (its own CopyChooser: a
  // reduction costs more a byte than a copy either way).
  void fillReduced(std::byte* slot, const Reduction& r) override;
  const CopyChooser& copyChooser() const { return chooser_; }
  const CopyChooser& reduceChooser() const { return reduceChooser_; }
  // Who this is, for the INFO line on what the CopyChooser did.
  void describe(int rank, int peer) {
    logRank_ = rank;
    logPeer_ = peer;
  }
  bool postReference(const std::byte* src, size_t bytes, bool acrossProcesses) override;
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
  uint64_t referenced_ = 0;  // slots up to the last postReference
  CopyChooser chooser_;
  CopyChooser reduceChooser_;
  int logRank_ = -1, logPeer_ = -1;
};

// A receiver in another process than its sender (shm) reads the slices the
// sender posted by reference from the sender's memory with one
// process_vm_readv (`senderPid`): straight into the destination where the
// executor gives one (tryPeekTo), else into the slot. A read that fails
// (the sender died, or the kernel refused) breaks the ring: the receiver
// stops returning slots and writes the errno to RingHeader::readError.
class RingReceiver final : public RecvConnection {
 public:
  RingReceiver(void* mem, uint32_t slots, size_t slotBytes, Doorbell* senderBell, bool sameProcess = false,
               int senderPid = 0);
  const std::byte* tryPeek(size_t* bytes) override;
  const std::byte* tryPeekTo(std::byte* dst, size_t dstBytes, size_t* bytes, bool* placed) override;
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
  int senderPid_;
  // The slot last read from the sender's memory, and where to.
  uint64_t readSlot_ = UINT64_MAX;
  const std::byte* readTo_ = nullptr;
  // The oldest posted slot, if there is one (else nullptr), its size and
  // whether it holds a reference.
  std::byte* oldest(uint64_t* size);
  bool readAcross(std::byte* to, const std::byte* from, size_t bytes);
};

// Whether this process can read `pid`'s memory with process_vm_readv: reads
// the 8 bytes at `addr` there and compares them with `expect`. 0 if it can,
// else why not: the errno (ENOSYS: the kernel lacks it; EPERM: Yama's
// ptrace_scope or a seccomp filter forbids it), EILSEQ where it read
// something else.
int readAcrossProbe(int pid, uint64_t addr, uint64_t expect);

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
