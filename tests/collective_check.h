// The shared multi-rank test harness: one collective call on one rank, checked
// against a reference that is computed independently of nodus.
//
// Every rank of a test builds the same CheckCase (same order on every rank) and
// runs it through CollectiveCheck (or RunCollectiveCheck). The harness
//  - fills this rank's input deterministically from (case seed, rank, index), so
//    any rank can regenerate any other rank's input without communicating;
//  - computes the expected output with plain loops over every rank's generated
//    input (its own fp16/bf16 conversions, modular integer arithmetic);
//  - issues the call through the public API, blocking or non-blocking, with the
//    NCCL in-place definitions of nodus.h;
//  - checks the output, that inputs that must stay untouched did, and that the
//    guard bytes around every buffer are intact;
//  - hashes the output so that callers can check that every rank holds the
//    same result where the collective promises that (CompareAcrossRanks).
//
// Inputs are chosen so that every result is exact whatever order nodus reduces
// in: small integers for floating-point sums, products of 1, 2 and -1 (a bounded
// number of 2s) for floating-point products, and integer arithmetic that wraps
// modulo 2^bits (the same in every order). Only nodusAvg on floating-point types
// needs a tolerance; see CollectiveCheck::Verify.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "nodus/nodus.h"

namespace nodus_test {

enum class Coll { kAllReduce, kAllGather, kReduceScatter, kBroadcast, kReduce };

inline constexpr Coll kAllColls[] = {Coll::kAllReduce, Coll::kAllGather, Coll::kReduceScatter,
                                     Coll::kBroadcast, Coll::kReduce};
inline constexpr nodusDataType_t kAllTypes[] = {
    nodusInt8,   nodusUint8,   nodusInt32,    nodusUint32,  nodusInt64,
    nodusUint64, nodusFloat16, nodusBfloat16, nodusFloat32, nodusFloat64};
inline constexpr nodusRedOp_t kAllOps[] = {nodusSum, nodusProd, nodusMin, nodusMax, nodusAvg};

const char* CollName(Coll coll);
const char* TypeName(nodusDataType_t type);
const char* OpName(nodusRedOp_t op);
const char* ResultName(nodusResult_t result);
size_t TypeSize(nodusDataType_t type);
bool CollUsesOp(Coll coll);
bool CollUsesRoot(Coll coll);
// Whether every rank's output must be identical (AllReduce, AllGather, Broadcast).
bool CollOutputsAgree(Coll coll);

struct CheckCase {
  Coll coll = Coll::kAllReduce;
  nodusDataType_t type = nodusFloat32;
  nodusRedOp_t op = nodusSum;  // ignored by AllGather and Broadcast
  int root = 0;                // Broadcast and Reduce only
  // Elements per rank as nodus.h counts them: AllGather's sendcount,
  // ReduceScatter's recvcount, everyone else's count.
  size_t count = 0;
  bool inPlace = false;
  bool nonBlocking = false;  // the nodusI* form, then nodusWait
  uint64_t seed = 1;         // inputs derive from (seed, rank, index)
  // AllReduce only: compare just this rank's 1/nranks slice of the output with
  // the reference (cuts the reference's cost by nranks). The rest of the output
  // is then only checked by CompareAcrossRanks, which the caller must run.
  bool checkSliceOnly = false;
  // AllGather only: nodusAllGatherList, every rank's block in a buffer of its
  // own (allocated one by one, last rank first, so they are not adjacent).
  bool listOutput = false;
};

// "AllReduce float16 sum count=7 in-place non-blocking" (root when it matters).
std::string Describe(const CheckCase& c);

struct CheckOutcome {
  nodusResult_t result = nodusSuccess;  // what the call (or its request) returned
  std::string failure;                  // empty when everything was as expected
  bool comparable = false;              // the output must equal every other rank's
  uint64_t outputHash = 0;              // hash of this rank's output when comparable
  bool ok() const { return failure.empty(); }
};

// One collective call on one rank: owns the buffers (with guard bytes around
// them), knows the expected result.
class CollectiveCheck {
 public:
  // Allocates and fills this rank's buffers for `c` on a communicator of
  // `nranks` ranks.
  CollectiveCheck(const CheckCase& c, int nranks, int rank);
  CollectiveCheck(const CollectiveCheck&) = delete;
  CollectiveCheck& operator=(const CollectiveCheck&) = delete;
  CollectiveCheck(CollectiveCheck&&) = default;
  CollectiveCheck& operator=(CollectiveCheck&&) = default;

  // Makes the call on `comm`: the blocking form when request == nullptr (inside
  // a group it returns at once), otherwise the non-blocking one.
  nodusResult_t Issue(nodusComm_t comm, nodusRequest_t* request);
  // Checks result, output, untouched inputs and guards once the call is
  // complete. `result` is what the call (or nodusWait/nodusTest) returned.
  CheckOutcome Verify(nodusResult_t result) const;

  const CheckCase& spec() const { return case_; }

  // A buffer with guard bytes before and after the payload.
  class Region {
   public:
    Region() = default;
    explicit Region(size_t bytes);
    unsigned char* data() { return bytes_ == npos ? nullptr : base() + kGuardBytes; }
    const unsigned char* data() const { return bytes_ == npos ? nullptr : base() + kGuardBytes; }
    size_t bytes() const { return bytes_ == npos ? 0 : bytes_; }
    bool allocated() const { return bytes_ != npos; }
    // "" or where a guard byte was overwritten.
    std::string CheckGuards(const char* what) const;

    static constexpr size_t kGuardBytes = 256;

   private:
    static constexpr size_t npos = ~size_t{0};
    unsigned char* base() { return reinterpret_cast<unsigned char*>(storage_.data()); }
    const unsigned char* base() const {
      return reinterpret_cast<const unsigned char*>(storage_.data());
    }
    std::vector<uint64_t> storage_;  // 8-byte aligned, like any malloc'd buffer
    size_t bytes_ = npos;
  };

 private:
  CheckCase case_;
  int nranks_ = 1;
  int rank_ = 0;
  nodusComm_t comm_ = nullptr;  // the last Issue's communicator, for its error text
  Region send_;                 // out-of-place send buffer (unallocated in place)
  Region recv_;                 // receive buffer, or the single in-place buffer
  std::vector<Region> parts_;   // listOutput: one receive buffer per rank
  std::vector<void*> partPtrs_;
  const void* sendPtr_ = nullptr;
  void* recvPtr_ = nullptr;
};

// Issue + (for non-blocking: nodusWait, nodusRequestFree) + Verify on `comm`.
// Rank and rank count are read from the communicator.
CheckOutcome RunCollectiveCheck(nodusComm_t comm, const CheckCase& c);

// For gtest: EXPECT_TRUE(Passed(outcome)).
::testing::AssertionResult Passed(const CheckOutcome& outcome);

// Given every rank's outcome of one case (index = rank), "" when all ranks
// whose output must agree hold the same hash, else a message naming them.
std::string CompareAcrossRanks(const CheckCase& c, const std::vector<CheckOutcome>& byRank);
std::string CompareAcrossRanks(const CheckCase& c, const std::vector<uint64_t>& hashByRank);

// The counts every multi-rank test runs: {0, 1, 7, nranks-1, large}, large
// adjusted up until nranks does not divide it; duplicates removed.
std::vector<size_t> DefaultCounts(int nranks, size_t large = 100003);

struct MatrixOptions {
  std::vector<size_t> counts;          // empty: DefaultCounts(nranks)
  std::vector<nodusDataType_t> types;  // empty: all ten
  std::vector<Coll> colls;             // empty: all five
  // false: for counts >= kLargeCount only one op per (collective, type),
  // cycling so that every op still meets large counts.
  bool allOpsAtLargeCounts = true;
  // AllReduce at counts >= kLargeCount: CheckCase::checkSliceOnly (the test
  // then must compare outputs across ranks).
  bool sliceChecksAtLargeCounts = true;
  // AllGather/ReduceScatter at counts >= kLargeCount: use count/nranks (made
  // odd and not divisible by nranks) so that their nranks*count buffers stay as
  // large as everyone else's buffers rather than nranks times larger.
  bool scaleLargeBlockCounts = true;
  // Half of the AllGather cases (alternating over types and counts) use
  // nodusAllGatherList (CheckCase::listOutput).
  bool listAllGather = true;
  static constexpr size_t kLargeCount = 4096;
  uint64_t seed = 0x6e6f647573ull;
};
// Every (collective, type, op, count, placement) case, each with its own seed;
// roots of Broadcast/Reduce rotate over all ranks and blocking/non-blocking
// alternate so that both forms meet every collective, type and placement.
std::vector<CheckCase> MakeMatrix(int nranks, const MatrixOptions& options = {});

// Conversions written for the tests (round to nearest even).
uint16_t DoubleToHalf(double v);
double HalfToDouble(uint16_t bits);
uint16_t DoubleToBfloat16(double v);
double Bfloat16ToDouble(uint16_t bits);

// Ends the process (exit status 124, after a message on stderr) if it is not
// destroyed within `limit`: a hung collective fails its test instead of
// hanging the test binary until the test driver's own timeout.
class Watchdog {
 public:
  Watchdog(std::string what, std::chrono::milliseconds limit);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// Runs `cases` in order on this rank. Each failure goes to `fail`; hashes (if
// not null) receives every case's output hash, for CompareAcrossRanks. After a
// call returns an error the rank aborts its communicator (so that peers fail
// instead of waiting for it) and stops. Returns how many cases ran.
size_t RunCasesOnRank(nodusComm_t comm, const std::vector<CheckCase>& cases,
                      const std::function<void(const std::string&)>& fail,
                      std::vector<uint64_t>* hashes);

// ---- Per-rank scenarios ----------------------------------------------------------
// Every rank of one communicator calls the same scenario (threads, forked
// processes or MPI ranks alike); problems are reported through `fail`.

using FailFn = std::function<void(const std::string&)>;

// A dozen non-blocking collectives (mostly AllReduce) outstanding at once on
// one communicator: polled latest-first, a later request done while an earlier
// one is not is a failure (completion in issue order); all results checked.
void IssueOrderScenario(nodusComm_t comm, int rank, int nranks, const FailFn& fail);
// Waiting for the last of several requests leaves the earlier ones complete.
void WaitLastScenario(nodusComm_t comm, int rank, int nranks, const FailFn& fail);
// Issue a non-blocking `coll` of 4 MiB, sleep 50 ms without calling nodus,
// then nodusTest must report it done: requests progress without polling. (A
// miss gets a few more looks, backing off to 31 s in all, still without
// polling in between, so that a loaded machine does not fail the test; each
// miss is noted on stderr.)
void BackgroundProgressScenario(nodusComm_t comm, int rank, int nranks, Coll coll,
                                const FailFn& fail);
// Nobody leaves an Ibarrier before everybody entered it (`arrived`: a counter
// shared by the ranks); then pairs (0,1), (2,3)... exchange with Isend/Irecv.
void IbarrierIsendIrecvScenario(nodusComm_t comm, int rank, int nranks, int* arrived,
                                const FailFn& fail);
// Inside one group every rank sends `count` floats to rank+1 and receives from
// rank-1 (deadlocks unless sends and receives progress together).
void GroupRingScenario(nodusComm_t comm, int rank, int nranks, size_t count, const FailFn& fail);
// Non-blocking collectives issued inside a group are complete at nodusGroupEnd.
void GroupRequestsScenario(nodusComm_t comm, int rank, int nranks, const FailFn& fail);
void GroupScratchScenario(nodusComm_t comm, int rank, int nranks, const FailFn& fail);
// Ten collectives of all kinds in nested groups, launched by the outer end.
void NestedGroupsScenario(nodusComm_t comm, int rank, int nranks, const FailFn& fail);
// Every ordered pair exchanges two messages with blocking Send/Recv in one
// global order: they match in issue order, every type arrives bit-exact, count
// 0 works and nothing is written past the count.
void SendRecvPairsScenario(nodusComm_t comm, int rank, int nranks, const FailFn& fail);
inline constexpr int kBarrierRounds = 6;
// kBarrierRounds barriers, a different rank late to each: nobody may leave one
// before everybody entered it. `arrived` points to kBarrierRounds counters,
// zero at the start, shared by the ranks (threads or processes).
void BarrierScenario(nodusComm_t comm, int rank, int nranks, int* arrived, const FailFn& fail);

// Values every rank of a ring/pair test can regenerate.
float RingValue(int rank, size_t index);

// ---- Ranks as forked processes ---------------------------------------------------

// What a forked rank tells its parent: lives in memory shared with the parent.
struct RankReport {
  static constexpr size_t kTextBytes = 6000;
  static constexpr size_t kMaxHashes = 4096;
  static constexpr size_t kValues = 16;

  // Appends a line to the report (truncated when full) and prints it on stderr.
  void Fail(const std::string& message);
  void AddHash(uint64_t hash) {
    if (numHashes < kMaxHashes) hashes[numHashes] = hash;
    ++numHashes;
  }

  size_t textUsed;
  size_t failures;
  char text[kTextBytes];
  size_t numHashes;
  uint64_t hashes[kMaxHashes];
  int64_t values[kValues];  // free-form numbers (timings, result codes)
};

// Forks one child process per rank. Children die with the parent
// (PR_SET_PDEATHSIG); the destructor kills and reaps any child still running,
// so no test leaves stray processes behind.
// A unique id made by one forked child and read by the others, through memory
// shared across fork. Forked tests make ids this way rather than in the parent:
// nodusGetUniqueId starts the bootstrap root thread, and a process that forks
// while another of its threads is starting (or allocating) can hand its
// children a held lock (seen with GCC 12's AddressSanitizer: the child hangs
// when it next creates a thread). For the same reason, forked tests start no
// thread of their own (a Watchdog) until the children are forked.
class SharedUniqueId {
 public:
  SharedUniqueId();
  ~SharedUniqueId();
  SharedUniqueId(const SharedUniqueId&) = delete;
  SharedUniqueId& operator=(const SharedUniqueId&) = delete;
  // In the child that makes the id: nodusGetUniqueId, then publish it (or the failure).
  nodusResult_t Make();
  // In the others: waits up to `limit` for the id; false if none came.
  bool Get(nodusUniqueId* id, std::chrono::milliseconds limit) const;

 private:
  struct Shared;
  Shared* shared_;
};

class ForkedRanks {
 public:
  explicit ForkedRanks(int nranks);
  ~ForkedRanks();
  ForkedRanks(const ForkedRanks&) = delete;
  ForkedRanks& operator=(const ForkedRanks&) = delete;

  // Forks the children; child `rank` runs body(rank, report) and _exits with its
  // return value (stdout/stderr flushed first). False if a fork failed (the
  // children already started are killed).
  bool Start(const std::function<int(int rank, RankReport& report)>& body);
  // Waits until every child exited or `limit` passed; stragglers get SIGKILL.
  void Wait(std::chrono::milliseconds limit);

  int size() const { return nranks_; }
  pid_t pid(int rank) const { return pids_[static_cast<size_t>(rank)]; }
  RankReport& report(int rank) { return reports_[rank]; }
  // After Wait: how each child ended.
  bool exitedNormally(int rank) const;
  int exitStatus(int rank) const;  // -1 unless it exited normally
  int termSignal(int rank) const;  // 0 unless a signal ended it
  bool timedOut(int rank) const { return timedOut_[static_cast<size_t>(rank)]; }
  // "" when every child exited with status 0, else one paragraph per child that
  // did not, with what it reported.
  std::string Failures() const;
  // How rank `rank` ended, in words, with its report's text.
  std::string Describe(int rank) const;

 private:
  void KillAll();
  int nranks_;
  RankReport* reports_ = nullptr;
  size_t mappedBytes_ = 0;
  std::vector<pid_t> pids_;
  std::vector<int> status_;
  std::vector<bool> reaped_;
  std::vector<bool> timedOut_;
};

// ---- Communicators of forked ranks ----------------------------------------------

// Runs in each child before it joins (environment, namespaces); false: the
// child reports why and exits 2.
using ForkedSetup = std::function<bool(int rank, RankReport& report)>;
using ForkedBody = std::function<void(nodusComm_t comm, int rank, int nranks, RankReport& report)>;

// Forks `nranks` children that get a unique id (SharedUniqueId), join with
// nodusCommInitRank, run `body` and destroy their communicator. Waits up to
// `limit`; a child that did not exit 0 fails the test. Returns the children
// (reaped) for a closer look at their reports.
std::unique_ptr<ForkedRanks> RunForkedComms(int nranks, std::chrono::milliseconds limit, const ForkedSetup& setup,
                                            const ForkedBody& body);
// A fail function for a forked rank: reports the first 20 failures, counts the rest.
FailFn ReportTo(RankReport& report);
// Runs `cases` on every forked rank; every case must run everywhere and
// outputs that must agree are compared case by case.
void RunForkedMatrix(int nranks, std::chrono::milliseconds limit, const std::vector<CheckCase>& cases,
                     const ForkedSetup& setup);

// ---- Shared-memory hygiene -------------------------------------------------------

// The entries of /dev/shm whose names start with "nodus".
std::set<std::string> NodusShmEntries();
// "" when, within `grace`, /dev/shm holds no "nodus" entry besides those in
// `before` (entries other processes on this machine had then); else names them.
std::string NodusShmLeaks(const std::set<std::string>& before, std::chrono::milliseconds grace);

// Sets an environment variable for its lifetime, then restores the old value.
// (Communicators read NODUS_* variables when they are created.)
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  bool hadValue_ = false;
  std::string oldValue_;
};

// A 64-bit hash of a byte range (FNV-1a over 8-byte words, then the tail).
uint64_t HashBytes(const void* data, size_t bytes);

}  // namespace nodus_test
