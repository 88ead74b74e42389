// Every bad input returns an error code with an explanation, and failures of
// peers (death, absence, abort) end blocked calls with an error instead of a
// hang. Time limits here check "no hang", not speed: they are generous.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "collective_check.h"
#include "nodus/nodus.h"

namespace nodus_test {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

long long MsSince(Clock::time_point start) {
  return std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
}

// The call must fail with `code` and leave an explanation: on `comm`, or on
// this thread when comm is null.
#define EXPECT_FAILS_WITH(code, comm, call)                                                   \
  do {                                                                                        \
    const nodusResult_t result_ = (call);                                                     \
    EXPECT_EQ(result_, code) << #call << " returned " << ResultName(result_);                 \
    if (result_ != nodusSuccess) {                                                            \
      const char* text_ = nodusGetLastError(comm);                                            \
      EXPECT_TRUE(text_ != nullptr && text_[0] != '\0') << #call << ": no nodusGetLastError"; \
    }                                                                                         \
  } while (0)

// Argument checks run on a one-rank loopback communicator: a call wrongly
// accepted then completes locally instead of waiting for a peer.
class Errors : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(nodusCommInitAll(&comm_, 1), nodusSuccess) << nodusGetLastError(nullptr);
  }
  void TearDown() override { EXPECT_EQ(nodusCommDestroy(comm_), nodusSuccess); }

  nodusComm_t comm_ = nullptr;
  float a_[64] = {};
  float b_[64] = {};
};

TEST(ErrorStrings, EveryCodeHasAName) {
  for (int code = 0; code <= nodusNumResults + 1; ++code) {
    const char* s = nodusGetErrorString(static_cast<nodusResult_t>(code));
    ASSERT_NE(s, nullptr) << code;
    EXPECT_GT(std::strlen(s), 0u) << code;
  }
  EXPECT_NE(nodusGetErrorString(static_cast<nodusResult_t>(-1)), nullptr);
  EXPECT_NE(nodusGetErrorString(static_cast<nodusResult_t>(12345)), nullptr);
  EXPECT_NE(nodusGetLastError(nullptr), nullptr);
}

TEST(ErrorStrings, VersionMatchesTheHeader) {
  int v = 0;
  EXPECT_EQ(nodusGetVersion(&v), nodusSuccess);
  EXPECT_EQ(v, NODUS_VERSION_CODE);
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusGetVersion(nullptr));
}

TEST_F(Errors, NullCommunicator) {
  nodusRequest_t q = nullptr;
  int x = 0;
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr,
                    nodusAllReduce(a_, b_, 4, nodusFloat32, nodusSum, nullptr));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr,
                    nodusAllGather(a_, b_, 4, nodusFloat32, nullptr));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr,
                    nodusReduceScatter(a_, b_, 4, nodusFloat32, nodusSum, nullptr));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr,
                    nodusBroadcast(a_, b_, 4, nodusFloat32, 0, nullptr));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr,
                    nodusReduce(a_, b_, 4, nodusFloat32, nodusSum, 0, nullptr));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusBarrier(nullptr));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusSend(a_, 4, nodusFloat32, 0, nullptr));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusRecv(b_, 4, nodusFloat32, 0, nullptr));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr,
                    nodusIallReduce(a_, b_, 4, nodusFloat32, nodusSum, nullptr, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr,
                    nodusIallGather(a_, b_, 4, nodusFloat32, nullptr, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr,
                    nodusIreduceScatter(a_, b_, 4, nodusFloat32, nodusSum, nullptr, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr,
                    nodusIbroadcast(a_, b_, 4, nodusFloat32, 0, nullptr, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr,
                    nodusIreduce(a_, b_, 4, nodusFloat32, nodusSum, 0, nullptr, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusIbarrier(nullptr, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusIsend(a_, 4, nodusFloat32, 0, nullptr, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusIrecv(b_, 4, nodusFloat32, 0, nullptr, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusCommCount(nullptr, &x));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusCommUserRank(nullptr, &x));
  EXPECT_EQ(nodusCommDestroy(nullptr), nodusSuccess);  // documented as accepted
}

TEST_F(Errors, NullOutputPointers) {
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusCommCount(comm_, nullptr));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusCommUserRank(comm_, nullptr));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusCommInitAll(nullptr, 2));
  int done = 0;
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusTest(nullptr, &done));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusWait(nullptr));
  // A null request pointer for a non-blocking call.
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusIallReduce(a_, b_, 4, nodusFloat32, nodusSum, comm_, nullptr));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusIbarrier(comm_, nullptr));
  nodusRequest_t q = nullptr;
  ASSERT_EQ(nodusIallReduce(a_, b_, 4, nodusFloat32, nodusSum, comm_, &q), nodusSuccess);
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusTest(q, nullptr));
  EXPECT_EQ(nodusWait(q), nodusSuccess);
  EXPECT_EQ(nodusRequestFree(q), nodusSuccess);
}

TEST_F(Errors, NullBuffersWithNonZeroCount) {
  nodusRequest_t q = nullptr;
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusAllReduce(nullptr, b_, 4, nodusFloat32, nodusSum, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusAllReduce(a_, nullptr, 4, nodusFloat32, nodusSum, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusAllGather(nullptr, b_, 4, nodusFloat32, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusAllGather(a_, nullptr, 4, nodusFloat32, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusReduceScatter(nullptr, b_, 4, nodusFloat32, nodusSum, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusReduceScatter(a_, nullptr, 4, nodusFloat32, nodusSum, comm_));
  // At the root the send buffer of a Broadcast and the receive buffer of a Reduce are needed.
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusBroadcast(nullptr, b_, 4, nodusFloat32, 0, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusBroadcast(a_, nullptr, 4, nodusFloat32, 0, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusReduce(nullptr, b_, 4, nodusFloat32, nodusSum, 0, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusReduce(a_, nullptr, 4, nodusFloat32, nodusSum, 0, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusIallReduce(nullptr, b_, 4, nodusFloat32, nodusSum, comm_, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusIallGather(a_, nullptr, 4, nodusFloat32, comm_, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusIreduceScatter(nullptr, b_, 4, nodusFloat32, nodusSum, comm_, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusIbroadcast(nullptr, b_, 4, nodusFloat32, 0, comm_, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusIreduce(a_, nullptr, 4, nodusFloat32, nodusSum, 0, comm_, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusSend(nullptr, 4, nodusFloat32, 0, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusRecv(nullptr, 4, nodusFloat32, 0, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusIsend(nullptr, 4, nodusFloat32, 0, comm_, &q));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusIrecv(nullptr, 4, nodusFloat32, 0, comm_, &q));
  // The communicator still works afterwards.
  for (int i = 0; i < 4; ++i) a_[i] = static_cast<float>(i);
  EXPECT_EQ(nodusAllReduce(a_, b_, 4, nodusFloat32, nodusSum, comm_), nodusSuccess);
  EXPECT_EQ(b_[3], 3.0f);
}

TEST_F(Errors, UnknownTypeAndOp) {
  nodusRequest_t q = nullptr;
  for (int t : {42, static_cast<int>(nodusNumTypes), -1}) {
    SCOPED_TRACE("type " + std::to_string(t));
    const auto type = static_cast<nodusDataType_t>(t);
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusAllReduce(a_, b_, 4, type, nodusSum, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusAllGather(a_, b_, 4, type, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusReduceScatter(a_, b_, 4, type, nodusSum, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusBroadcast(a_, b_, 4, type, 0, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusReduce(a_, b_, 4, type, nodusSum, 0, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusIallReduce(a_, b_, 4, type, nodusSum, comm_, &q));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusSend(a_, 4, type, 0, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusRecv(b_, 4, type, 0, comm_));
    // Also with count 0: a bad type is bad whatever the count.
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusAllReduce(a_, b_, 0, type, nodusSum, comm_));
  }
  for (int o : {42, static_cast<int>(nodusNumOps), -1}) {
    SCOPED_TRACE("op " + std::to_string(o));
    const auto op = static_cast<nodusRedOp_t>(o);
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusAllReduce(a_, b_, 4, nodusFloat32, op, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusReduceScatter(a_, b_, 4, nodusFloat32, op, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusReduce(a_, b_, 4, nodusFloat32, op, 0, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusIreduce(a_, b_, 4, nodusFloat32, op, 0, comm_, &q));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusAllReduce(a_, b_, 0, nodusInt8, op, comm_));
  }
}

TEST_F(Errors, CountOverflow) {
  nodusRequest_t q = nullptr;
  for (size_t count : {SIZE_MAX, SIZE_MAX / 2, SIZE_MAX / 4 + 1}) {
    SCOPED_TRACE("count " + std::to_string(count));
    // count * sizeof(float) overflows size_t.
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusAllReduce(a_, b_, count, nodusFloat32, nodusSum, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusAllGather(a_, b_, count, nodusFloat32, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusReduceScatter(a_, b_, count, nodusFloat32, nodusSum, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusBroadcast(a_, b_, count, nodusFloat32, 0, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusReduce(a_, b_, count, nodusFloat32, nodusSum, 0, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusIallReduce(a_, b_, count, nodusFloat32, nodusSum, comm_, &q));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusSend(a_, count, nodusFloat32, 0, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusRecv(b_, count, nodusFloat32, 0, comm_));
  }
}

// With 2 ranks, nranks * count * sizeof(type) overflows although count * sizeof
// does not. Checked from one thread: the call must fail before any communication.
TEST(ErrorsTwoRanks, BlockCountOverflow) {
  Watchdog watchdog("block count overflow", seconds(60));
  nodusComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(nodusCommInitAll(comms, 2), nodusSuccess);
  float a[8] = {}, b[16] = {};
  const size_t count = SIZE_MAX / 8 + 1;  // * 4 bytes fits, * 2 ranks * 4 bytes does not
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[0],
                    nodusAllGather(a, b, count, nodusFloat32, comms[0]));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[0],
                    nodusReduceScatter(a, b, count, nodusFloat32, nodusSum, comms[0]));
  EXPECT_EQ(nodusCommDestroy(comms[0]), nodusSuccess);
  EXPECT_EQ(nodusCommDestroy(comms[1]), nodusSuccess);
}

TEST_F(Errors, RootAndPeerOutOfRange) {
  nodusRequest_t q = nullptr;
  for (int bad : {-1, 1, 2, INT_MAX, INT_MIN}) {
    SCOPED_TRACE("rank " + std::to_string(bad));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusBroadcast(a_, b_, 4, nodusFloat32, bad, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusReduce(a_, b_, 4, nodusFloat32, nodusSum, bad, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusIbroadcast(a_, b_, 4, nodusFloat32, bad, comm_, &q));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusIreduce(a_, b_, 4, nodusFloat32, nodusSum, bad, comm_, &q));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusSend(a_, 4, nodusFloat32, bad, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusRecv(b_, 4, nodusFloat32, bad, comm_));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusIsend(a_, 4, nodusFloat32, bad, comm_, &q));
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_, nodusIrecv(b_, 4, nodusFloat32, bad, comm_, &q));
    // Bad roots are bad with count 0 too.
    EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                      nodusBroadcast(a_, b_, 0, nodusFloat32, bad, comm_));
  }
}

// Buffers that overlap other than in NCCL's in-place layouts are rejected.
TEST_F(Errors, PartiallyOverlappingBuffers) {
  float* buf = a_;
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusAllReduce(buf, buf + 1, 8, nodusFloat32, nodusSum, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusAllReduce(buf + 1, buf, 8, nodusFloat32, nodusSum, comm_));
  EXPECT_FAILS_WITH(
      nodusInvalidArgument, comm_,
      nodusAllReduce(buf, reinterpret_cast<char*>(buf) + 1, 8, nodusFloat32, nodusSum, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusAllGather(buf + 1, buf, 8, nodusFloat32, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusReduceScatter(buf, buf + 1, 8, nodusFloat32, nodusSum, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusBroadcast(buf, buf + 3, 8, nodusFloat32, 0, comm_));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusReduce(buf, buf + 7, 8, nodusFloat32, nodusSum, 0, comm_));
  nodusRequest_t q = nullptr;
  EXPECT_FAILS_WITH(nodusInvalidArgument, comm_,
                    nodusIallReduce(buf, buf + 2, 8, nodusFloat32, nodusSum, comm_, &q));
  // Adjacent (touching, not overlapping) and exactly in place are fine.
  for (int i = 0; i < 16; ++i) buf[i] = static_cast<float>(i);
  EXPECT_EQ(nodusAllReduce(buf, buf + 8, 8, nodusFloat32, nodusSum, comm_), nodusSuccess);
  EXPECT_EQ(buf[15], 7.0f);
  EXPECT_EQ(nodusAllReduce(buf, buf, 8, nodusFloat32, nodusSum, comm_), nodusSuccess);
  EXPECT_EQ(nodusAllGather(buf, buf, 8, nodusFloat32, comm_), nodusSuccess);
  EXPECT_EQ(nodusReduceScatter(buf, buf, 8, nodusFloat32, nodusMax, comm_), nodusSuccess);
  EXPECT_EQ(buf[7], 7.0f);
}

// With 2 ranks the in-place positions depend on the rank.
TEST(ErrorsTwoRanks, OverlapAtTheWrongInPlacePosition) {
  Watchdog watchdog("overlap with 2 ranks", seconds(60));
  nodusComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(nodusCommInitAll(comms, 2), nodusSuccess);
  float buf[32] = {};
  // Rank 1's in-place AllGather send buffer is recvbuf + 1 * count, not recvbuf.
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[1],
                    nodusAllGather(buf, buf, 8, nodusFloat32, comms[1]));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[1],
                    nodusAllGather(buf + 4, buf, 8, nodusFloat32, comms[1]));
  // Rank 1's in-place ReduceScatter receive buffer is sendbuf + 1 * recvcount.
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[1],
                    nodusReduceScatter(buf, buf, 8, nodusFloat32, nodusSum, comms[1]));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[0],
                    nodusReduceScatter(buf, buf + 8, 8, nodusFloat32, nodusSum, comms[0]));
  // Rank 0's in-place AllGather is sendbuf == recvbuf; recvbuf + count is rank 1's.
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[0],
                    nodusAllGather(buf + 8, buf, 8, nodusFloat32, comms[0]));
  EXPECT_EQ(nodusCommDestroy(comms[0]), nodusSuccess);
  EXPECT_EQ(nodusCommDestroy(comms[1]), nodusSuccess);
}

// nodusAllGatherList: the list, its entries, overlaps between them and with
// the send buffer (in place only as this rank's own entry).
TEST(ErrorsTwoRanks, AllGatherListBadBuffers) {
  Watchdog watchdog("list AllGather argument checks", seconds(60));
  nodusComm_t comms[2] = {nullptr, nullptr};
  ASSERT_EQ(nodusCommInitAll(comms, 2), nodusSuccess);
  float a[8] = {}, b[8] = {}, c[8] = {};
  void* apart[2] = {b, c};
  void* withNull[2] = {b, nullptr};
  void* overlapping[2] = {c, c + 2};
  void* twice[2] = {b, b};
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[1], nodusAllGatherList(a, nullptr, 4, nodusFloat32, comms[1]));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[1], nodusAllGatherList(a, withNull, 4, nodusFloat32, comms[1]));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[1], nodusAllGatherList(a, overlapping, 4, nodusFloat32, comms[1]));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[1], nodusAllGatherList(a, twice, 4, nodusFloat32, comms[1]));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[1], nodusAllGatherList(nullptr, apart, 4, nodusFloat32, comms[1]));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[1],
                    nodusAllGatherList(a, apart, 4, static_cast<nodusDataType_t>(99), comms[1]));
  // recvbufs[0] is rank 0's block: rank 1's in-place send buffer is recvbufs[1].
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[1], nodusAllGatherList(b, apart, 4, nodusFloat32, comms[1]));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[1], nodusAllGatherList(c + 1, apart, 4, nodusFloat32, comms[1]));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusAllGatherList(a, apart, 4, nodusFloat32, nullptr));
  nodusRequest_t q = reinterpret_cast<nodusRequest_t>(&q);
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[1], nodusIallGatherList(a, apart, 4, nodusFloat32, comms[1], nullptr));
  EXPECT_FAILS_WITH(nodusInvalidArgument, comms[1], nodusIallGatherList(a, nullptr, 4, nodusFloat32, comms[1], &q));
  EXPECT_EQ(q, nullptr);
  // Count 0 needs no buffers at all; then a real call, in place on rank 1.
  void* none[2] = {nullptr, nullptr};
  std::thread other([&] { EXPECT_EQ(nodusAllGatherList(nullptr, none, 0, nodusFloat32, comms[0]), nodusSuccess); });
  EXPECT_EQ(nodusAllGatherList(nullptr, none, 0, nodusFloat32, comms[1]), nodusSuccess);
  other.join();
  float r0[2][4] = {}, r1[2][4] = {};
  void* list0[2] = {r0[1], r0[0]};  // reversed: the blocks need not be in rank order in memory
  void* list1[2] = {r1[0], r1[1]};
  const float mine[4] = {1, 2, 3, 4};
  for (int i = 0; i < 4; ++i) r1[1][i] = 10.0f + static_cast<float>(i);
  std::thread zero([&] { EXPECT_EQ(nodusAllGatherList(mine, list0, 4, nodusFloat32, comms[0]), nodusSuccess); });
  EXPECT_EQ(nodusAllGatherList(r1[1], list1, 4, nodusFloat32, comms[1]), nodusSuccess);
  zero.join();
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r0[1][i], mine[i]);                        // rank 0's block, in recvbufs[0] = r0[1]
    EXPECT_EQ(r0[0][i], 10.0f + static_cast<float>(i));  // rank 1's, in recvbufs[1] = r0[0]
    EXPECT_EQ(r1[0][i], mine[i]);
    EXPECT_EQ(r1[1][i], 10.0f + static_cast<float>(i));
  }
  EXPECT_EQ(nodusCommDestroy(comms[0]), nodusSuccess);
  EXPECT_EQ(nodusCommDestroy(comms[1]), nodusSuccess);
}

TEST(ErrorsInit, BadRankCounts) {
  nodusComm_t comms[2] = {nullptr, nullptr};
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusCommInitAll(comms, 0));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusCommInitAll(comms, -1));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusCommInitAll(comms, INT_MIN));
}

// nranks < 1 and ranks outside [0, nranks), with a real id (its root gives up
// after the short timeout).
TEST(ErrorsInit, BadRankOrRankCountForInitRank) {
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "2000");
  nodusUniqueId id;
  ASSERT_EQ(nodusGetUniqueId(&id), nodusSuccess) << nodusGetLastError(nullptr);
  nodusComm_t comm = nullptr;
  const auto start = Clock::now();
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusCommInitRank(&comm, 0, id, 0));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusCommInitRank(&comm, -3, id, 0));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusCommInitRank(&comm, 2, id, 2));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusCommInitRank(&comm, 2, id, -1));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusCommInitRank(&comm, 2, id, INT_MAX));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusCommInitRank(nullptr, 2, id, 0));
  EXPECT_FAILS_WITH(nodusInvalidArgument, nullptr, nodusGetUniqueId(nullptr));
  EXPECT_LT(MsSince(start), 7000) << "argument checks should not wait for peers";
}

// An id that nodusGetUniqueId never made: an error within the timeout, no hang.
TEST(ErrorsInit, GarbageUniqueIdFailsWithinTheTimeout) {
  Watchdog watchdog("garbage unique id", seconds(120));
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "1500");
  std::mt19937_64 rng(12345);
  for (int variant = 0; variant < 4; ++variant) {
    nodusUniqueId id;
    for (size_t i = 0; i < sizeof id.internal; ++i) {
      id.internal[i] = variant == 0   ? '\0'
                       : variant == 1 ? static_cast<char>(0xFF)
                                      : static_cast<char>(rng() & 0xFF);
    }
    for (int rank : {0, 1}) {
      SCOPED_TRACE("garbage id variant " + std::to_string(variant) + ", rank " +
                   std::to_string(rank));
      nodusComm_t comm = nullptr;
      const auto start = Clock::now();
      const nodusResult_t r = nodusCommInitRank(&comm, 2, id, rank);
      const long long ms = MsSince(start);
      EXPECT_NE(r, nodusSuccess);
      if (r != nodusSuccess) {
        EXPECT_STRNE(nodusGetLastError(nullptr), "");
      } else {
        nodusCommDestroy(comm);
      }
      EXPECT_LE(ms, 1500 + 5000) << "took " << ms << " ms";
    }
  }
}

TEST(ErrorsLifetime, UseAfterDestroy) {
  nodusComm_t comm = nullptr;
  ASSERT_EQ(nodusCommInitAll(&comm, 1), nodusSuccess);
  ASSERT_EQ(nodusCommDestroy(comm), nodusSuccess);
  float a[4] = {1, 2, 3, 4}, b[4] = {};
  int x = 0;
  nodusRequest_t q = nullptr;
  // The handle now names no communicator: the explanation is on this thread.
  EXPECT_FAILS_WITH(nodusInvalidUsage, nullptr,
                    nodusAllReduce(a, b, 4, nodusFloat32, nodusSum, comm));
  EXPECT_FAILS_WITH(nodusInvalidUsage, nullptr,
                    nodusIallReduce(a, b, 4, nodusFloat32, nodusSum, comm, &q));
  EXPECT_FAILS_WITH(nodusInvalidUsage, nullptr, nodusBroadcast(a, b, 4, nodusFloat32, 0, comm));
  EXPECT_FAILS_WITH(nodusInvalidUsage, nullptr, nodusBarrier(comm));
  EXPECT_FAILS_WITH(nodusInvalidUsage, nullptr, nodusSend(a, 4, nodusFloat32, 0, comm));
  EXPECT_FAILS_WITH(nodusInvalidUsage, nullptr, nodusCommCount(comm, &x));
  EXPECT_FAILS_WITH(nodusInvalidUsage, nullptr, nodusCommUserRank(comm, &x));
  EXPECT_FAILS_WITH(nodusInvalidUsage, nullptr, nodusCommAbort(comm));
  EXPECT_FAILS_WITH(nodusInvalidUsage, nullptr, nodusCommDestroy(comm));  // twice
  // Several destroyed communicators of a multi-rank set.
  nodusComm_t comms[3] = {};
  ASSERT_EQ(nodusCommInitAll(comms, 3), nodusSuccess);
  for (nodusComm_t c : comms) EXPECT_EQ(nodusCommDestroy(c), nodusSuccess);
  for (nodusComm_t c : comms)
    EXPECT_FAILS_WITH(nodusInvalidUsage, nullptr,
                      nodusAllReduce(a, b, 4, nodusFloat32, nodusSum, c));
}

TEST(ErrorsGroups, GroupEndWithoutStart) {
  EXPECT_FAILS_WITH(nodusInvalidUsage, nullptr, nodusGroupEnd());
  // Balanced groups still work afterwards.
  EXPECT_EQ(nodusGroupStart(), nodusSuccess);
  EXPECT_EQ(nodusGroupEnd(), nodusSuccess);
}

// ---- Peers that fail -------------------------------------------------------------

// One rank of a loopback communicator never joins the collective: the others
// get nodusTimeout (a rank may instead see nodusRemoteError from a peer that
// timed out first) within NODUS_TIMEOUT_MS plus slack.
TEST(ErrorsPeers, AbsentRankTimesOut) {
  Watchdog watchdog("timeout", seconds(120));
  constexpr int kTimeoutMs = 1500;
  ScopedEnv timeout("NODUS_TIMEOUT_MS", std::to_string(kTimeoutMs));
  for (int n : {2, 3}) {
    std::vector<nodusComm_t> comms(static_cast<size_t>(n), nullptr);
    ASSERT_EQ(nodusCommInitAll(comms.data(), n), nodusSuccess);
    std::vector<nodusResult_t> results(static_cast<size_t>(n), nodusSuccess);
    std::vector<long long> elapsed(static_cast<size_t>(n), 0);
    std::vector<std::thread> threads;
    for (int r = 0; r + 1 < n; ++r) {  // rank n-1 never calls
      threads.emplace_back([&, r] {
        std::vector<float> in(100000, 1.0f), out(100000);
        const auto start = Clock::now();
        results[static_cast<size_t>(r)] =
            nodusAllReduce(in.data(), out.data(), in.size(), nodusFloat32, nodusSum,
                           comms[static_cast<size_t>(r)]);
        elapsed[static_cast<size_t>(r)] = MsSince(start);
      });
    }
    for (auto& t : threads) t.join();
    bool sawTimeout = false;
    for (int r = 0; r + 1 < n; ++r) {
      const nodusResult_t res = results[static_cast<size_t>(r)];
      SCOPED_TRACE(std::to_string(n) + " ranks, rank " + std::to_string(r));
      EXPECT_TRUE(res == nodusTimeout || res == nodusRemoteError) << ResultName(res);
      sawTimeout = sawTimeout || res == nodusTimeout;
      EXPECT_STRNE(nodusGetLastError(comms[static_cast<size_t>(r)]), "");
      EXPECT_LE(elapsed[static_cast<size_t>(r)], kTimeoutMs + 5000);
      EXPECT_GE(elapsed[static_cast<size_t>(r)], kTimeoutMs / 2)
          << "gave up long before the timeout";
    }
    EXPECT_TRUE(sawTimeout) << "no rank reported nodusTimeout";
    for (nodusComm_t c : comms) EXPECT_EQ(nodusCommDestroy(c), nodusSuccess);
  }
}

// nodusCommAbort from another thread: the rank blocked in AllReduce returns
// nodusAborted, queued requests too; aborting the absent rank's communicator
// releases the ranks blocked on it with nodusRemoteError. The timeout is long,
// so only the aborts can explain quick returns.
TEST(ErrorsPeers, AbortFromAnotherThread) {
  Watchdog watchdog("abort", seconds(120));
  constexpr int kTimeoutMs = 30000;
  ScopedEnv timeout("NODUS_TIMEOUT_MS", std::to_string(kTimeoutMs));
  nodusComm_t comms[3] = {};
  ASSERT_EQ(nodusCommInitAll(comms, 3), nodusSuccess);
  nodusResult_t results[2] = {nodusSuccess, nodusSuccess};
  std::atomic<long long> returnedAt[2] = {-1, -1};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {  // rank 2 never calls
    threads.emplace_back([&, r] {
      std::vector<float> in(1 << 20, 1.0f), out(1 << 20);
      results[r] =
          nodusAllReduce(in.data(), out.data(), in.size(), nodusFloat32, nodusSum, comms[r]);
      returnedAt[r] = MsSince(start);
    });
  }
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(nodusCommAbort(comms[0]), nodusSuccess);
  const long long abortedAt = MsSince(start);
  // Rank 0 returns nodusAborted promptly.
  while (returnedAt[0] < 0 && MsSince(start) < abortedAt + 5000)
    std::this_thread::sleep_for(milliseconds(5));
  EXPECT_GE(returnedAt[0].load(), 0) << "rank 0 still blocked 5 s after nodusCommAbort";
  // Then release rank 1 (blocked on rank 0 and/or the absent rank 2).
  EXPECT_EQ(nodusCommAbort(comms[2]), nodusSuccess);
  const long long secondAbortAt = MsSince(start);
  for (auto& t : threads) t.join();
  EXPECT_EQ(results[0], nodusAborted) << ResultName(results[0]);
  EXPECT_STRNE(nodusGetLastError(comms[0]), "");
  EXPECT_EQ(results[1], nodusRemoteError) << ResultName(results[1]);
  EXPECT_LE(returnedAt[1].load(), secondAbortAt + 5000)
      << "rank 1 was released by the timeout, not the aborts";
  for (nodusComm_t c : comms) EXPECT_EQ(nodusCommDestroy(c), nodusSuccess);
}

TEST(ErrorsPeers, AbortEndsQueuedRequests) {
  Watchdog watchdog("abort queued", seconds(120));
  ScopedEnv timeout("NODUS_TIMEOUT_MS", "30000");
  nodusComm_t comms[2] = {};
  ASSERT_EQ(nodusCommInitAll(comms, 2), nodusSuccess);
  std::vector<std::vector<float>> bufs(4, std::vector<float>(1 << 16, 1.0f));
  nodusRequest_t q[4] = {};
  for (int i = 0; i < 4; ++i) {  // rank 1 never joins
    ASSERT_EQ(nodusIallReduce(
                  bufs[static_cast<size_t>(i)].data(), bufs[static_cast<size_t>(i)].data(),
                  bufs[static_cast<size_t>(i)].size(), nodusFloat32, nodusSum, comms[0], &q[i]),
              nodusSuccess);
  }
  std::this_thread::sleep_for(milliseconds(100));
  const auto start = Clock::now();
  EXPECT_EQ(nodusCommAbort(comms[0]), nodusSuccess);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(nodusWait(q[i]), nodusAborted) << "request " << i;
    EXPECT_EQ(nodusRequestFree(q[i]), nodusSuccess);
  }
  EXPECT_LE(MsSince(start), 5000);
  EXPECT_EQ(nodusCommDestroy(comms[0]), nodusSuccess);
  EXPECT_EQ(nodusCommDestroy(comms[1]), nodusSuccess);
}

// Aborting the communicator of a rank that is not in any call releases the
// ranks blocked on it with nodusRemoteError (peers may also see a timeout,
// within NODUS_TIMEOUT_MS).
TEST(ErrorsPeers, AbortOfAnIdleRankReleasesItsPeers) {
  Watchdog watchdog("abort idle", seconds(120));
  constexpr int kTimeoutMs = 10000;
  ScopedEnv timeout("NODUS_TIMEOUT_MS", std::to_string(kTimeoutMs));
  nodusComm_t comms[3] = {};
  ASSERT_EQ(nodusCommInitAll(comms, 3), nodusSuccess);
  nodusResult_t results[2] = {nodusSuccess, nodusSuccess};
  long long elapsed[2] = {0, 0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      std::vector<double> in(100000, 2.0), out(100000);
      results[r] =
          nodusAllReduce(in.data(), out.data(), in.size(), nodusFloat64, nodusMax, comms[r]);
      elapsed[r] = MsSince(start);
    });
  }
  std::this_thread::sleep_for(milliseconds(300));
  EXPECT_EQ(nodusCommAbort(comms[2]), nodusSuccess);
  for (auto& t : threads) t.join();
  bool sawRemote = false;
  for (int r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_TRUE(results[r] == nodusRemoteError || results[r] == nodusTimeout)
        << ResultName(results[r]);
    EXPECT_LE(elapsed[r], kTimeoutMs + 5000);
    if (results[r] == nodusRemoteError) {
      sawRemote = true;
      EXPECT_LE(elapsed[r], 300 + 5000) << "nodusRemoteError, but only long after the abort";
    }
  }
  EXPECT_TRUE(sawRemote) << "no peer of the aborted rank saw nodusRemoteError";
  for (nodusComm_t c : comms) EXPECT_EQ(nodusCommDestroy(c), nodusSuccess);
}

// ---- Forked ranks that die or stay away -----------------------------------------------

class ErrorsShm : public ::testing::Test {
 protected:
  void SetUp() override { before_ = NodusShmEntries(); }
  void TearDown() override {
    const std::string leaks = NodusShmLeaks(before_, milliseconds(3000));
    EXPECT_TRUE(leaks.empty()) << leaks;
  }
  std::set<std::string> before_;
};

constexpr int kShmTimeoutMs = 3000;
constexpr int kVictim = 2;
constexpr size_t kResult = 0, kElapsedMs = 1, kDone = 2;

// Three processes over shm; after a barrier, ranks 0 and 1 run a large
// AllReduce while rank 2 either dies (SIGKILL) inside the same AllReduce or
// never calls it. Survivors must return nodusRemoteError or nodusTimeout within
// NODUS_TIMEOUT_MS + slack, and destroy their communicator without hanging.
void RunVictimScenario(bool kill, const char* transport = "shm") {
  ScopedEnv timeout("NODUS_TIMEOUT_MS", std::to_string(kShmTimeoutMs));
  SharedUniqueId sharedId;
  ForkedRanks ranks(3);
  ForkedRanks* shared = &ranks;
  const bool started = ranks.Start([&](int rank, RankReport& report) {
    setenv("NODUS_TRANSPORT", transport, 1);
    setenv("NODUS_SOCKET_IFNAME", "lo", 1);
    nodusUniqueId id;
    if (rank == 0) sharedId.Make();
    if (!sharedId.Get(&id, seconds(30))) {
      report.Fail("no unique id from rank 0");
      return 2;
    }
    nodusComm_t comm = nullptr;
    nodusResult_t r = nodusCommInitRank(&comm, 3, id, rank);
    if (r != nodusSuccess) {
      report.Fail(std::string("nodusCommInitRank returned ") + ResultName(r) + ": " +
                  nodusGetLastError(nullptr));
      return 2;
    }
    r = nodusBarrier(comm);
    if (r != nodusSuccess) {
      report.Fail(std::string("Barrier returned ") + ResultName(r));
      return 3;
    }
    const size_t count = size_t{4} << 20;
    std::vector<float> in(count, 1.0f), out(count);
    if (rank == kVictim) {
      if (kill) {
        nodusRequest_t q = nullptr;
        nodusIallReduce(in.data(), out.data(), count, nodusFloat32, nodusSum, comm, &q);
        std::this_thread::sleep_for(milliseconds(2));
        raise(SIGKILL);
      }
      // Absent: wait (bounded) until both survivors are done, then leave.
      const auto start = Clock::now();
      while (MsSince(start) < 60000 &&
             !(__atomic_load_n(&shared->report(0).values[kDone], __ATOMIC_SEQ_CST) &&
               __atomic_load_n(&shared->report(1).values[kDone], __ATOMIC_SEQ_CST)))
        std::this_thread::sleep_for(milliseconds(10));
      nodusCommDestroy(comm);
      return 0;
    }
    const auto start = Clock::now();
    r = nodusAllReduce(in.data(), out.data(), count, nodusFloat32, nodusSum, comm);
    const long long ms = MsSince(start);
    report.values[kResult] = r;
    report.values[kElapsedMs] = ms;
    if (r != nodusRemoteError && r != nodusTimeout)
      report.Fail(std::string("AllReduce with a ") + (kill ? "killed" : "absent") +
                  " peer returned " + ResultName(r) +
                  " (expected nodusRemoteError or nodusTimeout)");
    if (r != nodusSuccess && nodusGetLastError(comm)[0] == '\0')
      report.Fail("no nodusGetLastError text");
    if (ms > kShmTimeoutMs + 5000)
      report.Fail("AllReduce returned only after " + std::to_string(ms) + " ms (timeout " +
                  std::to_string(kShmTimeoutMs) + " ms)");
    const auto destroyStart = Clock::now();
    const nodusResult_t d = nodusCommDestroy(comm);
    if (d != nodusSuccess) report.Fail(std::string("nodusCommDestroy returned ") + ResultName(d));
    if (MsSince(destroyStart) > kShmTimeoutMs + 5000) report.Fail("nodusCommDestroy took too long");
    __atomic_store_n(&report.values[kDone], 1, __ATOMIC_SEQ_CST);
    return report.failures ? 1 : 0;
  });
  // Started after the fork: a thread still starting while the process forks
  // can leave its children a held lock (GCC 12 AddressSanitizer).
  Watchdog watchdog(kill ? "killed rank" : "absent rank", seconds(120));
  ASSERT_TRUE(started);
  ranks.Wait(seconds(90));
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(ranks.exitStatus(r), 0) << ranks.Describe(r);
    std::fprintf(stderr, "survivor %d: %s after %lld ms\n", r,
                 ResultName(static_cast<nodusResult_t>(ranks.report(r).values[kResult])),
                 static_cast<long long>(ranks.report(r).values[kElapsedMs]));
  }
  if (kill)
    EXPECT_EQ(ranks.termSignal(kVictim), SIGKILL) << ranks.Describe(kVictim);
  else
    EXPECT_EQ(ranks.exitStatus(kVictim), 0) << ranks.Describe(kVictim);
}

TEST_F(ErrorsShm, RankKilledMidCollective) { RunVictimScenario(true); }
TEST_F(ErrorsShm, RankThatNeverCallsTheCollective) { RunVictimScenario(false); }
// The same over tcp between processes of this machine: a killed rank's
// sockets close (the survivors see it at once), an absent one times out.
TEST_F(ErrorsShm, TcpRankKilledMidCollective) { RunVictimScenario(true, "tcp"); }
TEST_F(ErrorsShm, TcpRankThatNeverCallsTheCollective) { RunVictimScenario(false, "tcp"); }

// A rank killed before it even joins: the others' nodusCommInitRank fails
// within the timeout instead of waiting forever.
TEST_F(ErrorsShm, RankKilledBeforeInit) {
  ScopedEnv timeout("NODUS_TIMEOUT_MS", std::to_string(kShmTimeoutMs));
  SharedUniqueId sharedId;
  ForkedRanks ranks(3);
  ASSERT_TRUE(ranks.Start([&](int rank, RankReport& report) {
    if (rank == kVictim) raise(SIGKILL);
    setenv("NODUS_TRANSPORT", "shm", 1);
    nodusUniqueId id;
    if (rank == 0) sharedId.Make();
    if (!sharedId.Get(&id, seconds(30))) {
      report.Fail("no unique id from rank 0");
      return 2;
    }
    nodusComm_t comm = nullptr;
    const auto start = Clock::now();
    const nodusResult_t r = nodusCommInitRank(&comm, 3, id, rank);
    const long long ms = MsSince(start);
    if (r == nodusSuccess) {
      report.Fail("nodusCommInitRank succeeded without rank 2");
      nodusCommDestroy(comm);
    }
    if (ms > kShmTimeoutMs + 5000)
      report.Fail("nodusCommInitRank failed only after " + std::to_string(ms) + " ms");
    return report.failures ? 1 : 0;
  }));
  Watchdog watchdog("killed before init", seconds(120));  // after the fork, as above
  ranks.Wait(seconds(90));
  for (int r = 0; r < 2; ++r) EXPECT_EQ(ranks.exitStatus(r), 0) << ranks.Describe(r);
}

}  // namespace
}  // namespace nodus_test
