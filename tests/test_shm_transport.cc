// The shm transport's liveness check, at the transport's own interface: a
// peer process that posted its last slots and exited is reported dead only
// once those slots are read (a rank that finished its part may exit while
// another still waits for what it sent).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <new>
#include <vector>

#include "base/bootstrap.h"
#include "kernels/copy.h"
#include "transports/doorbell.h"
#include "transports/shm/shm_transport.h"
#include "transports/slot_ring.h"

namespace nodus {
namespace {

// ---- CopyChooser: given copy times, which way a connection copies ----------

// Feeds the chooser `copies` copies of `bytes` whose cost a byte is `cached`
// or `streamed` ticks; returns how many streamed.
uint64_t Feed(CopyChooser& c, uint64_t copies, size_t bytes, double cached, double streamed) {
  uint64_t n = 0;
  for (uint64_t i = 0; i < copies; ++i) {
    const bool s = c.streamNext(bytes);
    n += s;
    if (c.times(bytes)) c.record(s, bytes, static_cast<uint64_t>((s ? streamed : cached) * static_cast<double>(bytes)));
  }
  return n;
}

TEST(CopyChooser, ForcedPoliciesNeverChange) {
  CopyChooser cached(SlotCopy::Cached), streaming(SlotCopy::Streaming);
  EXPECT_FALSE(cached.times(1 << 20));
  EXPECT_EQ(Feed(cached, 100, 1 << 20, 10, 1), 0u);
  EXPECT_EQ(Feed(streaming, 100, 64, 1, 10), 100u);  // even small copies, as asked
}

TEST(CopyChooser, SmallCopiesAreCachedAndNotTimed) {
  CopyChooser c(SlotCopy::Auto);
  EXPECT_FALSE(c.times(CopyChooser::kMinBytes - 1));
  EXPECT_EQ(Feed(c, 1000, CopyChooser::kMinBytes - 1, 100, 1), 0u);
  EXPECT_EQ(c.copies(false) + c.copies(true), 0u);
}

TEST(CopyChooser, StreamsWhereCachedCopiesCostSeveralTimesMore) {
  const size_t b = 128 << 10;
  CopyChooser c(SlotCopy::Auto);
  // The warm-up alternates: half of its copies stream.
  EXPECT_EQ(Feed(c, CopyChooser::kWarmup, b, 10, 1), CopyChooser::kWarmup / 2);
  EXPECT_TRUE(c.streaming());
  // From then on every copy streams but one probe per kProbeEvery.
  EXPECT_EQ(Feed(c, 10 * CopyChooser::kProbeEvery, b, 10, 1), 10 * CopyChooser::kProbeEvery - 10);
  EXPECT_NEAR(c.cachedCost() / c.streamedCost(), 10.0, 0.01);
}

TEST(CopyChooser, StaysCachedWhereStreamingGainsLittle) {
  const size_t b = 128 << 10;
  CopyChooser c(SlotCopy::Auto);
  // Within one cache a cached copy costs the sender 1-3x a streamed one,
  // and the streamed one costs the reader more: no switch.
  Feed(c, CopyChooser::kWarmup, b, 2.5, 1);
  EXPECT_FALSE(c.streaming());
  EXPECT_EQ(Feed(c, 10 * CopyChooser::kProbeEvery, b, 2.5, 1), 10u);  // the probes only
}

TEST(CopyChooser, FollowsTheCoresWhenTheyMove) {
  const size_t b = 128 << 10;
  CopyChooser c(SlotCopy::Auto);
  Feed(c, CopyChooser::kWarmup + 4 * CopyChooser::kProbeEvery, b, 1.2, 1);
  EXPECT_FALSE(c.streaming());
  // The peer moves to a core of another cache: the connection streams
  // within a few copies (every cached one is timed).
  Feed(c, 8, b, 9, 1);
  EXPECT_TRUE(c.streaming());
  // It moves back: the probes see cached copies cheap again, and the
  // connection goes back to them after a few probes, not at once.
  Feed(c, CopyChooser::kProbeEvery, b, 1.2, 1);
  Feed(c, 4 * CopyChooser::kProbeEvery, b, 1.2, 1);
  EXPECT_FALSE(c.streaming());
  EXPECT_LT(c.cachedCost() / c.streamedCost(), CopyChooser::kCachedBelow);
}

TEST(CopyChooser, OneOutlierDoesNotFlipTheChoice) {
  const size_t b = 128 << 10;
  CopyChooser c(SlotCopy::Auto);
  Feed(c, CopyChooser::kWarmup + 16, b, 1.2, 1);
  ASSERT_FALSE(c.streaming());
  // A clock that stepped back (the difference wraps) and a copy preempted
  // for milliseconds: each counts as kOutlier times the average at most.
  for (uint64_t ticks : {~uint64_t{0} - 5, uint64_t{3000} * b}) {
    ASSERT_FALSE(c.streamNext(b));
    c.record(false, b, ticks);
    EXPECT_FALSE(c.streaming());
    Feed(c, 64, b, 1.2, 1);
  }
  EXPECT_LT(c.cachedCost(), 1.3);
  // Slow copies that go on are no outliers: the connection streams.
  Feed(c, 4, b, 12, 1);
  EXPECT_TRUE(c.streaming());
}

TEST(CopyChooser, AutoCopiesCachedWhereNothingStreams) {
  EXPECT_EQ(CopyChooser(SlotCopy::Auto).policy(), streamingCopyStreams() ? SlotCopy::Auto : SlotCopy::Cached);
}

// Both ends of a ring write its slot pages at init (prefaultRing): never its
// header, which may already count slices when a late end gets there.
TEST(SlotRing, PrefaultWritesTheSlotsAndLeavesTheHeader) {
  const uint32_t slots = 4;
  const size_t slotBytes = 3 * 4096 + 100;
  const size_t bytes = ringBytes(slots, slotBytes);
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* hdr = new (mem) RingHeader();
  Doorbell bell;
  RingSender tx(mem, slots, slotBytes, &bell);
  RingReceiver rx(mem, slots, slotBytes, &bell);
  std::byte* slot = tx.tryAcquire();
  ASSERT_NE(slot, nullptr);
  memset(slot, 0x5a, 64);
  tx.post(64);
  std::vector<std::byte> header(static_cast<const std::byte*>(mem), static_cast<const std::byte*>(mem) + sizeof(RingHeader));
  memset(ringSlot(mem, slotBytes, 2, slots), 0x77, slotBytes);
  prefaultRing(mem, bytes);
  EXPECT_EQ(memcmp(header.data(), mem, sizeof(RingHeader)), 0);
  EXPECT_EQ(hdr->head.load(), 1u);
  // It wrote every page of the slots: in slot 2, the bytes that start a page.
  const auto* s2 = reinterpret_cast<const unsigned char*>(ringSlot(mem, slotBytes, 2, slots));
  int pageStarts = 0;
  for (size_t i = 0; i < slotBytes; ++i) {
    const bool pageStart = reinterpret_cast<uintptr_t>(s2 + i) % 4096 == 0;
    pageStarts += pageStart;
    ASSERT_EQ(s2[i], pageStart ? 0u : 0x77u) << "byte " << i << " of slot 2";
  }
  EXPECT_EQ(pageStarts, 3);
  // The ring still works.
  size_t got = 0;
  ASSERT_NE(rx.tryPeek(&got), nullptr);
  EXPECT_EQ(got, 64u);
  rx.release();
  EXPECT_EQ(hdr->tail.load(), 1u);
  munmap(mem, bytes);
}

using std::chrono::seconds;

constexpr char kLastWords[] = "the last slot of a rank that exits";

Status connectPair(int rank, const nodusUniqueId& id, Doorbell* bell, std::unique_ptr<Bootstrap>* boot,
                   std::unique_ptr<Transport>* shm, Connections* conns, SlotCopy copy = SlotCopy::Auto,
                   bool cma = true) {
  NODUS_TRY(socketBootstrap(id, rank, 2, seconds(20), boot));
  *shm = makeShmTransport();
  ConnectRequest req;
  req.bootstrap = boot->get();
  req.rank = rank;
  req.nranks = 2;
  req.peers = {1 - rank};
  req.slotBytes = kMinCrossReferenceBytes;
  req.slots = 4;
  req.ringPrev = 1 - rank;
  req.ringNext = 1 - rank;  // both ends of both rings written at init
  req.bell = bell;
  req.timeoutMs = 20000;
  req.shmCopy = copy;
  req.shmCma = cma;
  return (*shm)->connect(req, *conns);
}

TEST(ShmTransport, APeerThatExitedIsDeadOnlyOnceItsPostedSlotsAreRead) {
  int idPipe[2];
  ASSERT_EQ(pipe(idPipe), 0);
  // Forked before this process makes the id: the child inherits no thread.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(idPipe[1]);
    nodusUniqueId id;
    if (read(idPipe[0], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) _exit(2);
    Doorbell bell;
    std::unique_ptr<Bootstrap> boot;
    std::unique_ptr<Transport> shm;
    Connections conns;
    if (!connectPair(1, id, &bell, &boot, &shm, &conns).isOk()) _exit(3);
    std::byte* slot = conns.send[0]->tryAcquire();
    if (slot == nullptr) _exit(4);
    memcpy(slot, kLastWords, sizeof(kLastWords));
    conns.send[0]->post(sizeof(kLastWords));
    _exit(0);  // no teardown: gone as a rank that finished its part
  }
  close(idPipe[0]);
  nodusUniqueId id;
  ASSERT_TRUE(createUniqueId(Settings(), &id).isOk());
  ASSERT_EQ(write(idPipe[1], &id, sizeof(id)), static_cast<ssize_t>(sizeof(id)));
  close(idPipe[1]);
  Doorbell bell;
  std::unique_ptr<Bootstrap> boot;
  std::unique_ptr<Transport> shm;
  Connections conns;
  const Status connected = connectPair(0, id, &bell, &boot, &shm, &conns, SlotCopy::Streaming);
  if (!connected.isOk()) kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);  // reaped: kill(pid, 0) now says ESRCH
  ASSERT_TRUE(connected.isOk()) << connected.message();
  // The request's NODUS_SHM_COPY reaches the sending end.
  auto* sender = dynamic_cast<RingSender*>(conns.send[1].get());
  ASSERT_NE(sender, nullptr);
  EXPECT_EQ(sender->copyChooser().policy(), SlotCopy::Streaming);
  EXPECT_EQ(sender->reduceChooser().policy(), SlotCopy::Streaming);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;

  // Its last slot is unread: not a failure yet.
  const Status beforeRead = shm->checkPeer(1);
  EXPECT_TRUE(beforeRead.isOk()) << beforeRead.message();
  size_t bytes = 0;
  const std::byte* got = conns.recv[1]->tryPeek(&bytes);
  ASSERT_NE(got, nullptr);
  ASSERT_EQ(bytes, sizeof(kLastWords));
  EXPECT_EQ(memcmp(got, kLastWords, sizeof(kLastWords)), 0);
  conns.recv[1]->release();

  // Nothing of it is left: waiting on it now fails, naming the process.
  const Status afterRead = shm->checkPeer(1);
  EXPECT_EQ(afterRead.code(), nodusRemoteError);
  EXPECT_NE(afterRead.message().find("died"), std::string::npos) << afterRead.message();
  EXPECT_NE(afterRead.message().find(std::to_string(child)), std::string::npos) << afterRead.message();
}

// ---- Slices by reference across processes (process_vm_readv) ---------------

// Where the kernel refuses process_vm_readv even on this process's own
// memory (a seccomp filter, no CONFIG_CROSS_MEMORY_ATTACH), there is no
// path to test: the transport keeps the slots (the no_cma shm tests).
#define SKIP_WITHOUT_CROSS_READ()                                                                   \
  do {                                                                                             \
    static const volatile uint64_t self = 42;                                                      \
    if (const int e = readAcrossProbe(getpid(), reinterpret_cast<uintptr_t>(&self), self); e != 0) \
      GTEST_SKIP() << "process_vm_readv refused here: " << strerror(e);                            \
  } while (0)

TEST(CrossRead, TheProbeReadsOnlyWhatItExpects) {
  SKIP_WITHOUT_CROSS_READ();
  static const volatile uint64_t word = 0x1234567890abcdefULL;
  const auto addr = reinterpret_cast<uintptr_t>(&word);
  EXPECT_EQ(readAcrossProbe(getpid(), addr, word), 0);
  EXPECT_EQ(readAcrossProbe(getpid(), addr, word + 1), EILSEQ);
  EXPECT_EQ(readAcrossProbe(getpid(), 0, word), EINVAL);
  const pid_t gone = fork();
  ASSERT_GE(gone, 0);
  if (gone == 0) _exit(0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  EXPECT_EQ(readAcrossProbe(gone, addr, word), ESRCH);
}

// A child process as rank 1 of a shm pair, running `body` on its connections
// (its exit code is the test's verdict on its side); the parent is rank 0.
template <typename Body>
pid_t ForkRank1(int idPipe[2], bool cma, Body body) {
  const pid_t child = fork();
  if (child != 0) return child;
  close(idPipe[1]);
  nodusUniqueId id;
  if (read(idPipe[0], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) _exit(2);
  Doorbell bell;
  std::unique_ptr<Bootstrap> boot;
  std::unique_ptr<Transport> shm;
  Connections conns;
  if (!connectPair(1, id, &bell, &boot, &shm, &conns, SlotCopy::Auto, cma).isOk()) _exit(3);
  _exit(body(conns));
}

// A slot (connectPair's): as much as a slice sent by reference can be.
constexpr size_t kRefBytes = kMinCrossReferenceBytes;


std::vector<std::byte> Pattern(size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed) & 0xff);
  return v;
}

// Rank 1 sends two slices of its own memory by reference and waits (at most
// 20 s) until rank 0 has read both; exit 0 if all went as `expectRefs` says.
int SendTwoByReference(Connections& conns, bool expectRefs) {
  const std::vector<std::byte> a = Pattern(kRefBytes, 1), b = Pattern(kRefBytes, 2);
  for (const auto* v : {&a, &b}) {
    std::byte* slot = nullptr;
    for (int i = 0; i < 20000 && !(slot = conns.send[0]->tryAcquire()); ++i) usleep(1000);
    if (!slot) return 5;
    const bool ref = conns.send[0]->postReference(v->data(), v->size(), true);
    if (ref != expectRefs) return 6;
    if (!ref) {
      conns.send[0]->fill(slot, v->data(), v->size());
      conns.send[0]->post(v->size());
    }
  }
  for (int i = 0; i < 20000 && !conns.send[0]->referencesDone(); ++i) usleep(1000);
  return conns.send[0]->referencesDone() ? 0 : 7;  // `a` and `b` live until rank 0 has read them
}

// Rank 0's side: the first slice straight into `dst`, the second through
// the slot; returns whether the first came placed.
void ReceiveTwo(Connections& conns, bool* firstPlaced) {
  std::vector<std::byte> dst(kRefBytes);
  size_t bytes = 0;
  bool placed = false;
  const std::byte* got = nullptr;
  for (int i = 0; i < 20000 && !(got = conns.recv[1]->tryPeekTo(dst.data(), dst.size(), &bytes, &placed)); ++i)
    usleep(1000);
  ASSERT_NE(got, nullptr);
  ASSERT_EQ(bytes, kRefBytes);
  if (!placed) memcpy(dst.data(), got, bytes);
  EXPECT_EQ(dst, Pattern(kRefBytes, 1));
  *firstPlaced = placed;
  conns.recv[1]->release();
  got = nullptr;
  for (int i = 0; i < 20000 && !(got = conns.recv[1]->tryPeek(&bytes)); ++i) usleep(1000);
  ASSERT_NE(got, nullptr);
  ASSERT_EQ(bytes, kRefBytes);
  EXPECT_EQ(std::vector<std::byte>(got, got + bytes), Pattern(kRefBytes, 2));
  // Peeked again before its release (the executor found no slot to send
  // on), now with a destination: what the first peek read, not placed.
  bool again = true;
  got = conns.recv[1]->tryPeekTo(dst.data(), dst.size(), &bytes, &again);
  ASSERT_NE(got, nullptr);
  EXPECT_FALSE(again);
  EXPECT_EQ(std::vector<std::byte>(got, got + bytes), Pattern(kRefBytes, 2));
  conns.recv[1]->release();
}

struct Pair {
  Doorbell bell;
  std::unique_ptr<Bootstrap> boot;
  std::unique_ptr<Transport> shm;
  Connections conns;
};

// Connects rank 0 with a child running `body` as rank 1.
template <typename Body>
pid_t StartPair(Pair* p, bool cma0, bool cma1, Body body) {
  int idPipe[2];
  if (pipe(idPipe) != 0) return -1;
  const pid_t child = ForkRank1(idPipe, cma1, body);
  close(idPipe[0]);
  nodusUniqueId id;
  if (!createUniqueId(Settings(), &id).isOk() || write(idPipe[1], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id)) ||
      !connectPair(0, id, &p->bell, &p->boot, &p->shm, &p->conns, SlotCopy::Auto, cma0).isOk()) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    close(idPipe[1]);
    return -1;
  }
  close(idPipe[1]);
  return child;
}

// Rank 1 sends two slices; whether they go by reference (and the first is
// placed at rank 0) is what both sides' NODUS_SHM_CMA say.
void ExchangeTwo(bool cma0, bool cma1) {
  SKIP_WITHOUT_CROSS_READ();
  const bool byReference = cma0 && cma1;
  Pair p;
  const pid_t child =
      StartPair(&p, cma0, cma1, [byReference](Connections& c) { return SendTwoByReference(c, byReference); });
  ASSERT_GT(child, 0);
  bool placed = !byReference;
  ReceiveTwo(p.conns, &placed);
  EXPECT_EQ(placed, byReference);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

TEST(CrossRead, AReferenceIsReadFromTheSendersMemoryStraightToItsDestination) { ExchangeTwo(true, true); }

// Rank 1 would let rank 0 read its memory, but rank 0 (NODUS_SHM_CMA=0)
// does not: rank 1's sends go through the slots.
TEST(CrossRead, AReceiverThatDoesNotReadAcrossGetsCopiesInSlots) { ExchangeTwo(false, true); }

TEST(CrossRead, ASenderThatForbidsItGetsCopiesInSlots) { ExchangeTwo(true, false); }

TEST(CrossRead, AReferenceFromAProcessThatExitedIsAnErrorNotAHang) {
  SKIP_WITHOUT_CROSS_READ();
  Pair p;
  const pid_t child = StartPair(&p, true, true, [](Connections& c) {
    static std::vector<std::byte> v = Pattern(kRefBytes, 3);
    if (!c.send[0]->tryAcquire() || !c.send[0]->postReference(v.data(), v.size(), true)) return 5;
    return 0;  // gone before rank 0 read it
  });
  ASSERT_GT(child, 0);
  // Exited but not reaped: a zombie, which kill(pid, 0) still finds.
  siginfo_t info{};
  ASSERT_EQ(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT), 0);
  ASSERT_TRUE(info.si_code == CLD_EXITED && info.si_status == 0) << "child status " << info.si_status;
  std::vector<std::byte> dst(kRefBytes);
  size_t bytes = 0;
  bool placed = false;
  EXPECT_EQ(p.conns.recv[1]->tryPeekTo(dst.data(), dst.size(), &bytes, &placed), nullptr);
  EXPECT_EQ(p.conns.recv[1]->tryPeek(&bytes), nullptr);  // the ring is broken
  const Status s = p.shm->checkPeer(1);
  EXPECT_EQ(s.code(), nodusRemoteError) << s.message();
  EXPECT_NE(s.message().find("died"), std::string::npos) << s.message();
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
}

}  // namespace
}  // namespace nodus
