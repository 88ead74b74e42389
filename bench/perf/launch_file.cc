// nodus-perf --rank R --nranks N --id-file PATH: one rank of processes started
// without a launcher, rank 0 handing the unique id to the others through PATH.
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
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

// Rank 0 writes the id under a name of its own and links it to `path`: a
// reader never sees half of it, and an id left by an earlier run is refused
// rather than overwritten under a reader's feet.
bool publishId(const std::string& path, const nodusUniqueId& id, std::string* err) {
  const std::string tmp = path + ".part." + std::to_string(static_cast<long>(getpid()));
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    *err = "cannot write " + tmp + ": " + std::strerror(errno);
    return false;
  }
  const bool written = std::fwrite(&id, sizeof id, 1, f) == 1;
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed) {
    *err = "cannot write " + tmp + ": " + std::strerror(errno);
    unlink(tmp.c_str());
    return false;
  }
  const int linked = link(tmp.c_str(), path.c_str());
  const int why = errno;
  unlink(tmp.c_str());
  if (linked != 0) {
    *err = why == EEXIST ? path + " exists already (left by an earlier run? remove it; every run needs a fresh one)"
                         : "cannot create " + path + ": " + std::strerror(why);
    return false;
  }
  return true;
}

// Rank 0's published id file, removed should rank 0 be interrupted or
// terminated before all ranks joined: the next run's ranks would otherwise
// read a dead rank 0's id and wait out their timeout on it.
char gPublishedId[4096];

extern "C" void removePublishedIdAndDie(int sig) {
  if (gPublishedId[0] != '\0') unlink(gPublishedId);  // async-signal-safe
  signal(sig, SIG_DFL);
  raise(sig);
}

void removeIdOnSignals(const std::string& path) {
  if (path.size() >= sizeof gPublishedId) return;
  std::memcpy(gPublishedId, path.c_str(), path.size() + 1);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, removePublishedIdAndDie);
}

void keepIdOnSignals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_DFL);
  gPublishedId[0] = '\0';
}

// Waits for rank 0's id, up to NODUS_TIMEOUT_MS, saying every 10 s that it waits.
bool awaitId(const std::string& path, int rank, nodusUniqueId* id, std::string* err) {
  const long limitMs = envLong("NODUS_TIMEOUT_MS", 300000);
  const auto start = std::chrono::steady_clock::now();
  auto said = start;
  while (true) {
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
      const bool got = std::fread(id, sizeof *id, 1, f) == 1;
      std::fclose(f);
      if (got) return true;
    }
    const auto now = std::chrono::steady_clock::now();
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count();
    if (waited >= limitMs) {
      *err = "rank 0 did not publish its id in " + path + " within NODUS_TIMEOUT_MS=" + std::to_string(limitMs) + " ms";
      return false;
    }
    if (now - said >= std::chrono::seconds(10)) {
      std::fprintf(stderr, "nodus-perf: rank %d: waiting for rank 0's id in %s (%lld s)\n", rank, path.c_str(),
                   static_cast<long long>(waited / 1000));
      said = now;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The ranks' synchronisation outside the timed calls, over a communicator of
// its own (the one the id file made), so the measured one carries nothing else.
class NodusGroup final : public Group {
 public:
  NodusGroup(nodusComm_t ctrl, int rank) : ctrl_(ctrl), rank_(rank) {}
  void barrier() override { checkNodus(nodusBarrier(ctrl_), "nodusBarrier (control)", ctrl_, rank_); }
  double maxAll(double v) override {
    double m = 0;
    checkNodus(nodusAllReduce(&v, &m, 1, nodusFloat64, nodusMax, ctrl_), "nodusAllReduce (control)", ctrl_, rank_);
    return m;
  }
  uint64_t sumAll(uint64_t v) override {
    uint64_t s = 0;
    checkNodus(nodusAllReduce(&v, &s, 1, nodusUint64, nodusSum, ctrl_), "nodusAllReduce (control)", ctrl_, rank_);
    return s;
  }

 private:
  nodusComm_t ctrl_;
  int rank_;
};

// Each communicator after the first gets a fresh id from rank 0, broadcast
// over the control communicator.
class FileCommMaker final : public CommMaker {
 public:
  FileCommMaker(nodusComm_t ctrl, int rank, int nranks) : ctrl_(ctrl), rank_(rank), nranks_(nranks) {}
  nodusComm_t create(const char* algo) override { return make(algo ? algo : ""); }
  // A communicator with `algo` as its rules (null: the run's, gAlgo).
  nodusComm_t make(const char* algo = nullptr) {
    nodusUniqueId id{};
    if (rank_ == 0) checkNodus(nodusGetUniqueId(&id), "nodusGetUniqueId", nullptr, rank_);
    checkNodus(nodusBroadcast(&id, &id, sizeof id, nodusUint8, 0, ctrl_), "nodusBroadcast (unique id)", ctrl_, rank_);
    nodusComm_t comm = nullptr;
    const nodusConfig_t cfg = perfConfig(algo);
    checkNodus(nodusCommInitRankConfig(&comm, nranks_, id, rank_, &cfg), "nodusCommInitRank", nullptr, rank_);
    return comm;
  }

 private:
  nodusComm_t ctrl_;
  int rank_, nranks_;
};

}  // namespace

int mainFile(const Options& opt) {
  const int rank = opt.rank, n = opt.nranks;
  if (opt.root >= n) {
    // Every rank says it: each was started by hand, and may be watched alone.
    std::fprintf(stderr, "nodus-perf: rank %d: root %d is not a rank of %d\n", rank, opt.root, n);
    return 2;
  }
  std::string err;
  nodusUniqueId id{};
  if (rank == 0) {
    checkNodus(nodusGetUniqueId(&id), "nodusGetUniqueId", nullptr, rank);
    removeIdOnSignals(opt.idFile);  // before it exists: no window without the handler
    if (!publishId(opt.idFile, id, &err)) {
      keepIdOnSignals();  // not ours: an earlier run's, or none
      fatal(rank, "%s", err.c_str());
    }
  } else if (!awaitId(opt.idFile, rank, &id, &err)) {
    fatal(rank, "%s", err.c_str());
  }
  nodusComm_t ctrl = nullptr;
  const nodusConfig_t ctrlCfg = perfConfig(nullptr);
  const nodusResult_t joined = nodusCommInitRankConfig(&ctrl, n, id, rank, &ctrlCfg);
  // Every rank has joined (or the job failed): the id is spent either way.
  if (rank == 0) {
    if (unlink(opt.idFile.c_str()) != 0 && errno != ENOENT)
      std::fprintf(stderr, "nodus-perf: cannot remove %s: %s\n", opt.idFile.c_str(), std::strerror(errno));
    keepIdOnSignals();
  }
  checkNodus(joined, "nodusCommInitRank", nullptr, rank);

  std::unique_ptr<Reporter> reporter;
  int32_t opened = 1;
  if (rank == 0) {
    reporter = std::make_unique<Reporter>(opt, n, "processes started without a launcher");
    opened = reporter->openFiles(&err) ? 1 : 0;
  }
  checkNodus(nodusBroadcast(&opened, &opened, 1, nodusInt32, 0, ctrl), "nodusBroadcast (control)", ctrl, rank);
  if (!opened) {
    if (rank == 0) std::fprintf(stderr, "nodus-perf: %s\n", err.c_str());
    checkNodus(nodusCommDestroy(ctrl), "nodusCommDestroy", nullptr, rank);
    return 1;
  }
  const int version = libraryVersion();
  FileCommMaker maker(ctrl, rank, n);
  nodusComm_t comm = opt.algoAll() ? nullptr : maker.make();

  char line[kRankLine] = {};
  rankLine(rank, line);
  std::vector<char> all(static_cast<size_t>(n) * kRankLine);
  checkNodus(nodusAllGather(line, all.data(), kRankLine, nodusUint8, ctrl), "nodusAllGather (control)", ctrl, rank);
  if (rank == 0) printRankLines(*reporter, version, all.data(), n);

  NodusGroup group(ctrl, rank);
  uint64_t wrong = 0;
  {
    Runner runner(opt, rank, n, comm, group, false, reporter.get());
    wrong = opt.algoAll() ? runner.runAll(maker) : runner.run();
  }
  group.barrier();
  if (comm != nullptr) checkNodus(nodusCommDestroy(comm), "nodusCommDestroy", nullptr, rank);
  if (reporter) reporter->finish();
  checkNodus(nodusCommDestroy(ctrl), "nodusCommDestroy", nullptr, rank);
  return wrong == 0 ? 0 : 1;
}

}  // namespace nodus_perf
