// Multi-rank tests over the tcp transport: every rank a forked process on
// this machine, tcp forced over loopback (NODUS_TRANSPORT=tcp,
// NODUS_SOCKET_IFNAME=lo), the full collective matrix at 2 and 3 ranks; and a
// communicator that mixes shm and tcp, with ranks in two UTS namespaces so
// that they sit on two "machines". The parent checks that nothing is left in
// /dev/shm and that every child exited (ForkedRanks kills stragglers).
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "collective_check.h"
#include "nodus/nodus.h"

namespace nodus_test {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

class TcpTest : public ::testing::Test {
 protected:
  void SetUp() override { before_ = NodusShmEntries(); }
  void TearDown() override {
    const std::string leaks = NodusShmLeaks(before_, milliseconds(3000));
    EXPECT_TRUE(leaks.empty()) << leaks;
  }

  static bool ForceTcpOverLoopback(int, RankReport&) {
    setenv("NODUS_TRANSPORT", "tcp", 1);
    setenv("NODUS_SOCKET_IFNAME", "lo", 1);
    return true;
  }

 private:
  std::set<std::string> before_;
};

// ---- The matrix over tcp -------------------------------------------------------

class TcpMatrix : public TcpTest, public ::testing::WithParamInterface<int> {};

// Every collective x type x op x placement x count {0, 1, 7, p-1, large odd
// counts}, blocking and not, over tcp between processes.
TEST_P(TcpMatrix, EveryCollectiveTypeOpCountAndPlacement) {
  const int n = GetParam();
  MatrixOptions options;
  options.seed += 300 + static_cast<uint64_t>(n);
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "60000");  // a deadlock: an error, not a hang
  RunForkedMatrix(n, seconds(240), MakeMatrix(n, options), ForceTcpOverLoopback);
}

INSTANTIATE_TEST_SUITE_P(Ranks, TcpMatrix, ::testing::Values(2, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return std::to_string(info.param) + "ranks"; });

// Small slots (many frames per call, senders waiting for free slots), one
// socket and many sockets, and messages above the striping threshold.
struct TcpSetting {
  const char* name;
  std::vector<std::pair<const char*, const char*>> env;
};

const TcpSetting& TcpSettingAt(int which) {
  static const TcpSetting kSettings[] = {
      {"slots4k_nsocks1", {{"NODUS_SLOT_BYTES", "4096"}, {"NODUS_NSOCKS", "1"}}},
      {"slots1m_nsocks4", {{"NODUS_SLOT_BYTES", "1M"}, {"NODUS_NSOCKS", "4"}, {"NODUS_SLOTS", "2"}}},
      {"ring_nsocks3", {{"NODUS_ALGO", "ring"}, {"NODUS_NSOCKS", "3"}}},
  };
  return kSettings[which];
}

class TcpForced : public TcpTest, public ::testing::WithParamInterface<int> {};

TEST_P(TcpForced, ReducedMatrix) {
  const TcpSetting& setting = TcpSettingAt(GetParam());
  std::vector<std::unique_ptr<ScopedEnv>> env;
  for (const auto& [name, value] : setting.env) env.push_back(std::make_unique<ScopedEnv>(name, value));
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "20000");
  MatrixOptions options;
  options.types = {nodusInt8, nodusFloat16, nodusFloat32, nodusFloat64};
  options.counts = {0, 1, 7, 4099, 1000003};
  options.allOpsAtLargeCounts = false;
  options.seed += 4000 + static_cast<uint64_t>(GetParam());
  if (std::string(setting.name) == "ring_nsocks3")
    options.colls = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter};
  RunForkedMatrix(3, seconds(240), MakeMatrix(3, options), ForceTcpOverLoopback);
}

INSTANTIATE_TEST_SUITE_P(Settings, TcpForced, ::testing::Range(0, 3),
                         [](const ::testing::TestParamInfo<int>& info) { return std::string(TcpSettingAt(info.param).name); });

// ---- Mixed: shm within a "machine", tcp between them ------------------------------

// Whether this process may make a UTS namespace (root, and a container that
// allows it): tried in a child, so nothing here changes.
bool CanMakeUtsNamespace() {
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) _exit(unshare(CLONE_NEWUTS) == 0 && sethostname("nodus-probe", 11) == 0 ? 0 : 1);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// In a forked rank: a UTS namespace named `host` (another machine to
// nodus), nothing forced, tcp over lo, INFO logged to logs/rankN.log.
bool PoseAsHost(const char* host, const std::string& logs, int rank, RankReport& report) {
  if (unshare(CLONE_NEWUTS) != 0 || sethostname(host, strlen(host)) != 0) {
    report.Fail("cannot enter a UTS namespace");
    return false;
  }
  unsetenv("NODUS_TRANSPORT");
  setenv("NODUS_SOCKET_IFNAME", "lo", 1);
  setenv("NODUS_DEBUG", "INFO", 1);
  setenv("NODUS_DEBUG_FILE", (logs + "/rank" + std::to_string(rank) + ".log").c_str(), 1);
  return true;
}

// Four ranks, two per UTS namespace hostname: ranks 0 and 1 on "machine" a,
// 2 and 3 on b. No transport is forced: each rank must pick shm for its
// neighbour and tcp for the other two, run both in one communicator (and one
// doorbell), and get every collective right.
TEST_F(TcpTest, ShmAndTcpInOneCommunicator) {
  if (!CanMakeUtsNamespace()) GTEST_SKIP() << "cannot make a UTS namespace here (needs CAP_SYS_ADMIN)";
  char dir[] = "/tmp/nodus-mixed-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string logs = dir;
  MatrixOptions options;
  options.types = {nodusInt32, nodusBfloat16, nodusFloat32};
  options.counts = {0, 1, 3, 4099, 300007};
  options.allOpsAtLargeCounts = false;
  options.seed += 5000;
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "30000");
  RunForkedMatrix(4, seconds(240), MakeMatrix(4, options), [&](int rank, RankReport& report) {
    const char* host = rank < 2 ? "nodus-host-a" : "nodus-host-b";
    return PoseAsHost(host, logs, rank, report);
  });
  for (int r = 0; r < 4; ++r) {
    const std::string path = logs + "/rank" + std::to_string(r) + ".log";
    const std::string text = ReadFile(path);
    EXPECT_NE(text.find("transports shm(1)+tcp(2)"), std::string::npos)
        << "rank " << r << " did not report shm for one peer and tcp for two:\n" << text.substr(0, 2000);
  }
  if (HasFailure()) {
    std::fprintf(stderr, "logs of the ranks kept in %s\n", dir);
    return;
  }
  for (int r = 0; r < 4; ++r) std::remove((logs + "/rank" + std::to_string(r) + ".log").c_str());
  rmdir(dir);
}

// Two ranks on two "machines" (UTS namespaces) with nothing forced: verbs
// comes first in the table for other hosts, but this host has no RDMA device
// (or no libibverbs), so each rank says so in one INFO line and tcp carries
// the pair. Skipped where a device is up (verbs would then be right). Both
// run under this one kernel, so they share its CPUs.
TEST_F(TcpTest, VerbsWithoutDeviceFallsBackToTcp) {
  if (!CanMakeUtsNamespace()) GTEST_SKIP() << "cannot make a UTS namespace here (needs CAP_SYS_ADMIN)";
  if (access("/sys/class/infiniband", F_OK) == 0) GTEST_SKIP() << "this host has RDMA devices";
  char dir[] = "/tmp/nodus-noverbs-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string logs = dir;
  MatrixOptions options;
  options.types = {nodusFloat32};
  options.counts = {1, 4099, 300007};
  options.allOpsAtLargeCounts = false;
  options.seed += 6000;
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "30000");
  RunForkedMatrix(2, seconds(240), MakeMatrix(2, options), [&](int rank, RankReport& report) {
    const char* host = rank == 0 ? "nodus-host-a" : "nodus-host-b";
    return PoseAsHost(host, logs, rank, report);
  });
  for (int r = 0; r < 2; ++r) {
    const std::string text = ReadFile(logs + "/rank" + std::to_string(r) + ".log");
    EXPECT_NE(text.find("transports tcp(1)"), std::string::npos) << "rank " << r << ":\n" << text.substr(0, 2000);
    // Two machines to the transports, one kernel's CPUs to share: each rank
    // counts both ranks when it decides whether to spin and bind.
    EXPECT_NE(text.find("transports tcp(1), 2 rank(s) on"), std::string::npos)
        << "rank " << r << " did not count the other host's rank as sharing its CPUs:\n" << text.substr(0, 2000);
    const size_t said = text.find("verbs: not used for rank");
    EXPECT_NE(said, std::string::npos) << "rank " << r << " did not log the fallback:\n" << text.substr(0, 2000);
    EXPECT_EQ(text.find("verbs: not used", said + 1), std::string::npos) << "more than one fallback line:\n" << text;
  }
  if (HasFailure()) {
    std::fprintf(stderr, "logs of the ranks kept in %s\n", dir);
    return;
  }
  for (int r = 0; r < 2; ++r) std::remove((logs + "/rank" + std::to_string(r) + ".log").c_str());
  rmdir(dir);
}

// ---- Failures ----------------------------------------------------------------------

// Different NODUS_TRANSPORT on different ranks is refused at init, on every rank.
TEST_F(TcpTest, RanksThatForceDifferentTransportsFailAtInit) {
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "10000");
  SharedUniqueId shared;
  ForkedRanks ranks(2);
  ASSERT_TRUE(ranks.Start([&](int rank, RankReport& report) {
    setenv("NODUS_TRANSPORT", rank == 0 ? "tcp" : "shm", 1);
    nodusUniqueId id;
    if (rank == 0) shared.Make();
    if (!shared.Get(&id, seconds(30))) return 2;
    nodusComm_t comm = nullptr;
    const nodusResult_t r = nodusCommInitRank(&comm, 2, id, rank);
    if (r != nodusInvalidUsage) report.Fail(std::string("nodusCommInitRank returned ") + ResultName(r));
    if (r == nodusSuccess) nodusCommDestroy(comm);
    else if (std::string(nodusGetLastError(nullptr)).find("NODUS_TRANSPORT") == std::string::npos)
      report.Fail(std::string("unclear error: ") + nodusGetLastError(nullptr));
    return report.failures ? 1 : 0;
  }));
  ranks.Wait(seconds(60));
  EXPECT_TRUE(ranks.Failures().empty()) << ranks.Failures();
}

}  // namespace
}  // namespace nodus_test
