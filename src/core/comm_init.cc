// Communicator set-up: the settings a communicator runs with, and Comm::init
// in its stages (placement and binding, what every rank is, the transports,
// what the connections can do). The rest of Comm is in comm.cc.
#include "core/comm.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <span>

#include "base/dtype.h"
#include "base/log.h"
#include "base/settings.h"
#include "topo/node.h"
#include "transports/registry.h"
#include "transports/selection.h"

namespace nodus {

Status CommConfig::fromSettings(const Settings& settings, CommConfig* c) {
  // Each value is in its registered range already (Settings::set); what is
  // checked here is what depends on other values.
  c->timeoutMs = settings.get(param::kTimeoutMs);
  int64_t slot = settings.get(param::kSlotBytes);
  if (slot != 0 && (slot < 64 || slot > (1LL << 30)))
    return makeError(nodusInvalidArgument, "NODUS_SLOT_BYTES=%lld is outside [64, 1G] (0: the transports' own)",
                     static_cast<long long>(slot));
  c->slotBytes = static_cast<size_t>(slot) / 64 * 64;  // 0: chosen at connect
  // At least 2 slots (NODUS_SLOTS' range): a ring step forwards slice s
  // while its successor may still hold slice s-1, and with one slot every
  // rank would wait on the next (the verifier shows it).
  const int64_t slots = settings.get(param::kSlots);
  c->slots = static_cast<uint32_t>(slots);
  // A step taking every slot of a connection in a row could wait on a peer
  // that waits on it (a ring's neighbours both sending): at most half.
  const int64_t round = settings.get(param::kRoundSlices);
  if (round < 0 || round > slots / 2)
    return makeError(nodusInvalidArgument, "NODUS_ROUND_SLICES=%lld is outside [0, NODUS_SLOTS/2 = %lld]",
                     static_cast<long long>(round), static_cast<long long>(slots / 2));
  c->spin = settings.get(param::kSpin);
  c->algo = settings.get(param::kAlgo);
  c->transport = settings.get(param::kTransport);
  c->traceDir = settings.get(param::kTrace);
  NODUS_TRY(parseBindMode(settings.get(param::kBind), &c->bind));
  NODUS_TRY(parseSlotCopy(settings.get(param::kShmCopy), &c->shmCopy));
  c->shmCma = settings.get(param::kShmCma) == 1;
  NODUS_TRY(AlgoSpec::parse(c->algo, &c->algoSpec));
  // The values just checked, as every tool without a communicator takes them.
  PlanContext ctx;
  contextFromSettings(settings, &ctx);
  c->sliceBytes = ctx.sliceBytes;
  c->sliceForced = ctx.sliceForced;
  c->roundSlices = ctx.roundSlices;
  c->channels = ctx.channels;
  c->channelsForced = ctx.channelsForced;
  c->directMaxBytes = ctx.directMaxBytes;
  return Status::ok();
}


namespace {

constexpr const char* kPlanSettings[] = {"NODUS_ALGO", "NODUS_SLICE_BYTES (formerly NODUS_CHUNK_BYTES)", "NODUS_ROUND_SLICES",
                                         "NODUS_DIRECT_MAX_BYTES", "NODUS_CHANNELS"};
static_assert(std::size(kPlanSettings) == std::size(RankInfo{}.planSettings));

// The settings as asked for (not as clamped to a slot that the transports
// may still change): ranks that ask alike plan alike.
void planSettingsOf(const Settings& settings, const CommConfig& c, int64_t* out) {
  uint64_t h = 1469598103934665603ULL;  // FNV-1a of NODUS_ALGO
  for (char ch : c.algo) h = (h ^ static_cast<unsigned char>(ch)) * 1099511628211ULL;
  out[0] = static_cast<int64_t>(h);
  out[1] = settings.get(param::kSliceBytes);
  out[2] = c.roundSlices;
  out[3] = settings.get(param::kDirectMaxBytes);
  out[4] = settings.get(param::kChannels);
}

uint64_t processToken() {
  static const uint64_t token = [] {
    uint64_t t = 0;
    if (getrandom(&t, sizeof(t), 0) != sizeof(t)) t = static_cast<uint64_t>(getpid()) * 0x9e3779b97f4a7c15ULL;
    return t;
  }();
  return token;
}

}  // namespace


namespace {

// Binds this process to its share of the machine when NODUS_BIND says so
// (binding.h), at most once per process: later communicators, and
// subgroups of this one, keep it.
void bindThisProcess(const CommConfig& cfg, const NodeInfo& node, const std::vector<RankPlacement>& places, int rank,
                     bool inProcess) {
  static std::atomic<bool> bound{false};
  if (cfg.bind == BindMode::None || inProcess || bound.load()) return;
  const RankPlacement& me = places[static_cast<size_t>(rank)];
  if (node.source != "this machine") {
    NODUS_INFO(rank, "NODUS_BIND=%s: not bound (the node is %s, not this machine)", bindModeName(cfg.bind),
               node.source.c_str());
    return;
  }
  // The processes sharing this kernel's CPUs, in order of their first rank.
  std::vector<uint64_t> procs;
  bool allFree = true;  // nothing bound any of them: each may run anywhere
  for (const RankPlacement& p : places) {
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
Status hostIdOfRank(const Settings& settings, int rank, char* out, size_t size) {
  const std::string& ids = settings.get(param::kHostId);
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
Status localNode(const Settings& settings, const NodeInfo** out) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<NodeInfo>> cache;
  const std::string& key = settings.get(param::kHwlocXml);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it == cache.end()) {
    auto node = std::make_unique<NodeInfo>();
    NODUS_TRY(detectNode(settings, node.get()));
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

// Communicator set-up, in stages; three exchanges over the bootstrap: where
// each rank runs (before binding, which needs it), what each rank is once
// bound (its NUMA node, host, settings, usable transports), and what the
// connections can do (known only once connected).
Status Comm::init(InitOptions& opts) {
  bootstrap_ = std::move(opts.bootstrap);
  rank_ = bootstrap_->rank();
  nranks_ = bootstrap_->nranks();
  settings_ = std::move(opts.settings);
  initParent_ = opts.parent;
  initParentRanks_ = opts.parentRanks;
  if (opts.parent != nullptr) opts.inProcess = opts.parent->inProcess_;
  inProcess_ = opts.inProcess;
  NODUS_TRY(CommConfig::fromSettings(settings_, &cfg_));
  checkTraceDir();
  static std::once_flag unknownChecked;  // once a process: a typo is the user's, not each communicator's
  std::call_once(unknownChecked, [this] {
    for (const std::string& name : unknownParams())
      NODUS_WARN(rank_, "%s is not a nodus parameter and is ignored (nodus-info lists them)", name.c_str());
  });
  // A child keeps its parent's fabric as the parent priced it, with every
  // host where the parent placed it (placing a subset in order would move
  // it: a row of a torus would become a corner).
  FabricConfig fabric;
  if (initParent_ != nullptr) {
    fabric = initParent_->topo_.placedFabric();
  } else {
    NODUS_TRY(fabricFromSettings(settings_, &fabric));
  }
  const NodeInfo* node = nullptr;
  NODUS_TRY(localNode(settings_, &node));
  int forced = -1;
  NODUS_TRY(forcedTransport(cfg_.transport, &forced));

  if (initParent_ != nullptr)
    inheritPlacement(*initParent_, initParentRanks_);
  else
    NODUS_TRY(exchangePlacement(*node, opts.inProcess, &places_));
  const std::vector<RankPlacement>& places = places_;
  bool anyRemote = false;
  for (const RankPlacement& p : places) anyRemote |= strncmp(p.machine, places[0].machine, sizeof(p.machine)) != 0;
  // Which transports this host can run, for the pairs to agree on (a device
  // being up is a local fact). Probed only where it can matter, and every
  // rank decides alike whether to: when some rank is on another machine, and
  // only for transports not excluded by NODUS_TRANSPORT.
  std::vector<std::string> unusableWhy;
  const uint32_t usable = usableTransports(settings_, forced, anyRemote, &unusableWhy);
  NODUS_TRY(exchangeRankInfo(fabric, *node, forced, usable, &infos_));
  const std::vector<RankInfo>& infos = infos_;
  NODUS_TRY(checkAgreement(fabric, forced, infos));
  std::vector<std::string> hostOfRank;
  std::vector<int> numaOfRank;
  for (const RankInfo& info : infos) {
    hostOfRank.emplace_back(info.host, strnlen(info.host, sizeof(info.host)));
    numaOfRank.push_back(info.numa);
  }
  NODUS_TRY(Topology::build(fabric, hostOfRank, numaOfRank, &topo_));
  // Computed from what every rank reported, so every rank prices algorithms
  // alike (they must all choose the same one).
  for (const RankInfo& info : infos) {
    topo_.oversubscribed |= info.kernelRanks > info.cores;
    if (info.cores > 0)
      topo_.coreShare = std::max(topo_.coreShare, static_cast<double>(info.kernelRanks) / info.cores);
  }

  // Choose a transport per peer (transports/selection.h): placement is
  // symmetric and NODUS_TRANSPORT the same everywhere (checked above), so
  // both ends of a pair choose alike, and every rank computes alike which
  // transports the job connects.
  std::vector<RankReach> reach(static_cast<size_t>(nranks_));
  for (int r = 0; r < nranks_; ++r) {
    RankReach& x = reach[static_cast<size_t>(r)];
    memcpy(x.machine, places[static_cast<size_t>(r)].machine, sizeof(x.machine));
    x.processToken = places[static_cast<size_t>(r)].processToken;
    x.usable = infos[static_cast<size_t>(r)].usableTransports;
  }
  TransportChoice choice;
  NODUS_TRY(chooseTransports(rank_, reach, hostOfRank, opts.inProcess, forced, unusableWhy, &choice));
  peerTransport_ = choice.peerTransport;

  // One slot size for every connection (a plan's slice must fit each): the
  // smallest the transports in use want, computed alike on every rank.
  if (cfg_.slotBytes == 0) {
    cfg_.slotBytes = slotBytesFor(choice.used);
    PlanContext ctx;
    contextFromSettings(settings_, &ctx, static_cast<int64_t>(cfg_.slotBytes));
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
  req.numa = infos[static_cast<size_t>(rank_)].numa;
  req.shmCopy = cfg_.shmCopy;
  req.shmCma = cfg_.shmCma;
  req.settings = &settings_;
  const auto at = std::find(topo_.ringOrder.begin(), topo_.ringOrder.end(), rank_);
  const int64_t pos = at - topo_.ringOrder.begin();
  req.ringPrev = topo_.ringOrder[static_cast<size_t>((pos + nranks_ - 1) % nranks_)];
  req.ringNext = topo_.ringOrder[static_cast<size_t>((pos + 1) % nranks_)];
  NODUS_TRY(connectTransports(req, choice, &connected_));
  execConns_ = &connected_.conns;
  execTimeoutMs_ = cfg_.timeoutMs;
  NODUS_TRY(exchangeConnected());

  // Spinning helps only while every rank of this host has a core to itself.
  // A transport thread (the net proxy) would want a second one: where the
  // machine has no core to spare for it, the thread stands aside while the
  // executor polls and moves the data itself (each wake-up of the thread was
  // a context switch on the executor's core: an 8 B tcp AllGather took
  // 25-45 us that way, 11-12 us with the executor polling the sockets).
  const int cores = machineCpus_;
  const auto table = transportTable();
  callerPolled_.clear();
  for (size_t t = 0; t < table.size(); ++t)
    if (table[t].ownThread && !choice.peersByTransport[t].empty() && kernelRanks_ * 2 > cores)
      callerPolled_.push_back(connected_.transports[t].get());
  spin_ = kernelRanks_ > cores ? 0 : cfg_.spin;
  NODUS_INFO(rank_, "rank %d of %d on %s: transports %s, %d rank(s) on %d core(s)%s%s, %u slots of %zu bytes", rank_,
             nranks_, hostOfRank[static_cast<size_t>(rank_)].c_str(), connected_.names.c_str(), kernelRanks_, cores,
             spin_ ? "" : " (oversubscribed: no spinning)",
             callerPolled_.empty() ? "" : " (no core to spare: the executor polls the network itself)", cfg_.slots,
             cfg_.slotBytes);
  if (rank_ == 0) NODUS_INFO(rank_, "topology:\n%s", topo_.describe().c_str());
  initParent_ = nullptr;
  return Status::ok();
}

// Exchange 1: where each rank runs and on which CPUs it may, before nodus
// binds anything; then this process is bound.
Status Comm::exchangePlacement(const NodeInfo& node, bool inProcess, std::vector<RankPlacement>* out) {
  std::vector<RankPlacement>& places = *out;
  places.assign(static_cast<size_t>(nranks_), RankPlacement{});
  RankPlacement& place = places[static_cast<size_t>(rank_)];
  snprintf(place.kernel, sizeof(place.kernel), "%s", kernelId().c_str());
  snprintf(place.machine, sizeof(place.machine), "%s", machineId().c_str());
  place.processToken = processToken();
  place.cpus = currentCpus();
  NODUS_TRY(bootstrap_->allGather(places.data(), sizeof(RankPlacement)));
  countKernelRanks();
  bindThisProcess(cfg_, node, places, rank_, inProcess);
  return Status::ok();
}

void Comm::countKernelRanks() {
  // The CPUs the ranks under this kernel may use between them: a launcher
  // that gives each rank a core of its own does not oversubscribe it.
  const RankPlacement& place = places_[static_cast<size_t>(rank_)];
  CpuMask machineCpus;
  kernelRanks_ = 0;
  for (const RankPlacement& p : places_)
    if (strncmp(p.kernel, place.kernel, sizeof(p.kernel)) == 0) {
      machineCpus |= p.cpus;
      ++kernelRanks_;
    }
  machineCpus_ = std::max(1, machineCpus.count());
}

// Instead of exchange 1 for a child: the parent's ranks said it all, and
// this process is bound (or not) already.
void Comm::inheritPlacement(const Comm& parent, const std::vector<int>& parentRanks) {
  places_.clear();
  for (int pr : parentRanks) places_.push_back(parent.places_[static_cast<size_t>(pr)]);
  countKernelRanks();
}

// Exchange 2: what each rank is once bound.
Status Comm::exchangeRankInfo(const FabricConfig& fabric, const NodeInfo& node, int forced, uint32_t usable,
                              std::vector<RankInfo>* out) {
  std::vector<RankInfo>& infos = *out;
  infos.assign(static_cast<size_t>(nranks_), RankInfo{});
  RankInfo& me = infos[static_cast<size_t>(rank_)];
  memset(&me, 0, sizeof(me));
  if (initParent_ != nullptr) {
    // The host and NUMA node the parent placed this rank on (NODUS_HOSTID
    // lists names by the parent's ranks).
    const RankInfo& was = initParent_->infos_[static_cast<size_t>(initParentRanks_[static_cast<size_t>(rank_)])];
    memcpy(me.host, was.host, sizeof(me.host));
  } else {
    NODUS_TRY(hostIdOfRank(settings_, rank_, me.host, sizeof(me.host)));
  }
  me.pid = getpid();
  me.slots = cfg_.slots;
  me.slotBytes = cfg_.slotBytes;
  planSettingsOf(settings_, cfg_, me.planSettings);
  me.forcedTransport = forced;
  me.usableTransports = usable;
  me.fabricFingerprint = fabric.fingerprint();
  me.numa = initParent_ != nullptr
                ? initParent_->infos_[static_cast<size_t>(initParentRanks_[static_cast<size_t>(rank_)])].numa
                : currentNuma(node);
  me.cores = machineCpus_;
  me.kernelRanks = kernelRanks_;
  return bootstrap_->allGather(infos.data(), sizeof(RankInfo));
}

// What every rank must have alike: the fabric, the forced transport, the
// slots and what the plans are made of.
Status Comm::checkAgreement(const FabricConfig& fabric, int forced, const std::vector<RankInfo>& infos) const {
  const RankInfo& me = infos[static_cast<size_t>(rank_)];
  const auto table = transportTable();
  for (int r = 0; r < nranks_; ++r) {
    const RankInfo& info = infos[static_cast<size_t>(r)];
    if (info.fabricFingerprint != me.fabricFingerprint)
      return makeError(nodusInvalidUsage,
                       "rank %d on %s describes the fabric differently from rank %d on %s (here: %s); every rank must "
                       "see the same NODUS_TOPO_FILE contents or NODUS_TORUS_DIMS / NODUS_FATTREE",
                       r, info.host, rank_, me.host, fabric.describe().c_str());
    if (info.forcedTransport != forced)
      return makeError(nodusInvalidUsage, "rank %d forces NODUS_TRANSPORT=%s but rank %d %s%s: every rank must force the same one",
                       r, info.forcedTransport < 0 ? "(none)" : table[static_cast<size_t>(info.forcedTransport)].name, rank_,
                       forced < 0 ? "forces none" : "forces ", forced < 0 ? "" : table[static_cast<size_t>(forced)].name);
    if (info.slotBytes != cfg_.slotBytes || info.slots != cfg_.slots)
      return makeError(nodusInvalidUsage,
                       "rank %d uses NODUS_SLOT_BYTES=%llu NODUS_SLOTS=%u but rank %d uses %llu and %u: every rank "
                       "must use the same values",
                       r, static_cast<unsigned long long>(info.slotBytes), info.slots, rank_,
                       static_cast<unsigned long long>(cfg_.slotBytes), cfg_.slots);
    // Ranks that plan differently would exchange messages that do not match.
    for (size_t i = 0; i < std::size(kPlanSettings); ++i) {
      if (info.planSettings[i] == me.planSettings[i]) continue;
      if (i == 0)
        return makeError(nodusInvalidUsage, "rank %d sets a different NODUS_ALGO from rank %d ('%s'): every rank must "
                         "set the same", r, rank_, cfg_.algo.c_str());
      return makeError(nodusInvalidUsage, "rank %d uses %s=%lld but rank %d uses %lld: every rank must use the same "
                       "value", r, kPlanSettings[i], static_cast<long long>(info.planSettings[i]), rank_,
                       static_cast<long long>(me.planSettings[i]));
    }
  }
  return Status::ok();
}

// Exchange 3: what the connections can do, known only once connected.
// - Whether slices larger than a slot may go by reference (the planner's
//   PlanCapabilities::referencesOfAnySize): every rank must say so of all its
//   incoming connections, as every rank must cut a call into the same slices.
// - The speed of the devices the ranks' net transports leave by: where the
//   fabric's description gives no link bandwidth, the links between hosts
//   are priced at the slowest of them (as NCCL prices a NIC at its reported
//   speed), not at LinkSpec's default of 25 GB/s: with that default, on 4
//   oversubscribed hosts of 2 ranks linked at 1 Gb/s, the tuner saw shared
//   memory as the bottleneck and picked Bruck for AllGather, which sends
//   13/8 of the data over each host's link where the ring sends 7/8
//   (nodus-perf between network namespaces, 4-64 MiB: 33-48% of the link,
//   against 90-95% with the ring). Every rank takes the same minimum, so
//   every rank prices alike. A host whose ranks leave by several NICs is
//   still priced at one of them: a ring crosses each host boundary once,
//   from one rank, so one NIC is what it gets.
Status Comm::exchangeConnected() {
  struct Connected {
    double deviceGBs = 0;        // the slowest device this rank's transports use; 0: none says
    uint32_t readsAcross = 0;    // every incoming connection takes references of any size
    uint32_t pad = 0;
  };
  std::vector<Connected> all(static_cast<size_t>(nranks_));
  Connected& mine = all[static_cast<size_t>(rank_)];
  mine.readsAcross = nranks_ > 1 ? 1 : 0;
  for (int r = 0; r < nranks_; ++r) {
    const int t = peerTransport_[static_cast<size_t>(r)];
    if (r != rank_ && (t < 0 || !connected_.transports[static_cast<size_t>(t)]->readsReferencesOfAnySize()))
      mine.readsAcross = 0;
  }
  for (const auto& t : connected_.transports)
    if (t && t->deviceGBs() > 0) mine.deviceGBs = mine.deviceGBs > 0 ? std::min(mine.deviceGBs, t->deviceGBs()) : t->deviceGBs();
  NODUS_TRY(bootstrap_->allGather(all.data(), sizeof(Connected)));
  referencesOfAnySize_ = std::all_of(all.begin(), all.end(), [](const Connected& c) { return c.readsAcross != 0; });
  // Every rank takes this branch alike: whether the fabric gave the
  // bandwidth is part of the fingerprint every rank checked at init.
  if (topo_.fabric.bandwidthGiven || topo_.hosts.size() <= 1) return Status::ok();
  double slowest = 0;
  for (const Connected& c : all)
    if (c.deviceGBs > 0) slowest = slowest > 0 ? std::min(slowest, c.deviceGBs) : c.deviceGBs;
  if (slowest <= 0) return Status::ok();
  topo_.fabric.link.bandwidthGBs = slowest;
  if (rank_ == 0)
    NODUS_INFO(rank_, "links between hosts priced at %g GB/s, the slowest device the ranks' net transport uses "
               "(a fabric file's link.bandwidth overrides it)", slowest);
  return Status::ok();
}

// The timeline (NODUS_TRACE, nodusConfig_t.traceDir) is not recorded yet;
// what can be checked of its directory now is, as the timeline will: one
// WARN line, and the communicator works as if none were given.
void Comm::checkTraceDir() {
  if (cfg_.traceDir.empty()) return;
  struct stat st {};
  if (stat(cfg_.traceDir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || access(cfg_.traceDir.c_str(), W_OK) != 0) {
    NODUS_WARN(rank_, "trace directory %s is not a writable directory; no timeline is written", cfg_.traceDir.c_str());
    cfg_.traceDir.clear();
  }
}

}  // namespace nodus
