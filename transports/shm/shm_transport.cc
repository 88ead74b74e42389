#include "transports/shm/shm_transport.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/bootstrap.h"
#include "base/log.h"
#include "transports/slot_ring.h"

namespace nodus {
namespace {

constexpr size_t kPage = 4096;
constexpr const char* kPrefix = "nodus-";

struct Mapping {
  void* addr = nullptr;
  size_t size = 0;
  Mapping() = default;
  Mapping(void* a, size_t s) : addr(a), size(s) {}
  Mapping(Mapping&& o) noexcept : addr(o.addr), size(o.size) { o.addr = nullptr; }
  Mapping& operator=(Mapping&&) = delete;
  ~Mapping() { reset(nullptr, 0); }
  void reset(void* a, size_t s) {
    if (addr) munmap(addr, size);
    addr = a;
    size = s;
  }
  std::byte* bytes() const { return static_cast<std::byte*>(addr); }
};

struct SegmentInfo {
  char name[64];
  int32_t pid;
  uint32_t pad;
  uint64_t probeAddr;   // of probeWord in this process (0: do not read our memory)
  uint64_t probeValue;  // what is there: random, so a reader that finds it reads this process
};

// What a peer reads from us with process_vm_readv at connect to learn
// whether it can (RingHeader::crossRead). A pid in a /dev/shm shared across
// pid namespaces may name another process, even one that runs the same
// binary at the same addresses: the value is random per process.
volatile uint64_t probeWord = 0;

class ShmTransport final : public Transport {
 public:
  const char* name() const override { return "shm"; }

  ~ShmTransport() override {
    if (!ownName_.empty()) shm_unlink(ownName_.c_str());  // error paths before the unlink below
  }

  Status connect(const ConnectRequest& req, Connections& out) override {
    removeStaleShmSegments();
    ringSize_ = ringBytes(req.slots, req.slotBytes);
    const size_t size = kPage + static_cast<size_t>(req.nranks) * ringSize_;
    std::vector<SegmentInfo> infos(req.nranks);
    SegmentInfo& mine = infos[req.rank];
    memset(&mine, 0, sizeof(mine));
    mine.pid = getpid();
    if (req.shmCma) {
      if (probeWord == 0) {
        uint64_t v = 0;
        while (v == 0)
          if (getrandom(&v, sizeof(v), 0) != sizeof(v)) v = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ULL | 1;
        probeWord = v;
      }
      mine.probeAddr = reinterpret_cast<uintptr_t>(&probeWord);
      mine.probeValue = probeWord;
    }
    Status made = req.peers.empty() ? Status::ok() : create(size, &mine);
    if (!made.isOk()) mine.name[0] = '\0';
    // Exchange even on failure, so the others learn of it instead of waiting.
    NODUS_TRY(req.bootstrap->allGather(infos.data(), sizeof(SegmentInfo)));
    NODUS_TRY(made);
    for (int peer : req.peers)
      if (infos[peer].name[0] == '\0')
        return makeError(nodusRemoteError, "rank %d could not create its shared memory", peer);

    // Peer processes ring this rank's doorbell: it lives in our segment.
    if (!req.peers.empty()) out.doorbell = reinterpret_cast<Doorbell*>(own_.bytes());
    out.send.resize(req.nranks);
    out.recv.resize(req.nranks);
    out.peerDoorbells.assign(req.nranks, nullptr);
    pids_.assign(req.nranks, 0);
    inbound_.assign(req.nranks, nullptr);
    outbound_.assign(req.nranks, nullptr);
    slots_ = req.slots;
    Status st = Status::ok();
    int crossReadable = 0, cmaRefused = 0, cmaRefusedPeers = 0;
    for (int peer : req.peers) {
      Mapping m;
      st = attach(infos[peer].name, size, &m);
      if (!st.isOk()) break;
      auto* peerBell = reinterpret_cast<Doorbell*>(m.bytes());
      void* outRing = m.bytes() + kPage + static_cast<size_t>(req.rank) * ringSize_;
      void* inRing = own_.bytes() + kPage + static_cast<size_t>(peer) * ringSize_;
      // The ring predecessor's connection carries the ring algorithms'
      // traffic: fault its pages in now rather than in the first collective,
      // and from this (receiving) rank, so that first-touch places them on
      // the receiver's NUMA node, where the slots are polled and read.
      if (peer == req.ringPrev) prefaultRing(inRing, ringSize_);
      auto sender = std::make_unique<RingSender>(outRing, req.slots, req.slotBytes, peerBell, false, req.shmCopy);
      sender->describe(req.rank, peer);
      out.send[peer] = std::move(sender);
      out.recv[peer] = std::make_unique<RingReceiver>(inRing, req.slots, req.slotBytes, peerBell, false, infos[peer].pid);
      // Before the barrier below, after which the peer's sender looks.
      if (req.shmCma && infos[peer].probeAddr != 0) {
        if (const int e = readAcrossProbe(infos[peer].pid, infos[peer].probeAddr, infos[peer].probeValue); e == 0) {
          static_cast<RingHeader*>(inRing)->crossRead.store(1, std::memory_order_release);
          ++crossReadable;
        } else {
          cmaRefused = e;
          ++cmaRefusedPeers;
        }
      }
      out.peerDoorbells[peer] = peerBell;
      inbound_[peer] = static_cast<const RingHeader*>(inRing);
      outbound_[peer] = static_cast<const RingHeader*>(outRing);
      pids_[peer] = infos[peer].pid;
      peers_.push_back(std::move(m));
    }
    // Once everyone has attached, the names are no longer needed: unlink
    // them all (a peer may have died before unlinking its own).
    Status synced = req.bootstrap->barrier();
    // The sending end of the ring successor's connection, in the
    // successor's segment: after the barrier, once the receiver has placed
    // the pages on its NUMA node.
    if (st.isOk() && synced.isOk() && req.ringNext >= 0 && req.ringNext != req.rank && outbound_[req.ringNext])
      prefaultRing(const_cast<RingHeader*>(outbound_[req.ringNext]), ringSize_);
    if (!ownName_.empty()) {
      shm_unlink(ownName_.c_str());
      ownName_.clear();
    }
    for (int peer : req.peers) shm_unlink(infos[peer].name);
    NODUS_TRY(st);
    readsAll_ = req.shmCma && cmaRefused == 0 && crossReadable == static_cast<int>(req.peers.size());
    if (cmaRefused != 0)
      NODUS_INFO(req.rank, "shm: cannot read %d peer process(es)' memory (process_vm_readv: %s; Yama ptrace_scope or "
                 "a seccomp filter?): what they send goes through the shared slots, two copies a byte; %d other(s) readable",
                 cmaRefusedPeers, strerror(cmaRefused), crossReadable);
    else if (crossReadable > 0)
      NODUS_INFO(req.rank, "shm: reads %d peer processes' slices from their memory (process_vm_readv)", crossReadable);
    return synced;
  }

  bool readsReferencesOfAnySize() const override { return readsAll_; }

  Status checkPeer(int peer) override {
    if (inbound_[peer] != nullptr) {
      const int32_t e = inbound_[peer]->readError.load(std::memory_order_acquire);
      // ESRCH: its memory is gone (exited, or a zombie kill() still finds).
      if (e == ESRCH) return makeError(nodusRemoteError, "rank %d (process %d on this host) died", peer, pids_[peer]);
      if (e != 0)
        return makeError(nodusSystemError, "cannot read rank %d's memory (process %d on this host; process_vm_readv: %s)",
                         peer, pids_[peer], strerror(e));
    }
    if (pids_[peer] <= 0 || kill(pids_[peer], 0) == 0 || errno != ESRCH) return Status::ok();
    // What the peer posted before it exited is still in our segment (a peer
    // that finished its part may exit while this rank waits, and post its
    // last slots just after our last look): the wait fails only once
    // nothing of it is left to read, or no slot towards it is free.
    const RingHeader* in = inbound_[peer];
    const RingHeader* out = outbound_[peer];
    const bool nothingToRead = in->head.load(std::memory_order_acquire) == in->tail.load(std::memory_order_acquire);
    const bool noSlotFree = out->head.load(std::memory_order_acquire) - out->tail.load(std::memory_order_acquire) >= slots_;
    if (!nothingToRead && !noSlotFree) return Status::ok();
    return makeError(nodusRemoteError, "rank %d (process %d on this host) died", peer, pids_[peer]);
  }

 private:
  Status create(size_t size, SegmentInfo* info) {
    uint64_t rnd[2] = {};
    if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) return systemError("getrandom");
    snprintf(info->name, sizeof(info->name), "/%s%d-%016llx%016llx", kPrefix, static_cast<int>(getpid()),
             static_cast<unsigned long long>(rnd[0]), static_cast<unsigned long long>(rnd[1]));
    int fd = shm_open(info->name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return systemError("shm_open(%s)", info->name);
    ownName_ = info->name;
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
      Status s = systemError("ftruncate(%s, %zu)", info->name, size);
      close(fd);
      return s;
    }
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return systemError("mmap(%s)", info->name);
    own_.reset(p, size);
    auto* bell = new (p) Doorbell();
    bell->pid.store(getpid());
    return Status::ok();
  }

  Status attach(const char* name, size_t size, Mapping* out) {
    int fd = shm_open(name, O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0) return systemError("shm_open(%s) of a peer", name);
    struct stat st{};
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != size) {
      close(fd);
      return makeError(nodusInvalidUsage, "shared memory %s has an unexpected size", name);
    }
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return systemError("mmap(%s) of a peer", name);
    out->reset(p, size);
    return Status::ok();
  }

  size_t ringSize_ = 0;
  Mapping own_;
  std::string ownName_;
  std::vector<Mapping> peers_;
  std::vector<int32_t> pids_;
  // Per peer: the ring it sends into (ours) and the one we send into (its).
  std::vector<const RingHeader*> inbound_, outbound_;
  uint32_t slots_ = 0;
  bool readsAll_ = false;
};

}  // namespace

std::unique_ptr<Transport> makeShmTransport() { return std::make_unique<ShmTransport>(); }

void removeStaleShmSegments() {
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (strncmp(e->d_name, kPrefix, strlen(kPrefix)) != 0) continue;
    const int pid = atoi(e->d_name + strlen(kPrefix));
    if (pid <= 0 || (kill(pid, 0) != 0 && errno == ESRCH)) {
      std::string name = std::string("/") + e->d_name;
      if (shm_unlink(name.c_str()) == 0) NODUS_INFO(-1, "removed stale shared memory %s of a dead process", name.c_str());
    }
  }
  closedir(d);
}

}  // namespace nodus
