// The interposer's process-wide state, from MPI_Init to MPI_Finalize.
//
// MPI itself is process-wide, so is this: one Plugin, created by the
// intercepted MPI_Init / MPI_Init_thread and destroyed by MPI_Finalize; while
// there is none (before, after, or when MPI was initialised behind the
// plugin's back) every call goes straight to the PMPI_ entry point.
//
// The one rule everything here keeps: every rank of a communicator must send
// each collective call to the same place (nodus or MPI), or the job hangs. So
// a call is routed only on what MPI requires to agree across ranks (counts,
// byte sizes, datatype and op of reductions, root) and on per-communicator
// state that changes only at points every rank passes together (creation at
// the first eligible blocking call, an agreed failure). Buffer addresses,
// in-place-ness and datatype layout (which may legally differ between ranks
// for Bcast and Allgather) change how this rank stages its data, never where
// the call goes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "comm_state.h"
#include "config.h"
#include "mpi_headers.h"
#include "nodus/nodus.h"
#include "pending_ops.h"
#include "stats.h"
#include "type_map.h"

namespace nodus::mpi {

class Plugin {
 public:
  // Made only by start(); public so that a unique_ptr can own it.
  explicit Plugin(int threadLevel);
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  static Plugin* get() noexcept { return instance_.load(std::memory_order_acquire); }
  // After PMPI_Init*: collective over MPI_COMM_WORLD (agrees on the settings
  // and creates MPI_COMM_WORLD's nodus communicator).
  static void start(int threadLevel);
  // Before PMPI_Finalize: completes what is pending, prints the report,
  // destroys every nodus communicator.
  static void stop();

  const Config& config() const { return config_; }
  Stats& stats() { return stats_; }
  const TypeMap& types() const { return types_; }
  PendingOps& pending() { return pending_; }

  // Routing by size. A call is "small", and goes to MPI, when it moves
  // nothing at all or when the block each rank contributes is below
  // NODUS_MPI_MIN_BYTES: the whole buffer of AllReduce, Reduce and Bcast,
  // one rank's block of Allgather and Reduce_scatter_block, and the whole
  // vector over the rank count for Reduce_scatter. That block is what the MPI
  // library's own protocol choice looks at (its eager limit applies to the
  // messages a rank sends), so one threshold fits every collective.
  // `whole` is the call's size as the counters report it.
  static bool small(uint64_t whole, uint64_t perRank, uint64_t minBytes) {
    return whole == 0 || perRank < minBytes;
  }

  // Whether a call of `count` elements of `type` per rank, over `ranks`
  // blocks, is small (counted if so). Only predefined types and valid
  // counts are decided here; anything else is left to the full routing. The
  // entry points ask this first, so that the calls below the threshold, the
  // ones programs make most often, jump to PMPI_* after a table scan and two
  // stores (callgrind: 66 instructions a call, was 106).
  bool tooSmall(int coll, int64_t count, MPI_Datatype type, uint64_t ranks = 1) noexcept {
    const uint64_t size = types_.predefinedSize(type);
    if (size == 0 || count < 0) return false;
    const uint64_t block = static_cast<uint64_t>(count) * size;
    if (!small(block, block, config_.minBytes)) return false;
    stats_.fallback(coll, NODUS_MPI_FB_SMALL, block * ranks);
    return true;
  }

  // Where a reduction goes: a communicator to run it on, or null once the
  // fall-back has been counted. `count` is in MPI elements of `type`, the
  // whole call; `ranks` how many blocks it is split into (reduce-scatters).
  CommState* routeReduction(int coll, MPI_Comm comm, int64_t count, MPI_Datatype type, MPI_Op op,
                            bool blocking, Reduction* out, uint64_t ranks = 1) {
    const uint64_t size = types_.predefinedSize(type);
    if (size != 0 && count >= 0) {
      out->bytes = static_cast<uint64_t>(count) * size;
      if (small(out->bytes, out->bytes / ranks, config_.minBytes)) {
        stats_.fallback(coll, NODUS_MPI_FB_SMALL, out->bytes);
        return nullptr;
      }
    }
    return routeReductionFurther(coll, comm, count, type, op, blocking, out, ranks);
  }
  // Where a byte-moving call (Bcast, Allgather, Barrier) of `bytes` in all,
  // `ranks` blocks (Allgather), goes.
  // A barrier moves nothing, so the threshold keeps it on MPI unless it is 0:
  // on 2 ranks of one host Open MPI's takes 0.15 us and nodus' (a one-byte
  // AllReduce) 0.32; oversubscribed (3-4 ranks on 2 cores) nodus' is 1.25x
  // faster, which NODUS_MPI_MIN_BYTES=0 buys along with every small call.
  CommState* routeMove(int coll, MPI_Comm comm, uint64_t bytes, bool blocking, uint64_t ranks = 1) {
    const bool barrier = coll == NODUS_MPI_BARRIER || coll == NODUS_MPI_IBARRIER;
    if (barrier ? config_.minBytes > 0 : small(bytes, bytes / ranks, config_.minBytes)) {
      stats_.fallback(coll, NODUS_MPI_FB_SMALL, bytes);
      return nullptr;
    }
    return routeMoveFurther(coll, comm, bytes, blocking);
  }
  // MPI_Comm_size, without the library call for MPI_COMM_WORLD.
  bool commSize(MPI_Comm comm, int* size) const {
    if (comm == MPI_COMM_WORLD) {
      *size = worldSize_;
      return true;
    }
    return PMPI_Comm_size(comm, size) == MPI_SUCCESS;
  }
  // Counts a fall-back decided by the caller.
  void fallBack(int coll, int reason, uint64_t bytes) { stats_.fallback(coll, reason, bytes); }

  // The communicator's state, or null if it has none yet.
  CommState* lookup(MPI_Comm comm);

  // Runs a blocking call on nodus. `run(nodusComm_t)` returns a
  // nodusResult_t; on failure every rank agrees on what happened and then
  // either re-runs the call through MPI (`redo()`, from the untouched inputs)
  // or reports MPI_ERR_OTHER (an input that nodus may have overwritten).
  template <class Run, class Redo>
  int runBlocking(CommState& s, int coll, uint64_t bytes, bool staged, bool inputsSurvive, Run&& run,
                  Redo&& redo) {
    const uint64_t seq = s.nextSeq();
    const nodusResult_t rc = std::forward<Run>(run)(s.nodus());
    if (rc == nodusSuccess) {
      stats_.nodus(coll, bytes, staged);
      return MPI_SUCCESS;
    }
    stats_.fallback(coll, NODUS_MPI_FB_NODUS_ERROR, bytes);
    if (agreeOnFailure(s, coll, seq, rc, inputsSurvive)) return std::forward<Redo>(redo)();
    return raise(s.comm(), MPI_ERR_OTHER);
  }

  // Starts a non-blocking call on nodus: `issue(nodusComm_t, nodusRequest_t*)`.
  template <class Issue>
  int startNonBlocking(CommState& s, int coll, uint64_t bytes, bool staged, std::unique_ptr<PendingOp> op,
                       Issue&& issue, MPI_Request* request) {
    s.nextSeq();
    nodusRequest_t req = nullptr;
    const nodusResult_t rc = std::forward<Issue>(issue)(s.nodus(), &req);
    if (rc != nodusSuccess) {
      stats_.fallback(coll, NODUS_MPI_FB_NODUS_ERROR, bytes);
      *request = MPI_REQUEST_NULL;
      return issueFailed(s, coll, rc);
    }
    stats_.nodus(coll, bytes, staged);
    op->comm = s.shared_from_this();
    op->request = req;
    op->coll = coll;
    return pending_.start(std::move(op), request);
  }

  // A nodus error inside a non-blocking request, seen when it completes.
  void requestFailed(int coll, nodusResult_t rc, const char* detail);

  // Invokes the communicator's error handler, as MPI does for its own errors.
  static int raise(MPI_Comm comm, int code);

  // Testing hook behind nodus_mpi_inject_fault().
  int injectFault(MPI_Comm comm);

 private:
  CommState* routeReductionFurther(int coll, MPI_Comm comm, int64_t count, MPI_Datatype type, MPI_Op op,
                                   bool blocking, Reduction* out, uint64_t ranks);
  CommState* routeMoveFurther(int coll, MPI_Comm comm, uint64_t bytes, bool blocking);
  CommState* attach(MPI_Comm comm, std::shared_ptr<CommState> s);
  std::shared_ptr<CommState> createState(MPI_Comm comm, bool blocking, int* reason);
  std::shared_ptr<CommState> createNodus(MPI_Comm comm, int rank, int size);
  void forget(CommState* s);
  bool agreeOnFailure(CommState& s, int coll, uint64_t seq, nodusResult_t rc, bool inputsSurvive);
  int issueFailed(CommState& s, int coll, nodusResult_t rc);
  void agreeOnSettings();
  static int deleteAttr(MPI_Comm comm, int keyval, void* value, void* extra);

  static std::atomic<Plugin*> instance_;

  const int threadLevel_;
  Config config_;
  Stats stats_;
  TypeMap types_;
  PendingOps pending_;
  int keyval_ = MPI_KEYVAL_INVALID;
  int worldRank_ = 0, worldSize_ = 1;
  CommState* world_ = nullptr;  // fast path for the most used communicator

  std::mutex liveMu_;  // communicators are created and freed from any thread
  std::unordered_map<CommState*, std::shared_ptr<CommState>> live_;

  std::atomic<bool> loggedInitFailure_{false};
  std::atomic<bool> loggedRuntimeFailure_{false};
};

}  // namespace nodus::mpi
