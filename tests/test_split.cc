// Communicators made from communicators: nodusCommSplit and
// nodusCommCreateGroup, with ranks as threads (nodusCommInitAll) and as
// forked processes over shared memory. Every child is checked with
// collectives against the harness's independent reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "collective_check.h"
#include "nodus/nodus.h"

namespace nodus_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

// A few collectives of every kind on `comm`, checked against the reference.
void CheckChild(nodusComm_t comm, const FailFn& fail, uint64_t seed) {
  int n = 0, rank = -1;
  if (nodusCommCount(comm, &n) != nodusSuccess || nodusCommUserRank(comm, &rank) != nodusSuccess) {
    fail("nodusCommCount / nodusCommUserRank failed on a child");
    return;
  }
  std::vector<CheckCase> cases;
  for (Coll coll : kAllColls)
    for (size_t count : {size_t{0}, size_t{7}, size_t{1000}}) {
      CheckCase c;
      c.coll = coll;
      c.type = count == 7 ? nodusInt32 : nodusFloat32;
      c.op = coll == Coll::kReduce ? nodusMax : nodusSum;
      c.root = n - 1;
      c.count = count;
      c.inPlace = count == 1000;
      c.nonBlocking = count == 7;
      c.seed = seed + cases.size();
      cases.push_back(c);
    }
  RunCasesOnRank(comm, cases, fail, nullptr);
}

// Runs fn(rank) on a thread per rank of an in-process communicator of n ranks.
class Threads {
 public:
  explicit Threads(int n) : comms_(static_cast<size_t>(n), nullptr) {
    ok_ = nodusCommInitAll(comms_.data(), n) == nodusSuccess;
    EXPECT_TRUE(ok_) << nodusGetLastError(nullptr);
  }
  ~Threads() {
    for (nodusComm_t c : comms_)
      if (c != nullptr) {
        EXPECT_EQ(nodusCommDestroy(c), nodusSuccess);
      }
  }
  bool ok() const { return ok_; }
  int size() const { return static_cast<int>(comms_.size()); }
  nodusComm_t comm(int r) const { return comms_[static_cast<size_t>(r)]; }
  void destroy(int r) {
    EXPECT_EQ(nodusCommDestroy(comms_[static_cast<size_t>(r)]), nodusSuccess);
    comms_[static_cast<size_t>(r)] = nullptr;
  }
  // Every rank's body at once; failures are collected and reported.
  void Run(const std::function<void(int rank, nodusComm_t comm, const FailFn& fail)>& body) {
    std::mutex mu;
    std::vector<std::string> failures;
    std::vector<std::thread> threads;
    Watchdog dog("split test", seconds(120));
    for (int r = 0; r < size(); ++r)
      threads.emplace_back([&, r] {
        FailFn fail = [&, r](const std::string& m) {
          std::lock_guard<std::mutex> lock(mu);
          failures.push_back("rank " + std::to_string(r) + ": " + m);
        };
        body(r, comm(r), fail);
      });
    for (auto& t : threads) t.join();
    for (const std::string& f : failures) ADD_FAILURE() << f;
  }

 private:
  std::vector<nodusComm_t> comms_;
  bool ok_ = false;
};

std::string LastError(nodusComm_t comm) { return nodusGetLastError(comm); }

// Rank and size of a child, or a failure.
bool Expect(nodusComm_t child, int size, int rank, const FailFn& fail) {
  int n = -1, r = -1;
  if (child == nullptr) {
    fail("no child communicator");
    return false;
  }
  nodusCommCount(child, &n);
  nodusCommUserRank(child, &r);
  if (n != size || r != rank) {
    fail("child is rank " + std::to_string(r) + " of " + std::to_string(n) + ", expected " + std::to_string(rank) +
         " of " + std::to_string(size));
    return false;
  }
  return true;
}

TEST(Split, ByParityGivesTwoCommunicatorsThatEachComputeRight) {
  Threads t(5);
  ASSERT_TRUE(t.ok());
  t.Run([](int rank, nodusComm_t comm, const FailFn& fail) {
    nodusComm_t child = nullptr;
    if (nodusCommSplit(comm, rank % 2, rank, &child, nullptr) != nodusSuccess) return fail(LastError(comm));
    // Evens 0, 2, 4 -> 0, 1, 2; odds 1, 3 -> 0, 1.
    if (Expect(child, rank % 2 ? 2 : 3, rank / 2, fail)) CheckChild(child, fail, 100 + rank % 2);
    // The parent still works alongside.
    CheckChild(comm, fail, 200);
    nodusCommDestroy(child);
  });
}

// nodusCommSplitGrid over 8 ranks as 2 x 2 x 2 in Megatron's order and in
// the one it chooses: every group has the members the order says, in
// coordinate order, and its AllReduce sums exactly their world ranks.
TEST(Split, GridGivesEachRankItsThreeGroupsAndCoordinates) {
  Threads t(8);
  ASSERT_TRUE(t.ok());
  for (const char* order : {"tp-pp-dp", "dp-tp-pp", static_cast<const char*>(nullptr)}) {
    SCOPED_TRACE(order ? order : "chosen");
    t.Run([order](int rank, nodusComm_t comm, const FailFn& fail) {
      nodusComm_t groups[3] = {nullptr, nullptr, nullptr};  // dp, tp, pp
      int c[3] = {-1, -1, -1};
      const char* used = nullptr;
      if (nodusCommSplitGrid(comm, 2, 2, 2, order, &groups[0], &groups[1], &groups[2], c, &used) != nodusSuccess)
        return fail(LastError(comm));
      if (order != nullptr && std::string(used) != order) fail(std::string("used order ") + used);
      const char* chosen = nullptr;
      if (order == nullptr && (nodusGridOrder(comm, 2, 2, 2, &chosen) != nodusSuccess || std::string(chosen) != used))
        fail("nodusGridOrder disagrees with the order nodusCommSplitGrid used");
      // Axes fastest first, from the order's name ("tp-pp-dp": tp, pp, dp).
      const std::string name = used;
      auto axisOf = [](const std::string& a) { return a == "dp" ? 0 : a == "tp" ? 1 : 2; };
      const int axes[3] = {axisOf(name.substr(0, 2)), axisOf(name.substr(3, 2)), axisOf(name.substr(6, 2))};
      int expect[3];
      for (int i = 0, r = rank; i < 3; ++i, r /= 2) expect[axes[i]] = r % 2;
      for (int a = 0; a < 3; ++a) {
        if (c[a] != expect[a]) fail("coordinate " + std::to_string(a) + " is " + std::to_string(c[a]));
        if (!Expect(groups[a], 2, expect[a], fail)) continue;
        // The members: this rank with axis a's coordinate set to 0 and to 1.
        int members = 0;
        for (int v = 0; v < 2; ++v) {
          int co[3] = {expect[0], expect[1], expect[2]};
          co[a] = v;
          int r = 0;
          for (int i = 2; i >= 0; --i) r = r * 2 + co[axes[i]];
          members += r;
        }
        int32_t x = rank;
        if (nodusAllReduce(&x, &x, 1, nodusInt32, nodusSum, groups[a]) != nodusSuccess) fail(LastError(groups[a]));
        else if (x != members) fail("group " + std::to_string(a) + " sums " + std::to_string(x) + ", expected " +
                                    std::to_string(members));
      }
      for (nodusComm_t g : groups) nodusCommDestroy(g);
    });
  }
  // A grid that is not the communicator's size fails at once, on every rank.
  t.Run([](int, nodusComm_t comm, const FailFn& fail) {
    nodusComm_t a = nullptr, b = nullptr, c = nullptr;
    if (nodusCommSplitGrid(comm, 2, 2, 3, nullptr, &a, &b, &c, nullptr, nullptr) != nodusInvalidArgument)
      fail("2 x 2 x 3 on 8 ranks did not fail with nodusInvalidArgument");
    if (nodusCommSplitGrid(comm, 2, 2, 2, "tp-tp-dp", &a, &b, &c, nullptr, nullptr) != nodusInvalidArgument)
      fail("a bad order did not fail with nodusInvalidArgument");
    if (a != nullptr || b != nullptr || c != nullptr) fail("a failed grid left communicators behind");
  });
}

TEST(Split, KeysOrderTheNewRanksAndTiesKeepTheParentsOrder) {
  Threads t(4);
  ASSERT_TRUE(t.ok());
  t.Run([](int rank, nodusComm_t comm, const FailFn& fail) {
    nodusComm_t reversed = nullptr, tied = nullptr;
    if (nodusCommSplit(comm, 0, -rank, &reversed, nullptr) != nodusSuccess) return fail(LastError(comm));
    if (Expect(reversed, 4, 3 - rank, fail)) CheckChild(reversed, fail, 300);
    if (nodusCommSplit(comm, 7, 5, &tied, nullptr) != nodusSuccess) return fail(LastError(comm));
    Expect(tied, 4, rank, fail);
    nodusCommDestroy(reversed);
    nodusCommDestroy(tied);
  });
}

TEST(Split, NoColorGivesNullAndTheOthersAreStillACommunicator) {
  Threads t(4);
  ASSERT_TRUE(t.ok());
  t.Run([](int rank, nodusComm_t comm, const FailFn& fail) {
    static nodusComm_t stale = reinterpret_cast<nodusComm_t>(&stale);
    nodusComm_t child = stale;  // must be overwritten
    const int color = rank == 2 ? NODUS_SPLIT_NOCOLOR : 3;
    if (nodusCommSplit(comm, color, 0, &child, nullptr) != nodusSuccess) return fail(LastError(comm));
    if (rank == 2) {
      if (child != nullptr) fail("NODUS_SPLIT_NOCOLOR gave a communicator");
      return;
    }
    if (Expect(child, 3, rank < 2 ? rank : rank - 1, fail)) CheckChild(child, fail, 400);
    nodusCommDestroy(child);
  });
}

TEST(Split, NestedSplitsAndGroupsOfChildren) {
  Threads t(8);
  ASSERT_TRUE(t.ok());
  t.Run([](int rank, nodusComm_t comm, const FailFn& fail) {
    nodusComm_t half = nullptr, quarter = nullptr, pair = nullptr;
    if (nodusCommSplit(comm, rank / 4, rank, &half, nullptr) != nodusSuccess) return fail(LastError(comm));
    if (!Expect(half, 4, rank % 4, fail)) return;
    if (nodusCommSplit(half, (rank % 4) / 2, 0, &quarter, nullptr) != nodusSuccess) return fail(LastError(half));
    if (Expect(quarter, 2, rank % 2, fail)) CheckChild(quarter, fail, 500 + rank / 2);
    // A group of the half's ranks 3 and 0 (in that order), made by them only.
    const int hr = rank % 4;
    if (hr == 0 || hr == 3) {
      const int list[] = {3, 0};
      if (nodusCommCreateGroup(half, list, 2, &pair, nullptr) != nodusSuccess) return fail(LastError(half));
      if (Expect(pair, 2, hr == 3 ? 0 : 1, fail)) CheckChild(pair, fail, 600 + rank / 4);
    }
    CheckChild(half, fail, 700 + rank / 4);
    nodusCommDestroy(pair);
    nodusCommDestroy(quarter);
    nodusCommDestroy(half);
  });
}

TEST(Split, CreateGroupIsCalledByTheMembersOnlyInTheListsOrder) {
  Threads t(5);
  ASSERT_TRUE(t.ok());
  t.Run([](int rank, nodusComm_t comm, const FailFn& fail) {
    const int list[] = {4, 1, 0};
    const int at = rank == 4 ? 0 : rank == 1 ? 1 : rank == 0 ? 2 : -1;
    if (at < 0) return;  // ranks 2 and 3 take no part
    nodusComm_t g1 = nullptr, g2 = nullptr;
    if (nodusCommCreateGroup(comm, list, 3, &g1, nullptr) != nodusSuccess) return fail(LastError(comm));
    // A second group of the same list: a communicator of its own.
    if (nodusCommCreateGroup(comm, list, 3, &g2, nullptr) != nodusSuccess) return fail(LastError(comm));
    if (Expect(g1, 3, at, fail)) CheckChild(g1, fail, 800);
    if (Expect(g2, 3, at, fail)) CheckChild(g2, fail, 900);
    nodusCommDestroy(g1);
    nodusCommDestroy(g2);
  });
}

TEST(Split, AChildOutlivesItsParent) {
  Threads t(4);
  ASSERT_TRUE(t.ok());
  std::vector<nodusComm_t> children(4, nullptr);
  t.Run([&](int rank, nodusComm_t comm, const FailFn& fail) {
    if (nodusCommSplit(comm, rank % 2, 0, &children[static_cast<size_t>(rank)], nullptr) != nodusSuccess)
      fail(LastError(comm));
  });
  for (int r = 0; r < 4; ++r) t.destroy(r);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int r = 0; r < 4; ++r)
    threads.emplace_back([&, r] {
      FailFn fail = [&](const std::string& m) {
        ++failures;
        fprintf(stderr, "rank %d: %s\n", r, m.c_str());
      };
      if (Expect(children[static_cast<size_t>(r)], 2, r / 2, fail)) CheckChild(children[static_cast<size_t>(r)], fail, 1000);
      EXPECT_EQ(nodusCommDestroy(children[static_cast<size_t>(r)]), nodusSuccess);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(Split, ParentAndChildRunAtOnceFromDifferentThreads) {
  Threads t(3);
  ASSERT_TRUE(t.ok());
  t.Run([](int rank, nodusComm_t comm, const FailFn& fail) {
    nodusComm_t child = nullptr;
    if (nodusCommSplit(comm, 0, rank, &child, nullptr) != nodusSuccess) return fail(LastError(comm));
    std::thread other([&] {
      for (int i = 0; i < 20; ++i) CheckChild(child, fail, 1100 + i);
    });
    for (int i = 0; i < 20; ++i) CheckChild(comm, fail, 1200 + i);
    other.join();
    nodusCommDestroy(child);
  });
}

TEST(Split, AbortingAChildLeavesTheParentWorking) {
  Threads t(3);
  ASSERT_TRUE(t.ok());
  t.Run([](int rank, nodusComm_t comm, const FailFn& fail) {
    nodusComm_t child = nullptr;
    if (nodusCommSplit(comm, 0, rank, &child, nullptr) != nodusSuccess) return fail(LastError(comm));
    if (nodusCommAbort(child) != nodusSuccess) fail("nodusCommAbort failed");
    float x = 1;
    const nodusResult_t r = nodusAllReduce(&x, &x, 1, nodusFloat32, nodusSum, child);
    if (r == nodusSuccess) fail("an AllReduce on an aborted child succeeded");
    CheckChild(comm, fail, 1300);
    nodusCommDestroy(child);
  });
}

TEST(Split, AConfigReplacesTheParentsSettingsItSetsAndInheritsTheRest) {
  Threads t(2);
  ASSERT_TRUE(t.ok());
  t.Run([](int rank, nodusComm_t comm, const FailFn& fail) {
    nodusConfig_t cfg = NODUS_CONFIG_INITIALIZER;
    cfg.algo = "allreduce:direct";
    nodusComm_t forced = nullptr, inherited = nullptr;
    if (nodusCommSplit(comm, 0, rank, &forced, &cfg) != nodusSuccess) return fail(LastError(comm));
    if (nodusCommSplit(comm, 0, rank, &inherited, nullptr) != nodusSuccess) return fail(LastError(comm));
    const char *a = nullptr, *b = nullptr, *p = nullptr;
    const size_t count = size_t{4} << 20;  // 16 MiB: never direct unless forced
    nodusCommGetAlgorithm(forced, nodusCollAllReduce, count, nodusFloat32, 0, &a);
    nodusCommGetAlgorithm(inherited, nodusCollAllReduce, count, nodusFloat32, 0, &b);
    nodusCommGetAlgorithm(comm, nodusCollAllReduce, count, nodusFloat32, 0, &p);
    if (a == nullptr || strcmp(a, "direct") != 0) fail(std::string("the config's rules were not used: ") + (a ? a : "null"));
    if (b == nullptr || p == nullptr || strcmp(b, p) != 0) fail("a child without a config plans differently from its parent");
    CheckChild(forced, fail, 1400);
    nodusCommDestroy(forced);
    nodusCommDestroy(inherited);
  });
}

TEST(Split, ABadColourFailsEveryRankAndNamesTheRank) {
  Threads t(3);
  ASSERT_TRUE(t.ok());
  t.Run([](int rank, nodusComm_t comm, const FailFn& fail) {
    nodusComm_t child = nullptr;
    const nodusResult_t r = nodusCommSplit(comm, rank == 1 ? -5 : 0, 0, &child, nullptr);
    const std::string msg = LastError(comm);
    if (r != nodusInvalidArgument) fail("a colour of -5 gave " + std::string(nodusGetErrorString(r)));
    if (msg.find("rank 1 passed colour -5") == std::string::npos) fail("message does not name the rank: " + msg);
    if (child != nullptr) fail("a failed split gave a communicator");
    // The parent is unharmed.
    CheckChild(comm, fail, 1500);
  });
}

TEST(Split, ABadConfigOnOneRankFailsEveryRank) {
  Threads t(3);
  ASSERT_TRUE(t.ok());
  t.Run([](int rank, nodusComm_t comm, const FailFn& fail) {
    nodusConfig_t cfg = NODUS_CONFIG_INITIALIZER;
    cfg.timeoutMs = -3;
    nodusComm_t child = nullptr;
    const nodusResult_t r = nodusCommSplit(comm, 0, 0, &child, rank == 2 ? &cfg : nullptr);
    const std::string msg = LastError(comm);
    if (r != nodusInvalidArgument) fail("a bad config gave " + std::string(nodusGetErrorString(r)));
    if (rank == 2 && msg.find("timeoutMs") == std::string::npos) fail("message does not name the field: " + msg);
    if (rank != 2 && msg.find("rank 2") == std::string::npos) fail("message does not name the rank: " + msg);
  });
}

TEST(Split, BadGroupListsFailAtOnce) {
  Threads t(3);
  ASSERT_TRUE(t.ok());
  t.Run([](int rank, nodusComm_t comm, const FailFn& fail) {
    nodusComm_t g = nullptr;
    const int dup[] = {0, 1, 1}, range[] = {0, 3}, without[] = {0, 1, 2};
    const int notMe[] = {(rank + 1) % 3};
    struct Bad {
      const int* list;
      int n;
      const char* says;
    } bads[] = {{dup, 3, "listed twice"}, {range, 2, "outside"}, {notMe, 1, "not in the list"},
                {nullptr, 2, "ranks is NULL"}, {without, 0, "nranks 0"}, {without, 4, "nranks 4"}};
    for (const Bad& b : bads) {
      const nodusResult_t r = nodusCommCreateGroup(comm, b.list, b.n, &g, nullptr);
      if (r != nodusInvalidArgument || g != nullptr) fail(std::string("bad list (") + b.says + ") gave " + nodusGetErrorString(r));
      if (LastError(comm).find(b.says) == std::string::npos) fail("message lacks '" + std::string(b.says) + "': " + LastError(comm));
    }
    if (nodusCommSplit(comm, 0, 0, nullptr, nullptr) != nodusInvalidArgument) fail("newcomm NULL was accepted");
  });
}

TEST(Split, MembersThatPassDifferentListsFailWithinTheTimeout) {
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "1500");
  Threads t(3);
  ASSERT_TRUE(t.ok());
  t.Run([](int rank, nodusComm_t comm, const FailFn& fail) {
    if (rank == 2) return;
    // Rank 0 lists {0, 1}, rank 1 lists {1, 0}.
    const int mine[] = {rank, 1 - rank};
    nodusComm_t g = nullptr;
    const auto start = std::chrono::steady_clock::now();
    const nodusResult_t r = nodusCommCreateGroup(comm, mine, 2, &g, nullptr);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r == nodusSuccess) fail("members with different lists made a communicator");
    if (s > 30) fail("took " + std::to_string(s) + " s to fail");
  });
}

// ---- Forked processes over shared memory ------------------------------------------

class SplitShm : public ::testing::Test {
 protected:
  void SetUp() override { before_ = NodusShmEntries(); }
  void TearDown() override {
    const std::string leaks = NodusShmLeaks(before_, milliseconds(3000));
    EXPECT_TRUE(leaks.empty()) << leaks;
  }
 private:
  std::set<std::string> before_;
};

// Forked ranks over shm whose body owns the communicator (it may destroy the
// parent before its children).
void RunOwned(int nranks, const std::function<void(nodusComm_t comm, int rank, const FailFn& fail)>& body) {
  SharedUniqueId shared;
  ForkedRanks ranks(nranks);
  const bool started = ranks.Start([&](int rank, RankReport& report) {
    setenv("NODUS_TRANSPORT", "shm", 1);
    nodusUniqueId id;
    if (rank == 0 && shared.Make() != nodusSuccess) return report.Fail("nodusGetUniqueId failed"), 2;
    if (!shared.Get(&id, seconds(60))) return report.Fail("no unique id"), 2;
    nodusComm_t comm = nullptr;
    if (nodusCommInitRank(&comm, nranks, id, rank) != nodusSuccess) return report.Fail(nodusGetLastError(nullptr)), 2;
    body(comm, rank, ReportTo(report));
    return report.failures ? 1 : 0;
  });
  ASSERT_TRUE(started);
  ranks.Wait(seconds(120));
  EXPECT_TRUE(ranks.Failures().empty()) << ranks.Failures();
}

TEST_F(SplitShm, TwoByTwoSplitsNestedGroupsAndAParentDestroyedFirst) {
  RunOwned(4, [](nodusComm_t comm, int rank, const FailFn& fail) {
    nodusComm_t rows = nullptr, cols = nullptr, pair = nullptr;
    if (nodusCommSplit(comm, rank / 2, rank, &rows, nullptr) != nodusSuccess) return fail(LastError(comm));
    if (nodusCommSplit(comm, rank % 2, rank, &cols, nullptr) != nodusSuccess) return fail(LastError(comm));
    if (Expect(rows, 2, rank % 2, fail)) CheckChild(rows, fail, 2000 + rank / 2);
    if (Expect(cols, 2, rank / 2, fail)) CheckChild(cols, fail, 2100 + rank % 2);
    if (rank == 0 || rank == 3) {
      const int list[] = {3, 0};
      if (nodusCommCreateGroup(comm, list, 2, &pair, nullptr) != nodusSuccess) return fail(LastError(comm));
      if (Expect(pair, 2, rank == 3 ? 0 : 1, fail)) CheckChild(pair, fail, 2200);
    }
    CheckChild(comm, fail, 2300);
    // The parent goes first; its children keep working.
    if (nodusCommDestroy(comm) != nodusSuccess) fail("destroying the parent failed");
    CheckChild(rows, fail, 2400 + rank / 2);
    if (pair != nullptr) CheckChild(pair, fail, 2500);
    CheckChild(cols, fail, 2600 + rank % 2);
    for (nodusComm_t c : {pair, cols, rows})
      if (nodusCommDestroy(c) != nodusSuccess) fail("destroying a child failed");
  });
}

}  // namespace
}  // namespace nodus_test
