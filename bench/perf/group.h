// How the ranks of nodus-perf meet outside the timed calls (barriers, the
// slowest rank's time, the wrong-element counts): threads of one process, or
// MPI processes, whose MPI side also maps nodus' types and operations for the
// MPI baseline. (The id-file mode's group is in launch_file.cc.)
#pragma once

#include <barrier>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "perf/common.h"

namespace nodus_perf {

// ---- Synchronisation between ranks, outside nodus ------------------------------

class Group {
 public:
  virtual ~Group() = default;
  virtual void barrier() = 0;
  virtual double maxAll(double v) = 0;
  virtual uint64_t sumAll(uint64_t v) = 0;
};

struct ThreadShared {
  explicit ThreadShared(int n)
      : bar(n),
        doubles(static_cast<size_t>(n)),
        counts(static_cast<size_t>(n)),
        comms(static_cast<size_t>(n), nullptr) {}
  std::barrier<> bar;
  std::vector<double> doubles;
  std::vector<uint64_t> counts;
  std::vector<nodusComm_t> comms;  // -a all: the communicator being made, rank i's at i
};

class ThreadGroup final : public Group {
 public:
  ThreadGroup(ThreadShared& shared, int rank) : s_(shared), rank_(static_cast<size_t>(rank)) {}
  void barrier() override;
  double maxAll(double v) override;
  uint64_t sumAll(uint64_t v) override;

 private:
  ThreadShared& s_;
  size_t rank_;
};

#if NODUS_PERF_MPI
class MpiGroup final : public Group {
 public:
  void barrier() override;
  double maxAll(double v) override;
  uint64_t sumAll(uint64_t v) override;
};

// MPI's equivalents of a nodus type and operation; false where MPI has none.
bool mpiType(nodusDataType_t t, MPI_Datatype* out);
bool mpiOp(nodusRedOp_t op, MPI_Op* out);
#endif

}  // namespace nodus_perf
