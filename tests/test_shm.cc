// Multi-rank tests over shared memory: every rank a forked process. The parent
// makes the unique id (nodusGetUniqueId), the children join with
// nodusCommInitRank and report through exit status, stderr and a shared page;
// the parent waits with a time limit and kills stragglers. After every test
// /dev/shm must hold no nodus segment that was not there before.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "collective_check.h"
#include "nodus/nodus.h"

namespace nodus_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;


// Parent side of one multi-process run.
class ShmTest : public ::testing::Test {
 protected:
  void SetUp() override { before_ = NodusShmEntries(); }
  void TearDown() override { ExpectNoShmLeft(); }

  // No nodus segment in /dev/shm but those other processes had before the test.
  void ExpectNoShmLeft() {
    const std::string leaks = NodusShmLeaks(before_, milliseconds(3000));
    EXPECT_TRUE(leaks.empty()) << leaks;
  }

  // Forked ranks joined over the shm transport (RunForkedComms).
  static std::unique_ptr<ForkedRanks> Run(int nranks, milliseconds limit, const ForkedBody& body) {
    return RunForkedComms(nranks, limit, ForceShm, body);
  }
  static bool ForceShm(int, RankReport&) {
    setenv("NODUS_TRANSPORT", "shm", 1);
    return true;
  }

  // Runs `body` on 2 processes with NODUS_DEBUG=INFO, NODUS_SHM_CMA and
  // NODUS_ALGO as given; returns every rank's log.
  static std::string RunLoggingPlans(const char* cma, const char* algo, const ForkedBody& body) {
    char dir[] = "/tmp/nodus-slices-XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      ADD_FAILURE() << "mkdtemp: " << strerror(errno);
      return {};
    }
    {
      ScopedEnv cmaEnv("NODUS_SHM_CMA", cma);
      ScopedEnv algoEnv("NODUS_ALGO", algo);
      ScopedEnv debug("NODUS_DEBUG", "INFO");
      ScopedEnv file("NODUS_DEBUG_FILE", std::string(dir) + "/log.%p");
      Run(2, seconds(60), body);
    }
    std::string logs;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      std::ifstream in(entry.path());
      logs.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    std::filesystem::remove_all(dir);
    return logs;
  }

  // Runs a scenario on every rank.
  template <typename Scenario>
  void RunScenario(int nranks, milliseconds limit, Scenario scenario) {
    Run(nranks, limit, [&](nodusComm_t comm, int rank, int n, RankReport& report) {
      scenario(comm, rank, n, ReportTo(report));
    });
  }

 private:
  std::set<std::string> before_;
};

// Memory shared by the parent and its forked children (for counters).
class SharedInts {
 public:
  explicit SharedInts(size_t n) : bytes_(std::max<size_t>(n, 1) * sizeof(int)) {
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) std::abort();
    data_ = static_cast<int*>(p);
    std::memset(data_, 0, bytes_);
  }
  ~SharedInts() { munmap(data_, bytes_); }
  SharedInts(const SharedInts&) = delete;
  SharedInts& operator=(const SharedInts&) = delete;
  int* data() { return data_; }

 private:
  size_t bytes_;
  int* data_;
};

// ---- The matrix ------------------------------------------------------------------

class ShmMatrix : public ShmTest, public ::testing::WithParamInterface<int> {};

// Every collective x type x op x placement x count on 1..4 processes; 5..8
// processes run one op per (collective, type) at the large count, to stay fast
// on two cores.
TEST_P(ShmMatrix, EveryCollectiveTypeOpCountAndPlacement) {
  const int n = GetParam();
  MatrixOptions options;
  options.seed += 100 + static_cast<uint64_t>(n);
  if (n > 4) options.allOpsAtLargeCounts = false;
  const std::vector<CheckCase> cases = MakeMatrix(n, options);
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "60000");  // a deadlock: an error, not a hang
  RunForkedMatrix(n, seconds(240), cases, ForceShm);
}

INSTANTIATE_TEST_SUITE_P(Ranks, ShmMatrix, ::testing::Range(1, 9),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// Algorithms forced outside the sizes the automatic choice gives them, and
// tiny slots (many slices, senders always waiting for the receiver), over shm.
struct ShmSetting {
  const char* name;
  std::vector<std::pair<const char*, const char*>> env;
  std::vector<Coll> colls;
  int nranks = 3;
};

const ShmSetting& ShmSettingAt(int which) {
  static const ShmSetting kSettings[] = {
      {"ring", {{"NODUS_ALGO", "ring"}}, {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter}},
      {"direct", {{"NODUS_ALGO", "direct"}}, {Coll::kAllReduce}},
      {"slots4k", {{"NODUS_SLOT_BYTES", "4096"}}, {}},
      // Slices smaller than the slot (the tuner's choice elsewhere), of a
      // size 4- and 8-byte elements do not divide: every slot is posted
      // part full.
      {"chunk12298", {{"NODUS_CHUNK_BYTES", "12298"}}, {}},
      {"tree", {{"NODUS_ALGO", "tree"}}, {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce}},
      // Slices copied into the slots with streaming stores (NODUS_SHM_COPY),
      // whole and of sizes that leave 16-byte blocks part full.
      {"streaming", {{"NODUS_SHM_COPY", "streaming"}}, {}},
      {"streaming_chunk12298", {{"NODUS_SHM_COPY", "streaming"}, {"NODUS_CHUNK_BYTES", "12298"}}, {}},
      // Every slice through the slots: what a rank sends from a user
      // buffer is otherwise read from there by the peer (process_vm_readv).
      {"no_cma", {{"NODUS_SHM_CMA", "0"}}, {}},
      {"halving_doubling", {{"NODUS_ALGO", "halving-doubling"}}, {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter}},
      // Processes posing as hosts (NODUS_HOSTID): the topology-aware
      // algorithms run over shm between them.
      {"torus_2x2",
       {{"NODUS_ALGO", "torus"}, {"NODUS_TORUS_DIMS", "2x2"}, {"NODUS_HOSTID", "a,b,c,d"}},
       {Coll::kAllReduce},
       4},
      {"hierarchical_2x2",
       {{"NODUS_ALGO", "hierarchical"}, {"NODUS_FATTREE", "2x2"}, {"NODUS_HOSTID", "a,a,b,b"}},
       {Coll::kAllReduce},
       4},
  };
  return kSettings[which];
}

class ShmForced : public ShmTest, public ::testing::WithParamInterface<int> {};

TEST_P(ShmForced, ReducedMatrix) {
  const ShmSetting& setting = ShmSettingAt(GetParam());
  const int n = setting.nranks;
  std::vector<std::unique_ptr<ScopedEnv>> env;
  for (const auto& [name, value] : setting.env) env.push_back(std::make_unique<ScopedEnv>(name, value));
  ScopedEnv slots("NODUS_SLOTS", "2");
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "20000");
  MatrixOptions options;
  options.colls = setting.colls;
  options.types = {nodusInt8, nodusUint32, nodusFloat16, nodusBfloat16, nodusFloat64};
  options.counts = {0, 1, 7, 4099, 100003};
  options.allOpsAtLargeCounts = false;
  options.seed += 2000 + static_cast<uint64_t>(GetParam());
  const std::vector<CheckCase> cases = MakeMatrix(n, options);
  SCOPED_TRACE(setting.name);
  RunForkedMatrix(n, seconds(240), cases, ForceShm);
}

INSTANTIATE_TEST_SUITE_P(Settings, ShmForced, ::testing::Range(0, 11),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::string(ShmSettingAt(info.param).name);
                         });

// ---- Communicator basics -----------------------------------------------------------

TEST_F(ShmTest, CountAndRank) {
  Run(3, seconds(60), [](nodusComm_t comm, int rank, int nranks, RankReport& report) {
    int count = -1, me = -1;
    if (nodusCommCount(comm, &count) != nodusSuccess || count != nranks)
      report.Fail("nodusCommCount gave " + std::to_string(count));
    if (nodusCommUserRank(comm, &me) != nodusSuccess || me != rank)
      report.Fail("nodusCommUserRank gave " + std::to_string(me) + " on rank " +
                  std::to_string(rank));
  });
}

// Two processes on each of four hosts (NODUS_HOSTID), over tcp (forced:
// processes of one machine would reach each other by shm) on loopback, which
// reports no speed (the tcp net takes 10 Gb/s). Where no fabric file gives
// the links' bandwidth, the tuner prices them at that device speed: the
// ring's AllGather sends 7/8 of the data over each host's link and the
// others more, so the ring is picked. At 25 GB/s (the fabric's default
// before, here from a fabric file) the links look faster than the
// oversubscribed hosts' shared memory and halving-doubling is picked
// (between network namespaces over 1 Gbit/s links Bruck was, at 33-48% of
// the link against the ring's 90-95%). The ranks share one CPU, so the pick
// does not depend on the machine's core count.
TEST_F(ShmTest, LinksBetweenHostsArePricedAtTheirDevice) {
  ScopedEnv hosts("NODUS_HOSTID", "a,a,b,b,c,c,d,d");
  ScopedEnv transport("NODUS_TRANSPORT", "tcp");
  ScopedEnv ifname("NODUS_SOCKET_IFNAME", "lo");
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "30000");
  const std::string file = ::testing::TempDir() + "nodus_flat_25g.yaml";
  {
    std::ofstream out(file);
    out << "fabric: flat\nlink: {bandwidth: 25GB/s}\n";
  }
  constexpr int kRanks = 8;
  constexpr size_t kCount = size_t{128} << 10;  // floats per rank: 4 MiB gathered
  for (const bool given : {false, true}) {
    SCOPED_TRACE(given ? "link.bandwidth 25GB/s in a fabric file" : "no fabric file");
    std::unique_ptr<ScopedEnv> topo;
    if (given) topo = std::make_unique<ScopedEnv>("NODUS_TOPO_FILE", file);
    const char* expected = given ? "halving-doubling" : "ring";
    // All 8 ranks on one CPU, so the hosts are oversubscribed as on this
    // 2-core machine and the tuner sees the same shared memory everywhere.
    const ForkedSetup oneCpu = [](int, RankReport& report) {
      cpu_set_t allowed, one;
      CPU_ZERO(&one);
      if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
        report.Fail("sched_getaffinity failed");
        return false;
      }
      for (int c = 0; c < CPU_SETSIZE; ++c)
        if (CPU_ISSET(c, &allowed)) {
          CPU_SET(c, &one);
          break;
        }
      if (sched_setaffinity(0, sizeof one, &one) != 0) {
        report.Fail("sched_setaffinity failed");
        return false;
      }
      return true;
    };
    RunForkedComms(kRanks, seconds(120), oneCpu, [&](nodusComm_t comm, int rank, int, RankReport& report) {
      const char* name = nullptr;
      if (nodusCommGetAlgorithm(comm, nodusCollAllGather, kCount, nodusFloat32, 0, &name) != nodusSuccess || name == nullptr) {
        report.Fail("nodusCommGetAlgorithm failed: " + std::string(nodusGetLastError(comm)));
        return;
      }
      if (std::string(name) != expected)
        report.Fail("rank " + std::to_string(rank) + ": AllGather of 4 MiB picks " + name + ", expected " + expected);
      // And it runs: every rank's block where it belongs.
      std::vector<float> in(kCount, static_cast<float>(rank + 1)), out(kRanks * kCount, -1.0f);
      if (nodusAllGather(in.data(), out.data(), kCount, nodusFloat32, comm) != nodusSuccess) {
        report.Fail("AllGather failed: " + std::string(nodusGetLastError(comm)));
        return;
      }
      for (size_t i = 0; i < out.size(); i += 4099)
        if (out[i] != static_cast<float>(i / kCount + 1)) {
          report.Fail("AllGather element " + std::to_string(i) + " is " + std::to_string(out[i]));
          return;
        }
    });
  }
  std::remove(file.c_str());
}

// How many plan lines of the logs start with `plan` (e.g. "AllGather
// count=524288"), and how many of those also say `slices` (e.g. "ring in 2M
// slices").
std::pair<size_t, size_t> CountPlans(const std::string& logs, const std::string& plan, const std::string& slices) {
  size_t plans = 0, matching = 0;
  for (size_t at = 0; (at = logs.find(plan, at)) != std::string::npos; ++at) {
    ++plans;
    const size_t eol = logs.find('\n', at);
    if (logs.substr(at, eol - at).find(slices) != std::string::npos) ++matching;
  }
  return {plans, matching};
}

// Where every process reads its peers' memory (process_vm_readv), a ring
// AllGather sends each block by reference as one slice, not in slots' worth
// (128 KiB); with NODUS_SHM_CMA=0 it goes through the slots. The results
// are checked either way; the slice is read off each rank's INFO log.
TEST_F(ShmTest, AllGatherBlocksGoWholeByReference) {
  for (const char* cma : {"1", "0"}) {
    SCOPED_TRACE(std::string("NODUS_SHM_CMA=") + cma);
    const std::string logs = RunLoggingPlans(cma, "ring", [](nodusComm_t comm, int, int, RankReport& report) {
      for (bool inPlace : {false, true}) {
        CheckCase c;
        c.coll = Coll::kAllGather;
        c.count = (2 << 20) / 4;  // a 2 MiB block of float32 per rank
        c.inPlace = inPlace;
        c.seed = 91;
        const CheckOutcome o = RunCollectiveCheck(comm, c);
        if (!o.ok()) report.Fail(o.failure);
      }
    });
    const auto [plans, whole] = CountPlans(logs, "AllGather count=524288", "ring in 2M slices");
    EXPECT_EQ(plans, 4u) << logs;  // 2 ranks x (out of place, in place)
    EXPECT_EQ(whole, std::string(cma) == "1" ? plans : 0u) << logs;
  }
}

// A 2-rank Broadcast of up to 1 MiB goes by reference, in one slice; a
// larger one, or one without cross-process reads, through the slots. Every
// root, in place and not, checked.
TEST_F(ShmTest, TwoRankBroadcastsUpTo1MiBGoWholeByReference) {
  for (const char* cma : {"1", "0"}) {
    SCOPED_TRACE(std::string("NODUS_SHM_CMA=") + cma);
    const std::string logs =
        RunLoggingPlans(cma, "broadcast:chain", [](nodusComm_t comm, int, int, RankReport& report) {
          for (size_t bytes : {size_t{1} << 20, size_t{2} << 20}) {
            for (int root : {0, 1}) {
              for (bool inPlace : {false, true}) {
                CheckCase c;
                c.coll = Coll::kBroadcast;
                c.type = nodusInt32;
                c.count = bytes / 4 - (bytes == (size_t{1} << 20) ? 0 : 3);  // 1 MiB; 2 MiB less 12 B
                c.root = root;
                c.inPlace = inPlace;
                c.seed = 93;
                const CheckOutcome o = RunCollectiveCheck(comm, c);
                if (!o.ok()) report.Fail(o.failure);
              }
            }
          }
        });
    // Per size, 6 plans: each rank's 2 as the root (in place, out of
    // place), 1 as the other (a receiver's key does not say in place).
    const auto [small, whole] = CountPlans(logs, "Broadcast count=262144 ", "in 1M slices");
    EXPECT_EQ(small, 6u) << logs;
    EXPECT_EQ(whole, std::string(cma) == "1" ? small : 0u) << logs;
    const auto [large, sliced] = CountPlans(logs, "Broadcast count=524285 ", "in 128K slices");
    EXPECT_EQ(large, 6u) << logs;
    EXPECT_EQ(sliced, large) << logs;
  }
}

// Communicators come and go without leaving segments behind (TearDown checks).
TEST_F(ShmTest, RepeatedInitAndDestroy) {
  for (int i = 0; i < 4; ++i) {
    const int n = 2 + i % 3;
    Run(n, seconds(60), [i](nodusComm_t comm, int, int, RankReport& report) {
      CheckCase c;
      c.count = 4097;
      c.seed = 77 + static_cast<uint64_t>(i);
      const CheckOutcome o = RunCollectiveCheck(comm, c);
      if (!o.ok()) report.Fail(o.failure);
    });
    ExpectNoShmLeft();
  }
}

// Two communicators in the same processes, used alternately.
TEST_F(ShmTest, TwoCommunicatorsInTheSameProcesses) {
  SharedUniqueId shared;
  Run(3, seconds(60), [&](nodusComm_t comm, int rank, int nranks, RankReport& report) {
    nodusUniqueId second;
    if (rank == 0) shared.Make();
    if (!shared.Get(&second, seconds(30))) {
      report.Fail("no second unique id");
      return;
    }
    nodusComm_t other = nullptr;
    const nodusResult_t r = nodusCommInitRank(&other, nranks, second, rank);
    if (r != nodusSuccess) {
      report.Fail(std::string("second nodusCommInitRank returned ") + ResultName(r) + ": " +
                  nodusGetLastError(nullptr));
      return;
    }
    for (int i = 0; i < 4; ++i) {
      CheckCase c;
      c.coll = i % 2 ? Coll::kReduceScatter : Coll::kAllReduce;
      c.type = nodusInt32;
      c.count = 3000 + static_cast<size_t>(i);
      c.seed = 500 + static_cast<uint64_t>(i);
      const CheckOutcome a = RunCollectiveCheck(i % 2 ? comm : other, c);
      c.seed += 50;
      const CheckOutcome b = RunCollectiveCheck(i % 2 ? other : comm, c);
      if (!a.ok()) report.Fail(a.failure);
      if (!b.ok()) report.Fail(b.failure);
    }
    nodusCommDestroy(other);
  });
}

// ---- Non-blocking ------------------------------------------------------------------

TEST_F(ShmTest, OutstandingRequestsCompleteInIssueOrder) {
  for (int n : {2, 3}) RunScenario(n, seconds(120), IssueOrderScenario);
}

TEST_F(ShmTest, WaitingForTheLastRequestCompletesEarlierOnes) {
  RunScenario(3, seconds(60), WaitLastScenario);
}

TEST_F(ShmTest, NonBlockingProgressesWithoutPolling) {
  for (int n : {2, 4}) {
    for (Coll coll : {Coll::kAllReduce, Coll::kAllGather, Coll::kBroadcast}) {
      SCOPED_TRACE(CollName(coll));
      RunScenario(n, seconds(60),
                  [coll](nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
                    BackgroundProgressScenario(comm, rank, nranks, coll, fail);
                  });
    }
  }
}

TEST_F(ShmTest, NonBlockingBarrierSendAndRecv) {
  for (int n : {2, 3, 4}) {
    SharedInts arrived(1);
    RunScenario(n, seconds(60), [&](nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
      IbarrierIsendIrecvScenario(comm, rank, nranks, arrived.data(), fail);
    });
  }
}

// ---- Groups ------------------------------------------------------------------------

TEST_F(ShmTest, GroupRingExchangeOfSendRecv) {
  for (int n : {2, 3, 4}) {
    RunScenario(n, seconds(120), [](nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
      GroupRingScenario(comm, rank, nranks, size_t{4} << 20, fail);  // 4M floats = 16 MiB per rank
    });
  }
  RunScenario(6, seconds(60), [](nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
    GroupRingScenario(comm, rank, nranks, 100003, fail);
  });
}

TEST_F(ShmTest, RequestsIssuedInAGroupAreCompleteAtGroupEnd) {
  RunScenario(3, seconds(60), GroupRequestsScenario);
}

TEST_F(ShmTest, CallsOfAGroupEachHaveTheirOwnScratch) {
  RunScenario(3, seconds(60), GroupScratchScenario);
}

TEST_F(ShmTest, SeveralCollectivesInNestedGroups) {
  for (int n : {2, 4}) RunScenario(n, seconds(60), NestedGroupsScenario);
}

// ---- Point-to-point and barrier ----------------------------------------------------

TEST_F(ShmTest, SendRecvPairsMatchInIssueOrder) {
  for (int n : {2, 3}) RunScenario(n, seconds(120), SendRecvPairsScenario);
}

TEST_F(ShmTest, BarrierWaitsForEveryRank) {
  for (int n : {2, 5}) {
    SharedInts arrived(kBarrierRounds);
    RunScenario(n, seconds(60), [&](nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
      BarrierScenario(comm, rank, nranks, arrived.data(), fail);
    });
  }
}

}  // namespace
}  // namespace nodus_test
