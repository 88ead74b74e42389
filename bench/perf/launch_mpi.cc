// nodus-perf under mpirun: every rank an MPI process.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "perf/common.h"
#include "perf/group.h"
#include "perf/launch.h"
#include "perf/options.h"
#include "perf/reporter.h"
#include "perf/runner.h"

#if NODUS_PERF_MPI

namespace nodus_perf {

namespace {

class MpiCommMaker final : public CommMaker {
 public:
  explicit MpiCommMaker(int rank) : rank_(rank) {}
  nodusComm_t create(const char* algo) override {
    const nodusConfig_t cfg = perfConfig(algo ? algo : "");
    nodusComm_t comm = nullptr;
    checkNodus(nodusCommInitMPIConfig(&comm, MPI_COMM_WORLD, &cfg), "nodusCommInitMPI", nullptr, rank_);
    return comm;
  }

 private:
  int rank_;
};

}  // namespace

int mainMpi(int argc, char** argv, const Options& opt) {
  MPI_Init(&argc, &argv);
  gAbortWithMpi = true;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (opt.root >= size) {
    if (rank == 0)
      std::fprintf(stderr, "nodus-perf: root %d is not a rank of %d\n", opt.root, size);
    MPI_Finalize();
    return 2;
  }
  std::unique_ptr<Reporter> reporter;
  int opened = 1;
  std::string err;
  if (rank == 0) {
    reporter = std::make_unique<Reporter>(opt, size, "MPI processes");
    opened = reporter->openFiles(&err) ? 1 : 0;
  }
  MPI_Bcast(&opened, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!opened) {
    if (rank == 0) std::fprintf(stderr, "nodus-perf: %s\n", err.c_str());
    MPI_Finalize();
    return 1;
  }
  const int version = libraryVersion();
  nodusComm_t comm = nullptr;
  const nodusConfig_t cfg = perfConfig(nullptr);
  if (!opt.algoAll()) checkNodus(nodusCommInitMPIConfig(&comm, MPI_COMM_WORLD, &cfg), "nodusCommInitMPI", nullptr, rank);

  char line[kRankLine] = {};
  rankLine(rank, line);
  std::vector<char> all(rank == 0 ? static_cast<size_t>(size) * kRankLine : 1);
  MPI_Gather(line, static_cast<int>(kRankLine), MPI_CHAR, all.data(), static_cast<int>(kRankLine), MPI_CHAR, 0,
             MPI_COMM_WORLD);
  if (rank == 0) printRankLines(*reporter, version, all.data(), size);

  MpiGroup group;
  uint64_t wrong = 0;
  {
    Runner runner(opt, rank, size, comm, group, opt.baselineMpi, reporter.get());
    if (opt.algoAll()) {
      MpiCommMaker maker(rank);
      wrong = runner.runAll(maker);
    } else {
      wrong = runner.run();
    }
  }
  group.barrier();
  if (comm != nullptr) checkNodus(nodusCommDestroy(comm), "nodusCommDestroy", nullptr, rank);
  if (reporter) reporter->finish();
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}

}  // namespace nodus_perf
#endif
