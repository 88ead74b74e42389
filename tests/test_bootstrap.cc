// The unique-id bootstrap: strangers that connect to the root without the
// secret are refused and the job goes on; ranks that disagree fail cleanly.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "collective_check.h"
#include "nodus/nodus.h"

namespace {

// The id's layout is private; the test only needs the root's address, which
// sits after a 4-byte magic as IPv4 address then port, in network order.
sockaddr_in rootAddress(const nodusUniqueId& id) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  memcpy(&a.sin_addr.s_addr, id.internal + 4, 4);
  memcpy(&a.sin_port, id.internal + 8, 2);
  return a;
}

// Connects to the root and sends `bytes`; returns whether the root closed
// the connection on us (it must, for anything that is not a valid hello).
bool strangerIsHungUpOn(const sockaddr_in& root, const std::vector<char>& bytes) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  if (connect(fd, reinterpret_cast<const sockaddr*>(&root), sizeof(root)) != 0) {
    close(fd);
    return false;
  }
  if (!bytes.empty()) (void)!write(fd, bytes.data(), bytes.size());
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char c;
  ssize_t n = read(fd, &c, 1);  // 0 or a reset: the root hung up (a timeout is EAGAIN)
  const bool reset = n < 0 && errno == ECONNRESET;
  close(fd);
  return n == 0 || reset;
}

void initRanks(const nodusUniqueId& id, int n, std::vector<nodusResult_t>* results, std::vector<nodusComm_t>* comms) {
  results->assign(n, nodusInternalError);
  comms->assign(n, nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] { (*results)[r] = nodusCommInitRank(&(*comms)[r], n, id, r); });
  for (auto& t : threads) t.join();
}

}  // namespace

TEST(Bootstrap, StrangersAreRefusedAndTheJobGoesOn) {
  nodusUniqueId id;
  ASSERT_EQ(nodusGetUniqueId(&id), nodusSuccess);
  const sockaddr_in root = rootAddress(id);
  // Garbage, a hello-sized block of zeros (wrong magic and secret), and a
  // stranger that says nothing at all (hung up on after the hello timeout).
  EXPECT_TRUE(strangerIsHungUpOn(root, std::vector<char>(7, 'x')));
  EXPECT_TRUE(strangerIsHungUpOn(root, std::vector<char>(64, 0)));
  std::vector<char> almost(64, 0);
  const uint32_t helloMagic = 0x6e6f6448;
  memcpy(almost.data(), &helloMagic, 4);  // right magic, wrong secret
  EXPECT_TRUE(strangerIsHungUpOn(root, almost));

  std::vector<nodusResult_t> results;
  std::vector<nodusComm_t> comms;
  initRanks(id, 3, &results, &comms);
  for (int r = 0; r < 3; ++r) ASSERT_EQ(results[r], nodusSuccess) << "rank " << r << ": " << nodusGetLastError(nullptr);
  // And the job works.
  std::vector<std::thread> threads;
  std::vector<int> sums(3, 0);
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      int x = r + 1;
      EXPECT_EQ(nodusAllReduce(&x, &sums[r], 1, nodusInt32, nodusSum, comms[r]), nodusSuccess);
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(sums[r], 6);
    EXPECT_EQ(nodusCommDestroy(comms[r]), nodusSuccess);
  }
}

TEST(Bootstrap, RanksThatDisagreeOnTheSizeFailWithoutHanging) {
  setenv("NODUS_TIMEOUT_MS", "2000", 1);
  nodusUniqueId id;
  ASSERT_EQ(nodusGetUniqueId(&id), nodusSuccess);
  nodusResult_t a = nodusInternalError, b = nodusInternalError;
  nodusComm_t ca = nullptr, cb = nullptr;
  std::thread ta([&] { a = nodusCommInitRank(&ca, 2, id, 0); });
  std::thread tb([&] { b = nodusCommInitRank(&cb, 3, id, 1); });
  ta.join();
  tb.join();
  unsetenv("NODUS_TIMEOUT_MS");
  EXPECT_NE(a, nodusSuccess);
  EXPECT_NE(b, nodusSuccess);
  EXPECT_EQ(ca, nullptr);
  EXPECT_EQ(cb, nullptr);
}

TEST(Bootstrap, AnIdNotMadeByNodusIsRejectedAtOnce) {
  nodusUniqueId id;
  memset(&id, 0x5a, sizeof(id));
  nodusComm_t c = nullptr;
  EXPECT_EQ(nodusCommInitRank(&c, 2, id, 0), nodusInvalidArgument);
  EXPECT_NE(std::string(nodusGetLastError(nullptr)).find("unique id"), std::string::npos) << nodusGetLastError(nullptr);
}

TEST(Parameters, ImpossibleValuesAreRejectedAtInit) {
  struct Case {
    const char* name;
    const char* value;
  } cases[] = {{"NODUS_SLOTS", "1"}, {"NODUS_SLOTS", "65"}, {"NODUS_SLOT_BYTES", "8"},
               {"NODUS_TIMEOUT_MS", "0"}, {"NODUS_ALGO", "nosuch"}, {"NODUS_TRANSPORT", "carrier-pigeon"},
               {"NODUS_CHANNELS", "17"}, {"NODUS_CHANNELS", "-1"}, {"NODUS_SHM_COPY", "fast"}, {"NODUS_SHM_CMA", "2"}};
  for (const Case& c : cases) {
    setenv(c.name, c.value, 1);
    nodusComm_t comms[2] = {nullptr, nullptr};
    nodusResult_t r = nodusCommInitAll(comms, 2);
    unsetenv(c.name);
    EXPECT_EQ(r, nodusInvalidArgument) << c.name << "=" << c.value;
    EXPECT_NE(std::string(nodusGetLastError(nullptr)).find(c.name), std::string::npos)
        << c.name << "=" << c.value << ": " << nodusGetLastError(nullptr);
  }
}

// Two forked ranks, each set up by setup(rank), both fail init with
// nodusInvalidUsage and a message holding every one of `words`.
void ExpectEveryRankRefusedAtInit(const std::function<void(int)>& setup, const std::vector<std::string>& words) {
  using nodus_test::ForkedRanks;
  using nodus_test::RankReport;
  nodus_test::SharedUniqueId shared;
  ForkedRanks ranks(2);
  ASSERT_TRUE(ranks.Start([&](int rank, RankReport& report) {
    setup(rank);
    setenv("NODUS_TIMEOUT_MS", "20000", 1);
    nodusUniqueId id;
    if (rank == 0 && shared.Make() != nodusSuccess) return 2;
    if (!shared.Get(&id, std::chrono::seconds(20))) return 2;
    nodusComm_t comm = nullptr;
    const nodusResult_t r = nodusCommInitRank(&comm, 2, id, rank);
    const std::string err = nodusGetLastError(nullptr);
    if (r != nodusInvalidUsage) report.Fail("init returned " + std::to_string(r) + " (" + err + "), not nodusInvalidUsage");
    for (const std::string& w : words)
      if (err.find(w) == std::string::npos) report.Fail("unclear message (no '" + w + "'): " + err);
    if (comm != nullptr) report.Fail("a communicator was returned");
    return report.failures ? 1 : 0;
  }));
  ranks.Wait(std::chrono::seconds(60));
  EXPECT_EQ(ranks.Failures(), "");
}

// Ranks that describe the fabric differently (here two processes with
// different NODUS_TORUS_DIMS) fail init on every rank, naming the mismatch.
TEST(Topology, RanksThatDisagreeOnTheFabricFailAtInit) {
  ExpectEveryRankRefusedAtInit(
      [](int rank) {
        setenv("NODUS_TORUS_DIMS", rank == 0 ? "2x1" : "1x2", 1);
        setenv("NODUS_HOSTID", "a,b", 1);
      },
      {"describes the fabric differently", "torus"});
}

// One rank's fabric file gives the links' bandwidth, the other's has none
// (that rank would price the links at its NIC): they describe the fabric
// differently, so init fails on both rather than one of them waiting for
// the other's device speed.
TEST(Topology, RanksThatDisagreeOnTheLinkBandwidthFailAtInit) {
  const std::string dir = ::testing::TempDir();
  const std::string given = dir + "nodus_flat_given.yaml", open = dir + "nodus_flat_open.yaml";
  {
    std::ofstream(given) << "fabric: flat\nlink: {bandwidth: 25GB/s}\n";
    std::ofstream(open) << "fabric: flat\n";
  }
  ExpectEveryRankRefusedAtInit(
      [&](int rank) {
        setenv("NODUS_TOPO_FILE", rank == 0 ? given.c_str() : open.c_str(), 1);
        setenv("NODUS_HOSTID", "a,b", 1);
        setenv("NODUS_TRANSPORT", "tcp", 1);
        setenv("NODUS_SOCKET_IFNAME", "lo", 1);
      },
      {"describes the fabric differently"});
  std::remove(given.c_str());
  std::remove(open.c_str());
}

// Ranks that would build different plans for one call (here NODUS_CHANNELS
// on one rank and NODUS_ALGO on the other pair) fail init on every rank,
// naming the setting, rather than exchanging messages that do not match.
TEST(Parameters, RanksThatWouldPlanDifferentlyFailAtInit) {
  struct Case {
    const char* name;
    const char* value0;
    const char* value1;
  } cases[] = {{"NODUS_CHANNELS", "2", "0"},
               {"NODUS_ALGO", "ring", "allreduce:ring"},
               {"NODUS_CHUNK_BYTES", "8192", "0"},
               // Both above the 128 KiB slot at init (as set, not as clamped):
               // a transport with larger slots would run them apart.
               {"NODUS_CHUNK_BYTES", "262144", "524288"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    ExpectEveryRankRefusedAtInit([&](int rank) { setenv(c.name, rank == 0 ? c.value0 : c.value1, 1); },
                                 {c.name, "every rank must"});
  }
}
