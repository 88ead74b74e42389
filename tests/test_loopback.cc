// Multi-rank tests over the loopback transport: nodusCommInitAll, every rank a
// thread of this process driving its own communicator (groups: one thread may
// drive them all, as NCCL users do).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "collective_check.h"
#include "nodus/nodus.h"

namespace nodus_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// nodusCommInitAll + nodusCommDestroy of every rank.
class LoopbackComms {
 public:
  explicit LoopbackComms(int nranks) : comms_(static_cast<size_t>(nranks), nullptr) {
    const nodusResult_t r = nodusCommInitAll(comms_.data(), nranks);
    EXPECT_EQ(r, nodusSuccess) << "nodusCommInitAll(" << nranks
                               << "): " << nodusGetLastError(nullptr);
    if (r != nodusSuccess) comms_.clear();
  }
  ~LoopbackComms() {
    for (nodusComm_t c : comms_) EXPECT_EQ(nodusCommDestroy(c), nodusSuccess);
  }
  LoopbackComms(const LoopbackComms&) = delete;
  LoopbackComms& operator=(const LoopbackComms&) = delete;

  bool ok() const { return !comms_.empty(); }
  int size() const { return static_cast<int>(comms_.size()); }
  nodusComm_t operator[](int rank) const { return comms_[static_cast<size_t>(rank)]; }

 private:
  std::vector<nodusComm_t> comms_;
};

// Runs body(rank) on one thread per rank and joins them.
template <typename Body>
void OnEveryRank(int nranks, Body body) {
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) threads.emplace_back(body, r);
  for (std::thread& t : threads) t.join();
}

// Reports failures of a per-rank list of messages from the test's thread
// (gtest failures from many threads at once interleave badly).
class FailureLog {
 public:
  void Add(std::string message) {
    std::lock_guard<std::mutex> lock(mutex_);
    messages_.push_back(std::move(message));
  }
  void Report(size_t limit = 25) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t i = 0; i < messages_.size() && i < limit; ++i) ADD_FAILURE() << messages_[i];
    if (messages_.size() > limit)
      ADD_FAILURE() << "... and " << messages_.size() - limit << " more failure(s)";
    messages_.clear();
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> messages_;
};

// Every rank runs `cases` in order. A rank whose call returns an error aborts
// its communicator and stops, so that the others fail instead of waiting.
void RunMatrix(const LoopbackComms& comms, const std::vector<CheckCase>& cases) {
  const int n = comms.size();
  std::vector<std::vector<CheckOutcome>> outcomes(static_cast<size_t>(n),
                                                  std::vector<CheckOutcome>(cases.size()));
  std::vector<size_t> ran(static_cast<size_t>(n), 0);
  OnEveryRank(n, [&](int r) {
    auto& mine = outcomes[static_cast<size_t>(r)];
    for (size_t i = 0; i < cases.size(); ++i) {
      mine[i] = RunCollectiveCheck(comms[r], cases[i]);
      ran[static_cast<size_t>(r)] = i + 1;
      if (mine[i].result != nodusSuccess) {
        nodusCommAbort(comms[r]);
        break;
      }
    }
  });
  FailureLog log;
  const size_t common = *std::min_element(ran.begin(), ran.end());
  for (size_t i = 0; i < cases.size(); ++i) {
    std::vector<CheckOutcome> byRank;
    for (int r = 0; r < n; ++r) {
      if (i < ran[static_cast<size_t>(r)] && !outcomes[static_cast<size_t>(r)][i].ok())
        log.Add(outcomes[static_cast<size_t>(r)][i].failure);
      byRank.push_back(outcomes[static_cast<size_t>(r)][i]);
    }
    if (i < common) {
      const std::string differ = CompareAcrossRanks(cases[i], byRank);
      if (!differ.empty()) log.Add(differ);
    }
  }
  log.Report();
}

// ---- The matrix ------------------------------------------------------------------

class LoopbackMatrix : public ::testing::TestWithParam<int> {};

// Every collective x type x op x placement x count on 1..16 ranks. The full
// matrix runs where rank counts differ in kind (1, 2, powers of two, odd,
// primes, 16); the rest get every op at small counts but one op per type at
// the large count, to keep the file fast on two cores.
TEST_P(LoopbackMatrix, EveryCollectiveTypeOpCountAndPlacement) {
  const int n = GetParam();
  Watchdog watchdog("loopback matrix with " + std::to_string(n) + " ranks", seconds(240));
  // A deadlock becomes a prompt, located error rather than a watchdog exit.
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "60000");
  LoopbackComms comms(n);
  ASSERT_TRUE(comms.ok());
  MatrixOptions options;
  const bool full = n <= 5 || n == 7 || n == 8 || n == 16;
  options.allOpsAtLargeCounts = full;
  options.seed += static_cast<uint64_t>(n);
  RunMatrix(comms, MakeMatrix(n, options));
}

INSTANTIATE_TEST_SUITE_P(Ranks, LoopbackMatrix, ::testing::Range(1, 17),
                         [](const ::testing::TestParamInfo<int>& info) {
                           return std::to_string(info.param) + "ranks";
                         });

// ---- Communicator basics -----------------------------------------------------------

// Every rank gets bitwise the same AllReduce result, also where the order of
// an operation's operands shows: min and max of +0 and -0, and the payload
// of the NaN a sum of two different NaNs returns. Direct folds every element
// on every rank, so it must keep each fold's operands in one order there.
TEST(Loopback, AllReduceGivesEveryRankTheSameBits) {
  Watchdog watchdog("same bits", seconds(120));
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "20000");
  const float nanA = std::bit_cast<float>(0x7fc00001u), nanB = std::bit_cast<float>(0x7fc00002u);
  for (const char* algo : {"direct", "ring", "tree", "halving-doubling"})
    for (int n : {2, 3, 5}) {
      ScopedEnv forced("NODUS_ALGO", algo);
      LoopbackComms comms(n);
      ASSERT_TRUE(comms.ok());
      constexpr size_t kCount = 64;
      for (nodusRedOp_t op : {nodusMin, nodusMax, nodusSum}) {
        std::vector<std::vector<float>> in(static_cast<size_t>(n), std::vector<float>(kCount));
        std::vector<std::vector<float>> out(static_cast<size_t>(n), std::vector<float>(kCount));
        for (int r = 0; r < n; ++r)
          for (size_t i = 0; i < kCount; ++i) {
            const bool odd = (r + static_cast<int>(i)) % 2 == 1;
            in[static_cast<size_t>(r)][i] = op == nodusSum ? (odd ? nanA : nanB) : (odd ? -0.0f : 0.0f);
          }
        std::vector<nodusResult_t> res(static_cast<size_t>(n), nodusSuccess);
        OnEveryRank(n, [&](int r) {
          res[static_cast<size_t>(r)] = nodusAllReduce(in[static_cast<size_t>(r)].data(), out[static_cast<size_t>(r)].data(),
                                                       kCount, nodusFloat32, op, comms[r]);
        });
        for (int r = 0; r < n; ++r) ASSERT_EQ(res[static_cast<size_t>(r)], nodusSuccess) << algo << " rank " << r;
        for (int r = 1; r < n; ++r)
          for (size_t i = 0; i < kCount; ++i)
            ASSERT_EQ(std::bit_cast<uint32_t>(out[static_cast<size_t>(r)][i]), std::bit_cast<uint32_t>(out[0][i]))
                << algo << ", " << n << " ranks, op " << op << ": rank " << r << " element " << i << " differs from rank 0";
      }
    }
}

TEST(Loopback, CountAndRankOfEveryComm) {
  for (int n : {1, 3, 16}) {
    LoopbackComms comms(n);
    ASSERT_TRUE(comms.ok());
    for (int r = 0; r < n; ++r) {
      int count = -1, rank = -1;
      EXPECT_EQ(nodusCommCount(comms[r], &count), nodusSuccess);
      EXPECT_EQ(nodusCommUserRank(comms[r], &rank), nodusSuccess);
      EXPECT_EQ(count, n);
      EXPECT_EQ(rank, r);
    }
  }
}

TEST(Loopback, CommunicatorsCanBeCreatedAndDestroyedRepeatedly) {
  Watchdog watchdog("repeated init/destroy", seconds(60));
  for (int i = 0; i < 20; ++i) {
    const int n = 1 + i % 5;
    LoopbackComms comms(n);
    ASSERT_TRUE(comms.ok());
    FailureLog log;
    CheckCase c;
    c.count = 33;
    c.seed = static_cast<uint64_t>(i) + 1;
    OnEveryRank(n, [&](int r) {
      const CheckOutcome o = RunCollectiveCheck(comms[r], c);
      if (!o.ok()) log.Add(o.failure);
    });
    log.Report();
  }
}

// Two communicators over the same threads must not see each other's traffic.
TEST(Loopback, TwoCommunicatorsInterleaved) {
  Watchdog watchdog("two communicators", seconds(60));
  const int n = 4;
  LoopbackComms a(n), b(n);
  ASSERT_TRUE(a.ok() && b.ok());
  FailureLog log;
  OnEveryRank(n, [&](int r) {
    for (int i = 0; i < 6; ++i) {
      CheckCase c;
      c.coll = i % 2 ? Coll::kAllGather : Coll::kAllReduce;
      c.type = nodusInt32;
      c.count = 1000 + static_cast<size_t>(i);
      c.seed = 100 + static_cast<uint64_t>(i);
      CheckCase d = c;
      d.seed += 1000;
      CollectiveCheck ca(c, n, r), cb(d, n, r);
      nodusRequest_t ra = nullptr;
      // Out of order across communicators: a is issued first, b completes first.
      const nodusResult_t ia = ca.Issue(a[r], &ra);
      const CheckOutcome ob = cb.Verify(cb.Issue(b[r], nullptr));
      nodusResult_t wa = ia == nodusSuccess ? nodusWait(ra) : ia;
      if (ia == nodusSuccess) nodusRequestFree(ra);
      const CheckOutcome oa = ca.Verify(wa);
      if (!oa.ok()) log.Add("comm a: " + oa.failure);
      if (!ob.ok()) log.Add("comm b: " + ob.failure);
    }
  });
  log.Report();
}

// ---- Algorithms and pipelining forced ------------------------------------------------

struct Forced {
  const char* name;       // test name suffix
  const char* algo;       // NODUS_ALGO, or null
  const char* slotBytes;  // NODUS_SLOT_BYTES, or null
  const char* slots;      // NODUS_SLOTS, or null
  std::vector<Coll> colls;
  const char* channels = nullptr;  // NODUS_CHANNELS, or null
};

const Forced& ForcedSetting(int which) {
  static const Forced kForced[] = {
      // Algorithms forced outside the sizes the automatic choice gives them.
      {"ring",
       "ring",
       nullptr,
       nullptr,
       {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter}},
      {"direct", "direct", nullptr, nullptr, {Coll::kAllReduce}},
      {"tree", "tree", nullptr, nullptr, {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce}},
      {"halving_doubling",
       "halving-doubling",
       nullptr,
       nullptr,
       {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter}},
      // Tiny slots: even small counts pipeline through many slices, and
      // senders wait for slots all the time.
      {"slots4k", nullptr, "4096", "2", {}},
      {"slots1k", nullptr, "1024", "2", {}},
      // Ring channels: half the data around the ring each way, through 4 KiB
      // slots so that they pipeline, and more channels than the ring runs.
      {"ring_2channels", "ring", "4096", nullptr, {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter}, "2"},
      {"ring_3channels", "ring", nullptr, nullptr, {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter}, "3"},
  };
  return kForced[which];
}

class LoopbackForced : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(LoopbackForced, ReducedMatrix) {
  const auto [which, n] = GetParam();
  const Forced& f = ForcedSetting(which);
  Watchdog watchdog(std::string("forced setting ") + f.name, seconds(240));
  std::vector<std::unique_ptr<ScopedEnv>> env;
  // A deadlock becomes a prompt, located error rather than a watchdog exit.
  env.push_back(std::make_unique<ScopedEnv>("NODUS_TIMEOUT_MS", "20000"));
  if (f.algo) env.push_back(std::make_unique<ScopedEnv>("NODUS_ALGO", f.algo));
  if (f.slotBytes) env.push_back(std::make_unique<ScopedEnv>("NODUS_SLOT_BYTES", f.slotBytes));
  if (f.slots) env.push_back(std::make_unique<ScopedEnv>("NODUS_SLOTS", f.slots));
  if (f.channels) env.push_back(std::make_unique<ScopedEnv>("NODUS_CHANNELS", f.channels));
  LoopbackComms comms(n);
  ASSERT_TRUE(comms.ok());
  MatrixOptions options;
  options.colls = f.colls;
  options.types = {nodusInt8, nodusUint32, nodusFloat16, nodusBfloat16, nodusFloat64};
  options.counts = {0, 1, 7, static_cast<size_t>(n) - 1, 4099, 100003};
  options.allOpsAtLargeCounts = false;
  options.seed += 1000 + static_cast<uint64_t>(which);
  SCOPED_TRACE(std::string("forced setting ") + f.name);
  RunMatrix(comms, MakeMatrix(n, options));
}

std::string ForcedName(const ::testing::TestParamInfo<std::tuple<int, int>>& info) {
  return std::string(ForcedSetting(std::get<0>(info.param)).name) + "_" +
         std::to_string(std::get<1>(info.param)) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(Settings, LoopbackForced,
                         ::testing::Combine(::testing::Range(0, 8), ::testing::Values(3, 4, 6)),
                         ForcedName);

// ---- Topology-aware algorithms: threads posing as hosts ------------------------------

struct Posed {
  const char* name;
  int nranks;
  int ranksPerHost;
  const char* torusDims;  // NODUS_TORUS_DIMS, or null
  const char* fatTree;    // NODUS_FATTREE, or null
  const char* algo;       // NODUS_ALGO
  std::vector<Coll> colls;
};

const Posed& PosedSetting(int which) {
  static const Posed kPosed[] = {
      {"torus_3x3x3", 27, 1, "3x3x3", nullptr, "torus", {Coll::kAllReduce}},
      {"torus_2x2_2local", 8, 2, "2x2", nullptr, "torus", {Coll::kAllReduce}},
      {"torus_3x2_auto", 6, 1, "3x2", nullptr, nullptr, {}},
      {"hierarchical_3hosts_2local", 6, 2, nullptr, "2x2", "hierarchical", {Coll::kAllReduce}},
      {"hierarchical_2hosts_3local", 6, 3, nullptr, "4", "hierarchical", {Coll::kAllReduce}},
      {"ring_snake_2x2x2", 8, 1, "2x2x2", nullptr, "ring", {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter}},
      {"tree_fattree", 6, 2, nullptr, "2x2", "tree", {Coll::kAllReduce, Coll::kBroadcast, Coll::kReduce}},
      // Two hosts, a core each: the tuner runs the ring's 64-256 KiB calls
      // in 8-32 KiB slices, below the 128 KiB slot (nodus-topo with
      // NODUS_TORUS_DIMS=2 --hosts 2 shows them).
      {"tuned_slices_2hosts", 2, 1, "2", nullptr, nullptr, {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter}},
  };
  return kPosed[which];
}

class LoopbackTopology : public ::testing::TestWithParam<int> {};

// Every rank a thread, NODUS_HOSTID giving each its host: the communicator
// builds the fabric's topology and the forced algorithm runs on it.
TEST_P(LoopbackTopology, ReducedMatrix) {
  const Posed& f = PosedSetting(GetParam());
  Watchdog watchdog(std::string("posed hosts ") + f.name, seconds(280));
  std::string hosts;
  for (int r = 0; r < f.nranks; ++r) hosts += (r ? "," : "") + std::string("host") + std::to_string(r / f.ranksPerHost);
  std::vector<std::unique_ptr<ScopedEnv>> env;
  env.push_back(std::make_unique<ScopedEnv>("NODUS_TIMEOUT_MS", "60000"));
  env.push_back(std::make_unique<ScopedEnv>("NODUS_HOSTID", hosts.c_str()));
  if (f.torusDims) env.push_back(std::make_unique<ScopedEnv>("NODUS_TORUS_DIMS", f.torusDims));
  if (f.fatTree) env.push_back(std::make_unique<ScopedEnv>("NODUS_FATTREE", f.fatTree));
  if (f.algo) env.push_back(std::make_unique<ScopedEnv>("NODUS_ALGO", f.algo));
  LoopbackComms comms(f.nranks);
  ASSERT_TRUE(comms.ok());
  if (f.algo) {
    // The forced algorithm really runs these calls (it did not fall back).
    const char* name = nullptr;
    ASSERT_EQ(nodusCommGetAlgorithm(comms[0], nodusCollAllReduce, 4099, nodusFloat32, 0, &name), nodusSuccess);
    EXPECT_STREQ(name, f.algo);
  }
  MatrixOptions options;
  options.colls = f.colls;
  options.types = {nodusInt8, nodusUint32, nodusFloat16, nodusBfloat16, nodusFloat64};
  options.counts = {0, 1, 7, static_cast<size_t>(f.nranks) - 1, 4099, 100003};
  options.allOpsAtLargeCounts = false;
  options.seed += 2000 + static_cast<uint64_t>(GetParam());
  SCOPED_TRACE(std::string("posed hosts ") + f.name);
  RunMatrix(comms, MakeMatrix(f.nranks, options));
}

INSTANTIATE_TEST_SUITE_P(Posed, LoopbackTopology, ::testing::Range(0, 8),
                         [](const ::testing::TestParamInfo<int>& info) { return PosedSetting(info.param).name; });

// ---- Non-blocking ------------------------------------------------------------------

// Runs scenario(comm, rank, nranks, fail) on every rank of a fresh communicator.
template <typename Scenario>
void RunScenario(int n, Scenario scenario) {
  LoopbackComms comms(n);
  ASSERT_TRUE(comms.ok());
  FailureLog log;
  OnEveryRank(n,
              [&](int r) { scenario(comms[r], r, n, [&](const std::string& m) { log.Add(m); }); });
  log.Report();
}

TEST(Loopback, OutstandingRequestsCompleteInIssueOrder) {
  Watchdog watchdog("outstanding requests", seconds(120));
  for (int n : {1, 2, 3, 4}) RunScenario(n, IssueOrderScenario);
}

TEST(Loopback, WaitingForTheLastRequestCompletesEarlierOnes) {
  Watchdog watchdog("wait for last", seconds(60));
  for (int n : {2, 3}) RunScenario(n, WaitLastScenario);
}

TEST(Loopback, NonBlockingProgressesWithoutPolling) {
  Watchdog watchdog("background progress", seconds(400));
  for (int n : {2, 4}) {
    for (Coll coll : {Coll::kAllReduce, Coll::kAllGather, Coll::kBroadcast}) {
      SCOPED_TRACE(CollName(coll));
      RunScenario(n, [coll](nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
        BackgroundProgressScenario(comm, rank, nranks, coll, fail);
      });
    }
  }
}

// nodusWaitTimeout: nodusInProgress while a peer has not joined, the result
// once it has; with a limit of NODUS_TIMEOUT_MS or more the waiting thread
// runs the queued work itself.
TEST(Loopback, WaitTimeoutReportsInProgressThenCompletes) {
  Watchdog watchdog("nodusWaitTimeout", seconds(60));
  EXPECT_EQ(nodusWaitTimeout(nullptr, 5), nodusInvalidArgument);
  LoopbackComms comms(2);
  ASSERT_TRUE(comms.ok());
  constexpr size_t kCount = 100003;
  std::vector<float> a(kCount, 1.0f), b(kCount, 2.0f), ra(kCount, 0.0f), rb(kCount, 0.0f);
  nodusRequest_t q = nullptr;
  ASSERT_EQ(nodusIallReduce(a.data(), ra.data(), kCount, nodusFloat32, nodusSum, comms[0], &q), nodusSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(nodusWaitTimeout(q, 20), nodusInProgress);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, milliseconds(20));
  EXPECT_EQ(nodusWaitTimeout(q, 0), nodusInProgress);
  std::thread other([&] {
    EXPECT_EQ(nodusAllReduce(b.data(), rb.data(), kCount, nodusFloat32, nodusSum, comms[1]), nodusSuccess);
  });
  EXPECT_EQ(nodusWaitTimeout(q, -1), nodusSuccess);
  other.join();
  EXPECT_EQ(nodusWaitTimeout(q, 0), nodusSuccess);
  EXPECT_EQ(nodusRequestFree(q), nodusSuccess);
  for (size_t i = 0; i < kCount; i += 997) {
    ASSERT_EQ(ra[i], 3.0f) << i;
    ASSERT_EQ(rb[i], 3.0f) << i;
  }
  // Both ranks wait with no practical limit: each may run its own operation.
  for (int round = 0; round < 20; ++round) {
    OnEveryRank(2, [&](int r) {
      std::vector<float>& in = r == 0 ? a : b;
      std::vector<float>& out = r == 0 ? ra : rb;
      nodusRequest_t req = nullptr;
      ASSERT_EQ(nodusIallReduce(in.data(), out.data(), 1 + static_cast<size_t>(round) * 5000, nodusFloat32, nodusMax,
                                comms[r], &req),
                nodusSuccess);
      EXPECT_EQ(nodusWaitTimeout(req, int64_t{1} << 40), nodusSuccess) << nodusGetLastError(comms[r]);
      EXPECT_EQ(nodusRequestFree(req), nodusSuccess);
      EXPECT_EQ(out[0], 2.0f);
    });
  }
}

TEST(Loopback, NonBlockingBarrierSendAndRecv) {
  Watchdog watchdog("Ibarrier/Isend/Irecv", seconds(60));
  for (int n : {2, 4, 5}) {
    int arrived = 0;
    RunScenario(n, [&](nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
      IbarrierIsendIrecvScenario(comm, rank, nranks, &arrived, fail);
    });
  }
}

// ---- Groups ------------------------------------------------------------------------

// Every rank sends to rank+1 and receives from rank-1 inside one group: must
// not deadlock, at any size (4M floats = 16 MiB per rank).
TEST(Loopback, GroupRingExchangeOfSendRecv) {
  Watchdog watchdog("group ring exchange", seconds(180));
  for (int n : {2, 3, 4, 8}) {
    const size_t count = n <= 4 ? (size_t{4} << 20) : (size_t{1} << 20);
    RunScenario(n, [count](nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
      GroupRingScenario(comm, rank, nranks, count, fail);
    });
  }
  for (size_t count : {size_t{0}, size_t{1}, size_t{1000}}) {
    RunScenario(3, [count](nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
      GroupRingScenario(comm, rank, nranks, count, fail);
    });
  }
}

TEST(Loopback, RequestsIssuedInAGroupAreCompleteAtGroupEnd) {
  Watchdog watchdog("group requests", seconds(60));
  for (int n : {1, 3}) RunScenario(n, GroupRequestsScenario);
}

TEST(Loopback, CallsOfAGroupEachHaveTheirOwnScratch) {
  Watchdog watchdog("group scratch", seconds(60));
  for (int n : {2, 3, 4}) RunScenario(n, GroupScratchScenario);
}

TEST(Loopback, SeveralCollectivesInNestedGroups) {
  Watchdog watchdog("nested groups", seconds(60));
  for (int n : {2, 4}) RunScenario(n, NestedGroupsScenario);
}

// One thread drives every communicator inside one group (the NCCL
// single-process multi-device pattern): collectives and a Send/Recv ring.
TEST(Loopback, OneThreadDrivesAllCommsInOneGroup) {
  Watchdog watchdog("one thread, all comms", seconds(120));
  for (int n : {1, 2, 3, 4, 8}) {
    LoopbackComms comms(n);
    ASSERT_TRUE(comms.ok());
    for (Coll coll : kAllColls) {
      for (nodusDataType_t type : {nodusFloat32, nodusInt8, nodusFloat16}) {
        CheckCase c;
        c.coll = coll;
        c.type = type;
        c.op = coll == Coll::kReduce ? nodusMin : nodusSum;
        c.root = n / 2;
        c.count = 10007;
        c.inPlace = type == nodusInt8;
        c.nonBlocking = type == nodusFloat16;
        c.seed = 555 + static_cast<uint64_t>(type);
        std::vector<std::unique_ptr<CollectiveCheck>> checks;
        std::vector<nodusRequest_t> requests(static_cast<size_t>(n), nullptr);
        std::vector<nodusResult_t> issued;
        ASSERT_EQ(nodusGroupStart(), nodusSuccess);
        for (int r = 0; r < n; ++r) {
          checks.push_back(std::make_unique<CollectiveCheck>(c, n, r));
          issued.push_back(checks.back()->Issue(
              comms[r], c.nonBlocking ? &requests[static_cast<size_t>(r)] : nullptr));
        }
        const nodusResult_t e = nodusGroupEnd();
        ASSERT_EQ(e, nodusSuccess) << Describe(c) << ": " << nodusGetLastError(nullptr);
        std::vector<CheckOutcome> outcomes;
        for (int r = 0; r < n; ++r) {
          nodusResult_t result = issued[static_cast<size_t>(r)];
          if (c.nonBlocking && result == nodusSuccess) {
            int d = 0;
            result = nodusTest(requests[static_cast<size_t>(r)], &d);
            EXPECT_EQ(d, 1) << Describe(c) << ": request not done at nodusGroupEnd";
            if (!d) result = nodusWait(requests[static_cast<size_t>(r)]);
            nodusRequestFree(requests[static_cast<size_t>(r)]);
          }
          outcomes.push_back(checks[static_cast<size_t>(r)]->Verify(result));
          EXPECT_TRUE(Passed(outcomes.back())) << "(one thread, " << n << " comms in one group)";
        }
        const std::string differ = CompareAcrossRanks(c, outcomes);
        EXPECT_TRUE(differ.empty()) << differ;
      }
    }
    if (n < 2) continue;
    // The ring of Send/Recv, all from this thread.
    const size_t count = size_t{1} << 20;
    std::vector<std::vector<float>> out(static_cast<size_t>(n)), in(static_cast<size_t>(n));
    ASSERT_EQ(nodusGroupStart(), nodusSuccess);
    for (int r = 0; r < n; ++r) {
      auto& o = out[static_cast<size_t>(r)];
      o.resize(count);
      for (size_t i = 0; i < count; ++i) o[i] = RingValue(r, i);
      in[static_cast<size_t>(r)].assign(count, -1.0f);
      EXPECT_EQ(nodusSend(o.data(), count, nodusFloat32, (r + 1) % n, comms[r]), nodusSuccess);
      EXPECT_EQ(nodusRecv(in[static_cast<size_t>(r)].data(), count, nodusFloat32, (r + n - 1) % n,
                          comms[r]),
                nodusSuccess);
    }
    ASSERT_EQ(nodusGroupEnd(), nodusSuccess) << nodusGetLastError(nullptr);
    for (int r = 0; r < n; ++r) {
      const int from = (r + n - 1) % n;
      for (size_t i = 0; i < count; ++i) {
        if (in[static_cast<size_t>(r)][i] != RingValue(from, i)) {
          ADD_FAILURE() << "one-thread ring of " << n << ": rank " << r << " wrong at index " << i;
          break;
        }
      }
    }
  }
}

// ---- Point-to-point and barrier ----------------------------------------------------

TEST(Loopback, SendRecvPairsMatchInIssueOrder) {
  Watchdog watchdog("send/recv pairs", seconds(120));
  for (int n : {2, 3, 5}) RunScenario(n, SendRecvPairsScenario);
}

TEST(Loopback, BarrierWaitsForEveryRank) {
  Watchdog watchdog("barrier", seconds(60));
  for (int n : {1, 2, 5, 8}) {
    std::vector<int> arrived(kBarrierRounds, 0);
    RunScenario(n, [&](nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
      BarrierScenario(comm, rank, nranks, arrived.data(), fail);
    });
  }
}

}  // namespace
}  // namespace nodus_test
