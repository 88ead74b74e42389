#include "plugin.h"

#include <climits>
#include <cstring>
#include <vector>

#include "log.h"

namespace nodus::mpi {

std::atomic<Plugin*> Plugin::instance_{nullptr};

namespace {
// Owns the instance between start() and stop(); Plugin::get() is the hot-path view.
std::unique_ptr<Plugin>& owner() {
  static std::unique_ptr<Plugin> p;
  return p;
}
}  // namespace

Plugin::Plugin(int threadLevel) : threadLevel_(threadLevel), config_(Config::fromEnvironment()) {}

void Plugin::start(int threadLevel) {
  if (get() != nullptr) return;
  owner() = std::make_unique<Plugin>(threadLevel);
  Plugin& p = *owner();
  PMPI_Comm_rank(MPI_COMM_WORLD, &p.worldRank_);
  PMPI_Comm_size(MPI_COMM_WORLD, &p.worldSize_);
  setLogRank(p.worldRank_);
  p.types_.build();
  // Each communicator's own nodus communicator: a duplicate gets its own, on
  // its first eligible call, so the attribute is not copied.
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, deleteAttr, &p.keyval_, nullptr);
  p.agreeOnSettings();
  instance_.store(&p, std::memory_order_release);
  int reason = -1;
  p.world_ = p.createState(MPI_COMM_WORLD, true, &reason).get();
  if (p.config_.verbose >= 2)
    logMessage("started: thread level %d, NODUS_MPI_MIN_BYTES=%llu, MPI_COMM_WORLD %s", p.threadLevel_,
               static_cast<unsigned long long>(p.config_.minBytes),
               p.world_ && p.world_->state() == NODUS_MPI_COMM_ACTIVE ? "on nodus" : "on MPI");
}

void Plugin::agreeOnSettings() {
  // Routing compares sizes with the threshold on every rank: ranks started
  // with different NODUS_MPI_MIN_BYTES would route one call differently and
  // hang. All ranks take the largest.
  long long v[2] = {static_cast<long long>(config_.minBytes), -static_cast<long long>(config_.minBytes)};
  PMPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  if (v[0] != -v[1] && worldRank_ == 0)
    logMessage("NODUS_MPI_MIN_BYTES differs between ranks (%lld to %lld); all use %lld", -v[1], v[0], v[0]);
  config_.minBytes = static_cast<uint64_t>(v[0]);
}

void Plugin::stop() {
  Plugin* p = get();
  if (p == nullptr) return;
  p->pending_.drain();
  if (p->config_.verbose >= 2 || (p->config_.verbose == 1 && p->worldRank_ == 0))
    p->stats_.report(p->worldSize_, p->config_.minBytes);
  // Deleting the attribute runs deleteAttr, which forgets the state and (once
  // no request holds it) destroys its nodus communicator: the same path as
  // MPI_Comm_free. What is left after that is held only by unfinished requests.
  std::vector<MPI_Comm> comms;
  {
    std::lock_guard<std::mutex> lock(p->liveMu_);
    for (auto& [raw, state] : p->live_) comms.push_back(state->comm());
  }
  for (MPI_Comm c : comms) PMPI_Comm_delete_attr(c, p->keyval_);
  p->world_ = nullptr;
  PMPI_Comm_free_keyval(&p->keyval_);
  instance_.store(nullptr, std::memory_order_release);
  std::vector<std::shared_ptr<CommState>> rest;
  {
    std::lock_guard<std::mutex> lock(p->liveMu_);
    for (auto& [raw, state] : p->live_) rest.push_back(state);
    p->live_.clear();
  }
  for (auto& s : rest) s->shutdown();
  owner().reset();
}

// ---- Communicators ------------------------------------------------------------------------

CommState* Plugin::lookup(MPI_Comm comm) {
  if (comm == MPI_COMM_WORLD && world_ != nullptr) return world_;
  void* value = nullptr;
  int found = 0;
  if (PMPI_Comm_get_attr(comm, keyval_, &value, &found) != MPI_SUCCESS || !found) return nullptr;
  return static_cast<CommState*>(value);
}

CommState* Plugin::attach(MPI_Comm comm, std::shared_ptr<CommState> s) {
  CommState* raw = s.get();
  {
    std::lock_guard<std::mutex> lock(liveMu_);
    live_.emplace(raw, std::move(s));
  }
  PMPI_Comm_set_attr(comm, keyval_, raw);
  return raw;
}

void Plugin::forget(CommState* s) {
  std::shared_ptr<CommState> dying;
  {
    std::lock_guard<std::mutex> lock(liveMu_);
    auto it = live_.find(s);
    if (it == live_.end()) return;
    dying = std::move(it->second);
    live_.erase(it);
  }
  if (s == world_) world_ = nullptr;
  // `dying` goes here: the nodus communicator is destroyed once no pending
  // request holds the state any more.
}

int Plugin::deleteAttr(MPI_Comm, int, void* value, void*) {
  if (Plugin* p = get()) p->forget(static_cast<CommState*>(value));
  return MPI_SUCCESS;
}

std::shared_ptr<CommState> Plugin::createState(MPI_Comm comm, bool blocking, int* reason) {
  int inter = 0, size = 0, rank = 0;
  if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS) {
    *reason = NODUS_MPI_FB_ARGS;
    return nullptr;
  }
  if (inter) {
    auto s = std::make_shared<CommState>(comm, 0, 0, nullptr, NODUS_MPI_COMM_UNSUITABLE, NODUS_MPI_FB_INTERCOMM);
    attach(comm, s);
    *reason = NODUS_MPI_FB_INTERCOMM;
    return s;
  }
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &rank);
  if (size < 2) {
    auto s = std::make_shared<CommState>(comm, rank, size, nullptr, NODUS_MPI_COMM_UNSUITABLE, NODUS_MPI_FB_ONE_RANK);
    attach(comm, s);
    *reason = NODUS_MPI_FB_ONE_RANK;
    return s;
  }
  if (!blocking) {
    // Creating is a blocking collective; a non-blocking call must not block
    // on the other ranks. Every rank reaches this same call without one.
    *reason = NODUS_MPI_FB_NOT_READY;
    return nullptr;
  }
  auto s = createNodus(comm, rank, size);
  attach(comm, s);
  *reason = s->state() == NODUS_MPI_COMM_ACTIVE ? -1 : NODUS_MPI_FB_INIT_FAILED;
  return s;
}

std::shared_ptr<CommState> Plugin::createNodus(MPI_Comm comm, int rank, int size) {
  // nodusCommInitMPI's protocol, over PMPI so that nothing here is intercepted.
  nodusUniqueId id;
  std::memset(&id, 0, sizeof id);
  int idOk = 1;
  if (rank == 0) idOk = nodusGetUniqueId(&id) == nodusSuccess;
  std::string why;
  if (rank == 0 && !idOk) why = nodusGetLastError(nullptr);
  PMPI_Bcast(&idOk, 1, MPI_INT, 0, comm);
  nodusComm_t nodus = nullptr;
  bool mine = false;
  if (idOk) {
    PMPI_Bcast(&id, static_cast<int>(sizeof id), MPI_BYTE, 0, comm);
    mine = nodusCommInitRank(&nodus, size, id, rank) == nodusSuccess;
    if (!mine) why = nodusGetLastError(nullptr);
  }
  // Every rank must come to the same answer, or some would send this
  // communicator's calls to nodus and others to MPI. The lowest failing rank
  // says why.
  int v[2] = {idOk && mine ? 1 : 0, idOk && mine ? INT_MAX : rank};
  PMPI_Allreduce(MPI_IN_PLACE, v, 2, MPI_INT, MPI_MIN, comm);
  if (v[0] == 1) {
    if (config_.verbose >= 2) logMessage("a communicator of %d ranks (rank %d here) is on nodus", size, rank);
    return std::make_shared<CommState>(comm, rank, size, nodus, NODUS_MPI_COMM_ACTIVE, -1);
  }
  nodusCommDestroy(nodus);
  if (rank == v[1] && (!loggedInitFailure_.exchange(true) || config_.verbose >= 1))
    logMessage("nodus could not create a communicator of %d ranks (%s); its collectives use MPI instead%s", size,
               why.empty() ? "no reason given" : why.c_str(),
               config_.verbose >= 1 ? "" : " (further failures are not logged)");
  return std::make_shared<CommState>(comm, rank, size, nullptr, NODUS_MPI_COMM_INIT_FAILED, -1);
}

// ---- Routing -------------------------------------------------------------------------------

namespace {
bool validComm(MPI_Comm comm) { return comm != MPI_COMM_NULL; }
}  // namespace

CommState* Plugin::routeReductionFurther(int coll, MPI_Comm comm, int64_t count, MPI_Datatype type, MPI_Op op,
                                         bool blocking, Reduction* out, uint64_t ranks) {
  if (!validComm(comm) || count < 0) {
    stats_.fallback(coll, NODUS_MPI_FB_ARGS, 0);
    return nullptr;
  }
  int why = types_.reduction(type, op, count, out);
  if (why < 0 && small(out->bytes, out->bytes / ranks, config_.minBytes)) why = NODUS_MPI_FB_SMALL;
  CommState* s = nullptr;
  if (why < 0) {
    s = lookup(comm);
    if (s == nullptr) s = createState(comm, blocking, &why).get();
    else if (s->state() != NODUS_MPI_COMM_ACTIVE) why = s->fallbackReason();
    if (why >= 0) s = nullptr;
  }
  if (s == nullptr) stats_.fallback(coll, why, out->bytes);
  return s;
}

CommState* Plugin::routeMoveFurther(int coll, MPI_Comm comm, uint64_t bytes, bool blocking) {
  if (!validComm(comm)) {
    stats_.fallback(coll, NODUS_MPI_FB_ARGS, bytes);
    return nullptr;
  }
  const bool barrier = coll == NODUS_MPI_BARRIER || coll == NODUS_MPI_IBARRIER;
  int why = -1;
  CommState* s = lookup(comm);
  // A barrier alone never pays for creating a nodus communicator.
  if (s == nullptr) s = createState(comm, blocking && !barrier, &why).get();
  else if (s->state() != NODUS_MPI_COMM_ACTIVE) why = s->fallbackReason();
  if (why >= 0) s = nullptr;
  if (s == nullptr) stats_.fallback(coll, why, bytes);
  return s;
}

// ---- Failures ------------------------------------------------------------------------------

bool Plugin::agreeOnFailure(CommState& s, int coll, uint64_t seq, nodusResult_t rc, bool inputsSurvive) {
  const std::string detail = nodusGetLastError(s.nodus());
  if (!loggedRuntimeFailure_.exchange(true) || config_.verbose >= 1)
    logMessage("nodus %s failed on a communicator of %d ranks: %s%s%s; this communicator uses MPI from now on",
               nodus_mpi_coll_name(coll), s.size(), nodusGetErrorString(rc), detail.empty() ? "" : ": ",
               detail.c_str());
  // Peers still inside this call (or about to enter it) fail at once instead
  // of waiting NODUS_TIMEOUT_MS for this rank.
  nodusCommAbort(s.nodus());
  // Which call failed where, and could every rank's inputs still be read?
  // Ranks that saw the same call fail can all redo it through MPI; a rank
  // whose nodus call succeeded while another's failed has already returned
  // its result and cannot join a redo: that job cannot be repaired.
  long long v[3] = {static_cast<long long>(seq), -static_cast<long long>(seq), inputsSurvive ? 0 : 1};
  PMPI_Allreduce(MPI_IN_PLACE, v, 3, MPI_LONG_LONG, MPI_MAX, s.comm());
  s.disable();
  if (v[0] != -v[1]) {
    logMessage("ranks disagree on which nodus call failed (calls %lld to %lld of this communicator): "
               "the results already returned cannot be made consistent; aborting",
               -v[1], v[0]);
    PMPI_Abort(s.comm(), 1);
  }
  if (v[2] != 0) {
    if (s.rank() == 0)
      logMessage("the failed %s was in place on some rank: its input may be partly overwritten, so it cannot be "
                 "redone; reporting MPI_ERR_OTHER",
                 nodus_mpi_coll_name(coll));
    return false;
  }
  return true;
}

int Plugin::issueFailed(CommState& s, int coll, nodusResult_t rc) {
  const std::string detail = nodusGetLastError(s.nodus());
  if (!loggedRuntimeFailure_.exchange(true) || config_.verbose >= 1)
    logMessage("nodus could not start %s: %s%s%s; reporting MPI_ERR_OTHER (the next blocking collective on this "
               "communicator moves it to MPI)",
               nodus_mpi_coll_name(coll), nodusGetErrorString(rc), detail.empty() ? "" : ": ", detail.c_str());
  // A non-blocking call cannot wait for the other ranks to agree on a redo
  // (they may be elsewhere); fail this request and make sure no peer waits
  // for it in nodus.
  nodusCommAbort(s.nodus());
  return raise(s.comm(), MPI_ERR_OTHER);
}

void Plugin::requestFailed(int coll, nodusResult_t rc, const char* detail) {
  if (!loggedRuntimeFailure_.exchange(true) || config_.verbose >= 1)
    logMessage("nodus %s failed: %s%s%s; the request completes with MPI_ERR_OTHER", nodus_mpi_coll_name(coll),
               nodusGetErrorString(rc), detail && *detail ? ": " : "", detail ? detail : "");
}

int Plugin::raise(MPI_Comm comm, int code) {
  PMPI_Comm_call_errhandler(comm, code);
  return code;
}

int Plugin::injectFault(MPI_Comm comm) {
  CommState* s = lookup(comm);
  if (s == nullptr || s->state() != NODUS_MPI_COMM_ACTIVE) return -1;
  return nodusCommAbort(s->nodus()) == nodusSuccess ? 0 : -1;
}

}  // namespace nodus::mpi

// ---- What a program may ask (nodus_mpi_plugin.h) ---------------------------------------

using nodus::mpi::Plugin;

extern "C" {

__attribute__((visibility("default"))) int nodus_mpi_stats(int coll, nodus_mpi_counters_t* out) {
  Plugin* p = Plugin::get();
  if (p == nullptr || out == nullptr || coll < 0 || coll >= NODUS_MPI_NUM_COLLS) return -1;
  *out = p->stats().get(coll);
  return 0;
}

__attribute__((visibility("default"))) int nodus_mpi_comm_state(MPI_Comm comm) {
  Plugin* p = Plugin::get();
  if (p == nullptr) return -1;
  nodus::mpi::CommState* s = p->lookup(comm);
  return s ? s->state() : NODUS_MPI_COMM_NONE;
}

__attribute__((visibility("default"))) long long nodus_mpi_min_bytes(void) {
  Plugin* p = Plugin::get();
  return p ? static_cast<long long>(p->config().minBytes) : -1;
}

__attribute__((visibility("default"))) int nodus_mpi_inject_fault(MPI_Comm comm) {
  Plugin* p = Plugin::get();
  return p ? p->injectFault(comm) : -1;
}

}  // extern "C"
