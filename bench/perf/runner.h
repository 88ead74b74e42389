// One rank's sweep of nodus-perf: the communicators' settings, the buffers,
// the timed loops (nodus and the MPI baseline), the check, and -a all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <vector>

#include "perf/common.h"
#include "perf/group.h"
#include "perf/options.h"
#include "perf/reporter.h"

namespace nodus_perf {

// ---- Communicators of -a all ---------------------------------------------------

// The algorithm rules every communicator of the run gets (nodusConfig_t::algo):
// null for the environment's NODUS_ALGO, "" for none (-a auto: the tuner
// decides), or what -a forces. Set once in main, before any thread exists.
extern const char* gAlgo;

// A communicator's settings: `algo` (null: gAlgo) as its algorithm rules.
nodusConfig_t perfConfig(const char* algo);

// -a all needs one communicator per algorithm: a communicator takes its
// algorithm rules when it is created (nodusConfig_t).
class CommMaker {
 public:
  virtual ~CommMaker() = default;
  // Collective: every rank calls it, with the same algo (null: none forced, the tuner decides).
  virtual nodusComm_t create(const char* algo) = 0;
};

// ---- One rank's sweep ----------------------------------------------------------

struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte, FreeDeleter>;

class Runner {
 public:
  Runner(const Options& opt, int rank, int nranks, nodusComm_t comm, Group& group, bool mpiBaseline,
         Reporter* reporter);

  // Runs the whole sweep; returns the number of wrong elements over all ranks.
  // --split K: first times the split and creation from new ids, then sweeps
  // on this rank's split communicator.
  uint64_t run();

  // -a all: the sweep once per algorithm, out-of-place, each on a communicator
  // made with NODUS_ALGO set to it, after one with NODUS_ALGO unset has told
  // the tuner's picks. Every rank makes the same communicators in the same
  // order. Returns the number of wrong elements over all ranks.
  uint64_t runAll(CommMaker& maker);

 private:
  // --split: times nodusCommSplit into opt_.split groups against new ids,
  // reports both, and makes comm_ (rank_, nranks_, the MPI baseline's
  // communicator) this rank's split communicator; returns the parent.
  nodusComm_t splitMode();
  uint64_t sweep();

  // The rows of collective `c`'s table, in sweep order, not yet measured.
  std::vector<Row> sweepRows(Coll c) const;

  // The algorithm comm_ runs this row's call with (the library's static name).
  const char* algorithmFor(const Row& r) const;

  // Ends a communicator of -a all once no peer may still need it.
  void retire();

  Buffer allocTouched(size_t bytes);

  // The (sendbuf, recvbuf) pair of a nodus call, NCCL's in-place definitions.
  void nodusBuffers(Coll c, size_t rankCount, size_t elemSize, bool inPlace, const void** send,
                    void** recv) const;

  void callNodus(Coll c, const void* send, void* recv, size_t count, nodusDataType_t type,
                 nodusRedOp_t op) const;

  // Average time per call in microseconds, of the slowest rank.
  template <class F>
  double timeLoop(F&& once);

  Measurement measure(Coll c, const TypeInfo& ti, nodusRedOp_t op, size_t rankCount, size_t bytes,
                      bool inPlace, uint64_t seed, bool withMpi);

  // The MPI baseline of a call into m->mpi*, where MPI has an equivalent.
  void timeMpi(Coll c, const TypeInfo& ti, nodusRedOp_t op, size_t rankCount, size_t bytes,
               bool inPlace, Measurement* m);

#if NODUS_PERF_MPI
  void callMpi(Coll c, bool inPlace, size_t rankCount, size_t elemSize, MPI_Datatype dt,
               MPI_Op op) const;
#endif

  // One more call on fresh inputs; returns the wrong elements over all ranks.
  uint64_t check(Coll c, const TypeInfo& ti, nodusRedOp_t op, size_t rankCount, bool inPlace,
                 uint64_t seed, const void* send, void* recv);

  const Options& opt_;
  int rank_;
  int nranks_;
  nodusComm_t comm_;
  Group& group_;
  bool mpiBaseline_;
  Reporter* reporter_;
  std::vector<size_t> sizes_;
  size_t capacity_ = 0;
  Buffer send_;
  Buffer recv_;
#if NODUS_PERF_MPI
  MPI_Comm mpiComm_ = MPI_COMM_WORLD;  // the MPI baseline's (--split: MPI_Comm_split's)
#endif
};

}  // namespace nodus_perf
