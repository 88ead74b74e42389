// Multi-rank tests under mpirun (2, 3 and 4 ranks): every MPI rank joins a
// nodus communicator with nodusCommInitMPI(MPI_COMM_WORLD) and runs the shared
// harness. MPI agrees on pass/fail after every test (so every rank's gtest sees
// a failure anywhere), carries output hashes between ranks and provides a
// second, independent AllReduce to compare with. Rank 0 prints the gtest
// report; other ranks print only their failures. The exit status is non-zero
// on every rank if any rank failed.
// Only MPI's C API is used: keep the deprecated C++ bindings out.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <gtest/gtest.h>
#include <hwloc.h>
#include <mpi.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collective_check.h"
#include "nodus/nodus.h"
#include "nodus/nodus_mpi.h"

namespace nodus_test {
namespace {

int WorldRank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int WorldSize() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

// A fresh nodus communicator over MPI_COMM_WORLD per test, so that a test that
// aborts its communicator does not take the next ones down with it.
class Mpi : public ::testing::Test {
 protected:
  void SetUp() override {
    rank_ = WorldRank();
    nranks_ = WorldSize();
    const nodusResult_t r = nodusCommInitMPI(&comm_, MPI_COMM_WORLD);
    int ok = r == nodusSuccess, allOk = 0;
    MPI_Allreduce(&ok, &allOk, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    ASSERT_EQ(r, nodusSuccess) << "nodusCommInitMPI: " << ResultName(r) << ": "
                               << nodusGetLastError(nullptr);
    ASSERT_TRUE(allOk) << "nodusCommInitMPI failed on another rank";
  }

  void TearDown() override {
    if (comm_) {
      EXPECT_EQ(nodusCommDestroy(comm_), nodusSuccess);
    }
    // Everyone learns whether anyone failed.
    int mine = HasFailure() ? 1 : 0, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any && !mine) ADD_FAILURE() << "failed on another rank (its failures are on stderr)";
  }

  FailFn Fail() {
    return [this](const std::string& m) {
      if (++failures_ <= 20) ADD_FAILURE() << "[rank " << rank_ << "] " << m;
    };
  }

  nodusComm_t comm_ = nullptr;
  int rank_ = 0;
  int nranks_ = 1;
  int failures_ = 0;
};

// ---- Binding ----------------------------------------------------------------------

// The CPUs this process could run on when main() started (what the launcher gave it).
std::vector<int> gCpusAtStart;

std::vector<int> CpusOf(pid_t tid) {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(tid, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

// Every rank's CPU list, gathered (all ranks of these tests are on one machine).
std::vector<std::vector<int>> GatherCpus(const std::vector<int>& mine, int nranks) {
  std::vector<int> flags(static_cast<size_t>(CPU_SETSIZE) * static_cast<size_t>(nranks));
  std::vector<int> me(CPU_SETSIZE, 0);
  for (int c : mine) me[static_cast<size_t>(c)] = 1;
  MPI_Allgather(me.data(), CPU_SETSIZE, MPI_INT, flags.data(), CPU_SETSIZE, MPI_INT, MPI_COMM_WORLD);
  std::vector<std::vector<int>> out(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (flags[static_cast<size_t>(r) * CPU_SETSIZE + static_cast<size_t>(c)]) out[static_cast<size_t>(r)].push_back(c);
  return out;
}

// NODUS_BIND (default auto): processes nothing bound get an even share of
// the machine's cores each, every thread of them (those started before the
// communicator too); a launcher's binding is kept; more processes than
// cores stay free.
TEST_F(Mpi, ProcessesRunOnTheirShareOfTheMachine) {
  hwloc_topology_t topo = nullptr;
  ASSERT_EQ(hwloc_topology_init(&topo), 0);
  ASSERT_EQ(hwloc_topology_load(topo), 0);
  const int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
  const int pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
  hwloc_topology_destroy(topo);
  const char* mode = std::getenv("NODUS_BIND");
  const std::string bind = mode && *mode ? mode : "auto";
  const auto before = GatherCpus(gCpusAtStart, nranks_);
  const auto now = GatherCpus(CpusOf(0), nranks_);
  bool allFree = true;
  for (const auto& b : before) allFree = allFree && static_cast<int>(b.size()) == pus;
  const bool shared = bind == "core" || (bind == "auto" && allFree);
  if (shared && nranks_ <= cores) {
    std::set<int> seen;
    size_t smallest = SIZE_MAX, largest = 0;
    for (int r = 0; r < nranks_; ++r) {
      const auto& cpus = now[static_cast<size_t>(r)];
      EXPECT_FALSE(cpus.empty());
      for (int c : cpus) EXPECT_TRUE(seen.insert(c).second) << "CPU " << c << " in the share of two ranks";
      smallest = std::min(smallest, cpus.size());
      largest = std::max(largest, cpus.size());
    }
    EXPECT_EQ(static_cast<int>(seen.size()), pus) << "the shares cover the machine";
    EXPECT_LE(largest - smallest, static_cast<size_t>(pus / cores)) << "shares differ by at most a core";
  } else {
    EXPECT_EQ(now[static_cast<size_t>(rank_)], before[static_cast<size_t>(rank_)])
        << "NODUS_BIND=" << bind << ", " << nranks_ << " ranks on " << cores << " cores: the binding must not change";
  }
  // Process-wide: every thread, those MPI started before the communicator
  // included, and one started now.
  const std::vector<int> mine = CpusOf(0);
  std::vector<int> fresh;
  std::thread([&] { fresh = CpusOf(0); }).join();
  EXPECT_EQ(fresh, mine);
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    const pid_t tid = static_cast<pid_t>(std::stol(entry.path().filename().string()));
    EXPECT_EQ(CpusOf(tid), mine) << "thread " << tid;
  }
}

// ---- The matrix ------------------------------------------------------------------

TEST_F(Mpi, EveryCollectiveTypeOpCountAndPlacement) {
  MatrixOptions options;
  options.seed += 300 + static_cast<uint64_t>(nranks_);
  const std::vector<CheckCase> cases = MakeMatrix(nranks_, options);
  std::vector<uint64_t> hashes;
  const size_t ran = RunCasesOnRank(comm_, cases, Fail(), &hashes);
  hashes.resize(cases.size(), 0);
  // Ranks that stopped early (a call failed) have said so; compare what all ran.
  unsigned long long mine = ran, common = 0;
  MPI_Allreduce(&mine, &common, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  std::vector<uint64_t> all(hashes.size() * static_cast<size_t>(nranks_));
  MPI_Allgather(hashes.data(), static_cast<int>(hashes.size()), MPI_UINT64_T, all.data(),
                static_cast<int>(hashes.size()), MPI_UINT64_T, MPI_COMM_WORLD);
  if (rank_ != 0) return;  // one report is enough
  int differing = 0;
  for (size_t i = 0; i < common; ++i) {
    std::vector<uint64_t> byRank;
    for (int r = 0; r < nranks_; ++r)
      byRank.push_back(all[static_cast<size_t>(r) * hashes.size() + i]);
    const std::string differ = CompareAcrossRanks(cases[i], byRank);
    if (!differ.empty() && ++differing <= 20) ADD_FAILURE() << differ;
  }
  EXPECT_EQ(differing, 0) << "cases whose output differs across ranks";
}

// Runs that force an algorithm say which one AllReduce must use
// (TEST_EXPECT_ALGO, set by ctest): the forced algorithm really ran.
TEST_F(Mpi, ForcedAlgorithmIsTheOneThatRuns) {
  const char* expect = getenv("TEST_EXPECT_ALGO");
  const std::string want = expect ? expect : "";
  const char* name = nullptr;
  ASSERT_EQ(nodusCommGetAlgorithm(comm_, nodusCollAllReduce, 100003, nodusFloat32, 0, &name), nodusSuccess);
  ASSERT_NE(name, nullptr);
  if (!want.empty()) {
    EXPECT_EQ(want, name);
  }
  // Whatever runs is one of the library's algorithms.
  EXPECT_NE((std::string(",") + nodusAlgorithmNames() + ",").find(std::string(",") + name + ","), std::string::npos);
}

// nodus and the MPI library must compute the same AllReduce, bit for bit, where
// the result does not depend on the reduction order (integers, min/max, and
// floating-point sums of small integers).
TEST_F(Mpi, AllReduceAgreesWithMpiAllreduce) {
  const size_t count = 100003;
  struct Combo {
    nodusDataType_t type;
    nodusRedOp_t op;
    MPI_Datatype mpiType;
    MPI_Op mpiOp;
  };
  const Combo combos[] = {
      {nodusInt32, nodusSum, MPI_INT32_T, MPI_SUM},  {nodusInt32, nodusProd, MPI_INT32_T, MPI_PROD},
      {nodusInt32, nodusMin, MPI_INT32_T, MPI_MIN},  {nodusUint64, nodusMax, MPI_UINT64_T, MPI_MAX},
      {nodusInt8, nodusSum, MPI_INT8_T, MPI_SUM},    {nodusFloat32, nodusSum, MPI_FLOAT, MPI_SUM},
      {nodusFloat64, nodusMin, MPI_DOUBLE, MPI_MIN}, {nodusUint8, nodusProd, MPI_UINT8_T, MPI_PROD},
  };
  for (const Combo& combo : combos) {
    const size_t es = TypeSize(combo.type);
    std::vector<unsigned char> in(count * es), ours(count * es), theirs(count * es);
    for (size_t i = 0; i < count; ++i) {
      const int64_t v =
          static_cast<int64_t>((i * 2654435761u + static_cast<size_t>(rank_) * 40503u) % 17) - 8;
      switch (combo.type) {
        case nodusFloat32: {
          const float f = static_cast<float>(v);
          std::memcpy(&in[i * es], &f, es);
          break;
        }
        case nodusFloat64: {
          const double d = static_cast<double>(v) * 1.5;
          std::memcpy(&in[i * es], &d, es);
          break;
        }
        case nodusInt8:
        case nodusUint8: {
          // No 8-bit overflow: some MPI builds saturate 8-bit sums (Open MPI's
          // AVX op component) where nodus, like C, wraps.
          const int8_t b = static_cast<int8_t>(combo.op == nodusProd ? 1 + (v & 1) : v);
          std::memcpy(&in[i * es], &b, es);
          break;
        }
        default: {
          const uint64_t u = static_cast<uint64_t>(v * 977 + rank_ * 131);
          std::memcpy(&in[i * es], &u, es);  // little-endian: the low bytes
          break;
        }
      }
    }
    const nodusResult_t r =
        nodusAllReduce(in.data(), ours.data(), count, combo.type, combo.op, comm_);
    ASSERT_EQ(r, nodusSuccess) << nodusGetLastError(comm_);
    MPI_Allreduce(in.data(), theirs.data(), static_cast<int>(count), combo.mpiType, combo.mpiOp,
                  MPI_COMM_WORLD);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < count; ++i) {
      if (std::memcmp(&ours[i * es], &theirs[i * es], es) != 0 && bad++ == 0) first = i;
    }
    uint64_t oursFirst = 0, theirsFirst = 0;
    std::memcpy(&oursFirst, &ours[first * es], es);
    std::memcpy(&theirsFirst, &theirs[first * es], es);
    EXPECT_EQ(bad, 0u) << TypeName(combo.type) << " " << OpName(combo.op) << ": differs from "
                       << "MPI_Allreduce at " << bad << " element(s), first index " << first
                       << " (bytes: nodus 0x" << std::hex << oursFirst << ", MPI 0x" << theirsFirst
                       << std::dec << ")";
  }
}

// ---- Non-blocking ------------------------------------------------------------------

TEST_F(Mpi, OutstandingRequestsCompleteInIssueOrder) {
  IssueOrderScenario(comm_, rank_, nranks_, Fail());
}

TEST_F(Mpi, WaitingForTheLastRequestCompletesEarlierOnes) {
  WaitLastScenario(comm_, rank_, nranks_, Fail());
}

TEST_F(Mpi, NonBlockingProgressesWithoutPolling) {
  for (Coll coll : {Coll::kAllReduce, Coll::kAllGather, Coll::kBroadcast}) {
    BackgroundProgressScenario(comm_, rank_, nranks_, coll, Fail());
    MPI_Barrier(MPI_COMM_WORLD);
  }
}

// Counters shared by the ranks of this node (MPI-3 shared memory), for the
// barrier checks; null when the ranks do not all share one node.
class SharedCounters {
 public:
  explicit SharedCounters(int n) {
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node_);
    int nodeSize = 0;
    MPI_Comm_size(node_, &nodeSize);
    int nodeRank = 0;
    MPI_Comm_rank(node_, &nodeRank);
    const MPI_Aint bytes = nodeRank == 0 ? static_cast<MPI_Aint>(n * sizeof(int)) : 0;
    void* base = nullptr;
    MPI_Win_allocate_shared(bytes, sizeof(int), MPI_INFO_NULL, node_, &base, &win_);
    MPI_Aint size = 0;
    int disp = 0;
    MPI_Win_shared_query(win_, 0, &size, &disp, &base);
    if (nodeRank == 0) std::memset(base, 0, static_cast<size_t>(n) * sizeof(int));
    MPI_Barrier(node_);
    if (nodeSize == WorldSize()) data_ = static_cast<int*>(base);
  }
  ~SharedCounters() {
    MPI_Barrier(node_);
    MPI_Win_free(&win_);
    MPI_Comm_free(&node_);
  }
  SharedCounters(const SharedCounters&) = delete;
  SharedCounters& operator=(const SharedCounters&) = delete;
  int* data() { return data_; }

 private:
  MPI_Comm node_ = MPI_COMM_NULL;
  MPI_Win win_ = MPI_WIN_NULL;
  int* data_ = nullptr;
};

TEST_F(Mpi, NonBlockingBarrierSendAndRecv) {
  SharedCounters arrived(1);
  if (!arrived.data()) GTEST_SKIP() << "ranks on several nodes";
  IbarrierIsendIrecvScenario(comm_, rank_, nranks_, arrived.data(), Fail());
}

// ---- Groups ------------------------------------------------------------------------

TEST_F(Mpi, GroupRingExchangeOfSendRecv) {
  GroupRingScenario(comm_, rank_, nranks_, size_t{4} << 20, Fail());  // 4M floats
  GroupRingScenario(comm_, rank_, nranks_, 1, Fail());
}

TEST_F(Mpi, RequestsIssuedInAGroupAreCompleteAtGroupEnd) {
  GroupRequestsScenario(comm_, rank_, nranks_, Fail());
}

TEST_F(Mpi, SeveralCollectivesInNestedGroups) {
  NestedGroupsScenario(comm_, rank_, nranks_, Fail());
}

// ---- Point-to-point and barrier ----------------------------------------------------

TEST_F(Mpi, SendRecvPairsMatchInIssueOrder) {
  SendRecvPairsScenario(comm_, rank_, nranks_, Fail());
}

TEST_F(Mpi, BarrierWaitsForEveryRank) {
  SharedCounters arrived(kBarrierRounds);
  if (!arrived.data()) GTEST_SKIP() << "ranks on several nodes";
  BarrierScenario(comm_, rank_, nranks_, arrived.data(), Fail());
}

// Prints this rank's failures (ranks other than 0 have no result printer).
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_,
                 result.file_name() ? result.file_name() : "?", result.line_number(),
                 result.message());
    std::fflush(stderr);
  }

 private:
  int rank_;
};

}  // namespace
}  // namespace nodus_test

int main(int argc, char** argv) {
  nodus_test::gCpusAtStart = nodus_test::CpusOf(0);
  MPI_Init(&argc, &argv);
  // A wait that never ends becomes an error long before the test driver's limit.
  setenv("NODUS_TIMEOUT_MS", "60000", 0);
  ::testing::InitGoogleTest(&argc, argv);
  const int rank = nodus_test::WorldRank();
  if (rank != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new nodus_test::RankFailurePrinter(rank));
  }
  const std::set<std::string> shmBefore = nodus_test::NodusShmEntries();
  int failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
  // Every rank has destroyed its communicators: no nodus segment may be left.
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    const std::string leaks = nodus_test::NodusShmLeaks(shmBefore, std::chrono::milliseconds(3000));
    if (!leaks.empty()) {
      std::fprintf(stderr, "after all tests: %s\n", leaks.c_str());
      failed = 1;
    }
  }
  int anyFailed = 0;
  MPI_Allreduce(&failed, &anyFailed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return anyFailed ? 1 : 0;
}
