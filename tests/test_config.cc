// Per-communicator settings (nodusConfig_t) and the parameter registry's
// ranges, through the public API as users call them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nodus/nodus.h"

namespace {

// Environment variables a test sets, put back as they were when it ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) had_ = true, old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_.c_str(), old_.c_str(), 1);
    else unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

void destroyAll(std::vector<nodusComm_t>& comms) {
  for (nodusComm_t c : comms) EXPECT_EQ(nodusCommDestroy(c), nodusSuccess);
  comms.clear();
}

TEST(Config, OutOfRangeEnvironmentValuesFailInitNamingVariableValueAndRange) {
  for (const char* bad : {"0", "-5", "3000000000", "soon"}) {
    ScopedEnv env("NODUS_TIMEOUT_MS", bad);
    nodusComm_t comms[2] = {nullptr, nullptr};
    EXPECT_EQ(nodusCommInitAll(comms, 2), nodusInvalidArgument) << bad;
    EXPECT_EQ(comms[0], nullptr);
    const std::string msg = nodusGetLastError(nullptr);
    EXPECT_NE(msg.find(std::string("NODUS_TIMEOUT_MS=") + (std::string(bad) == "soon" ? "\"soon\"" : bad)),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("[1, 2147483647]"), std::string::npos) << msg;
  }
  {
    ScopedEnv env("NODUS_BIND", "fast");
    nodusComm_t comms[1] = {nullptr};
    EXPECT_EQ(nodusCommInitAll(comms, 1), nodusInvalidArgument);
    const std::string msg = nodusGetLastError(nullptr);
    EXPECT_NE(msg.find("NODUS_BIND=\"fast\" is not one of auto|core|numa|none"), std::string::npos) << msg;
  }
  {
    ScopedEnv env("NODUS_SLOTS", "65");
    nodusComm_t comms[1] = {nullptr};
    EXPECT_EQ(nodusCommInitAll(comms, 1), nodusInvalidArgument);
    EXPECT_NE(std::string(nodusGetLastError(nullptr)).find("NODUS_SLOTS=65 is outside its range [2, 64]"),
              std::string::npos)
        << nodusGetLastError(nullptr);
  }
}

TEST(Config, NodusParamGetIntReadsTheRegistry) {
  int64_t v = 0;
  {
    ScopedEnv env("NODUS_MPI_MIN_BYTES", "4K");
    ASSERT_EQ(nodusParamGetInt("NODUS_MPI_MIN_BYTES", &v), nodusSuccess);
    EXPECT_EQ(v, 4096);
  }
  ASSERT_EQ(nodusParamGetInt("NODUS_MPI_MIN_BYTES", &v), nodusSuccess);
  EXPECT_EQ(v, 512);  // the registry's default
  {
    ScopedEnv env("NODUS_MPI_VERBOSE", "7");
    EXPECT_EQ(nodusParamGetInt("NODUS_MPI_VERBOSE", &v), nodusInvalidArgument);
    EXPECT_NE(std::string(nodusGetLastError(nullptr)).find("[0, 2]"), std::string::npos);
  }
  EXPECT_EQ(nodusParamGetInt("NODUS_NO_SUCH_THING", &v), nodusInvalidArgument);
  EXPECT_EQ(nodusParamGetInt("NODUS_ALGO", &v), nodusInvalidArgument);  // a string
}

TEST(Config, RenamedSliceVariableStillWorksUnderItsOldName) {
  ScopedEnv env("NODUS_CHUNK_BYTES", "3");  // not a whole number of 64 B lines, still a slice
  int64_t v = 0;
  ASSERT_EQ(nodusParamGetInt("NODUS_SLICE_BYTES", &v), nodusSuccess);
  EXPECT_EQ(v, 3);
  ScopedEnv bad("NODUS_CHUNK_BYTES", "-1");
  EXPECT_EQ(nodusParamGetInt("NODUS_SLICE_BYTES", &v), nodusInvalidArgument);
  EXPECT_NE(std::string(nodusGetLastError(nullptr)).find("NODUS_CHUNK_BYTES=-1"), std::string::npos)
      << nodusGetLastError(nullptr);
}

TEST(Config, FieldsAreCheckedAndNamed) {
  nodusConfig_t cfg = NODUS_CONFIG_INITIALIZER;
  cfg.timeoutMs = 0;
  nodusComm_t comms[2] = {nullptr, nullptr};
  EXPECT_EQ(nodusCommInitAllConfig(comms, 2, &cfg), nodusInvalidArgument);
  EXPECT_NE(std::string(nodusGetLastError(nullptr)).find("nodusConfig_t.timeoutMs=0 is outside its range"),
            std::string::npos)
      << nodusGetLastError(nullptr);
  nodusConfig_t rules = NODUS_CONFIG_INITIALIZER;
  rules.algo = "allreduce:no-such-algorithm";
  EXPECT_EQ(nodusCommInitAllConfig(comms, 2, &rules), nodusInvalidArgument);
  EXPECT_NE(std::string(nodusGetLastError(nullptr)).find("no-such-algorithm"), std::string::npos)
      << nodusGetLastError(nullptr);
  nodusConfig_t garbage;
  memset(&garbage, 0x5a, sizeof(garbage));
  EXPECT_EQ(nodusCommInitAllConfig(comms, 2, &garbage), nodusInvalidArgument);
  EXPECT_NE(std::string(nodusGetLastError(nullptr)).find("NODUS_CONFIG_INITIALIZER"), std::string::npos);
}

TEST(Config, AlgorithmRulesApplyToTheirCommunicatorOnly) {
  ScopedEnv env("NODUS_ALGO", "tree");
  nodusConfig_t ring = NODUS_CONFIG_INITIALIZER;
  ring.algo = "allreduce:ring";
  nodusConfig_t none = NODUS_CONFIG_INITIALIZER;
  none.algo = "";  // nothing forced: the tuner picks, whatever NODUS_ALGO says
  std::vector<nodusComm_t> a(3), b(3), c(3);
  ASSERT_EQ(nodusCommInitAllConfig(a.data(), 3, &ring), nodusSuccess) << nodusGetLastError(nullptr);
  ASSERT_EQ(nodusCommInitAllConfig(b.data(), 3, nullptr), nodusSuccess) << nodusGetLastError(nullptr);
  ASSERT_EQ(nodusCommInitAllConfig(c.data(), 3, &none), nodusSuccess) << nodusGetLastError(nullptr);
  const size_t count = 1 << 20;
  const char* name = nullptr;
  ASSERT_EQ(nodusCommGetAlgorithm(a[0], nodusCollAllReduce, count, nodusFloat32, 0, &name), nodusSuccess);
  EXPECT_STREQ(name, "ring");
  ASSERT_EQ(nodusCommGetAlgorithm(b[0], nodusCollAllReduce, count, nodusFloat32, 0, &name), nodusSuccess);
  EXPECT_STREQ(name, "tree");  // the environment's
  const char* tuned = nullptr;
  ASSERT_EQ(nodusCommGetAlgorithm(c[0], nodusCollAllReduce, count, nodusFloat32, 0, &tuned), nodusSuccess);
  ASSERT_NE(tuned, nullptr);
  // And the forced one really runs, right, on every rank.
  std::vector<std::thread> ranks;
  std::vector<float> got(3, 0.0f);
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      std::vector<float> buf(1000, static_cast<float>(r + 1));
      EXPECT_EQ(nodusAllReduce(buf.data(), buf.data(), buf.size(), nodusFloat32, nodusSum, a[r]), nodusSuccess);
      got[r] = buf[999];
    });
  for (auto& t : ranks) t.join();
  for (float g : got) EXPECT_EQ(g, 6.0f);
  destroyAll(a);
  destroyAll(b);
  destroyAll(c);
}

// Two communicators of one process with different timeouts: rank 1 never
// calls, so rank 0's call on the short one times out while its call on the
// long one is still waiting, and completes once rank 1 joins.
TEST(Config, TwoCommunicatorsInOneProcessKeepTheirOwnTimeouts) {
  nodusConfig_t quick = NODUS_CONFIG_INITIALIZER;
  quick.timeoutMs = 200;
  nodusConfig_t patient = NODUS_CONFIG_INITIALIZER;
  patient.timeoutMs = 120000;
  nodusComm_t q[2], p[2];
  ASSERT_EQ(nodusCommInitAllConfig(q, 2, &quick), nodusSuccess) << nodusGetLastError(nullptr);
  ASSERT_EQ(nodusCommInitAllConfig(p, 2, &patient), nodusSuccess) << nodusGetLastError(nullptr);

  float slow[4] = {1, 1, 1, 1};
  nodusRequest_t pending = nullptr;
  ASSERT_EQ(nodusIallReduce(slow, slow, 4, nodusFloat32, nodusSum, p[0], &pending), nodusSuccess);
  float fast[4] = {1, 1, 1, 1};
  EXPECT_EQ(nodusAllReduce(fast, fast, 4, nodusFloat32, nodusSum, q[0]), nodusTimeout);
  const std::string msg = nodusGetLastError(q[0]);
  EXPECT_NE(msg.find("NODUS_TIMEOUT_MS=200"), std::string::npos) << msg;
  // The patient communicator's call waits on.
  EXPECT_EQ(nodusWaitTimeout(pending, 0), nodusInProgress);
  float peer[4] = {2, 2, 2, 2};
  EXPECT_EQ(nodusAllReduce(peer, peer, 4, nodusFloat32, nodusSum, p[1]), nodusSuccess) << nodusGetLastError(p[1]);
  EXPECT_EQ(nodusWait(pending), nodusSuccess) << nodusGetLastError(p[0]);
  EXPECT_EQ(slow[0], 3.0f);
  EXPECT_EQ(peer[3], 3.0f);
  EXPECT_EQ(nodusRequestFree(pending), nodusSuccess);
  for (nodusComm_t c : {q[0], q[1], p[0], p[1]}) EXPECT_EQ(nodusCommDestroy(c), nodusSuccess);
}

TEST(Config, ATraceDirectoryThatCannotBeWrittenIsNoError) {
  nodusConfig_t cfg = NODUS_CONFIG_INITIALIZER;
  cfg.traceDir = "/nonexistent/nodus-trace";
  nodusComm_t comms[2];
  ASSERT_EQ(nodusCommInitAllConfig(comms, 2, &cfg), nodusSuccess) << nodusGetLastError(nullptr);
  for (nodusComm_t c : comms) EXPECT_EQ(nodusCommDestroy(c), nodusSuccess);
}

// A caller compiled against an older, shorter nodusConfig_t: the fields it
// does not have are never read.
TEST(Config, AShorterOlderConfigIsReadOnlyAsFarAsItGoes) {
  struct {
    nodusConfig_t cfg;
    char poison[64];
  } old;
  memset(&old, 0x5a, sizeof(old));
  old.cfg.size = offsetof(nodusConfig_t, algo);  // size, magic, version, timeoutMs only
  old.cfg.magic = NODUS_CONFIG_MAGIC;
  old.cfg.version = NODUS_VERSION_CODE;
  old.cfg.timeoutMs = 5000;
  nodusComm_t comms[2];
  ASSERT_EQ(nodusCommInitAllConfig(comms, 2, &old.cfg), nodusSuccess) << nodusGetLastError(nullptr);
  for (nodusComm_t c : comms) EXPECT_EQ(nodusCommDestroy(c), nodusSuccess);
}

}  // namespace
