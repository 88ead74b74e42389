#include "core/comm.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <span>

#include "base/dtype.h"
#include "base/log.h"
#include "base/params.h"
#include "topo/node.h"
#include "transports/registry.h"

namespace nodus {

Status CommConfig::fromEnvironment(CommConfig* c) {
  c->timeoutMs = param::kTimeoutMs.get();
  if (c->timeoutMs <= 0) return makeError(nodusInvalidArgument, "NODUS_TIMEOUT_MS must be positive");
  int64_t slot = param::kSlotBytes.get();
  if (slot != 0 && (slot < 64 || slot > (1LL << 30)))
    return makeError(nodusInvalidArgument, "NODUS_SLOT_BYTES=%lld is outside [64, 1G] (0: the transports' own)",
                     static_cast<long long>(slot));
  c->slotBytes = static_cast<size_t>(slot) / 64 * 64;  // 0: chosen at connect
  int64_t slots = param::kSlots.get();
  // A ring step forwards slice s while its successor may still hold slice
  // s-1: with one slot every rank would wait on the next (the verifier shows it).
  if (slots < 2 || slots > 64)
    return makeError(nodusInvalidArgument, "NODUS_SLOTS=%lld is outside [2, 64]", static_cast<long long>(slots));
  c->slots = static_cast<uint32_t>(slots);
  // A step taking every slot of a connection in a row could wait on a peer
  // that waits on it (a ring's neighbours both sending): at most half.
  const int64_t round = param::kRoundSlices.get();
  if (round < 0 || round > slots / 2)
    return makeError(nodusInvalidArgument, "NODUS_ROUND_SLICES=%lld is outside [0, NODUS_SLOTS/2 = %lld]",
                     static_cast<long long>(round), static_cast<long long>(slots / 2));
  c->spin = std::max<int64_t>(0, param::kSpin.get());
  c->algo = param::kAlgo.get();
  c->transport = param::kTransport.get();
  NODUS_TRY(parseBindMode(param::kBind.get(), &c->bind));
  NODUS_TRY(parseSlotCopy(param::kShmCopy.get(), &c->shmCopy));
  if (const int64_t cma = param::kShmCma.get(); cma != 0 && cma != 1)
    return makeError(nodusInvalidArgument, "NODUS_SHM_CMA=%lld: expected 0 or 1", static_cast<long long>(cma));
  c->shmCma = param::kShmCma.get() == 1;
  NODUS_TRY(AlgoSpec::parse(c->algo, &c->algoSpec));
  if (param::kChunkBytes.get() < 0) return makeError(nodusInvalidArgument, "NODUS_CHUNK_BYTES must not be negative");
  if (const int64_t ch = param::kChannels.get(); ch < 0 || ch > kMaxChannels)
    return makeError(nodusInvalidArgument, "NODUS_CHANNELS=%lld is outside [0, %lld] (0: the tuner picks)",
                     static_cast<long long>(ch), static_cast<long long>(kMaxChannels));
  // The values just checked, as every tool without a communicator takes them.
  PlanContext ctx;
  contextFromEnvironment(&ctx);
  c->sliceBytes = ctx.sliceBytes;
  c->sliceForced = ctx.sliceForced;
  c->roundSlices = ctx.roundSlices;
  c->channels = ctx.channels;
  c->channelsForced = ctx.channelsForced;
  c->directMaxBytes = ctx.directMaxBytes;
  return Status::ok();
}

namespace {

// What every rank tells every other at init.
struct RankInfo {
  char host[64];     // where the topology places the rank (NODUS_HOSTID, else the hostname)
  char machine[80];  // the machine it really runs on: which transports reach it
  uint64_t fabricFingerprint;
  int32_t numa;
  int32_t cores;        // CPUs the ranks under its kernel may run on between them
  int32_t kernelRanks;  // the ranks of the communicator under its kernel
  uint64_t processToken;  // random per process: equal tokens = same process
  int32_t pid;
  uint32_t slots;
  int32_t forcedTransport;  // index into the transport table, -1: none forced
  uint32_t usableTransports;  // bit t: transport t can run on this host (TransportEntry::usable)
  uint64_t slotBytes;
  // What the plans are made of, which every rank must build alike
  // (kPlanSettings names them; NODUS_ALGO as a hash of its text).
  int64_t planSettings[5];
};

constexpr const char* kPlanSettings[] = {"NODUS_ALGO", "NODUS_CHUNK_BYTES", "NODUS_ROUND_SLICES",
                                         "NODUS_DIRECT_MAX_BYTES", "NODUS_CHANNELS"};
static_assert(std::size(kPlanSettings) == std::size(RankInfo{}.planSettings));

// The settings as asked for (not as clamped to a slot that the transports
// may still change): ranks that ask alike plan alike.
void planSettingsOf(const CommConfig& c, int64_t* out) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a of NODUS_ALGO
  for (char ch : c.algo) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ULL;
  out[0] = static_cast<int64_t>(h);
  out[1] = param::kChunkBytes.get();
  out[2] = c.roundSlices;
  out[3] = std::max<int64_t>(-1, param::kDirectMaxBytes.get());  // every negative value: automatic
  out[4] = param::kChannels.get();
}

uint64_t processToken() {
  static const uint64_t token = [] {
    uint64_t t = 0;
    if (getrandom(&t, sizeof(t), 0) != sizeof(t)) t = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ULL;
    return t;
  }();
  return token;
}

// What every rank tells every other first: where it runs and on which CPUs
// it may, before nodus binds anything (binding needs to know who shares the
// machine, and the NUMA node a rank reports must be where it will run).
struct Placement {
  // The kernel it runs under (boot id): processes of one kernel share its
  // CPUs, even where UTS namespaces make them different machines to the
  // transports (the netns harness: four "hosts" on this machine's 2 cores).
  char kernel[40] = {};
  uint64_t processToken = 0;
  CpuMask cpus;
};

// Binds this process to its share of the machine when NODUS_BIND says so
// (binding.h), at most once per process: later communicators, and
// subgroups of this one, keep it.
void bindThisProcess(const CommConfig& cfg, const NodeInfo& node, const std::vector<Placement>& places, int rank,
                     bool inProcess) {
  static std::atomic<bool> bound{false};
  if (cfg.bind == BindMode::None || inProcess || bound.load()) return;
  const Placement& me = places[static_cast<size_t>(rank)];
  if (node.source != "this machine") {
    NODUS_INFO(rank, "NODUS_BIND=%s: not bound (the node is %s, not this machine)", bindModeName(cfg.bind),
               node.source.c_str());
    return;
  }
  // The processes sharing this kernel's CPUs, in order of their first rank.
  std::vector<uint64_t> procs;
  bool allFree = true;  // nothing bound any of them: each may run anywhere
  for (const Placement& p : places) {
    if (strncmp(p.kernel, me.kernel, sizeof(p.kernel)) != 0) continue;
    if (std::find(procs.begin(), procs.end(), p.processToken) == procs.end()) procs.push_back(p.processToken);
    allFree = allFree && p.cpus.count() >= node.pus;
  }
  if (cfg.bind == BindMode::Auto && !allFree) {
    NODUS_INFO(rank, "NODUS_BIND=auto: kept the launcher's binding (CPUs %s)", me.cpus.describe().c_str());
    return;
  }
  const int count = static_cast<int>(procs.size());
  const int index = static_cast<int>(std::find(procs.begin(), procs.end(), me.processToken) - procs.begin());
  const std::vector<int> share = bindingShare(node, cfg.bind, index, count);
  if (share.empty()) {
    NODUS_INFO(rank, "NODUS_BIND=%s: not bound (%d processes on %d cores)", bindModeName(cfg.bind), count,
               node.cores);
    return;
  }
  Status s = bindProcess(share);
  if (!s.isOk()) {
    NODUS_WARN(rank, "NODUS_BIND=%s: could not bind to CPUs %s: %s", bindModeName(cfg.bind),
               maskOf(share).describe().c_str(), s.message().c_str());
    return;
  }
  bound.store(true);
  NODUS_INFO(rank, "NODUS_BIND=%s: process %d of %d on this machine bound to CPUs %s (NUMA node %d)",
             bindModeName(cfg.bind), index, count, maskOf(share).describe().c_str(), node.numaOfCpu(share.front()));
}

// The host name the topology gives a rank: NODUS_HOSTID (one name, or a
// comma-separated name per rank so threads can pose as hosts), else the
// hostname.
Status hostIdOfRank(int rank, char* out, size_t size) {
  const std::string ids = param::kHostId.get();
  std::string id;
  if (ids.find(',') == std::string::npos) {
    id = ids.empty() ? std::string(hostName()) : ids;
  } else {
    std::vector<std::string> list;
    size_t start = 0;
    for (size_t comma; (comma = ids.find(',', start)) != std::string::npos; start = comma + 1)
      list.push_back(ids.substr(start, comma - start));
    list.push_back(ids.substr(start));
    if (static_cast<size_t>(rank) >= list.size())
      return makeError(nodusInvalidArgument, "NODUS_HOSTID lists %zu host names; rank %d has none", list.size(), rank);
    id = list[static_cast<size_t>(rank)];
  }
  if (id.empty() || id.size() >= size)
    return makeError(nodusInvalidArgument, "NODUS_HOSTID: host name '%s' of rank %d is empty or longer than %zu bytes",
                     id.c_str(), rank, size - 1);
  snprintf(out, size, "%s", id.c_str());
  return Status::ok();
}

// The kernel this process runs under: its boot id (the hostname where
// /proc does not say).
std::string kernelId() {
  char boot[40] = {};
  if (FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r")) {
    if (!fgets(boot, sizeof(boot), f)) boot[0] = '\0';
    fclose(f);
  }
  boot[strcspn(boot, "\n")] = '\0';
  if (boot[0] == '\0') gethostname(boot, sizeof(boot) - 1);
  return boot;
}

// This machine as transports see it: the kernel's hostname (a UTS namespace
// makes another host) and boot id.
std::string machineId() {
  char name[65] = {};
  gethostname(name, sizeof(name) - 1);
  std::string id = name;
  if (FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r")) {
    char boot[40] = {};
    if (fgets(boot, sizeof(boot), f)) {
      id.push_back('/');
      id.append(boot, strnlen(boot, 8));
    }
    fclose(f);
  }
  return id.substr(0, 79);
}

// The node is the same for every communicator of a process: detect it once
// (per NODUS_HWLOC_XML value, which tests change between communicators).
Status localNode(const NodeInfo** out) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<NodeInfo>> cache;
  const std::string key = param::kHwlocXml.get();
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) {
    auto node = std::make_unique<NodeInfo>();
    NODUS_TRY(detectNode(node.get()));
    it = cache.emplace(key, std::move(node)).first;
  }
  *out = it->second.get();
  return Status::ok();
}

}  // namespace

Status Comm::create(InitOptions opts, std::unique_ptr<Comm>* out) {
  std::unique_ptr<Comm> c(new Comm());
  NODUS_TRY(c->init(opts));
  *out = std::move(c);
  return Status::ok();
}

Status Comm::init(InitOptions& opts) {
  bootstrap_ = std::move(opts.bootstrap);
  rank_ = bootstrap_->rank();
  nranks_ = bootstrap_->nranks();
  NODUS_TRY(CommConfig::fromEnvironment(&cfg_));
  static std::once_flag unknownChecked;  // once a process: a typo is the user's, not each communicator's
  std::call_once(unknownChecked, [this] {
    for (const std::string& name : unknownParams())
      NODUS_WARN(rank_, "%s is not a nodus parameter and is ignored (nodus-info lists them)", name.c_str());
  });
  FabricConfig fabric;
  NODUS_TRY(fabricFromEnvironment(&fabric));
  const NodeInfo* node = nullptr;
  NODUS_TRY(localNode(&node));

  std::vector<Placement> places(static_cast<size_t>(nranks_));
  Placement& place = places[static_cast<size_t>(rank_)];
  snprintf(place.kernel, sizeof(place.kernel), "%s", kernelId().c_str());
  place.processToken = processToken();
  place.cpus = currentCpus();
  NODUS_TRY(bootstrap_->allGather(places.data(), sizeof(Placement)));
  // The CPUs the ranks under this kernel may use between them: a launcher
  // that gives each rank a core of its own does not oversubscribe it.
  CpuMask machineCpus;
  kernelRanks_ = 0;
  for (const Placement& p : places)
    if (strncmp(p.kernel, place.kernel, sizeof(p.kernel)) == 0) {
      machineCpus |= p.cpus;
      ++kernelRanks_;
    }
  machineCpus_ = std::max(1, machineCpus.count());
  bindThisProcess(cfg_, *node, places, rank_, opts.inProcess);

  std::vector<RankInfo> infos(nranks_);
  RankInfo& me = infos[rank_];
  memset(&me, 0, sizeof(me));
  NODUS_TRY(hostIdOfRank(rank_, me.host, sizeof(me.host)));
  snprintf(me.machine, sizeof(me.machine), "%s", machineId().c_str());
  me.processToken = processToken();
  me.pid = getpid();
  me.slots = cfg_.slots;
  me.slotBytes = cfg_.slotBytes;
  planSettingsOf(cfg_, me.planSettings);
  int forced = -1;
  if (!cfg_.transport.empty()) {
    std::string known;
    for (size_t t = 0; t < transportTable().size(); ++t) {
      if (cfg_.transport == transportTable()[t].name) forced = static_cast<int>(t);
      known += (known.empty() ? "" : ", ") + std::string(transportTable()[t].name);
    }
    if (forced < 0)
      return makeError(nodusInvalidArgument, "NODUS_TRANSPORT=%s names no transport (%s)", cfg_.transport.c_str(), known.c_str());
  }
  me.forcedTransport = forced;
  me.fabricFingerprint = fabric.fingerprint();
  me.numa = currentNuma(*node);
  me.cores = machineCpus_;
  me.kernelRanks = kernelRanks_;
  NODUS_TRY(bootstrap_->allGather(infos.data(), sizeof(RankInfo)));
  std::vector<std::string> hostOfRank;
  std::vector<int> numaOfRank;
  for (int r = 0; r < nranks_; ++r) {
    if (infos[r].fabricFingerprint != me.fabricFingerprint)
      return makeError(nodusInvalidUsage,
                       "rank %d on %s describes the fabric differently from rank %d on %s (here: %s); every rank must "
                       "see the same NODUS_TOPO_FILE contents or NODUS_TORUS_DIMS / NODUS_FATTREE",
                       r, infos[r].host, rank_, me.host, fabric.describe().c_str());
    hostOfRank.emplace_back(infos[r].host, strnlen(infos[r].host, sizeof(infos[r].host)));
    numaOfRank.push_back(infos[r].numa);
  }
  NODUS_TRY(Topology::build(fabric, hostOfRank, numaOfRank, &topo_));
  // Computed from what every rank reported, so every rank prices algorithms
  // alike (they must all choose the same one).
  for (const RankInfo& info : infos) {
    topo_.oversubscribed |= info.kernelRanks > info.cores;
    if (info.cores > 0)
      topo_.coreShare = std::max(topo_.coreShare, static_cast<double>(info.kernelRanks) / info.cores);
  }
  for (int r = 0; r < nranks_; ++r) {
    if (infos[r].forcedTransport != forced)
      return makeError(nodusInvalidUsage, "rank %d forces NODUS_TRANSPORT=%s but rank %d %s%s: every rank must force the same one",
                       r, infos[r].forcedTransport < 0 ? "(none)" : transportTable()[infos[r].forcedTransport].name, rank_,
                       forced < 0 ? "forces none" : "forces ", forced < 0 ? "" : transportTable()[forced].name);
    if (infos[r].slotBytes != cfg_.slotBytes || infos[r].slots != cfg_.slots)
      return makeError(nodusInvalidUsage,
                       "rank %d uses NODUS_SLOT_BYTES=%llu NODUS_SLOTS=%u but rank %d uses %llu and %u: every rank "
                       "must use the same values",
                       r, static_cast<unsigned long long>(infos[r].slotBytes), infos[r].slots, rank_,
                       static_cast<unsigned long long>(cfg_.slotBytes), cfg_.slots);
    // Ranks that plan differently would exchange messages that do not match.
    for (size_t i = 0; i < std::size(kPlanSettings); ++i) {
      if (infos[r].planSettings[i] == me.planSettings[i]) continue;
      if (i == 0)
        return makeError(nodusInvalidUsage, "rank %d sets a different NODUS_ALGO from rank %d ('%s'): every rank must "
                         "set the same", r, rank_, cfg_.algo.c_str());
      return makeError(nodusInvalidUsage, "rank %d uses %s=%lld but rank %d uses %lld: every rank must use the same "
                       "value", r, kPlanSettings[i], static_cast<long long>(infos[r].planSettings[i]), rank_,
                       static_cast<long long>(me.planSettings[i]));
    }
  }

  // Which transports this host can run, for the pairs to agree on (a device
  // being up is a local fact). Probed only where it can matter, and every
  // rank decides alike whether to: when some rank is on another machine, and
  // only for transports not excluded by NODUS_TRANSPORT.
  std::vector<std::string> unusableWhy(transportTable().size());
  bool anyRemote = false;
  for (const RankInfo& info : infos) anyRemote |= strncmp(info.machine, infos[0].machine, sizeof(info.machine)) != 0;
  if (anyRemote) {
    std::vector<uint32_t> usable(static_cast<size_t>(nranks_), 0);
    for (size_t t = 0; t < transportTable().size(); ++t) {
      const TransportEntry& e = transportTable()[t];
      const bool candidate = forced < 0 || forced == static_cast<int>(t);
      if (e.usable == nullptr || (candidate && e.usable(&unusableWhy[t]))) usable[static_cast<size_t>(rank_)] |= 1u << t;
    }
    NODUS_TRY(bootstrap_->allGather(usable.data(), sizeof(uint32_t)));
    for (int r = 0; r < nranks_; ++r) infos[r].usableTransports = usable[static_cast<size_t>(r)];
  } else {
    for (RankInfo& info : infos) info.usableTransports = ~0u;
  }

  // Choose a transport per peer: the forced one, else the first in the table
  // that reaches it. Placement is symmetric and NODUS_TRANSPORT the same
  // everywhere (checked above), so both ends of a pair choose alike.
  const std::span<const TransportEntry> table = transportTable();
  std::vector<std::vector<int>> peersByTransport(table.size());
  peerTransport_.assign(static_cast<size_t>(nranks_), -1);
  uint32_t unusableSaid = 0;
  for (int r = 0; r < nranks_; ++r) {
    PeerPlacement where;
    where.sameHost = strncmp(infos[r].machine, me.machine, sizeof(me.machine)) == 0;
    where.sameProcess = opts.inProcess && where.sameHost && infos[r].processToken == me.processToken;
    if (r == rank_) continue;
    int pick = -1;
    for (size_t t = 0; t < table.size() && pick < 0; ++t) {
      if ((forced >= 0 && forced != static_cast<int>(t)) || !table[t].reaches(where)) continue;
      const uint32_t bit = 1u << t;
      if ((me.usableTransports & infos[r].usableTransports & bit) == 0) {
        // Said once per communicator and transport, then the next one is tried.
        if ((unusableSaid & bit) == 0)
          NODUS_INFO(rank_, "%s: not used for rank %d on %s%s%s; trying the next transport", table[t].name, r,
                     infos[r].host, (me.usableTransports & bit) == 0 ? ": " : " (it has no usable device)",
                     (me.usableTransports & bit) == 0 ? unusableWhy[t].c_str() : "");
        unusableSaid |= bit;
        continue;
      }
      pick = static_cast<int>(t);
    }
    if (pick < 0)
      return makeError(nodusInvalidUsage, "NODUS_TRANSPORT=%s cannot reach rank %d on host %s from rank %d on host %s%s%s",
                       cfg_.transport.c_str(), r, infos[r].host, rank_, me.host,
                       forced >= 0 && !unusableWhy[static_cast<size_t>(forced)].empty() ? ": " : "",
                       forced >= 0 ? unusableWhy[static_cast<size_t>(forced)].c_str() : "");
    peersByTransport[static_cast<size_t>(pick)].push_back(r);
    peerTransport_[static_cast<size_t>(r)] = pick;
    peers_.push_back(r);
  }
  // Every rank connects every transport that any rank uses, in table order,
  // with or without peers of its own, so that their bootstrap exchanges match.
  uint32_t used = 0;
  for (size_t t = 0; t < table.size(); ++t)
    if (!peersByTransport[t].empty()) used |= 1u << t;
  std::vector<uint32_t> usedBy(static_cast<size_t>(nranks_));
  usedBy[static_cast<size_t>(rank_)] = used;
  NODUS_TRY(bootstrap_->allGather(usedBy.data(), sizeof(uint32_t)));
  for (uint32_t u : usedBy) used |= u;

  // One slot size for every connection (a plan's slice must fit each): the
  // smallest the transports in use want, computed alike on every rank.
  if (cfg_.slotBytes == 0) {
    cfg_.slotBytes = slotBytesFor(used);
    PlanContext ctx;
    contextFromEnvironment(&ctx, static_cast<int64_t>(cfg_.slotBytes));
    cfg_.sliceBytes = ctx.sliceBytes;
  }
  ConnectRequest req;
  req.bootstrap = bootstrap_.get();
  req.rank = rank_;
  req.nranks = nranks_;
  req.slotBytes = cfg_.slotBytes;
  req.slots = cfg_.slots;
  req.timeoutMs = cfg_.timeoutMs;
  req.node = node;
  req.numa = me.numa;
  req.shmCopy = cfg_.shmCopy;
  req.shmCma = cfg_.shmCma;
  const auto at = std::find(topo_.ringOrder.begin(), topo_.ringOrder.end(), rank_);
  const int64_t pos = at - topo_.ringOrder.begin();
  req.ringPrev = topo_.ringOrder[static_cast<size_t>((pos + nranks_ - 1) % nranks_)];
  req.ringNext = topo_.ringOrder[static_cast<size_t>((pos + 1) % nranks_)];
  localBell_ = std::make_unique<Doorbell>();
  req.bell = localBell_.get();
  bool bellUsed = false;  // by a transport with peers, before any provided one
  conns_.send.resize(static_cast<size_t>(nranks_));
  conns_.recv.resize(static_cast<size_t>(nranks_));
  conns_.peerDoorbells.assign(static_cast<size_t>(nranks_), nullptr);
  transports_.resize(table.size());
  std::string names;
  for (size_t t = 0; t < table.size(); ++t) {
    if ((used & (1u << t)) == 0) continue;
    transports_[t] = table[t].make();
    req.peers = peersByTransport[t];
    Connections c;
    NODUS_TRY(transports_[t]->connect(req, c));
    if (c.doorbell != nullptr) {
      // Peers of the transports connected before rang the earlier doorbell.
      if (bellUsed)
        return makeError(nodusInternalError, "transport %s provides this rank's doorbell after others used another one",
                         table[t].name);
      req.bell = c.doorbell;
    }
    bellUsed |= !req.peers.empty();
    for (int peer : req.peers) {
      const size_t i = static_cast<size_t>(peer);
      conns_.send[i] = std::move(c.send[i]);
      conns_.recv[i] = std::move(c.recv[i]);
      if (i < c.peerDoorbells.size()) conns_.peerDoorbells[i] = c.peerDoorbells[i];
    }
    if (!req.peers.empty())
      names += (names.empty() ? "" : "+") + std::string(table[t].name) + "(" + std::to_string(req.peers.size()) + ")";
  }
  conns_.doorbell = req.bell;
  if (names.empty()) names = "none";
  // Whether slices larger than a slot may go by reference (Comm::plan):
  // every rank must say so of all its incoming connections, as every rank
  // must cut a call into the same slices.
  {
    uint32_t mine = nranks_ > 1 ? 1 : 0;
    for (int r = 0; r < nranks_; ++r) {
      const int t = peerTransport_[static_cast<size_t>(r)];
      if (r != rank_ && (t < 0 || !transports_[static_cast<size_t>(t)]->readsEveryPeerAcross())) mine = 0;
    }
    std::vector<uint32_t> all(static_cast<size_t>(nranks_));
    all[static_cast<size_t>(rank_)] = mine;
    NODUS_TRY(bootstrap_->allGather(all.data(), sizeof(uint32_t)));
    wholeReferences_ = std::all_of(all.begin(), all.end(), [](uint32_t v) { return v != 0; });
  }
  NODUS_TRY(priceLinksAtDevices());

  // Spinning helps only while every rank of this host has a core to itself.
  // A transport thread (the net proxy) would want a second one: where the
  // machine has no core to spare for it, the thread stands aside while the
  // executor polls and moves the data itself (each wake-up of the thread was
  // a context switch on the executor's core: an 8 B tcp AllGather took
  // 25-45 us that way, 11-12 us with the executor polling the sockets).
  const int cores = machineCpus_;
  callerPolled_.clear();
  for (size_t t = 0; t < table.size(); ++t)
    if (table[t].ownThread && !peersByTransport[t].empty() && kernelRanks_ * 2 > cores)
      callerPolled_.push_back(transports_[t].get());
  spin_ = kernelRanks_ > cores ? 0 : cfg_.spin;
  NODUS_INFO(rank_, "rank %d of %d on %s: transports %s, %d rank(s) on %d core(s)%s%s, %u slots of %zu bytes", rank_,
             nranks_, me.host, names.c_str(), kernelRanks_, cores, spin_ ? "" : " (oversubscribed: no spinning)",
             callerPolled_.empty() ? "" : " (no core to spare: the executor polls the network itself)", cfg_.slots,
             cfg_.slotBytes);
  if (rank_ == 0) NODUS_INFO(rank_, "topology:\n%s", topo_.describe().c_str());
  return Status::ok();
}

// Where the fabric's description gives no link bandwidth, the links between
// hosts are priced at the slowest device the ranks' net transports leave by
// (as NCCL prices a NIC at its reported speed), not at LinkSpec's default of
// 25 GB/s: with that default, on 4 oversubscribed hosts of 2 ranks linked at
// 1 Gb/s, the tuner saw shared memory as the bottleneck and picked Bruck for
// AllGather, which sends 13/8 of the data over each host's link where the
// ring sends 7/8 (nodus-perf between network namespaces, 4-64 MiB: 33-48% of
// the link, against 90-95% with the ring). Every rank takes the same
// minimum, so every rank prices alike. A host whose ranks leave by several
// NICs is still priced at one of them: a ring crosses each host boundary
// once, from one rank, so one NIC is what it gets.
Status Comm::priceLinksAtDevices() {
  // Every rank returns here alike: whether the fabric gave the bandwidth is
  // part of the fingerprint every rank checked at init.
  if (topo_.fabric.bandwidthGiven || topo_.hosts.size() <= 1) return Status::ok();
  double mine = 0;
  for (const auto& t : transports_)
    if (t && t->deviceGBs() > 0) mine = mine > 0 ? std::min(mine, t->deviceGBs()) : t->deviceGBs();
  std::vector<double> all(static_cast<size_t>(nranks_), 0.0);
  all[static_cast<size_t>(rank_)] = mine;
  NODUS_TRY(bootstrap_->allGather(all.data(), sizeof(double)));
  double slowest = 0;
  for (double g : all)
    if (g > 0) slowest = slowest > 0 ? std::min(slowest, g) : g;
  if (slowest <= 0) return Status::ok();
  topo_.fabric.link.bandwidthGBs = slowest;
  if (rank_ == 0)
    NODUS_INFO(rank_, "links between hosts priced at %g GB/s, the slowest device the ranks' net transport uses "
               "(a fabric file's link.bandwidth overrides it)", slowest);
  return Status::ok();
}

Comm::~Comm() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    claimWaiters_.fetch_add(1, std::memory_order_seq_cst);
    cv_.wait(lock, [&] { return queue_.empty() && !busy_.load(std::memory_order_seq_cst); });
    claimWaiters_.fetch_sub(1, std::memory_order_seq_cst);
    stop_ = true;
  }
  cv_.notify_all();
  if (progress_.joinable()) progress_.join();
  // Later transports may ring a doorbell an earlier one owns (the net proxy,
  // shm's doorbell): take them down in reverse order, connections first.
  conns_ = Connections();
  while (!transports_.empty()) transports_.pop_back();
  if (scratch_) munmap(scratch_, scratchBytes_);
}

Status Comm::plan(const PlanKey& key, const Plan** out) {
  if (const auto* last = lastPlan_.load(std::memory_order_acquire); last && last->first == key) {
    *out = last->second.get();
    return Status::ok();
  }
  std::lock_guard<std::mutex> lock(planMu_);
  auto it = plans_.find(key);
  if (it != plans_.end()) {
    lastPlan_.store(&*it, std::memory_order_release);
    *out = it->second.get();
    return Status::ok();
  }
  Choice choice;
  PlanCapabilities caps;
  caps.wholeReferences = wholeReferences_;
  auto p = std::make_unique<Plan>();
  NODUS_TRY(makePlan(key, planContext(), cfg_.algoSpec, caps, p.get(), &choice));
  const Algorithm* algo = choice.algo;
  NODUS_INFO(rank_,
             "%s count=%llu x %uB%s root=%d: %s in %s slices%s, %u channel(s)%s, %zu step(s), %zu phase(s) "
             "(estimates: %s)",
             collectiveName(key.coll), static_cast<unsigned long long>(key.count), key.typeSize,
             key.inPlace ? " in-place" : "", key.root, algo->name, formatBytes(p->sliceElems * key.typeSize).c_str(),
             cfg_.sliceForced ? " (NODUS_CHUNK_BYTES)" : "", p->channels,
             cfg_.channelsForced && algo->maxChannels > 1 ? " (NODUS_CHANNELS)" : "", p->steps.size(),
             p->phaseStarts.size() + 1, choice.explain().c_str());
  if (logLevel() >= LogLevel::Trace) NODUS_TRACE(rank_, "%s", describe(*p).c_str());
  *out = p.get();
  lastPlan_.store(&*plans_.emplace(key, std::move(p)).first, std::memory_order_release);
  return Status::ok();
}

PlanContext Comm::planContext() const {
  PlanContext ctx;
  ctx.sliceBytes = cfg_.sliceBytes;
  ctx.sliceForced = cfg_.sliceForced;
  ctx.channels = cfg_.channels;
  ctx.channelsForced = cfg_.channelsForced;
  ctx.slots = cfg_.slots;
  ctx.roundSlices = cfg_.roundSlices;
  ctx.directMaxBytes = cfg_.directMaxBytes;
  ctx.topo = &topo_;
  return ctx;
}

Status Comm::choose(const PlanKey& key, Choice* out) const {
  return chooseAlgorithm(key, planContext(), cfg_.algoSpec, out);
}

Status Comm::assignScratch(std::span<Task> tasks) {
  auto part = [this](const Task& t) -> size_t {
    if (t.comm != this || t.plan->scratchElems == 0) return 0;
    return (t.plan->scratchElems * typeSize(t.type) + 63) / 64 * 64;
  };
  size_t total = 0;
  for (const Task& t : tasks) total += part(t);
  if (total == 0) return Status::ok();
  if (total > scratchBytes_) NODUS_TRY(growScratch(total));
  size_t off = 0;
  for (Task& t : tasks)
    if (const size_t n = part(t)) {
      t.scratch = scratch_ + off;
      off += n;
    }
  return Status::ok();
}

Status Comm::growScratch(size_t bytes) {
  const size_t size = std::max<size_t>(bytes, std::max<size_t>(scratchBytes_ * 2, 1 << 16));
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
  if (p == MAP_FAILED) return systemError("mmap(%zu bytes of scratch)", size);
  if (scratch_) munmap(scratch_, scratchBytes_);
  scratch_ = static_cast<std::byte*>(p);
  scratchBytes_ = size;
  return Status::ok();
}

Status Comm::failure() const {
  if (!failed_.load(std::memory_order_acquire)) return Status::ok();  // every call asks: no lock then
  std::lock_guard<std::mutex> lock(errMu_);
  return failure_;
}

void Comm::recordFailure(const Status& s) {
  std::lock_guard<std::mutex> lock(errMu_);
  if (failure_.isOk()) failure_ = s;
  failed_.store(!failure_.isOk(), std::memory_order_release);
}

void Comm::notifyPeersOfFailure() {
  if (!conns_.doorbell) return;
  conns_.doorbell->aborted.store(1, std::memory_order_seq_cst);
  conns_.doorbell->ring();
  for (Doorbell* d : conns_.peerDoorbells)
    if (d) d->ring();
  for (const auto& t : transports_)
    if (t) t->notifyFailure();
}

void Comm::abort() {
  aborted_.store(true, std::memory_order_release);
  notifyPeersOfFailure();
  cv_.notify_all();
}

Status Comm::checkPeer(int peer) {
  if (peer < 0 || peer >= nranks_ || peer == rank_) return Status::ok();
  Doorbell* d = conns_.peerDoorbells[peer];
  if (d && d->aborted.load(std::memory_order_acquire))
    return makeError(nodusRemoteError, "rank %d failed or aborted", peer);
  const int t = peerTransport_[static_cast<size_t>(peer)];
  return t < 0 ? Status::ok() : transports_[static_cast<size_t>(t)]->checkPeer(peer);
}

static Status usable(const Comm& c) {
  if (c.aborted()) return makeError(nodusAborted, "the communicator was aborted");
  Status f = c.failure();
  if (!f.isOk()) return Status(f.code(), "the communicator failed earlier and cannot be used: " + f.message());
  return Status::ok();
}

void Comm::release() {
  busy_.store(false, std::memory_order_seq_cst);
  if (queued_.load(std::memory_order_seq_cst) == 0 && claimWaiters_.load(std::memory_order_seq_cst) == 0) return;
  { std::lock_guard<std::mutex> lock(mu_); }  // a waiter that saw busy_ set is inside cv_.wait now
  cv_.notify_all();
}

Status Comm::runBlocking(std::vector<Task> tasks) {
  std::shared_ptr<Request> waitFor;
  {
    std::unique_lock<std::mutex> lock(mu_);
    NODUS_TRY(usable(*this));
    if (!queue_.empty() || !tryClaim()) {
      waitFor = std::make_shared<Request>();
      tasks.back().request = waitFor;
      queue_.push_back(std::move(tasks));
      setQueued();
      if (!progress_.joinable()) progress_ = std::thread([this] { progressMain(); });
      cv_.notify_all();
    }
  }
  if (waitFor) return waitFor->wait();
  return runClaimed(tasks);
}

Status Comm::runBlocking(Task&& task) {
  // Nothing queued, nobody waiting for the claim, nothing running: no lock.
  // A call queued earlier by this thread is counted in queued_ until the
  // progress thread has claimed it (it claims before it dequeues), so no
  // call overtakes an earlier one; a waiting claim() is not starved by a
  // loop of blocking calls.
  if (queued_.load(std::memory_order_seq_cst) == 0 && claimWaiters_.load(std::memory_order_seq_cst) == 0 &&
      tryClaim()) {
    if (Status s = usable(*this); !s.isOk()) {
      release();
      return s;
    }
    return runClaimed(std::span<Task>(&task, 1));
  }
  std::vector<Task> batch;
  batch.push_back(std::move(task));
  return runBlocking(std::move(batch));
}

Status Comm::runClaimed(std::span<Task> tasks) {
  Status s = runTasks(tasks);
  release();
  return s;
}

Status Comm::enqueue(std::vector<Task> tasks) {
  std::lock_guard<std::mutex> lock(mu_);
  NODUS_TRY(usable(*this));
  queue_.push_back(std::move(tasks));
  setQueued();
  if (!progress_.joinable()) progress_ = std::thread([this] { progressMain(); });
  cv_.notify_all();
  return Status::ok();
}

bool Comm::runFront(std::unique_lock<std::mutex>& lock) {
  if (queue_.empty() || !tryClaim()) return false;
  std::vector<Task> tasks = std::move(queue_.front());
  queue_.pop_front();
  setQueued();
  lock.unlock();
  runQueued(tasks);
  lock.lock();
  busy_.store(false, std::memory_order_seq_cst);
  cv_.notify_all();
  return true;
}

void Comm::progressUntil(const Request& r) {
  std::unique_lock<std::mutex> lock(mu_);
  while (!r.done.load(std::memory_order_acquire) && runFront(lock)) {
  }
}

void Comm::claim() {
  std::unique_lock<std::mutex> lock(mu_);
  claimWaiters_.fetch_add(1, std::memory_order_seq_cst);
  cv_.wait(lock, [&] { return queue_.empty() && tryClaim(); });
  claimWaiters_.fetch_sub(1, std::memory_order_seq_cst);
}

void Comm::unclaim() { release(); }

void Comm::runQueued(std::vector<Task>& tasks) {
  Status s = usable(*this);
  if (s.isOk()) s = runTasks(tasks);
  for (Task& t : tasks)
    if (t.request) t.request->complete(s);
}

void Comm::progressMain() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (!queue_.empty() && !busy_.load(std::memory_order_seq_cst)); });
    if (queue_.empty()) return;  // stop_ with nothing left
    runFront(lock);  // may find the claim taken again: then wait for its release
  }
}

void Comm::setLastError(const std::string& msg) {
  std::lock_guard<std::mutex> lock(errMu_);
  lastError_ = msg;
}

const char* Comm::lastError() {
  std::lock_guard<std::mutex> lock(errMu_);
  return lastError_.c_str();
}

}  // namespace nodus
