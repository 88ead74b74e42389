// nodus-perf -t N: every rank a thread of this process.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "perf/common.h"
#include "perf/group.h"
#include "perf/launch.h"
#include "perf/options.h"
#include "perf/reporter.h"
#include "perf/runner.h"

namespace nodus_perf {

namespace {

// One thread makes every rank's communicator while the others wait at the
// barrier, so nobody reads the environment while it changes.
class ThreadCommMaker final : public CommMaker {
 public:
  ThreadCommMaker(ThreadShared& shared, int rank) : s_(shared), rank_(rank) {}
  nodusComm_t create(const char* algo) override {
    s_.bar.arrive_and_wait();
    if (rank_ == 0) {
      const nodusConfig_t cfg = perfConfig(algo ? algo : "");
      checkNodus(nodusCommInitAllConfig(s_.comms.data(), static_cast<int>(s_.comms.size()), &cfg),
                 "nodusCommInitAll", nullptr, 0);
    }
    s_.bar.arrive_and_wait();
    return s_.comms[static_cast<size_t>(rank_)];
  }

 private:
  ThreadShared& s_;
  int rank_;
};

}  // namespace

int mainThreads(const Options& opt) {
  const int n = opt.threads;
  if (opt.baselineMpi) {
    std::fprintf(stderr, "nodus-perf: --baseline mpi needs an MPI launch (mpirun, without -t)\n");
    return 2;
  }
  if (opt.root >= n) {
    std::fprintf(stderr, "nodus-perf: root %d is not a rank of %d\n", opt.root, n);
    return 2;
  }
  Reporter reporter(opt, n, "threads of one process");
  std::string err;
  if (!reporter.openFiles(&err)) {
    std::fprintf(stderr, "nodus-perf: %s\n", err.c_str());
    return 1;
  }
  const int version = libraryVersion();
  std::vector<nodusComm_t> comms(static_cast<size_t>(n), nullptr);
  const nodusConfig_t cfg = perfConfig(nullptr);
  if (!opt.algoAll()) checkNodus(nodusCommInitAllConfig(comms.data(), n, &cfg), "nodusCommInitAll", nullptr, 0);
  char line[512];
  std::snprintf(line, sizeof line, "#  Ranks 0..%d: threads of pid %d on %s", n - 1,
                static_cast<int>(getpid()), hostName().c_str());
  reporter.printHeader(version, {line});

  ThreadShared shared(n);
  std::vector<uint64_t> wrong(static_cast<size_t>(n), 0);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ThreadGroup group(shared, r);
      Runner runner(opt, r, n, comms[static_cast<size_t>(r)], group, false,
                    r == 0 ? &reporter : nullptr);
      if (opt.algoAll()) {
        ThreadCommMaker maker(shared, r);
        wrong[static_cast<size_t>(r)] = runner.runAll(maker);
        return;
      }
      wrong[static_cast<size_t>(r)] = runner.run();
      group.barrier();  // nobody leaves while a peer may still need it
      checkNodus(nodusCommDestroy(comms[static_cast<size_t>(r)]), "nodusCommDestroy", nullptr, r);
    });
  }
  for (std::thread& t : threads) t.join();
  reporter.finish();
  return wrong[0] == 0 ? 0 : 1;
}

}  // namespace nodus_perf
