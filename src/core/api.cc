// The C API: argument checks, handles, groups; everything else is delegated.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>
#include <string>

#include "core/comm.h"
#include "base/dtype.h"
#include "base/log.h"
#include "base/settings.h"
#include "nodus/nodus.h"
#include "topo/grid.h"

using namespace nodus;

// Handles. A destroyed communicator's handle is kept (as a tombstone, in a
// registry that lives as long as the process) so a stale handle is detected
// as such instead of touching freed memory or a new communicator.
struct nodusComm {
  static constexpr uint64_t kLive = 0x6e6f647573636f6dULL;
  static constexpr uint64_t kDead = 0x64656164636f6d6dULL;
  std::atomic<uint64_t> magic{kLive};
  std::unique_ptr<Comm> impl;
};

struct nodusRequest {
  std::shared_ptr<Request> req;
  nodusComm_t comm = nullptr;
};

namespace {

std::mutex gTombstonesMu;
std::vector<std::unique_ptr<nodusComm>>& tombstones() {
  static std::vector<std::unique_ptr<nodusComm>> t;  // the documented registry of dead handles
  return t;
}

thread_local std::string tLastError;

nodusResult_t fail(nodusComm_t comm, const Status& s) {
  // A handle that is not live is never dereferenced beyond its magic.
  if (comm && comm->magic.load() != nodusComm::kLive) comm = nullptr;
  if (comm) comm->impl->setLastError(s.message());
  tLastError = s.message();
  NODUS_INFO(comm ? comm->impl->rank() : -1, "%s: %s",
             nodusGetErrorString(s.code()), s.message().c_str());
  return s.code();
}

Status checkComm(nodusComm_t comm) {
  if (comm == nullptr) return makeError(nodusInvalidArgument, "the communicator is NULL");
  uint64_t m = comm->magic.load(std::memory_order_acquire);
  if (m == nodusComm::kDead) return makeError(nodusInvalidUsage, "the communicator was destroyed");
  if (m != nodusComm::kLive) return makeError(nodusInvalidUsage, "not a nodus communicator");
  return Status::ok();
}

// ---- Groups ---------------------------------------------------------------------

struct GroupState {
  int depth = 0;
  std::vector<Task> tasks;
  Status error;  // the first failure while recording
};
thread_local GroupState tGroup;

// ---- Argument checks ----------------------------------------------------------------

struct Call {
  Collective coll;
  const void* send;
  void* recv;
  size_t count;
  nodusDataType_t type;
  nodusRedOp_t op;
  int root;  // or peer
  void* const* recvList = nullptr;  // AllGather into separate buffers (nodusAllGatherList)
  bool isList = false;
  // The V-collectives' arrays (nranks entries each, or null).
  const size_t* sendCounts = nullptr;
  const size_t* sendDispls = nullptr;
  const size_t* recvCounts = nullptr;
  const size_t* recvDispls = nullptr;
};

bool overlaps(const std::byte* a, size_t an, const std::byte* b, size_t bn) {
  return an && bn && a < b + bn && b < a + an;
}

// nodusAllGatherList's buffers: nranks of them, none NULL, no two overlapping,
// and the send buffer either one of them (in place, this rank's) or apart.
Status checkRecvList(const Call& c, int p, int me, size_t ts, const std::byte* send, bool* inPlace,
                     std::vector<std::byte*>* parts) {
  const char* name = "AllGather (list)";
  parts->assign(static_cast<size_t>(p), nullptr);
  if (c.count == 0) return Status::ok();
  const size_t bytes = c.count * ts;
  for (int i = 0; i < p; ++i) {
    (*parts)[static_cast<size_t>(i)] = static_cast<std::byte*>(c.recvList[i]);
    if (c.recvList[i] == nullptr) return makeError(nodusInvalidArgument, "%s: recvbufs[%d] is NULL", name, i);
  }
  std::vector<std::pair<const std::byte*, int>> sorted;
  for (int i = 0; i < p; ++i) sorted.emplace_back((*parts)[static_cast<size_t>(i)], i);
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i)
    if (overlaps(sorted[i - 1].first, bytes, sorted[i].first, bytes))
      return makeError(nodusInvalidArgument, "%s: recvbufs[%d] and recvbufs[%d] overlap", name, sorted[i - 1].second,
                       sorted[i].second);
  *inPlace = send == (*parts)[static_cast<size_t>(me)];
  if (!*inPlace)
    for (int i = 0; i < p; ++i)
      if (overlaps(send, bytes, (*parts)[static_cast<size_t>(i)], bytes))
        return makeError(nodusInvalidArgument,
                         "%s: the send buffer overlaps recvbufs[%d] but is not in place (in place: sendbuf == recvbufs[%d])",
                         name, i, me);
  return Status::ok();
}

// The block collectives' checks and key: counts and displacements, root,
// buffers, in place (nodus.h's rules).
Status prepareBlocks(Comm& impl, const Call& c, Task* task) {
  const char* name = collectiveName(c.coll);
  const int p = impl.nranks(), me = impl.rank();
  const size_t ts = typeSize(c.type);
  const uint64_t limit = (static_cast<uint64_t>(1) << 62) / ts;  // elements a buffer may span
  if ((c.coll == Collective::Gather || c.coll == Collective::Scatter) && (c.root < 0 || c.root >= p))
    return makeError(nodusInvalidArgument, "%s: root %d is out of range [0, %d)", name, c.root, p);
  PlanKey key{c.coll, p, me, c.count, static_cast<uint32_t>(ts), c.root, false};
  if (!isVCollective(c.coll)) key.root = c.coll == Collective::AllToAll ? 0 : c.root;
  if (!isVCollective(c.coll) && c.count > limit / static_cast<uint64_t>(p))
    return makeError(nodusInvalidArgument, "%s: count %zu x %zu bytes x %d ranks overflows", name, c.count, ts, p);
  const auto* s = static_cast<const std::byte*>(c.send);
  auto* r = static_cast<std::byte*>(c.recv);
  const bool vInPlace = c.coll == Collective::AllToAllV && s != nullptr && s == r;
  // The arrays: present, and every block within the limit.
  auto take = [&](const size_t* a, const char* what) -> Status {
    if (a == nullptr) return makeError(nodusInvalidArgument, "%s: %s is NULL", name, what);
    for (int j = 0; j < p; ++j) {
      if (a[j] > limit) return makeError(nodusInvalidArgument, "%s: %s[%d] = %zu overflows", name, what, j, a[j]);
      key.blocks.push_back(a[j]);
    }
    return Status::ok();
  };
  switch (c.coll) {
    case Collective::AllToAllV:
      if (vInPlace) {
        NODUS_TRY(take(c.recvCounts, "recvcounts"));
        NODUS_TRY(take(c.recvDispls, "rdispls"));
      } else {
        NODUS_TRY(take(c.sendCounts, "sendcounts"));
        NODUS_TRY(take(c.sendDispls, "sdispls"));
      }
      NODUS_TRY(take(c.recvCounts, "recvcounts"));
      NODUS_TRY(take(c.recvDispls, "rdispls"));
      break;
    case Collective::AllGatherV:
      NODUS_TRY(take(c.recvCounts, "recvcounts"));
      NODUS_TRY(take(c.recvDispls, "displs"));
      if (c.recvCounts[me] != c.count)
        return makeError(nodusInvalidArgument, "%s: sendcount %zu differs from recvcounts[%d] = %zu", name, c.count, me,
                         c.recvCounts[me]);
      break;
    case Collective::ReduceScatterV: {
      NODUS_TRY(take(c.recvCounts, "recvcounts"));
      uint64_t sum = 0;
      for (int j = 0; j < p; ++j) sum += c.recvCounts[j];
      if (sum > limit) return makeError(nodusInvalidArgument, "%s: the sum of recvcounts overflows", name);
      key.count = c.recvCounts[me];
      break;
    }
    default: break;
  }
  if (c.coll == Collective::AllToAllV) {
    key.count = 0;  // PlanKey::blocks
    for (int j = 0; j < p; ++j) {
      const PeerBlock out = blockTo(key, j), in = blockFrom(key, j);
      if (out.offset + out.count > limit || in.offset + in.count > limit)
        return makeError(nodusInvalidArgument, "%s: the block %s rank %d ends past 2^62 bytes (displacement + count overflows)",
                         name, out.offset + out.count > limit ? "for" : "from", j);
    }
    if (blockTo(key, me).count != blockFrom(key, me).count)
      return makeError(nodusInvalidArgument, "%s: sendcounts[%d] = %llu differs from recvcounts[%d] = %llu (what a rank sends itself it receives)",
                       name, me, static_cast<unsigned long long>(blockTo(key, me).count), me,
                       static_cast<unsigned long long>(blockFrom(key, me).count));
  }
  if (c.coll == Collective::AllGatherV)
    for (int j = 0; j < p; ++j)
      if (c.recvDispls[j] + c.recvCounts[j] > limit)
        return makeError(nodusInvalidArgument, "%s: displs[%d] + recvcounts[%d] overflows", name, j, j);
  // Receive blocks must not overlap (two peers' data in one place).
  std::vector<std::pair<uint64_t, int>> starts;
  for (int j = 0; j < p; ++j) {
    const PeerBlock in = blockFrom(key, j);
    if (in.exists && in.count > 0 && (c.coll != Collective::ReduceScatterV || j == me)) starts.emplace_back(in.offset, j);
  }
  std::sort(starts.begin(), starts.end());
  for (size_t i = 1; i < starts.size(); ++i) {
    const PeerBlock prev = blockFrom(key, starts[i - 1].second);
    if (prev.offset + prev.count > starts[i].first)
      return makeError(nodusInvalidArgument, "%s: the receive blocks from ranks %d and %d overlap", name,
                       starts[i - 1].second, starts[i].second);
  }
  const uint64_t sendN = sendElems(key), recvN = recvElems(key);
  if (sendN > 0 && s == nullptr) return makeError(nodusInvalidArgument, "%s: the send buffer is NULL", name);
  if (recvN > 0 && r == nullptr) return makeError(nodusInvalidArgument, "%s: the receive buffer is NULL", name);
  if (sendN > 0 && recvN > 0) {
    const int64_t shift = inPlaceShift(key);
    if (s == r + shift * static_cast<int64_t>(ts)) key.inPlace = true;
    else if (overlaps(s, sendN * ts, r, recvN * ts))
      return makeError(nodusInvalidArgument, "%s: the send and receive buffers overlap but are not in place as nodus.h defines it",
                       name);
  } else if (vInPlace) {
    key.inPlace = true;
  }
  if (isVCollective(c.coll)) {
    NODUS_TRY(impl.plan(key, &task->planHold));
    task->plan = task->planHold.get();
  } else {
    NODUS_TRY(impl.plan(key, &task->plan));
  }
  task->comm = &impl;
  task->send = s;
  task->recv = r;
  task->type = c.type;
  task->op = c.coll == Collective::ReduceScatterV ? c.op : nodusSum;
  return Status::ok();
}

Status prepare(nodusComm_t comm, const Call& c, Task* task) {
  NODUS_TRY(checkComm(comm));
  if (isBlockCollective(c.coll)) {
    if (!validType(c.type))
      return makeError(nodusInvalidArgument, "%s: unknown data type %d", collectiveName(c.coll), static_cast<int>(c.type));
    if (c.coll == Collective::ReduceScatterV && !validOp(c.op))
      return makeError(nodusInvalidArgument, "%s: unknown reduction op %d", collectiveName(c.coll), static_cast<int>(c.op));
    return prepareBlocks(*comm->impl, c, task);
  }
  Comm& impl = *comm->impl;
  const char* name = collectiveName(c.coll);
  if (!validType(c.type)) return makeError(nodusInvalidArgument, "%s: unknown data type %d", name, static_cast<int>(c.type));
  const bool reduces = c.coll == Collective::AllReduce || c.coll == Collective::ReduceScatter || c.coll == Collective::Reduce;
  if (reduces && !validOp(c.op)) return makeError(nodusInvalidArgument, "%s: unknown reduction op %d", name, static_cast<int>(c.op));
  const int p = impl.nranks(), me = impl.rank();
  const bool rooted = c.coll == Collective::Broadcast || c.coll == Collective::Reduce;
  const bool p2p = c.coll == Collective::Send || c.coll == Collective::Recv;
  if ((rooted || p2p) && (c.root < 0 || c.root >= p))
    return makeError(nodusInvalidArgument, "%s: %s %d is out of range [0, %d)", name, p2p ? "peer" : "root", c.root, p);
  if (p2p && c.root == me) return makeError(nodusInvalidArgument, "%s: peer %d is this rank", name, c.root);
  const size_t ts = typeSize(c.type);
  const size_t multiple = (c.coll == Collective::AllGather || c.coll == Collective::ReduceScatter) ? static_cast<size_t>(p) : 1;
  if (c.count > (static_cast<size_t>(1) << 62) / ts / multiple)
    return makeError(nodusInvalidArgument, "%s: count %zu x %zu bytes x %zu overflows", name, c.count, ts, multiple);
  PlanKey key{c.coll, p, me, c.count, static_cast<uint32_t>(ts), rooted || p2p ? c.root : 0, false};
  const size_t sendBytes = sendElems(key) * ts, recvBytes = recvElems(key) * ts;
  const bool needSend = c.coll != Collective::Recv && !(c.coll == Collective::Broadcast && me != c.root);
  const bool needRecv = c.coll != Collective::Send && !(c.coll == Collective::Reduce && me != c.root);
  if (c.count > 0 && needSend && c.send == nullptr) return makeError(nodusInvalidArgument, "%s: the send buffer is NULL", name);
  const auto* s = static_cast<const std::byte*>(c.send);
  if (c.isList) {
    if (c.recvList == nullptr) return makeError(nodusInvalidArgument, "%s: recvbufs is NULL", name);
    NODUS_TRY(checkRecvList(c, p, me, ts, s, &key.inPlace, &task->recvParts));
    key.listRecv = true;
    task->partElems = c.count;
  } else if (c.count > 0 && needRecv && c.recv == nullptr) {
    return makeError(nodusInvalidArgument, "%s: the receive buffer is NULL", name);
  }
  auto* r = static_cast<std::byte*>(c.recv);
  if (needSend && needRecv && c.count > 0 && !c.isList) {
    const std::byte* inPlaceSend = r;  // where sendbuf must be for an in-place call
    if (c.coll == Collective::AllGather) inPlaceSend = r + static_cast<size_t>(me) * c.count * ts;
    if (c.coll == Collective::ReduceScatter) inPlaceSend = r - static_cast<size_t>(me) * c.count * ts;
    if (s == inPlaceSend) key.inPlace = true;
    else if (overlaps(s, sendBytes, r, recvBytes))
      return makeError(nodusInvalidArgument, "%s: the send and receive buffers overlap but are not in place as nodus.h defines it",
                       name);
  }
  const Plan* plan = nullptr;
  NODUS_TRY(impl.plan(key, &plan));
  task->comm = &impl;
  task->send = s;
  task->recv = r;
  task->type = c.type;
  task->op = reduces ? c.op : nodusSum;
  task->plan = plan;
  return Status::ok();
}

nodusResult_t launch(nodusComm_t comm, const Call& c, nodusRequest_t* request) {
  if (request) *request = nullptr;
  Task task;
  Status s = prepare(comm, c, &task);
  if (!s.isOk()) {
    if (tGroup.depth > 0 && tGroup.error.isOk()) tGroup.error = s;
    return fail(comm, s);
  }
  std::shared_ptr<Request> req;
  if (request) req = std::make_shared<Request>();
  task.request = req;
  if (tGroup.depth > 0) {
    tGroup.tasks.push_back(std::move(task));
  } else if (request) {
    s = comm->impl->enqueue({std::move(task)});
  } else {
    s = comm->impl->runBlocking(std::move(task));
  }
  if (!s.isOk()) return fail(comm, s);
  if (request) *request = new nodusRequest{std::move(req), comm};
  return nodusSuccess;
}

}  // namespace

// ---- Library ----------------------------------------------------------------------------

extern "C" {

nodusResult_t nodusGetVersion(int* version) {
  if (version == nullptr) return fail(nullptr, makeError(nodusInvalidArgument, "version is NULL"));
  *version = NODUS_VERSION_CODE;
  return nodusSuccess;
}

const char* nodusGetErrorString(nodusResult_t r) {
  switch (r) {
    case nodusSuccess: return "no error";
    case nodusInvalidArgument: return "invalid argument";
    case nodusInvalidUsage: return "invalid usage";
    case nodusSystemError: return "system error";
    case nodusInternalError: return "internal error";
    case nodusRemoteError: return "remote error (a peer failed)";
    case nodusTimeout: return "timeout";
    case nodusAborted: return "aborted";
    case nodusInProgress: return "in progress";
    default: return "unknown result code";
  }
}

const char* nodusGetLastError(nodusComm_t comm) {
  if (comm == nullptr || comm->magic.load() != nodusComm::kLive) return tLastError.c_str();
  return comm->impl->lastError();
}

nodusResult_t nodusGetUniqueId(nodusUniqueId* id) {
  if (id == nullptr) return fail(nullptr, makeError(nodusInvalidArgument, "uniqueId is NULL"));
  Settings settings;
  Status s = Settings::fromEnvironment(&settings);
  if (s.isOk()) s = createUniqueId(settings, id);
  return s.isOk() ? nodusSuccess : fail(nullptr, s);
}

// The settings of a new communicator: the environment's, then every field of
// `config` not left at its initializer value. Each field is checked as its
// variable would be, and errors name the field.
static Status applyConfig(const nodusConfig_t* config, Settings* out);

static Status settingsFor(const nodusConfig_t* config, Settings* out) {
  NODUS_TRY(Settings::fromEnvironment(out));
  return applyConfig(config, out);
}

// Every field of `config` not left at its initializer value, over `out`.
static Status applyConfig(const nodusConfig_t* config, Settings* out) {
  if (config == nullptr) return Status::ok();
  if (config->magic != NODUS_CONFIG_MAGIC)
    return makeError(nodusInvalidArgument, "nodusConfig_t: bad magic 0x%x (start from NODUS_CONFIG_INITIALIZER)",
                     config->magic);
  // A caller built against an older nodus has a shorter struct: read only
  // the fields it has.
  const size_t have = std::min(config->size, sizeof(nodusConfig_t));
  auto has = [have](size_t offset, size_t bytes) { return offset + bytes <= have; };
  if (has(offsetof(nodusConfig_t, timeoutMs), sizeof(int)) && config->timeoutMs != NODUS_CONFIG_UNDEF_INT)
    NODUS_TRY(out->set(param::kTimeoutMs, config->timeoutMs, "nodusConfig_t.timeoutMs"));
  if (has(offsetof(nodusConfig_t, algo), sizeof(char*)) && config->algo != nullptr)
    NODUS_TRY(out->set(param::kAlgo.info(), config->algo, "nodusConfig_t.algo"));
  if (has(offsetof(nodusConfig_t, traceDir), sizeof(char*)) && config->traceDir != nullptr)
    NODUS_TRY(out->set(param::kTrace.info(), config->traceDir, "nodusConfig_t.traceDir"));
  return Status::ok();
}

nodusResult_t nodusParamGetInt(const char* name, int64_t* value) {
  if (name == nullptr || value == nullptr)
    return fail(nullptr, makeError(nodusInvalidArgument, "nodusParamGetInt: name or value is NULL"));
  const ParamInfo* p = findParam(name);
  if (p == nullptr || p->type != ParamType::Int)
    return fail(nullptr, makeError(nodusInvalidArgument, "%s is not an integer nodus parameter", name));
  Settings env;
  Status s = Settings::fromEnvironment(&env);
  // Only this parameter's own error counts (under its name or its old one).
  auto about = [&s](const char* n) { return n != nullptr && s.message().rfind(std::string(n) + "=", 0) == 0; };
  if (!s.isOk() && (about(p->name) || about(p->oldName))) return fail(nullptr, s);
  *value = env.get(IntParam(p->name));
  return nodusSuccess;
}

static nodusComm_t wrap(std::unique_ptr<Comm> c) {
  auto* h = new nodusComm();
  h->impl = std::move(c);
  return h;
}

nodusResult_t nodusCommInitRank(nodusComm_t* comm, int nranks, nodusUniqueId id, int rank) {
  return nodusCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

nodusResult_t nodusCommInitRankConfig(nodusComm_t* comm, int nranks, nodusUniqueId id, int rank,
                                      const nodusConfig_t* config) {
  if (comm == nullptr) return fail(nullptr, makeError(nodusInvalidArgument, "comm is NULL"));
  *comm = nullptr;
  if (nranks < 1) return fail(nullptr, makeError(nodusInvalidArgument, "nranks %d is less than 1", nranks));
  if (rank < 0 || rank >= nranks)
    return fail(nullptr, makeError(nodusInvalidArgument, "rank %d is out of range [0, %d)", rank, nranks));
  if (tGroup.depth > 0) return fail(nullptr, makeError(nodusInvalidUsage, "nodusCommInitRank inside a group is not supported"));
  InitOptions opts;
  // Bad settings fail this rank, but only once it has joined the bootstrap:
  // leaving it then tells the other ranks at once (they would wait for the
  // timeout for a rank that never came).
  const Status bad = settingsFor(config, &opts.settings);
  const auto timeout = std::chrono::milliseconds(opts.settings.get(param::kTimeoutMs));
  Status s = socketBootstrap(id, rank, nranks, timeout, &opts.bootstrap);
  if (s.isOk() && !bad.isOk()) s = bad;
  std::unique_ptr<Comm> c;
  if (s.isOk()) s = Comm::create(std::move(opts), &c);
  if (!s.isOk()) return fail(nullptr, Status(s.code(), "nodusCommInitRank(rank " + std::to_string(rank) + " of " + std::to_string(nranks) + "): " + s.message()));
  *comm = wrap(std::move(c));
  return nodusSuccess;
}

nodusResult_t nodusCommInitAll(nodusComm_t* comms, int n) { return nodusCommInitAllConfig(comms, n, nullptr); }

nodusResult_t nodusCommInitAllConfig(nodusComm_t* comms, int n, const nodusConfig_t* config) {
  if (comms == nullptr) return fail(nullptr, makeError(nodusInvalidArgument, "comms is NULL"));
  if (n < 1) return fail(nullptr, makeError(nodusInvalidArgument, "ndev %d is less than 1", n));
  Settings settings;
  if (Status s = settingsFor(config, &settings); !s.isOk())
    return fail(nullptr, Status(s.code(), "nodusCommInitAll: " + s.message()));
  auto group = makeInProcessGroup(n);
  std::vector<std::unique_ptr<Comm>> made(n);
  std::vector<Status> status(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      InitOptions opts;
      opts.settings = settings;
      opts.bootstrap = inProcessBootstrap(group, r, std::chrono::milliseconds(settings.get(param::kTimeoutMs)));
      opts.inProcess = true;
      status[r] = Comm::create(std::move(opts), &made[r]);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r)
    if (!status[r].isOk()) return fail(nullptr, Status(status[r].code(), "nodusCommInitAll(rank " + std::to_string(r) + "): " + status[r].message()));
  for (int r = 0; r < n; ++r) comms[r] = wrap(std::move(made[r]));
  return nodusSuccess;
}

nodusResult_t nodusCommSplit(nodusComm_t comm, int color, int key, nodusComm_t* newcomm, const nodusConfig_t* config) {
  if (newcomm == nullptr) return fail(comm, makeError(nodusInvalidArgument, "nodusCommSplit: newcomm is NULL"));
  *newcomm = nullptr;
  Status s = checkComm(comm);
  if (!s.isOk()) return fail(nullptr, Status(s.code(), "nodusCommSplit: " + s.message()));
  if (tGroup.depth > 0) return fail(comm, makeError(nodusInvalidUsage, "nodusCommSplit inside a group is not supported"));
  // The child's settings: the parent's, then the fields `config` sets. A bad
  // config (or colour) fails every rank, after the exchange (Comm::split).
  Settings settings = comm->impl->settings();
  const Status bad = applyConfig(config, &settings);
  std::unique_ptr<Comm> c;
  s = comm->impl->split(color, key, std::move(settings),
                        bad.isOk() ? bad : Status(bad.code(), "nodusCommSplit: " + bad.message()), &c);
  if (!s.isOk()) return fail(comm, Status(s.code(), "nodusCommSplit(rank " + std::to_string(comm->impl->rank()) + ", colour " + std::to_string(color) + "): " + s.message()));
  if (c) *newcomm = wrap(std::move(c));
  return nodusSuccess;
}

nodusResult_t nodusCommCreateGroup(nodusComm_t comm, const int* ranks, int nranks, nodusComm_t* newcomm,
                                   const nodusConfig_t* config) {
  if (newcomm == nullptr) return fail(comm, makeError(nodusInvalidArgument, "nodusCommCreateGroup: newcomm is NULL"));
  *newcomm = nullptr;
  Status s = checkComm(comm);
  if (!s.isOk()) return fail(nullptr, Status(s.code(), "nodusCommCreateGroup: " + s.message()));
  if (tGroup.depth > 0)
    return fail(comm, makeError(nodusInvalidUsage, "nodusCommCreateGroup inside a group is not supported"));
  const int n = comm->impl->nranks(), me = comm->impl->rank();
  if (ranks == nullptr) return fail(comm, makeError(nodusInvalidArgument, "nodusCommCreateGroup: ranks is NULL"));
  if (nranks < 1 || nranks > n)
    return fail(comm, makeError(nodusInvalidArgument, "nodusCommCreateGroup: nranks %d is outside [1, %d]", nranks, n));
  std::vector<int> list(ranks, ranks + nranks);
  std::vector<char> seen(static_cast<size_t>(n), 0);
  for (int i = 0; i < nranks; ++i) {
    if (list[i] < 0 || list[i] >= n)
      return fail(comm, makeError(nodusInvalidArgument, "nodusCommCreateGroup: ranks[%d] = %d is outside [0, %d)", i, list[i], n));
    if (seen[static_cast<size_t>(list[i])]++)
      return fail(comm, makeError(nodusInvalidArgument, "nodusCommCreateGroup: rank %d is listed twice", list[i]));
  }
  if (!seen[static_cast<size_t>(me)])
    return fail(comm, makeError(nodusInvalidArgument,
                                "nodusCommCreateGroup: rank %d is not in the list; only the listed ranks call it", me));
  Settings settings = comm->impl->settings();
  s = applyConfig(config, &settings);
  if (!s.isOk()) return fail(comm, Status(s.code(), "nodusCommCreateGroup: " + s.message()));
  std::unique_ptr<Comm> c;
  s = comm->impl->createGroup(list, std::move(settings), &c);
  if (!s.isOk()) return fail(comm, Status(s.code(), "nodusCommCreateGroup(rank " + std::to_string(me) + "): " + s.message()));
  *newcomm = wrap(std::move(c));
  return nodusSuccess;
}

// dp x tp x pp over `comm`, with `order` or the chosen one.
static Status gridOf(nodusComm_t comm, int dp, int tp, int pp, const char* order, GridShape* shape, GridOrder* out) {
  NODUS_TRY(checkComm(comm));
  if (dp < 1 || tp < 1 || pp < 1)
    return makeError(nodusInvalidArgument, "grid dp=%d tp=%d pp=%d: every size must be at least 1", dp, tp, pp);
  const int n = comm->impl->nranks();
  if (static_cast<int64_t>(dp) * tp * pp != n)
    return makeError(nodusInvalidArgument, "grid dp=%d x tp=%d x pp=%d is not the communicator's %d ranks", dp, tp, pp, n);
  shape->size = {dp, tp, pp};
  if (order != nullptr) return parseGridOrder(order, out);
  *out = chooseGridOrder(comm->impl->topology(), *shape, nullptr);
  return Status::ok();
}

nodusResult_t nodusGridOrder(nodusComm_t comm, int dp, int tp, int pp, const char** order) {
  GridShape shape;
  GridOrder o;
  Status s = order == nullptr ? makeError(nodusInvalidArgument, "nodusGridOrder: order is NULL")
                              : gridOf(comm, dp, tp, pp, nullptr, &shape, &o);
  if (!s.isOk()) return fail(comm, Status(s.code(), "nodusGridOrder: " + s.message()));
  *order = gridOrderName(o);
  return nodusSuccess;
}

nodusResult_t nodusCommSplitGrid(nodusComm_t comm, int dp, int tp, int pp, const char* order, nodusComm_t* dpComm,
                                 nodusComm_t* tpComm, nodusComm_t* ppComm, int* coords, const char** chosenOrder) {
  if (dpComm == nullptr || tpComm == nullptr || ppComm == nullptr)
    return fail(comm, makeError(nodusInvalidArgument, "nodusCommSplitGrid: dpComm, tpComm and ppComm must not be NULL"));
  *dpComm = *tpComm = *ppComm = nullptr;
  GridShape shape;
  GridOrder o;
  Status s = gridOf(comm, dp, tp, pp, order, &shape, &o);
  if (!s.isOk()) return fail(checkComm(comm).isOk() ? comm : nullptr, Status(s.code(), "nodusCommSplitGrid: " + s.message()));
  const std::array<int, 3> c = gridCoords(shape, o, comm->impl->rank());
  // Each axis's group: the ranks that share the other two coordinates, by
  // their coordinate on it.
  struct Axis {
    int axis;
    nodusComm_t* out;
  };
  for (Axis a : {Axis{kGridData, dpComm}, Axis{kGridTensor, tpComm}, Axis{kGridPipeline, ppComm}}) {
    int color = 0;
    for (int other = 0; other < 3; ++other)
      if (other != a.axis) color = color * shape.size[static_cast<size_t>(other)] + c[static_cast<size_t>(other)];
    const nodusResult_t r = nodusCommSplit(comm, color, c[static_cast<size_t>(a.axis)], a.out, nullptr);
    if (r != nodusSuccess) {
      for (nodusComm_t* made : {dpComm, tpComm, ppComm}) {
        nodusCommDestroy(*made);
        *made = nullptr;
      }
      return r;
    }
  }
  if (coords != nullptr)
    for (int i = 0; i < 3; ++i) coords[i] = c[static_cast<size_t>(i)];
  if (chosenOrder != nullptr) *chosenOrder = gridOrderName(o);
  return nodusSuccess;
}

nodusResult_t nodusCommDestroy(nodusComm_t comm) {
  if (comm == nullptr) return nodusSuccess;
  Status s = checkComm(comm);
  if (!s.isOk()) return fail(nullptr, s);
  uint64_t live = nodusComm::kLive;
  if (!comm->magic.compare_exchange_strong(live, nodusComm::kDead))
    return fail(nullptr, makeError(nodusInvalidUsage, "the communicator was destroyed"));
  comm->impl.reset();
  std::lock_guard<std::mutex> lock(gTombstonesMu);
  tombstones().emplace_back(comm);
  return nodusSuccess;
}

nodusResult_t nodusCommAbort(nodusComm_t comm) {
  Status s = checkComm(comm);
  if (!s.isOk()) return fail(nullptr, s);
  comm->impl->abort();
  return nodusSuccess;
}

nodusResult_t nodusCommCount(nodusComm_t comm, int* count) {
  Status s = checkComm(comm);
  if (s.isOk() && count == nullptr) s = makeError(nodusInvalidArgument, "count is NULL");
  if (!s.isOk()) return fail(comm, s);
  *count = comm->impl->nranks();
  return nodusSuccess;
}

nodusResult_t nodusCommUserRank(nodusComm_t comm, int* rank) {
  Status s = checkComm(comm);
  if (s.isOk() && rank == nullptr) s = makeError(nodusInvalidArgument, "rank is NULL");
  if (!s.isOk()) return fail(comm, s);
  *rank = comm->impl->rank();
  return nodusSuccess;
}

// ---- Collectives ------------------------------------------------------------------------

#define NODUS_DEFINE_PAIR(Blocking, NonBlocking, params, ...)                                    \
  nodusResult_t Blocking params { return launch(comm, Call{__VA_ARGS__}, nullptr); }             \
  nodusResult_t NonBlocking(NODUS_UNPAREN params, nodusRequest_t* request) {                      \
    if (request == nullptr) return fail(comm, makeError(nodusInvalidArgument, "request is NULL")); \
    return launch(comm, Call{__VA_ARGS__}, request);                                              \
  }
#define NODUS_UNPAREN(...) __VA_ARGS__

NODUS_DEFINE_PAIR(nodusAllReduce, nodusIallReduce,
                  (const void* sendbuf, void* recvbuf, size_t count, nodusDataType_t datatype, nodusRedOp_t op, nodusComm_t comm),
                  Collective::AllReduce, sendbuf, recvbuf, count, datatype, op, 0)
NODUS_DEFINE_PAIR(nodusAllGather, nodusIallGather,
                  (const void* sendbuf, void* recvbuf, size_t sendcount, nodusDataType_t datatype, nodusComm_t comm),
                  Collective::AllGather, sendbuf, recvbuf, sendcount, datatype, nodusSum, 0)
nodusResult_t nodusAllGatherList(const void* sendbuf, void* const* recvbufs, size_t sendcount, nodusDataType_t datatype,
                                 nodusComm_t comm) {
  return launch(comm, Call{Collective::AllGather, sendbuf, nullptr, sendcount, datatype, nodusSum, 0, recvbufs, true}, nullptr);
}
nodusResult_t nodusIallGatherList(const void* sendbuf, void* const* recvbufs, size_t sendcount, nodusDataType_t datatype,
                                  nodusComm_t comm, nodusRequest_t* request) {
  if (request == nullptr) return fail(comm, makeError(nodusInvalidArgument, "request is NULL"));
  return launch(comm, Call{Collective::AllGather, sendbuf, nullptr, sendcount, datatype, nodusSum, 0, recvbufs, true}, request);
}
NODUS_DEFINE_PAIR(nodusReduceScatter, nodusIreduceScatter,
                  (const void* sendbuf, void* recvbuf, size_t recvcount, nodusDataType_t datatype, nodusRedOp_t op,
                   nodusComm_t comm),
                  Collective::ReduceScatter, sendbuf, recvbuf, recvcount, datatype, op, 0)
NODUS_DEFINE_PAIR(nodusBroadcast, nodusIbroadcast,
                  (const void* sendbuf, void* recvbuf, size_t count, nodusDataType_t datatype, int root, nodusComm_t comm),
                  Collective::Broadcast, sendbuf, recvbuf, count, datatype, nodusSum, root)
NODUS_DEFINE_PAIR(nodusReduce, nodusIreduce,
                  (const void* sendbuf, void* recvbuf, size_t count, nodusDataType_t datatype, nodusRedOp_t op, int root,
                   nodusComm_t comm),
                  Collective::Reduce, sendbuf, recvbuf, count, datatype, op, root)
NODUS_DEFINE_PAIR(nodusSend, nodusIsend,
                  (const void* sendbuf, size_t count, nodusDataType_t datatype, int peer, nodusComm_t comm),
                  Collective::Send, sendbuf, nullptr, count, datatype, nodusSum, peer)
NODUS_DEFINE_PAIR(nodusRecv, nodusIrecv,
                  (void* recvbuf, size_t count, nodusDataType_t datatype, int peer, nodusComm_t comm),
                  Collective::Recv, nullptr, recvbuf, count, datatype, nodusSum, peer)

NODUS_DEFINE_PAIR(nodusAllToAll, nodusIallToAll,
                  (const void* sendbuf, void* recvbuf, size_t count, nodusDataType_t datatype, nodusComm_t comm),
                  Collective::AllToAll, sendbuf, recvbuf, count, datatype, nodusSum, 0)
NODUS_DEFINE_PAIR(nodusAllToAllV, nodusIallToAllV,
                  (const void* sendbuf, const size_t* sendcounts, const size_t* sdispls, void* recvbuf,
                   const size_t* recvcounts, const size_t* rdispls, nodusDataType_t datatype, nodusComm_t comm),
                  Collective::AllToAllV, sendbuf, recvbuf, 0, datatype, nodusSum, 0, nullptr, false, sendcounts,
                  sdispls, recvcounts, rdispls)
NODUS_DEFINE_PAIR(nodusGather, nodusIgather,
                  (const void* sendbuf, void* recvbuf, size_t count, nodusDataType_t datatype, int root, nodusComm_t comm),
                  Collective::Gather, sendbuf, recvbuf, count, datatype, nodusSum, root)
NODUS_DEFINE_PAIR(nodusScatter, nodusIscatter,
                  (const void* sendbuf, void* recvbuf, size_t count, nodusDataType_t datatype, int root, nodusComm_t comm),
                  Collective::Scatter, sendbuf, recvbuf, count, datatype, nodusSum, root)
NODUS_DEFINE_PAIR(nodusAllGatherV, nodusIallGatherV,
                  (const void* sendbuf, size_t sendcount, void* recvbuf, const size_t* recvcounts, const size_t* displs,
                   nodusDataType_t datatype, nodusComm_t comm),
                  Collective::AllGatherV, sendbuf, recvbuf, sendcount, datatype, nodusSum, 0, nullptr, false, nullptr,
                  nullptr, recvcounts, displs)
NODUS_DEFINE_PAIR(nodusReduceScatterV, nodusIreduceScatterV,
                  (const void* sendbuf, void* recvbuf, const size_t* recvcounts, nodusDataType_t datatype, nodusRedOp_t op,
                   nodusComm_t comm),
                  Collective::ReduceScatterV, sendbuf, recvbuf, 0, datatype, op, 0, nullptr, false, nullptr, nullptr,
                  recvcounts, nullptr)

static Call barrierCall(nodusComm_t comm) {
  std::byte* b = (comm && comm->magic.load() == nodusComm::kLive) ? comm->impl->barrierBuffer() : nullptr;
  return Call{Collective::AllReduce, b, b, 1, nodusUint8, nodusMax, 0};
}
nodusResult_t nodusBarrier(nodusComm_t comm) { return launch(comm, barrierCall(comm), nullptr); }
nodusResult_t nodusIbarrier(nodusComm_t comm, nodusRequest_t* request) {
  if (request == nullptr) return fail(comm, makeError(nodusInvalidArgument, "request is NULL"));
  return launch(comm, barrierCall(comm), request);
}

// ---- Requests ---------------------------------------------------------------------------

nodusResult_t nodusTest(nodusRequest_t request, int* done) {
  if (request == nullptr || done == nullptr) return fail(nullptr, makeError(nodusInvalidArgument, "request or done is NULL"));
  *done = request->req->done.load(std::memory_order_acquire) != 0;
  if (!*done) return nodusSuccess;
  const Status& s = request->req->status;
  return s.isOk() ? nodusSuccess : fail(request->comm, s);
}

// Lets the waiting thread run its communicator's queued work (Comm::progressUntil).
static void helpProgress(nodusRequest_t request) {
  if (request->req->done.load(std::memory_order_acquire)) return;
  nodusComm_t comm = request->comm;
  // A live request keeps its communicator alive: nodusCommDestroy waits for it.
  if (comm && comm->magic.load(std::memory_order_acquire) == nodusComm::kLive) comm->impl->progressUntil(*request->req);
}

nodusResult_t nodusWait(nodusRequest_t request) {
  if (request == nullptr) return fail(nullptr, makeError(nodusInvalidArgument, "request is NULL"));
  helpProgress(request);
  Status s = request->req->wait();
  return s.isOk() ? nodusSuccess : fail(request->comm, s);
}

nodusResult_t nodusWaitTimeout(nodusRequest_t request, int64_t timeoutMs) {
  if (request == nullptr) return fail(nullptr, makeError(nodusInvalidArgument, "request is NULL"));
  if (timeoutMs < 0) return nodusWait(request);
  Request& r = *request->req;
  nodusComm_t comm = request->comm;
  if (!r.done.load(std::memory_order_acquire) && comm && comm->magic.load(std::memory_order_acquire) == nodusComm::kLive &&
      timeoutMs >= comm->impl->config().timeoutMs)
    comm->impl->progressUntil(r);
  if (!r.waitUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs))) return nodusInProgress;
  return r.status.isOk() ? nodusSuccess : fail(comm, r.status);
}

nodusResult_t nodusRequestFree(nodusRequest_t request) {
  if (request == nullptr) return nodusSuccess;
  (void)request->req->wait();
  delete request;
  return nodusSuccess;
}

// ---- Groups -----------------------------------------------------------------------------

// Every task this file makes runs on a Comm (prepare()); the executor sees it
// only as its ExecContext.
static Comm* commOf(const Task& t) { return static_cast<Comm*>(t.comm); }

nodusResult_t nodusGroupStart(void) {
  ++tGroup.depth;
  return nodusSuccess;
}

nodusResult_t nodusGroupEnd(void) {
  if (tGroup.depth == 0) return fail(nullptr, makeError(nodusInvalidUsage, "nodusGroupEnd without nodusGroupStart"));
  if (--tGroup.depth > 0) return nodusSuccess;
  std::vector<Task> tasks = std::move(tGroup.tasks);
  tGroup.tasks.clear();
  Status recorded = std::move(tGroup.error);
  tGroup.error = Status::ok();
  Status s = recorded;
  if (s.isOk() && !tasks.empty()) s = Comm::runGroup(tasks);
  for (Task& t : tasks)
    if (t.request) t.request->complete(s.isOk() ? Status::ok() : s);
  if (!s.isOk()) {
    nodusComm_t none = nullptr;
    for (Task& t : tasks) commOf(t)->setLastError(s.message());
    return fail(none, s);
  }
  return nodusSuccess;
}

const char* nodusAlgorithmNames(void) {
  static const std::string names = [] {
    std::string n;
    for (const Algorithm* a : algorithms()) {
      if (!n.empty()) n.push_back(',');
      n.append(a->name);
    }
    return n;
  }();
  return names.c_str();
}

nodusResult_t nodusCommGetAlgorithm(nodusComm_t comm, nodusCollective_t coll, size_t count, nodusDataType_t datatype,
                                    int root, const char** name) {
  Status s = checkComm(comm);
  if (s.isOk() && name == nullptr) s = makeError(nodusInvalidArgument, "name is NULL");
  if (s.isOk() && (coll < 0 || coll >= nodusNumColls))
    s = makeError(nodusInvalidArgument, "unknown collective %d", static_cast<int>(coll));
  if (s.isOk() && !validType(datatype)) s = makeError(nodusInvalidArgument, "unknown data type %d", static_cast<int>(datatype));
  if (!s.isOk()) return fail(comm, s);
  static const Collective kColl[] = {Collective::AllReduce, Collective::AllGather, Collective::ReduceScatter,
                                     Collective::Broadcast, Collective::Reduce,    Collective::AllToAll,
                                     Collective::Gather,    Collective::Scatter};
  static_assert(sizeof(kColl) / sizeof(kColl[0]) == nodusNumColls);
  Comm& impl = *comm->impl;
  const Collective c = kColl[coll];
  const bool rooted = c == Collective::Broadcast || c == Collective::Reduce || c == Collective::Gather ||
                      c == Collective::Scatter;
  if (rooted && (root < 0 || root >= impl.nranks()))
    return fail(comm, makeError(nodusInvalidArgument, "root %d is out of range [0, %d)", root, impl.nranks()));
  PlanKey key{c, impl.nranks(), impl.rank(), count, static_cast<uint32_t>(typeSize(datatype)), rooted ? root : 0, false};
  Choice choice;
  s = impl.choose(key, &choice);
  if (!s.isOk()) return fail(comm, s);
  *name = choice.algo->name;
  return nodusSuccess;
}

}  // extern "C"
