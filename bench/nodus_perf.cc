// nodus-perf: the collective benchmark of nodus, in nccl-tests' language.
//
// For each collective, data type, reduction and size it times the out-of-place
// and the in-place form (n iterations after w warmups, a barrier before, the
// slowest rank's average per iteration), then, with -c 1, runs the call once
// more on fresh inputs and compares every output element with a value this file
// computes on its own. Only the public API (nodus.h, nodus_mpi.h) is used, so
// the benchmark is also an end-to-end test of what users get.
//
// Launch:  mpirun -np N nodus-perf ...   one rank per process (needs MPI)
//          nodus-perf -t N ...           N ranks as threads of one process
//          nodus-perf --rank R --nranks N --id-file PATH ...
//                                        rank R of N processes started by hand
//                                        (the unique id goes through PATH)
//
// Sizes are total bytes as in nccl-tests: AllReduce/Broadcast/Reduce move
// `size` bytes per rank, AllGather's size is what each rank receives
// (nranks * sendcount), ReduceScatter's what each rank sends (nranks * recvcount).
// busbw = algbw * factor, factor 2(p-1)/p for AllReduce, (p-1)/p for AllGather
// and ReduceScatter, 1 for Broadcast and Reduce.

#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <bit>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/size.h"
#include "nodus/nodus.h"

#if defined(NODUS_PERF_WITH_MPI) && NODUS_PERF_WITH_MPI
#define NODUS_PERF_MPI 1
// Only MPI's C interface is used; its deprecated C++ bindings do not build warning-free.
#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include "nodus/nodus_mpi.h"
#else
#define NODUS_PERF_MPI 0
#endif

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- Fatal errors --------------------------------------------------------------

#if NODUS_PERF_MPI
// Set once in main() before any rank runs; read-only afterwards.
bool gAbortWithMpi = false;
#endif

[[noreturn]] void dieNow() {
  std::fflush(stdout);
  std::fflush(stderr);
#if NODUS_PERF_MPI
  if (gAbortWithMpi) MPI_Abort(MPI_COMM_WORLD, 1);
#endif
  // Threads of other ranks may be blocked inside nodus: leave without running
  // destructors that would wait for them.
  std::_Exit(1);
}

[[noreturn, gnu::format(printf, 2, 3)]] void fatal(int rank, const char* fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::fprintf(stderr, "nodus-perf: rank %d: %s\n", rank, msg);
  dieNow();
}

void checkNodus(nodusResult_t result, const char* what, nodusComm_t comm, int rank) {
  if (result == nodusSuccess) return;
  const char* detail = nodusGetLastError(comm);
  fatal(rank, "%s failed: %s%s%s", what, nodusGetErrorString(result), detail[0] ? ": " : "",
        detail);
}

// ---- Launcher environment ------------------------------------------------------

long envLong(const char* name, long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  return (end != nullptr && *end == '\0') ? x : fallback;
}

// Number of processes of the MPI job this process belongs to (1 when not
// launched by mpirun/mpiexec/srun).
long launcherSize() {
  long n = 1;
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MPI_LOCALNRANKS"})
    n = std::max(n, envLong(name, 1));
  return n;
}

// This process's rank in that job (0 when not launched by a launcher).
long launcherRank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"}) {
    long r = envLong(name, -1);
    if (r >= 0) return r;
  }
  return 0;
}

// ---- Collectives, types and operations -----------------------------------------

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce };
constexpr Coll kAllColls[] = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter,
                              Coll::Broadcast, Coll::Reduce};

const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "allreduce";
    case Coll::AllGather: return "allgather";
    case Coll::ReduceScatter: return "reducescatter";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
  }
  return "?";
}

bool collHasOp(Coll c) {
  return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce;
}
bool collHasRoot(Coll c) { return c == Coll::Broadcast || c == Coll::Reduce; }
// The per-rank count is the size divided among the ranks.
bool collSplitsSize(Coll c) { return c == Coll::AllGather || c == Coll::ReduceScatter; }

double busFactor(Coll c, int nranks) {
  const double p = nranks;
  switch (c) {
    case Coll::AllReduce: return 2.0 * (p - 1) / p;
    case Coll::AllGather:
    case Coll::ReduceScatter: return (p - 1) / p;
    case Coll::Broadcast:
    case Coll::Reduce: return 1.0;
  }
  return 1.0;
}

struct TypeInfo {
  nodusDataType_t type;
  const char* name;  // as nccl-tests prints it
  size_t size;
  bool isSigned;
  bool narrow;  // 8-bit integers and 16-bit floats: keep values (and sums) tiny
};

constexpr TypeInfo kTypes[] = {
    {nodusInt8, "int8", 1, true, true},      {nodusUint8, "uint8", 1, false, true},
    {nodusInt32, "int32", 4, true, false},   {nodusUint32, "uint32", 4, false, false},
    {nodusInt64, "int64", 8, true, false},   {nodusUint64, "uint64", 8, false, false},
    {nodusFloat16, "half", 2, true, true},   {nodusBfloat16, "bfloat16", 2, true, true},
    {nodusFloat32, "float", 4, true, false}, {nodusFloat64, "double", 8, true, false},
};

const TypeInfo& typeInfo(nodusDataType_t t) {
  for (const TypeInfo& ti : kTypes)
    if (ti.type == t) return ti;
  return kTypes[8];
}

const char* opName(nodusRedOp_t op) {
  switch (op) {
    case nodusSum: return "sum";
    case nodusProd: return "prod";
    case nodusMin: return "min";
    case nodusMax: return "max";
    case nodusAvg: return "avg";
    default: break;
  }
  return "?";
}

// ---- 16-bit floats, written here so the check does not trust nodus' own --------

uint16_t floatToHalf(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u)  // inf or nan
    return static_cast<uint16_t>(sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (ax < 0x38800000u) {                                               // below 2^-14: subnormal
    if (ax < 0x33000000u) return sign;                                  // at most 2^-25: zero
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14..24: units of 2^-24
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  const uint32_t r = ax - 0x38000000u;  // rebias the exponent from 127 to 15
  uint32_t q = r >> 13;
  const uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;  // a carry may reach inf: correct
  return static_cast<uint16_t>(sign | q);
}

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);
    return sign ? -v : v;
  }
  if (e == 31) return std::bit_cast<float>(sign | 0x7f800000u | (m << 13));
  return std::bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t floatToBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float bf16ToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

struct Half {
  uint16_t bits;
};
struct Bf16 {
  uint16_t bits;
};

// How the checker writes and reads an element of type T. Integers compare
// exactly; floating types compare in double.
template <class T>
struct Scalar {
  static constexpr bool kFloat = false;
  static T fromInt(int64_t v) { return static_cast<T>(v); }  // modular, as C++20 defines
};
template <>
struct Scalar<float> {
  static constexpr bool kFloat = true;
  static constexpr double kEps = 0x1p-23;
  static float fromInt(int64_t v) { return static_cast<float>(v); }
  static double toDouble(float v) { return v; }
  static double rounded(double v) { return static_cast<float>(v); }
  static double avg(int64_t sum, int n) { return static_cast<float>(sum) / static_cast<float>(n); }
};
template <>
struct Scalar<double> {
  static constexpr bool kFloat = true;
  static constexpr double kEps = 0x1p-52;
  static double fromInt(int64_t v) { return static_cast<double>(v); }
  static double toDouble(double v) { return v; }
  static double rounded(double v) { return v; }
  static double avg(int64_t sum, int n) { return static_cast<double>(sum) / n; }
};
template <>
struct Scalar<Half> {
  static constexpr bool kFloat = true;
  static constexpr double kEps = 0x1p-10;
  static Half fromInt(int64_t v) { return Half{floatToHalf(static_cast<float>(v))}; }
  static double toDouble(Half v) { return halfToFloat(v.bits); }
  static double rounded(double v) { return halfToFloat(floatToHalf(static_cast<float>(v))); }
  static double avg(int64_t sum, int n) {
    return halfToFloat(floatToHalf(static_cast<float>(sum) / static_cast<float>(n)));
  }
};
template <>
struct Scalar<Bf16> {
  static constexpr bool kFloat = true;
  static constexpr double kEps = 0x1p-7;
  static Bf16 fromInt(int64_t v) { return Bf16{floatToBf16(static_cast<float>(v))}; }
  static double toDouble(Bf16 v) { return bf16ToFloat(v.bits); }
  static double rounded(double v) { return bf16ToFloat(floatToBf16(static_cast<float>(v))); }
  static double avg(int64_t sum, int n) {
    return bf16ToFloat(floatToBf16(static_cast<float>(sum) / static_cast<float>(n)));
  }
};

// Calls f(std::type_identity<T>{}) with the C++ type of a nodus data type.
template <class F>
decltype(auto) withType(nodusDataType_t t, F&& f) {
  switch (t) {
    case nodusInt8: return f(std::type_identity<int8_t>{});
    case nodusUint8: return f(std::type_identity<uint8_t>{});
    case nodusInt32: return f(std::type_identity<int32_t>{});
    case nodusUint32: return f(std::type_identity<uint32_t>{});
    case nodusInt64: return f(std::type_identity<int64_t>{});
    case nodusUint64: return f(std::type_identity<uint64_t>{});
    case nodusFloat16: return f(std::type_identity<Half>{});
    case nodusBfloat16: return f(std::type_identity<Bf16>{});
    case nodusFloat64: return f(std::type_identity<double>{});
    default: break;
  }
  return f(std::type_identity<float>{});
}

// ---- Input values and their expected reductions --------------------------------
//
// Every input element is a small integer that depends on (rank, global index,
// seed), so every partial and final result is exactly representable in every
// type, and the reduction over all ranks has a closed form: checking costs O(1)
// per element whatever the rank count.
//  Data (AllGather, Broadcast): a value in [-5, 5] (unsigned: [0, 10]).
//  Sum/Avg: rank r holds W[(c + r) mod m] with c a hash of the index, W a
//    centred cycle ({-2..2}, narrow types {-1,0,1}), so the total stays within a
//    few units for any rank count; rank 0 adds a per-index extra so that the
//    result still depends on the index when m divides the rank count.
//  Min/Max: every rank holds a(i) + d (Max: a(i) - d) with d in {1,2,3} except
//    one rank, rotating with the index, that holds exactly a(i).
//  Prod: all ones except at most one rank holding 2 and (signed types) at most
//    one rank holding -1, so the product is one of 1, 2, -1, -2.

enum class Pattern { Data, Sum, Prod, Min, Max };

Pattern patternFor(Coll c, nodusRedOp_t op) {
  if (!collHasOp(c)) return Pattern::Data;
  switch (op) {
    case nodusProd: return Pattern::Prod;
    case nodusMin: return Pattern::Min;
    case nodusMax: return Pattern::Max;
    default: return Pattern::Sum;  // sum and avg
  }
}

class Inputs {
 public:
  Inputs(Pattern pattern, int nranks, uint64_t seed, const TypeInfo& type)
      : pattern_(pattern),
        nranks_(nranks),
        seed_(seed * 0xD1B54A32D192ED03ull + 0x2545F4914F6CDD1Dull),
        signed_(type.isSigned),
        m_(type.narrow ? 3 : 5) {
    for (int c = 0; c < m_; ++c) {
      int64_t s = 0;
      for (int r = 0; r < nranks_; ++r) s += cycle(static_cast<uint64_t>(c), r);
      cycleSum_[c] = s;
    }
  }

  // Input element `index` of rank `rank`.
  int64_t value(int rank, uint64_t index) const {
    const uint64_t h = hash(index);
    switch (pattern_) {
      case Pattern::Data: {
        const int64_t w = static_cast<int64_t>((h + static_cast<uint64_t>(rank) * 7u) % 11u);
        return signed_ ? w - 5 : w;
      }
      case Pattern::Sum: {
        int64_t v = cycle(h % static_cast<uint64_t>(m_), rank);
        if (rank == 0) v += extra(h);
        return v;
      }
      case Pattern::Min: return base(h) + spread(h, rank);
      case Pattern::Max: return base(h) - spread(h, rank);
      case Pattern::Prod: {
        const uint64_t twice = 2u * static_cast<uint64_t>(nranks_);
        int64_t v = (static_cast<uint64_t>(rank) == (h >> 4) % twice) ? 2 : 1;
        if (signed_ && static_cast<uint64_t>(rank) == (h >> 24) % twice) v = -v;
        return v;
      }
    }
    return 0;
  }

  // The reduction of element `index` over all ranks (Avg: the sum; the caller divides).
  int64_t reduced(uint64_t index) const {
    const uint64_t h = hash(index);
    switch (pattern_) {
      case Pattern::Sum: return cycleSum_[h % static_cast<uint64_t>(m_)] + extra(h);
      case Pattern::Min:
      case Pattern::Max: return base(h);
      case Pattern::Prod: {
        const uint64_t n = static_cast<uint64_t>(nranks_);
        int64_t v = ((h >> 4) % (2u * n) < n) ? 2 : 1;
        if (signed_ && (h >> 24) % (2u * n) < n) v = -v;
        return v;
      }
      case Pattern::Data: break;
    }
    return 0;
  }

 private:
  uint64_t hash(uint64_t index) const {
    uint64_t x = index + seed_;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  int64_t cycle(uint64_t c, int rank) const {
    const int64_t w =
        static_cast<int64_t>((c + static_cast<uint64_t>(rank)) % static_cast<uint64_t>(m_));
    return signed_ ? w - m_ / 2 : w;
  }
  int64_t extra(uint64_t h) const {
    return signed_ ? static_cast<int64_t>((h >> 40) % 3u) - 1
                   : static_cast<int64_t>((h >> 40) % 2u);
  }
  int64_t base(uint64_t h) const {
    const int64_t b = static_cast<int64_t>((h >> 32) % 9u);
    return signed_ ? b - 4 : b + 4;
  }
  int64_t spread(uint64_t h, int rank) const {
    const uint64_t n = static_cast<uint64_t>(nranks_);
    const uint64_t k = ((h >> 8) % n + static_cast<uint64_t>(rank)) % n;
    return k == 0 ? 0 : 1 + static_cast<int64_t>((k + (h >> 16)) % 3u);
  }

  Pattern pattern_;
  int nranks_;
  uint64_t seed_;
  bool signed_;
  int m_;
  int64_t cycleSum_[5] = {};
};

template <class T>
void fillInputs(void* buf, size_t n, int rank, const Inputs& in) {
  T* b = static_cast<T*>(buf);
  for (size_t k = 0; k < n; ++k) b[k] = Scalar<T>::fromInt(in.value(rank, k));
}

// Counts the elements of out[0, n) that differ from expect(k). With avg, expect
// gives the sum and the element must hold sum/nranks (integers: truncated;
// floating types: within 2 units in the last place of the type).
template <class T, class Expect>
uint64_t countWrong(const void* out, size_t n, bool avg, int nranks, Expect&& expect) {
  const T* o = static_cast<const T*>(out);
  uint64_t wrong = 0;
  for (size_t k = 0; k < n; ++k) {
    int64_t e = expect(k);
    if constexpr (Scalar<T>::kFloat) {
      const double got = Scalar<T>::toDouble(o[k]);
      if (avg) {
        const double want = Scalar<T>::avg(e, nranks);
        if (!(std::fabs(got - want) <= 2.0 * Scalar<T>::kEps * std::fabs(want))) ++wrong;
      } else if (!(got == Scalar<T>::rounded(static_cast<double>(e)))) {
        ++wrong;
      }
    } else {
      if (avg) e /= nranks;
      if (o[k] != static_cast<T>(e)) ++wrong;
    }
  }
  return wrong;
}

// ---- Options -------------------------------------------------------------------

struct Options {
  size_t minBytes = 8;
  size_t maxBytes = size_t{64} << 20;
  double stepFactor = 2.0;
  size_t stepBytes = 0;  // > 0: linear steps instead of a factor
  int iters = 20;
  int rounds = 1;  // -a all: passes over the algorithms, each cell keeps its best
  int warmup = 5;
  int check = 1;
  int root = 0;
  int threads = 0;  // > 0: ranks are threads of this process
  // --rank/--nranks/--id-file: one rank of a job started without a launcher
  // (every process run by hand, a script or a scheduler).
  int rank = -1;
  int nranks = 0;
  std::string idFile;
  bool idFileMode() const { return !idFile.empty(); }
  bool baselineMpi = false;
  bool help = false;
  std::vector<Coll> colls{Coll::AllReduce};
  std::vector<nodusDataType_t> types{nodusFloat32};
  std::vector<nodusRedOp_t> ops{nodusSum};
  std::string csvPath;
  std::string jsonPath;
  // -a: empty (NODUS_ALGO as the environment has it), "auto" (unset), "all"
  // (every algorithm side by side), or what NODUS_ALGO is set to.
  std::string algo;
  bool algoAll() const { return algo == "all"; }
  // The table shows the algorithm that ran only when -a asks: scripts parse it.
  bool algoColumn() const { return !algo.empty() && !algoAll(); }
};

// The algorithms the library implements, in its registry order.
std::vector<std::string> algorithmNames();

void printHelp(FILE* f) {
  // The library's algorithm list, wrapped into the option column.
  std::string names, lineSoFar;
  for (const std::string& n : algorithmNames()) {
    if (!lineSoFar.empty() && lineSoFar.size() + n.size() + 2 > 80) {
      names += lineSoFar + ",\n";
      lineSoFar.clear();
    }
    if (!lineSoFar.empty()) lineSoFar += ", ";
    if (lineSoFar.empty()) lineSoFar = std::string(26, ' ');
    lineSoFar += n;
  }
  names += lineSoFar;
  std::fprintf(f,
               "nodus-perf: collective benchmark (nccl-tests' table and flags)\n"
               "\n"
               "Usage: mpirun -np N nodus-perf [options]   one rank per process\n"
               "       nodus-perf -t N [options]           N ranks as threads of one process\n"
               "       nodus-perf --rank R --nranks N --id-file PATH [options]\n"
               "                                           rank R of N processes started\n"
               "                                           without mpirun (any host, any order)\n"
               "\n"
               "  -t, --nthreads N        run N ranks as threads of this process (no mpirun)\n"
               "      --rank R            this process is rank R of --nranks N; rank 0 makes\n"
               "      --nranks N          the communicator's unique id and publishes it in\n"
               "      --id-file PATH      PATH (which must not exist yet), the others wait\n"
               "                          for PATH (a file system every rank sees) and rank 0\n"
               "                          removes it once all have joined (or when\n"
               "                          interrupted or terminated before)\n"
               "  -b, --minbytes SIZE     smallest size in bytes (default 8)\n"
               "  -e, --maxbytes SIZE     largest size in bytes (default 64M)\n"
               "  -f, --stepfactor F      multiply the size by F at each step (default 2)\n"
               "  -i, --stepbytes SIZE    add SIZE at each step instead of multiplying\n"
               "  -n, --iters N           timed iterations per size (default 20)\n"
               "  -w, --warmup_iters N    untimed iterations before timing (default 5)\n"
               "  -c, --check 0|1         verify every result (default 1)\n"
               "  -d, --datatype TYPE     float|float32|half|float16|bfloat16|double|int8|uint8|\n"
               "                          int32|uint32|int64|uint64|all, or a comma list\n"
               "                          (default float)\n"
               "  -o, --op OP             sum|prod|min|max|avg|all, or a comma list (default sum)\n"
               "  -r, --root R            root of broadcast and reduce (default 0)\n"
               "      --coll NAME         allreduce|allgather|reducescatter|broadcast|reduce|all,\n"
               "                          or a comma list (default allreduce)\n"
               "      --baseline mpi      also time the MPI library's own collective on the same\n"
               "                          buffers (under mpirun; fp16, bf16 and avg: n/a)\n"
               "      --csv FILE          write one CSV record per size and placement\n"
               "      --json FILE         write the results as JSON\n"
               "      --rounds R          -a all: R passes over the algorithms, in reverse order\n"
               "                          every other pass; each cell keeps its best (default 1)\n"
               "  -a, --algo NAME         force an algorithm: sets NODUS_ALGO=NAME before any\n"
               "                          communicator is created. NAME is one of:\n%s,\n"
               "                          or a whole NODUS_ALGO rule string, passed through\n"
               "                          (e.g. 'allreduce:0-64K:direct,64K-:ring'). A call the\n"
               "                          algorithm does not implement is left to the tuner, so\n"
               "                          the table gains an `algo` column: what actually ran.\n"
               "                          auto: unset NODUS_ALGO; the `algo` column shows the\n"
               "                          tuner's pick. all: compare every algorithm (below)\n"
               "  -h, --help              this text\n"
               "\n"
               "SIZE accepts K, M, G (and T) suffixes, powers of 1024. Sizes are total bytes\n"
               "as in nccl-tests (allgather: bytes received, reducescatter: bytes sent per\n"
               "rank); a size whose count per rank rounds to 0 is skipped. busbw = algbw *\n"
               "2(p-1)/p for allreduce, (p-1)/p for allgather and reducescatter, 1 otherwise.\n"
               "The exit status is 1 when any result was wrong.\n"
               "\n"
               "-a all times each algorithm in turn on a communicator of its own (NODUS_ALGO set\n"
               "to its name; a communicator reads NODUS_ALGO when it is created), out-of-place\n"
               "only, after asking a communicator with NODUS_ALGO unset for the tuner's pick\n"
               "(a NODUS_ALGO from the environment is ignored).\n"
               "One table per collective: a row per size and type/op, a busbw column per\n"
               "algorithm that runs at least one of its calls, '-' where the algorithm does not\n"
               "run that call (the library would fall back to the tuner; not timed), '*' on the\n"
               "tuner's pick; then the fastest algorithm measured, whether the tuner agreed, and\n"
               "the pick's busbw over the fastest's. Every timed call is checked (-c). busbw\n"
               "below 1 GB/s is shown to 3 significant digits so small sizes stay comparable.\n"
               "With --baseline mpi, an `mpi` column (timed once, in the tuner's pass). CSV/JSON:\n"
               "one record per size and algorithm that ran, with `algo`, `tuner_pick` and\n"
               "`fastest`. A `#` line is printed as each algorithm's pass starts. On a shared\n"
               "or oversubscribed machine, --rounds 3 or more makes the columns comparable.\n",
               names.c_str());
}

// Sizes as every nodus tool takes them (base/size.h).
bool parseSize(const std::string& s, size_t* out) {
  uint64_t v = 0;
  if (!nodus::parseUnsignedSize(s, &v) || v > std::numeric_limits<size_t>::max()) return false;
  *out = static_cast<size_t>(v);
  return true;
}

bool parseInt(const std::string& s, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || s.empty() || *end != '\0' || v < INT_MIN || v > INT_MAX) return false;
  *out = static_cast<int>(v);
  return true;
}

std::vector<std::string> splitList(const std::string& s) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t comma = s.find(',', start);
    parts.push_back(
        s.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

std::vector<std::string> algorithmNames() {
  std::vector<std::string> names;
  for (std::string& n : splitList(nodusAlgorithmNames()))
    if (!n.empty()) names.push_back(std::move(n));
  return names;
}

// -a's value. A plain name must be one the library knows, so a typo stops here
// with the list instead of silently falling back to the tuner; anything with
// rule syntax is NODUS_ALGO's business (communicator creation reports errors).
bool parseAlgo(const std::string& value, std::string* out, std::string* err) {
  if (value.find_first_of(":,;") != std::string::npos) {
    *out = value;
    return true;
  }
  std::string n;
  for (char ch : value)
    n.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  if (n == "all" || n == "auto") {
    *out = n;
    return true;
  }
  std::string known;
  for (const std::string& name : algorithmNames()) {
    if (n == name) {
      *out = name;
      return true;
    }
    known += (known.empty() ? "" : ", ") + name;
  }
  *err = "unknown algorithm '" + value + "' for -a (this library has: " + known +
         "; or all, auto, or a NODUS_ALGO rule string)";
  return false;
}

std::string lowerNoSeparators(const std::string& s) {
  std::string r;
  for (char ch : s)
    if (ch != '_' && ch != '-')
      r.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(ch))));
  return r;
}

bool parseTypes(const std::string& s, std::vector<nodusDataType_t>* out) {
  out->clear();
  for (const std::string& raw : splitList(s)) {
    const std::string n = lowerNoSeparators(raw);
    if (n == "all") {
      for (const TypeInfo& ti : kTypes) out->push_back(ti.type);
      continue;
    }
    nodusDataType_t t;
    if (n == "float" || n == "float32" || n == "fp32" || n == "f32")
      t = nodusFloat32;
    else if (n == "half" || n == "float16" || n == "fp16" || n == "f16")
      t = nodusFloat16;
    else if (n == "bfloat16" || n == "bf16")
      t = nodusBfloat16;
    else if (n == "double" || n == "float64" || n == "fp64" || n == "f64")
      t = nodusFloat64;
    else if (n == "int8" || n == "char")
      t = nodusInt8;
    else if (n == "uint8")
      t = nodusUint8;
    else if (n == "int32" || n == "int")
      t = nodusInt32;
    else if (n == "uint32")
      t = nodusUint32;
    else if (n == "int64")
      t = nodusInt64;
    else if (n == "uint64")
      t = nodusUint64;
    else
      return false;
    out->push_back(t);
  }
  return !out->empty();
}

bool parseOps(const std::string& s, std::vector<nodusRedOp_t>* out) {
  out->clear();
  for (const std::string& raw : splitList(s)) {
    const std::string n = lowerNoSeparators(raw);
    if (n == "all") {
      for (nodusRedOp_t op : {nodusSum, nodusProd, nodusMin, nodusMax, nodusAvg})
        out->push_back(op);
    } else if (n == "sum")
      out->push_back(nodusSum);
    else if (n == "prod")
      out->push_back(nodusProd);
    else if (n == "min")
      out->push_back(nodusMin);
    else if (n == "max")
      out->push_back(nodusMax);
    else if (n == "avg")
      out->push_back(nodusAvg);
    else
      return false;
  }
  return !out->empty();
}

bool parseColls(const std::string& s, std::vector<Coll>* out) {
  out->clear();
  for (const std::string& raw : splitList(s)) {
    const std::string n = lowerNoSeparators(raw);
    if (n == "all") {
      out->insert(out->end(), std::begin(kAllColls), std::end(kAllColls));
      continue;
    }
    bool found = false;
    for (Coll c : kAllColls) {
      if (n == collName(c) || (n == "bcast" && c == Coll::Broadcast)) {
        out->push_back(c);
        found = true;
      }
    }
    if (!found) return false;
  }
  return !out->empty();
}

// Parses argv; on failure writes a message to *err and returns false.
bool parseArgs(int argc, char** argv, Options* o, std::string* err) {
  struct Alias {
    const char* longName;
    char shortName;
  };
  static constexpr Alias kAliases[] = {
      {"nthreads", 't'},  {"minbytes", 'b'}, {"maxbytes", 'e'},     {"stepfactor", 'f'},
      {"stepbytes", 'i'}, {"iters", 'n'},    {"warmup_iters", 'w'}, {"check", 'c'},
      {"datatype", 'd'},  {"op", 'o'},       {"root", 'r'},         {"help", 'h'},
      {"coll", 'C'},      {"baseline", 'B'}, {"csv", 'V'},          {"json", 'J'},
      {"algo", 'a'},      {"rounds", 'R'},       {"rank", 'K'},         {"nranks", 'N'},
      {"id-file", 'I'},
  };
  for (int a = 1; a < argc; ++a) {
    std::string arg = argv[a];
    char key = 0;
    std::string value;
    bool hasValue = false;
    if (arg.size() > 2 && arg[0] == '-' && arg[1] == '-') {
      std::string name = arg.substr(2);
      const size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
        hasValue = true;
      }
      for (const Alias& al : kAliases)
        if (name == al.longName) key = al.shortName;
      if (name == "collective") key = 'C';
      if (key == 0) {
        *err = "unknown option '" + arg + "'";
        return false;
      }
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      key = arg[1];
      bool known = false;
      for (const Alias& al : kAliases)
        if (key == al.shortName && std::islower(static_cast<unsigned char>(key))) known = true;
      if (!known) {
        *err = "unknown option '" + arg + "'";
        return false;
      }
      if (arg.size() > 2) {
        value = arg.substr(2);
        hasValue = true;
      }
    } else {
      *err = "unexpected argument '" + arg + "'";
      return false;
    }
    if (key == 'h') {
      o->help = true;
      continue;
    }
    if (!hasValue) {
      if (a + 1 >= argc) {
        *err = "option '" + arg + "' needs a value";
        return false;
      }
      value = argv[++a];
    }
    bool ok = true;
    switch (key) {
      case 't': ok = parseInt(value, &o->threads) && o->threads >= 1; break;
      case 'b': ok = parseSize(value, &o->minBytes); break;
      case 'e': ok = parseSize(value, &o->maxBytes); break;
      case 'f': {
        char* end = nullptr;
        o->stepFactor = std::strtod(value.c_str(), &end);
        ok = !value.empty() && *end == '\0' && o->stepFactor > 1.0 && std::isfinite(o->stepFactor);
        if (ok) o->stepBytes = 0;
        break;
      }
      case 'i': ok = parseSize(value, &o->stepBytes); break;
      case 'n': ok = parseInt(value, &o->iters) && o->iters >= 1; break;
      case 'w': ok = parseInt(value, &o->warmup) && o->warmup >= 0; break;
      case 'R': ok = parseInt(value, &o->rounds) && o->rounds >= 1; break;
      case 'K': ok = parseInt(value, &o->rank) && o->rank >= 0; break;
      case 'N': ok = parseInt(value, &o->nranks) && o->nranks >= 1; break;
      case 'I':
        o->idFile = value;
        ok = !value.empty();
        break;
      case 'c': ok = parseInt(value, &o->check) && (o->check == 0 || o->check == 1); break;
      case 'd': ok = parseTypes(value, &o->types); break;
      case 'o': ok = parseOps(value, &o->ops); break;
      case 'r': ok = parseInt(value, &o->root) && o->root >= 0; break;
      case 'C': ok = parseColls(value, &o->colls); break;
      case 'B': {
        const std::string n = lowerNoSeparators(value);
        ok = (n == "mpi" || n == "none");
        o->baselineMpi = (n == "mpi");
        break;
      }
      case 'V':
        o->csvPath = value;
        ok = !value.empty();
        break;
      case 'J':
        o->jsonPath = value;
        ok = !value.empty();
        break;
      case 'a':
        if (!parseAlgo(value, &o->algo, err)) return false;
        break;
      default: ok = false; break;
    }
    if (!ok) {
      *err = "bad value '" + value + "' for option '" + arg + "'";
      return false;
    }
  }
  if (o->minBytes > o->maxBytes) {
    *err = "minbytes (-b) is larger than maxbytes (-e)";
    return false;
  }
  if (o->rounds > 1 && !o->algoAll()) {
    *err = "--rounds applies to -a all only";
    return false;
  }
  const bool anyOfFile = o->rank >= 0 || o->nranks > 0 || o->idFileMode();
  if (anyOfFile && (o->rank < 0 || o->nranks < 1 || !o->idFileMode())) {
    *err = "--rank, --nranks and --id-file go together (one rank of a job started without mpirun)";
    return false;
  }
  if (anyOfFile && o->rank >= o->nranks) {
    *err = "--rank " + std::to_string(o->rank) + " is not a rank of --nranks " + std::to_string(o->nranks);
    return false;
  }
  if (anyOfFile && o->threads > 0) {
    *err = "-t (ranks as threads) and --rank/--nranks/--id-file (ranks as processes) exclude each other";
    return false;
  }
  if (anyOfFile && o->baselineMpi) {
    *err = "--baseline mpi needs an MPI launch (mpirun), not --id-file";
    return false;
  }
  return true;
}

std::vector<size_t> sweepSizes(const Options& o) {
  std::vector<size_t> sizes;
  size_t s = o.minBytes;
  while (true) {
    sizes.push_back(s);
    size_t next;
    if (o.stepBytes > 0) {
      next = s + o.stepBytes;
      if (next < s) break;  // overflow
    } else {
      const double d = static_cast<double>(s) * o.stepFactor;
      next = d >= 1.8e19 ? std::numeric_limits<size_t>::max() : static_cast<size_t>(d);
      if (next <= s) next = s + 1;
    }
    if (next > o.maxBytes) break;
    s = next;
  }
  return sizes;
}

// ---- Results -------------------------------------------------------------------

struct Measurement {
  double timeUs = 0;
  double algbw = 0;
  double busbw = 0;
  int64_t wrong = -1;       // -1: not checked
  double mpiTimeUs = kNaN;  // NaN: no baseline, or no MPI equivalent
  double mpiBusbw = kNaN;
};

struct Row {
  Coll coll;
  nodusDataType_t type;
  nodusRedOp_t op;
  int root;                    // -1 for collectives without one
  size_t bytes;                // nccl-tests' size
  size_t count;                // bytes / element size
  size_t rankCount;            // the count argument of the nodus call
  Measurement place[2];        // out-of-place, in-place
  const char* algo = nullptr;  // what nodusCommGetAlgorithm says runs the call
};

// A row of -a all: the out-of-place call under every algorithm.
struct AlgoRow {
  Row row;                     // place[0] holds the MPI baseline only
  const char* pick = nullptr;  // the tuner's choice, NODUS_ALGO unset
  // Per algorithm of algorithmNames(); empty where it does not run the call.
  std::vector<std::optional<Measurement>> cells;
};

nodusCollective_t collEnum(Coll c) {
  switch (c) {
    case Coll::AllReduce: return nodusCollAllReduce;
    case Coll::AllGather: return nodusCollAllGather;
    case Coll::ReduceScatter: return nodusCollReduceScatter;
    case Coll::Broadcast: return nodusCollBroadcast;
    case Coll::Reduce: return nodusCollReduce;
  }
  return nodusCollAllReduce;
}

// ---- Synchronisation between ranks, outside nodus ------------------------------

class Group {
 public:
  virtual ~Group() = default;
  virtual void barrier() = 0;
  virtual double maxAll(double v) = 0;
  virtual uint64_t sumAll(uint64_t v) = 0;
};

struct ThreadShared {
  explicit ThreadShared(int n)
      : bar(n),
        doubles(static_cast<size_t>(n)),
        counts(static_cast<size_t>(n)),
        comms(static_cast<size_t>(n), nullptr) {}
  std::barrier<> bar;
  std::vector<double> doubles;
  std::vector<uint64_t> counts;
  std::vector<nodusComm_t> comms;  // -a all: the communicator being made, rank i's at i
};

class ThreadGroup final : public Group {
 public:
  ThreadGroup(ThreadShared& shared, int rank) : s_(shared), rank_(static_cast<size_t>(rank)) {}
  void barrier() override { s_.bar.arrive_and_wait(); }
  double maxAll(double v) override {
    s_.doubles[rank_] = v;
    s_.bar.arrive_and_wait();
    const double m = *std::max_element(s_.doubles.begin(), s_.doubles.end());
    s_.bar.arrive_and_wait();  // nobody overwrites a slot before all have read
    return m;
  }
  uint64_t sumAll(uint64_t v) override {
    s_.counts[rank_] = v;
    s_.bar.arrive_and_wait();
    uint64_t sum = 0;
    for (uint64_t c : s_.counts) sum += c;
    s_.bar.arrive_and_wait();
    return sum;
  }

 private:
  ThreadShared& s_;
  size_t rank_;
};

#if NODUS_PERF_MPI
class MpiGroup final : public Group {
 public:
  void barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  double maxAll(double v) override {
    double m = 0;
    MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
  }
  uint64_t sumAll(uint64_t v) override {
    uint64_t s = 0;
    MPI_Allreduce(&v, &s, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    return s;
  }
};

bool mpiType(nodusDataType_t t, MPI_Datatype* out) {
  switch (t) {
    case nodusInt8: *out = MPI_INT8_T; return true;
    case nodusUint8: *out = MPI_UINT8_T; return true;
    case nodusInt32: *out = MPI_INT32_T; return true;
    case nodusUint32: *out = MPI_UINT32_T; return true;
    case nodusInt64: *out = MPI_INT64_T; return true;
    case nodusUint64: *out = MPI_UINT64_T; return true;
    case nodusFloat32: *out = MPI_FLOAT; return true;
    case nodusFloat64: *out = MPI_DOUBLE; return true;
    default: return false;  // fp16, bf16: no standard MPI type
  }
}

bool mpiOp(nodusRedOp_t op, MPI_Op* out) {
  switch (op) {
    case nodusSum: *out = MPI_SUM; return true;
    case nodusProd: *out = MPI_PROD; return true;
    case nodusMin: *out = MPI_MIN; return true;
    case nodusMax: *out = MPI_MAX; return true;
    default: return false;  // avg: no MPI equivalent
  }
}
#endif

// ---- Output (rank 0 only) ------------------------------------------------------

struct FileCloser {
  void operator()(FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using File = std::unique_ptr<FILE, FileCloser>;

std::string fmtTime(double us) {
  char b[32];
  if (!std::isfinite(us)) return "n/a";
  std::snprintf(b, sizeof b, us < 1e6 ? "%.2f" : "%.0f", us);
  return b;
}

std::string fmtFixed(double v, const char* fmt = "%.2f") {
  char b[32];
  if (!std::isfinite(v)) return "n/a";
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

// busbw in the -a all table: below 1 GB/s "%.2f" would print 0.00 for every
// algorithm at small sizes, where they differ the most.
std::string fmtBw(double v) {
  char b[32];
  if (!std::isfinite(v)) return "n/a";
  std::snprintf(b, sizeof b, v >= 1.0 ? "%.2f" : "%#.3g", v);
  return b;
}

std::string jsonNum(double v) {
  char b[40];
  if (!std::isfinite(v)) return "null";
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

std::string csvNum(double v) {
  char b[40];
  if (!std::isfinite(v)) return "";
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

std::string jsonString(const std::string& s) {
  std::string r = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      r.push_back('\\');
      r.push_back(ch);
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(ch)));
      r += b;
    } else {
      r.push_back(ch);
    }
  }
  return r + "\"";
}

class Reporter {
 public:
  Reporter(const Options& opt, int nranks, const char* launch)
      : opt_(opt), nranks_(nranks), launch_(launch) {}

  bool openFiles(std::string* err) {
    if (!opt_.csvPath.empty()) {
      csv_.reset(std::fopen(opt_.csvPath.c_str(), "w"));
      if (!csv_) {
        *err = "cannot write " + opt_.csvPath + ": " + std::strerror(errno);
        return false;
      }
      std::fprintf(csv_.get(),
                   "collective,nranks,launch,type,redop,root,size_bytes,count,rank_count,placement,"
                   "time_us,algbw_gbps,busbw_gbps,wrong,mpi_time_us,mpi_busbw_gbps,busbw_ratio,"
                   "algo%s\n",
                   opt_.algoAll() ? ",tuner_pick,fastest" : "");
      std::fflush(csv_.get());
    }
    if (!opt_.jsonPath.empty()) {
      json_.reset(std::fopen(opt_.jsonPath.c_str(), "w"));
      if (!json_) {
        *err = "cannot write " + opt_.jsonPath + ": " + std::strerror(errno);
        return false;
      }
    }
    return true;
  }

  void printHeader(int version, const std::vector<std::string>& rankLines) {
    std::string colls, types, ops;
    for (Coll c : opt_.colls) colls += std::string(colls.empty() ? "" : ",") + collName(c);
    for (nodusDataType_t t : opt_.types)
      types += std::string(types.empty() ? "" : ",") + typeInfo(t).name;
    for (nodusRedOp_t op : opt_.ops) ops += std::string(ops.empty() ? "" : ",") + opName(op);
    char step[64];
    if (opt_.stepBytes > 0)
      std::snprintf(step, sizeof step, "%zu(bytes)", opt_.stepBytes);
    else
      std::snprintf(step, sizeof step, "%g(factor)", opt_.stepFactor);
    std::printf("# nodus-perf: nodus %d.%d.%d, %d ranks (%s)\n", version / 10000,
                (version / 100) % 100, version % 100, nranks_, launch_);
    std::printf("#  minBytes %zu maxBytes %zu step: %s warmup iters: %d iters: %d validation: %d\n",
                opt_.minBytes, opt_.maxBytes, step, opt_.warmup, opt_.iters, opt_.check);
    std::printf("#  collectives: %s  types: %s  ops: %s  root: %d  baseline: %s%s%s\n",
                colls.c_str(), types.c_str(), ops.c_str(), opt_.root,
                opt_.baselineMpi ? "mpi" : "none",
                opt_.algo.empty() ? "" : "  algo: ", opt_.algo.c_str());
    std::printf("#\n");
    for (const std::string& l : rankLines) std::printf("%s\n", l.c_str());
    std::fflush(stdout);
    if (json_) {
      FILE* j = json_.get();
      std::fprintf(j, "{\n  \"benchmark\": \"nodus-perf\",\n");
      std::fprintf(j, "  \"nodus_version\": \"%d.%d.%d\",\n", version / 10000,
                   (version / 100) % 100, version % 100);
      std::fprintf(j, "  \"nranks\": %d,\n  \"launch\": %s,\n", nranks_,
                   jsonString(launch_).c_str());
      std::fprintf(j,
                   "  \"min_bytes\": %zu,\n  \"max_bytes\": %zu,\n  \"step_factor\": %s,\n"
                   "  \"step_bytes\": %zu,\n  \"iters\": %d,\n  \"warmup_iters\": %d,\n"
                   "  \"check\": %d,\n  \"root\": %d,\n  \"baseline\": %s,\n  \"algo\": %s,\n",
                   opt_.minBytes, opt_.maxBytes,
                   opt_.stepBytes > 0 ? "null" : jsonNum(opt_.stepFactor).c_str(), opt_.stepBytes,
                   opt_.iters, opt_.warmup, opt_.check, opt_.root,
                   opt_.baselineMpi ? "\"mpi\"" : "null",
                   opt_.algo.empty() ? "null" : jsonString(opt_.algo).c_str());
      std::fprintf(j, "  \"results\": [");
      std::fflush(j);
    }
  }

  void beginTable(Coll c) {
    table_ = Table{};
    std::printf("#\n# %s\n", collName(c));
    const bool mpi = opt_.baselineMpi;
    std::string l1 = lead("", "", "", "", "");
    std::string l2 = lead("size", "count", "type", "redop", "root");
    std::string l3 = lead("(B)", "(elements)", "", "", "");
    for (const char* title : {"out-of-place", "in-place"}) {
      std::string cols = place("time", "algbw", "busbw", "#wrong");
      std::string units = place("(us)", "(GB/s)", "(GB/s)", "");
      if (mpi) {
        cols += mpiCols("mpi(us)", "mpibw", "ratio");
        units += mpiCols("(us)", "(GB/s)", "");
      }
      std::string t = title;
      const size_t width = cols.size();
      l1 += std::string(width > t.size() ? width - t.size() : 0, ' ') + t;
      l2 += cols;
      l3 += units;
    }
    if (opt_.algoColumn()) l2 += "  algo";
    for (std::string* l : {&l1, &l2, &l3}) {
      (*l)[0] = '#';
      l->erase(l->find_last_not_of(' ') + 1);
      std::printf("%s\n", l->c_str());
    }
    std::fflush(stdout);
  }

  void row(const Row& r) {
    const TypeInfo& ti = typeInfo(r.type);
    const char* redop = collHasOp(r.coll) ? opName(r.op) : "none";
    char rootStr[16];
    std::snprintf(rootStr, sizeof rootStr, "%d", r.root);
    char sizeStr[24], countStr[24];
    std::snprintf(sizeStr, sizeof sizeStr, "%zu", r.bytes);
    std::snprintf(countStr, sizeof countStr, "%zu", r.count);
    std::string line = lead(sizeStr, countStr, ti.name, redop, rootStr);
    for (int ip = 0; ip < 2; ++ip) {
      const Measurement& m = r.place[ip];
      const std::string wrong = m.wrong < 0 ? "N/A" : std::to_string(m.wrong);
      line += place(fmtTime(m.timeUs), fmtFixed(m.algbw), fmtFixed(m.busbw), wrong);
      const double ratio = m.busbw / m.mpiBusbw;
      if (opt_.baselineMpi)
        line += mpiCols(fmtTime(m.mpiTimeUs), fmtFixed(m.mpiBusbw), fmtFixed(ratio));
      table_.busbwSum += m.busbw;
      ++table_.busbwCount;
      if (std::isfinite(m.mpiBusbw)) {
        table_.mpiBusbwSum += m.mpiBusbw;
        ++table_.mpiCount;
      }
      if (std::isfinite(ratio)) {
        table_.ratioSum += ratio;
        ++table_.ratioCount;
      }
      if (m.wrong > 0) table_.wrong += static_cast<uint64_t>(m.wrong);
      if (m.wrong >= 0) table_.checked = true;
      record(r, ip == 1, ratio);
    }
    if (opt_.algoColumn()) line += std::string("  ") + (r.algo != nullptr ? r.algo : "?");
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }

  void endTable(Coll c) {
    const Table& t = table_;
    if (!t.checked)
      std::printf("# Wrong values         : not checked\n");
    else
      std::printf("# Wrong values         : %llu %s\n", static_cast<unsigned long long>(t.wrong),
                  t.wrong == 0 ? "OK" : "FAILED");
    const double avg = t.busbwCount > 0 ? t.busbwSum / t.busbwCount : 0.0;
    std::printf("# Avg bus bandwidth    : %g\n", avg);
    double mpiAvg = kNaN, ratioAvg = kNaN;
    if (opt_.baselineMpi) {
      if (t.mpiCount > 0) mpiAvg = t.mpiBusbwSum / t.mpiCount;
      if (t.ratioCount > 0) ratioAvg = t.ratioSum / t.ratioCount;
      std::printf("# Avg MPI bus bandwidth: %s\n",
                  std::isfinite(mpiAvg) ? fmtFixed(mpiAvg, "%g").c_str() : "n/a");
      std::printf("# Avg nodus/MPI busbw  : %s\n",
                  std::isfinite(ratioAvg) ? fmtFixed(ratioAvg, "%.3f").c_str() : "n/a");
    }
    std::fflush(stdout);
    char b[512];
    std::snprintf(b, sizeof b,
                  "    {\"collective\": \"%s\", \"wrong\": %s, \"avg_busbw_gbps\": %s, "
                  "\"avg_mpi_busbw_gbps\": %s, \"avg_busbw_ratio\": %s}",
                  collName(c), t.checked ? std::to_string(t.wrong).c_str() : "null",
                  jsonNum(avg).c_str(), jsonNum(mpiAvg).c_str(), jsonNum(ratioAvg).c_str());
    summaries_.push_back(b);
    totalWrong_ += t.wrong;
  }

  // A comment line while a long -a all sweep runs.
  void progress(const std::string& text) {
    std::printf("# %s\n", text.c_str());
    std::fflush(stdout);
  }

  // -a all: the table of collective `c` from its rows, with its CSV/JSON
  // records and summary.
  void algoTable(Coll c, const std::vector<AlgoRow>& rows, const std::vector<std::string>& names) {
    std::vector<size_t> cols;  // the algorithms that run at least one call of this table
    for (size_t k = 0; k < names.size(); ++k)
      for (const AlgoRow& ar : rows)
        if (ar.row.coll == c && ar.cells[k]) {
          cols.push_back(k);
          break;
        }
    const auto cellWidth = [&](size_t k) {
      return static_cast<int>(std::max<size_t>(names[k].size(), 8) + 1);
    };
    int fastestWidth = 7;
    for (size_t k : cols) fastestWidth = std::max(fastestWidth, static_cast<int>(names[k].size()));
    const bool mpi = opt_.baselineMpi;

    std::printf(
        "#\n# %s: out-of-place busbw (GB/s) per algorithm; * the tuner's pick, - not run by "
        "that algorithm\n",
        collName(c));
    std::string l1 = lead("size", "count", "type", "redop", "root");
    std::string l2 = lead("(B)", "(elements)", "", "", "");
    for (size_t k : cols) {
      l1 += "  " + pad(names[k] + " ", cellWidth(k));
      l2 += "  " + pad("(GB/s) ", cellWidth(k));
    }
    if (mpi) {
      l1 += "  " + pad("mpi ", 9);
      l2 += "  " + pad("(GB/s) ", 9);
    }
    l1 += "  " + pad("fastest", fastestWidth) + "  " + pad("agree", 5) + "  " +
          pad("pick/best", 9) + "  " + pad("#wrong", 6);
    for (std::string* l : {&l1, &l2}) {
      (*l)[0] = '#';
      l->erase(l->find_last_not_of(' ') + 1);
      std::printf("%s\n", l->c_str());
    }

    int nrows = 0, agreed = 0, ratioCount = 0;
    double ratioSum = 0;
    uint64_t wrong = 0;
    bool checked = false;
    std::vector<int> wins(names.size(), 0);
    for (const AlgoRow& ar : rows) {
      if (ar.row.coll != c) continue;
      const Row& r = ar.row;
      ++nrows;
      std::optional<size_t> best, pick;
      int64_t rowWrong = -1;
      for (size_t k = 0; k < names.size(); ++k) {
        if (ar.pick != nullptr && names[k] == ar.pick) pick = k;
        if (!ar.cells[k]) continue;
        if (!best || ar.cells[k]->timeUs < ar.cells[*best]->timeUs) best = k;
        if (ar.cells[k]->wrong >= 0) rowWrong = std::max<int64_t>(rowWrong, 0) + ar.cells[k]->wrong;
      }
      const bool pickRan = pick && ar.cells[*pick];
      double pickOverBest = kNaN;
      if (best) {
        ++wins[*best];
        if (pickRan) {
          pickOverBest = ar.cells[*pick]->busbw / ar.cells[*best]->busbw;
          if (*pick == *best) ++agreed;
        }
      }
      if (std::isfinite(pickOverBest)) {
        ratioSum += pickOverBest;
        ++ratioCount;
      }
      if (rowWrong >= 0) {
        checked = true;
        wrong += static_cast<uint64_t>(rowWrong);
      }

      char rootStr[16], sizeStr[24], countStr[24];
      std::snprintf(rootStr, sizeof rootStr, "%d", r.root);
      std::snprintf(sizeStr, sizeof sizeStr, "%zu", r.bytes);
      std::snprintf(countStr, sizeof countStr, "%zu", r.count);
      std::string line = lead(sizeStr, countStr, typeInfo(r.type).name,
                              collHasOp(r.coll) ? opName(r.op) : "none", rootStr);
      for (size_t k : cols) {
        const std::string cell =
            ar.cells[k] ? fmtBw(ar.cells[k]->busbw) + (pick && *pick == k ? "*" : " ") : "- ";
        line += "  " + pad(cell, cellWidth(k));
      }
      if (mpi) line += "  " + pad(fmtBw(r.place[0].mpiBusbw) + " ", 9);
      line += "  " + pad(best ? names[*best] : "n/a", fastestWidth) + "  " +
              pad(!best || !pickRan ? "n/a"
                  : *pick == *best  ? "yes"
                                    : "no",
                  5) +
              "  " + pad(fmtFixed(pickOverBest), 9) + "  " +
              pad(rowWrong < 0 ? "N/A" : std::to_string(rowWrong), 6);
      std::printf("%s\n", line.c_str());

      for (size_t k = 0; k < names.size(); ++k) {
        if (!ar.cells[k]) continue;
        Row rec = r;
        const Measurement& baseline = r.place[0];
        rec.place[0] = *ar.cells[k];
        rec.place[0].mpiTimeUs = baseline.mpiTimeUs;
        rec.place[0].mpiBusbw = baseline.mpiBusbw;
        rec.algo = names[k].c_str();
        const bool isPick = pick && *pick == k, isBest = best && *best == k;
        const std::string csvExtra =
            std::string(",") + (isPick ? "true" : "false") + "," + (isBest ? "true" : "false");
        const std::string jsonExtra = std::string(", \"tuner_pick\": ") +
                                      (isPick ? "true" : "false") +
                                      ", \"fastest\": " + (isBest ? "true" : "false");
        record(rec, false, rec.place[0].busbw / baseline.mpiBusbw, csvExtra.c_str(),
               jsonExtra.c_str());
      }
    }

    if (!checked)
      std::printf("# Wrong values         : not checked\n");
    else
      std::printf("# Wrong values         : %llu %s\n", static_cast<unsigned long long>(wrong),
                  wrong == 0 ? "OK" : "FAILED");
    const double avgRatio = ratioCount > 0 ? ratioSum / ratioCount : kNaN;
    std::printf("# Tuner's pick fastest : %d of %d rows; its busbw averaged %s of the fastest's\n",
                agreed, nrows, fmtFixed(avgRatio, "%.3f").c_str());
    std::string tally;
    for (size_t k = 0; k < names.size(); ++k)
      if (wins[k] > 0)
        tally += (tally.empty() ? "" : ", ") + names[k] + " " + std::to_string(wins[k]);
    std::printf("# Fastest measured     : %s\n", tally.empty() ? "none" : tally.c_str());
    std::fflush(stdout);
    char b[512];
    std::snprintf(b, sizeof b,
                  "    {\"collective\": \"%s\", \"wrong\": %s, \"rows\": %d, \"tuner_agreed\": %d, "
                  "\"avg_pick_over_best\": %s}",
                  collName(c), checked ? std::to_string(wrong).c_str() : "null", nrows, agreed,
                  jsonNum(avgRatio).c_str());
    summaries_.push_back(b);
    totalWrong_ += wrong;
  }

  void finish() {
    if (opt_.colls.size() > 1 && opt_.check)
      std::printf("#\n# Wrong values, all collectives: %llu %s\n",
                  static_cast<unsigned long long>(totalWrong_), totalWrong_ == 0 ? "OK" : "FAILED");
    std::fflush(stdout);
    if (json_) {
      FILE* j = json_.get();
      std::fprintf(j, "\n  ],\n  \"summary\": [\n");
      for (size_t i = 0; i < summaries_.size(); ++i)
        std::fprintf(j, "%s%s\n", summaries_[i].c_str(), i + 1 < summaries_.size() ? "," : "");
      std::fprintf(j, "  ]\n}\n");
      std::fflush(j);
    }
    csv_.reset();
    json_.reset();
  }

 private:
  struct Table {
    double busbwSum = 0;
    int busbwCount = 0;
    double mpiBusbwSum = 0;
    int mpiCount = 0;
    double ratioSum = 0;
    int ratioCount = 0;
    uint64_t wrong = 0;
    bool checked = false;
  };

  static std::string pad(const std::string& s, int width) {
    return std::string(
               s.size() < static_cast<size_t>(width) ? static_cast<size_t>(width) - s.size() : 0,
               ' ') +
           s;
  }
  static std::string lead(const std::string& size, const std::string& count,
                          const std::string& type, const std::string& redop,
                          const std::string& root) {
    return pad(size, 12) + "  " + pad(count, 12) + "  " + pad(type, 8) + "  " + pad(redop, 6) +
           "  " + pad(root, 6);
  }
  static std::string place(const std::string& time, const std::string& algbw,
                           const std::string& busbw, const std::string& wrong) {
    return "  " + pad(time, 9) + "  " + pad(algbw, 7) + "  " + pad(busbw, 7) + "  " + pad(wrong, 6);
  }
  static std::string mpiCols(const std::string& time, const std::string& busbw,
                             const std::string& ratio) {
    return "  " + pad(time, 9) + "  " + pad(busbw, 7) + "  " + pad(ratio, 6);
  }

  // extraCsv/extraJson: more fields of -a all, each starting with a comma.
  void record(const Row& r, bool inPlace, double ratio, const char* extraCsv = "",
              const char* extraJson = "") {
    const Measurement& m = r.place[inPlace ? 1 : 0];
    const char* algo = r.algo != nullptr ? r.algo : "";
    const char* redop = collHasOp(r.coll) ? opName(r.op) : "none";
    const char* placement = inPlace ? "in-place" : "out-of-place";
    const char* type = typeInfo(r.type).name;
    if (csv_) {
      std::fprintf(csv_.get(), "%s,%d,%s,%s,%s,%d,%zu,%zu,%zu,%s,%s,%s,%s,%s,%s,%s,%s,%s%s\n",
                   collName(r.coll), nranks_, launch_, type, redop, r.root, r.bytes, r.count,
                   r.rankCount, placement, csvNum(m.timeUs).c_str(), csvNum(m.algbw).c_str(),
                   csvNum(m.busbw).c_str(), m.wrong < 0 ? "" : std::to_string(m.wrong).c_str(),
                   csvNum(m.mpiTimeUs).c_str(), csvNum(m.mpiBusbw).c_str(), csvNum(ratio).c_str(),
                   algo, extraCsv);
      std::fflush(csv_.get());
    }
    if (json_) {
      std::fprintf(
          json_.get(),
          "%s\n    {\"collective\": \"%s\", \"nranks\": %d, \"type\": \"%s\", "
          "\"redop\": \"%s\", \"root\": %d, \"size_bytes\": %zu, \"count\": %zu, "
          "\"rank_count\": %zu, \"placement\": \"%s\", \"time_us\": %s, "
          "\"algbw_gbps\": %s, \"busbw_gbps\": %s, \"wrong\": %s, \"mpi_time_us\": %s, "
          "\"mpi_busbw_gbps\": %s, \"busbw_ratio\": %s, \"algo\": %s%s}",
          firstRecord_ ? "" : ",", collName(r.coll), nranks_, type, redop, r.root, r.bytes, r.count,
          r.rankCount, placement, jsonNum(m.timeUs).c_str(), jsonNum(m.algbw).c_str(),
          jsonNum(m.busbw).c_str(), m.wrong < 0 ? "null" : std::to_string(m.wrong).c_str(),
          jsonNum(m.mpiTimeUs).c_str(), jsonNum(m.mpiBusbw).c_str(), jsonNum(ratio).c_str(),
          r.algo != nullptr ? jsonString(r.algo).c_str() : "null", extraJson);
      std::fflush(json_.get());
      firstRecord_ = false;
    }
  }

  const Options& opt_;
  int nranks_;
  const char* launch_;
  File csv_;
  File json_;
  bool firstRecord_ = true;
  Table table_;
  std::vector<std::string> summaries_;
  uint64_t totalWrong_ = 0;
};

// ---- Communicators of -a all ---------------------------------------------------

// The algorithm rules every communicator of the run gets (nodusConfig_t::algo):
// null for the environment's NODUS_ALGO, "" for none (-a auto: the tuner
// decides), or what -a forces. Set once in main, before any thread exists.
const char* gAlgo = nullptr;

// A communicator's settings: `algo` (null: gAlgo) as its algorithm rules.
nodusConfig_t perfConfig(const char* algo) {
  nodusConfig_t cfg = NODUS_CONFIG_INITIALIZER;
  cfg.algo = algo ? algo : gAlgo;
  return cfg;
}

// -a all needs one communicator per algorithm: a communicator takes its
// algorithm rules when it is created (nodusConfig_t).
class CommMaker {
 public:
  virtual ~CommMaker() = default;
  // Collective: every rank calls it, with the same algo (null: none forced, the tuner decides).
  virtual nodusComm_t create(const char* algo) = 0;
};

// ---- One rank's sweep ----------------------------------------------------------

struct FreeDeleter {
  void operator()(std::byte* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<std::byte, FreeDeleter>;

class Runner {
 public:
  Runner(const Options& opt, int rank, int nranks, nodusComm_t comm, Group& group, bool mpiBaseline,
         Reporter* reporter)
      : opt_(opt),
        rank_(rank),
        nranks_(nranks),
        comm_(comm),
        group_(group),
        mpiBaseline_(mpiBaseline),
        reporter_(reporter),
        sizes_(sweepSizes(opt)) {
    // Every size's send and receive buffers fit in maxBytes. Allocate and touch
    // them once: a page fault costs more than moving the page.
    capacity_ = std::max<size_t>((opt.maxBytes + 4095) / 4096 * 4096, 4096);
    send_ = allocTouched(capacity_);
    recv_ = allocTouched(capacity_);
  }

  // Runs the whole sweep; returns the number of wrong elements over all ranks.
  uint64_t run() {
    uint64_t totalWrong = 0;
    uint64_t seed = 0;
    for (Coll c : opt_.colls) {
      if (reporter_ != nullptr) reporter_->beginTable(c);
      for (Row row : sweepRows(c)) {
        const TypeInfo& ti = typeInfo(row.type);
        for (int ip = 0; ip < 2; ++ip) {
          row.place[ip] =
              measure(c, ti, row.op, row.rankCount, row.bytes, ip == 1, ++seed, mpiBaseline_);
          if (row.place[ip].wrong > 0) totalWrong += static_cast<uint64_t>(row.place[ip].wrong);
        }
        if (reporter_ != nullptr) {
          row.algo = algorithmFor(row);
          reporter_->row(row);
        }
      }
      if (reporter_ != nullptr) reporter_->endTable(c);
    }
    return totalWrong;
  }

  // -a all: the sweep once per algorithm, out-of-place, each on a communicator
  // made with NODUS_ALGO set to it, after one with NODUS_ALGO unset has told
  // the tuner's picks. Every rank makes the same communicators in the same
  // order. Returns the number of wrong elements over all ranks.
  uint64_t runAll(CommMaker& maker) {
    const std::vector<std::string> names = algorithmNames();
    std::vector<AlgoRow> rows;
    for (Coll c : opt_.colls)
      for (const Row& r : sweepRows(c))
        rows.push_back(AlgoRow{r, nullptr, std::vector<std::optional<Measurement>>(names.size())});
    if (reporter_ != nullptr)
      reporter_->progress(std::string("tuner: NODUS_ALGO unset, asking for its picks") +
                          (mpiBaseline_ ? "; timing the MPI baseline" : ""));
    comm_ = maker.create(nullptr);
    for (AlgoRow& ar : rows) {
      ar.pick = algorithmFor(ar.row);
      if (mpiBaseline_)
        timeMpi(ar.row.coll, typeInfo(ar.row.type), ar.row.op, ar.row.rankCount, ar.row.bytes,
                false, &ar.row.place[0]);
    }
    retire();

    uint64_t totalWrong = 0;
    uint64_t seed = 0;
    // Several rounds: the algorithms in turn, the other way round every other
    // round, so that a machine that slows down for a while (shared VMs do,
    // 2x and more) does not slow one algorithm's whole column.
    for (int round = 0; round < opt_.rounds; ++round)
    for (size_t step = 0; step < names.size(); ++step) {
      const size_t k = round % 2 == 0 ? step : names.size() - 1 - step;
      comm_ = maker.create(names[k].c_str());
      // A rank that disagreed would run another plan than its peers: stop
      // instead of hanging.
      std::vector<char> runs(rows.size(), 0);
      size_t nruns = 0;
      for (size_t i = 0; i < rows.size(); ++i) {
        runs[i] = names[k] == algorithmFor(rows[i].row);
        const uint64_t agree = group_.sumAll(runs[i] ? 1 : 0);
        if (agree != 0 && agree != static_cast<uint64_t>(nranks_))
          fatal(rank_, "ranks disagree on whether %s runs %s of %zu bytes", names[k].c_str(),
                collName(rows[i].row.coll), rows[i].row.bytes);
        nruns += runs[i] ? 1 : 0;
      }
      if (reporter_ != nullptr) {
        std::string what = (opt_.rounds > 1 ? "round " + std::to_string(round + 1) + "/" +
                                                  std::to_string(opt_.rounds) + ", "
                                            : std::string()) +
                           "algorithm " + std::to_string(k + 1) + "/" + std::to_string(names.size()) + " " +
                           names[k] + ": ";
        if (nruns == 0)
          what += "runs none of these calls, skipped";
        else
          what +=
              "timing " + std::to_string(nruns) + " of " + std::to_string(rows.size()) + " calls" +
              (nruns < rows.size() ? " (the rest would fall back to the tuner: not timed)" : "");
        reporter_->progress(what);
      }
      for (size_t i = 0; i < rows.size(); ++i) {
        if (!runs[i]) continue;
        const Row& r = rows[i].row;
        const Measurement m =
            measure(r.coll, typeInfo(r.type), r.op, r.rankCount, r.bytes, false, ++seed, false);
        if (m.wrong > 0) totalWrong += static_cast<uint64_t>(m.wrong);
        std::optional<Measurement>& cell = rows[i].cells[k];
        if (!cell || m.timeUs < cell->timeUs) {
          const int64_t wrong = cell ? std::max(cell->wrong, m.wrong) : m.wrong;
          cell = m;
          cell->wrong = wrong;
        } else {
          cell->wrong = std::max(cell->wrong, m.wrong);
        }
      }
      retire();
    }
    if (reporter_ != nullptr)
      for (Coll c : opt_.colls) reporter_->algoTable(c, rows, names);
    return totalWrong;
  }

 private:
  // The rows of collective `c`'s table, in sweep order, not yet measured.
  std::vector<Row> sweepRows(Coll c) const {
    std::vector<Row> rows;
    for (nodusDataType_t type : opt_.types) {
      const TypeInfo& ti = typeInfo(type);
      const std::vector<nodusRedOp_t> ops =
          collHasOp(c) ? opt_.ops : std::vector<nodusRedOp_t>{nodusSum};
      for (nodusRedOp_t op : ops) {
        size_t previous = std::numeric_limits<size_t>::max();
        for (size_t size : sizes_) {
          const size_t parts = collSplitsSize(c) ? static_cast<size_t>(nranks_) : 1;
          const size_t rankCount = size / (ti.size * parts);
          if (rankCount == 0) continue;
          const size_t bytes = rankCount * ti.size * parts;
          if (bytes == previous) continue;  // a size that rounds to the one before
          previous = bytes;
          Row row{};
          row.coll = c;
          row.type = type;
          row.op = op;
          row.root = collHasRoot(c) ? opt_.root : -1;
          row.bytes = bytes;
          row.count = bytes / ti.size;
          row.rankCount = rankCount;
          rows.push_back(row);
        }
      }
    }
    return rows;
  }

  // The algorithm comm_ runs this row's call with (the library's static name).
  const char* algorithmFor(const Row& r) const {
    const char* name = nullptr;
    checkNodus(nodusCommGetAlgorithm(comm_, collEnum(r.coll), r.rankCount, r.type,
                                     r.root < 0 ? 0 : r.root, &name),
               "nodusCommGetAlgorithm", comm_, rank_);
    return name;
  }

  // Ends a communicator of -a all once no peer may still need it.
  void retire() {
    group_.barrier();
    checkNodus(nodusCommDestroy(comm_), "nodusCommDestroy", nullptr, rank_);
    comm_ = nullptr;
  }

  Buffer allocTouched(size_t bytes) {
    void* p = std::aligned_alloc(4096, bytes);
    if (p == nullptr) fatal(rank_, "cannot allocate %zu bytes", bytes);
    std::memset(p, 0, bytes);
    return Buffer(static_cast<std::byte*>(p));
  }

  // The (sendbuf, recvbuf) pair of a nodus call, NCCL's in-place definitions.
  void nodusBuffers(Coll c, size_t rankCount, size_t elemSize, bool inPlace, const void** send,
                    void** recv) const {
    std::byte* s = send_.get();
    std::byte* r = recv_.get();
    const size_t mine = static_cast<size_t>(rank_) * rankCount * elemSize;
    *send = s;
    *recv = r;
    if (!inPlace) return;
    switch (c) {
      case Coll::AllReduce:
      case Coll::Broadcast:
      case Coll::Reduce: *send = r; break;
      case Coll::AllGather: *send = r + mine; break;
      case Coll::ReduceScatter:
        *send = r;
        *recv = r + mine;
        break;
    }
  }

  void callNodus(Coll c, const void* send, void* recv, size_t count, nodusDataType_t type,
                 nodusRedOp_t op) const {
    nodusResult_t res = nodusSuccess;
    switch (c) {
      case Coll::AllReduce: res = nodusAllReduce(send, recv, count, type, op, comm_); break;
      case Coll::AllGather: res = nodusAllGather(send, recv, count, type, comm_); break;
      case Coll::ReduceScatter: res = nodusReduceScatter(send, recv, count, type, op, comm_); break;
      case Coll::Broadcast: res = nodusBroadcast(send, recv, count, type, opt_.root, comm_); break;
      case Coll::Reduce: res = nodusReduce(send, recv, count, type, op, opt_.root, comm_); break;
    }
    checkNodus(res, collName(c), comm_, rank_);
  }

  // Average time per call in microseconds, of the slowest rank.
  template <class F>
  double timeLoop(F&& once) {
    for (int i = 0; i < opt_.warmup; ++i) once();
    group_.barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < opt_.iters; ++i) once();
    const auto t1 = std::chrono::steady_clock::now();
    const double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / opt_.iters;
    return group_.maxAll(us);
  }

  Measurement measure(Coll c, const TypeInfo& ti, nodusRedOp_t op, size_t rankCount, size_t bytes,
                      bool inPlace, uint64_t seed, bool withMpi) {
    Measurement m;
    const void* send = nullptr;
    void* recv = nullptr;
    nodusBuffers(c, rankCount, ti.size, inPlace, &send, &recv);
    const double factor = busFactor(c, nranks_);
    m.timeUs = timeLoop([&] { callNodus(c, send, recv, rankCount, ti.type, op); });
    m.algbw = m.timeUs > 0 ? static_cast<double>(bytes) / m.timeUs / 1e3 : 0.0;
    m.busbw = m.algbw * factor;
    if (withMpi) timeMpi(c, ti, op, rankCount, bytes, inPlace, &m);
    if (opt_.check)
      m.wrong = static_cast<int64_t>(check(c, ti, op, rankCount, inPlace, seed, send, recv));
    return m;
  }

  // The MPI baseline of a call into m->mpi*, where MPI has an equivalent.
  void timeMpi(Coll c, const TypeInfo& ti, nodusRedOp_t op, size_t rankCount, size_t bytes,
               bool inPlace, Measurement* m) {
#if NODUS_PERF_MPI
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    MPI_Op mop = MPI_OP_NULL;
    const bool supported = mpiType(ti.type, &dt) && (!collHasOp(c) || mpiOp(op, &mop)) &&
                           rankCount <= static_cast<size_t>(INT_MAX);
    if (supported) {
      m->mpiTimeUs = timeLoop([&] { callMpi(c, inPlace, rankCount, ti.size, dt, mop); });
      m->mpiBusbw = m->mpiTimeUs > 0
                        ? static_cast<double>(bytes) / m->mpiTimeUs / 1e3 * busFactor(c, nranks_)
                        : 0.0;
    }
#else
    (void)c, (void)ti, (void)op, (void)rankCount, (void)bytes, (void)inPlace, (void)m;
#endif
  }

#if NODUS_PERF_MPI
  void callMpi(Coll c, bool inPlace, size_t rankCount, size_t elemSize, MPI_Datatype dt,
               MPI_Op op) const {
    std::byte* s = send_.get();
    std::byte* r = recv_.get();
    const int n = static_cast<int>(rankCount);
    const int root = opt_.root;
    const bool isRoot = rank_ == root;
    (void)elemSize;
    int rc = MPI_SUCCESS;
    switch (c) {
      case Coll::AllReduce:
        rc = MPI_Allreduce(inPlace ? MPI_IN_PLACE : s, r, n, dt, op, MPI_COMM_WORLD);
        break;
      case Coll::AllGather:
        rc = inPlace ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, n, dt, MPI_COMM_WORLD)
                     : MPI_Allgather(s, n, dt, r, n, dt, MPI_COMM_WORLD);
        break;
      case Coll::ReduceScatter:
        // MPI's in-place form reads the whole input from recvbuf and leaves the
        // result at its start (NCCL's at the rank's offset): same traffic.
        rc = MPI_Reduce_scatter_block(inPlace ? MPI_IN_PLACE : s, r, n, dt, op, MPI_COMM_WORLD);
        break;
      case Coll::Broadcast:
        rc = MPI_Bcast(!inPlace && isRoot ? s : r, n, dt, root, MPI_COMM_WORLD);
        break;
      case Coll::Reduce:
        if (inPlace)
          rc = MPI_Reduce(isRoot ? MPI_IN_PLACE : r, isRoot ? r : nullptr, n, dt, op, root,
                          MPI_COMM_WORLD);
        else
          rc = MPI_Reduce(s, r, n, dt, op, root, MPI_COMM_WORLD);
        break;
    }
    if (rc != MPI_SUCCESS) fatal(rank_, "MPI baseline %s failed (MPI error %d)", collName(c), rc);
  }
#endif

  // One more call on fresh inputs; returns the wrong elements over all ranks.
  uint64_t check(Coll c, const TypeInfo& ti, nodusRedOp_t op, size_t rankCount, bool inPlace,
                 uint64_t seed, const void* send, void* recv) {
    const Inputs in(patternFor(c, op), nranks_, seed, ti);
    const bool avg = collHasOp(c) && op == nodusAvg;
    const size_t es = ti.size;
    const size_t p = static_cast<size_t>(nranks_);
    const int root = opt_.root;
    std::byte* sb = send_.get();
    std::byte* rb = recv_.get();
    const size_t mine = static_cast<size_t>(rank_) * rankCount * es;
    // Stale results of the timed loop must not pass: poison the output first
    // (0xA5 bytes are no small integer in any type), then write the inputs.
    const uint64_t wrong = withType(ti.type, [&](auto tag) -> uint64_t {
      using T = typename decltype(tag)::type;
      const auto run = [&] { callNodus(c, send, recv, rankCount, ti.type, op); };
      const auto reducedAt = [&](uint64_t first) {
        return [&in, first](size_t k) { return in.reduced(first + k); };
      };
      switch (c) {
        case Coll::AllReduce:
          std::memset(rb, 0xA5, rankCount * es);
          fillInputs<T>(inPlace ? rb : sb, rankCount, rank_, in);
          run();
          return countWrong<T>(rb, rankCount, avg, nranks_, reducedAt(0));
        case Coll::AllGather:
          std::memset(rb, 0xA5, p * rankCount * es);
          fillInputs<T>(inPlace ? rb + mine : sb, rankCount, rank_, in);
          run();
          return countWrong<T>(rb, p * rankCount, false, nranks_, [&](size_t k) {
            return in.value(static_cast<int>(k / rankCount), k % rankCount);
          });
        case Coll::ReduceScatter:
          if (!inPlace) std::memset(rb, 0xA5, rankCount * es);
          fillInputs<T>(inPlace ? rb : sb, p * rankCount, rank_, in);
          run();
          return countWrong<T>(inPlace ? rb + mine : rb, rankCount, avg, nranks_,
                               reducedAt(static_cast<uint64_t>(rank_) * rankCount));
        case Coll::Broadcast:
          std::memset(rb, 0xA5, rankCount * es);
          if (rank_ == root) fillInputs<T>(inPlace ? rb : sb, rankCount, root, in);
          run();
          return countWrong<T>(rb, rankCount, false, nranks_,
                               [&](size_t k) { return in.value(root, k); });
        case Coll::Reduce:
          if (rank_ == root) std::memset(rb, 0xA5, rankCount * es);
          fillInputs<T>(inPlace ? rb : sb, rankCount, rank_, in);
          run();
          if (rank_ != root) return 0;
          return countWrong<T>(rb, rankCount, avg, nranks_, reducedAt(0));
      }
      return 0;
    });
    return group_.sumAll(wrong);
  }

  const Options& opt_;
  int rank_;
  int nranks_;
  nodusComm_t comm_;
  Group& group_;
  bool mpiBaseline_;
  Reporter* reporter_;
  std::vector<size_t> sizes_;
  size_t capacity_ = 0;
  Buffer send_;
  Buffer recv_;
};

std::string hostName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "?";
  return host;
}

// The header's line about each rank: the same width for every rank, so the
// lines can be gathered as fixed-size blocks.
constexpr size_t kRankLine = 320;

void rankLine(int rank, char (&line)[kRankLine]) {
  std::snprintf(line, kRankLine, "#  Rank %4d Pid %7d on %s", rank, static_cast<int>(getpid()), hostName().c_str());
}

// Rank 0's header, from every rank's line gathered in rank order (the first 64).
void printRankLines(Reporter& reporter, int version, const char* gathered, int n) {
  std::vector<std::string> lines;
  const int shown = std::min(n, 64);
  for (int r = 0; r < shown; ++r) {
    const char* l = gathered + static_cast<size_t>(r) * kRankLine;
    lines.emplace_back(l, strnlen(l, kRankLine));
  }
  if (shown < n) lines.push_back("#  ... and " + std::to_string(n - shown) + " more ranks");
  reporter.printHeader(version, lines);
}

int libraryVersion() {
  int v = 0;
  checkNodus(nodusGetVersion(&v), "nodusGetVersion", nullptr, 0);
  return v;
}

// ---- Threads: every rank a thread of this process ------------------------------

// One thread makes every rank's communicator while the others wait at the
// barrier, so nobody reads the environment while it changes.
class ThreadCommMaker final : public CommMaker {
 public:
  ThreadCommMaker(ThreadShared& shared, int rank) : s_(shared), rank_(rank) {}
  nodusComm_t create(const char* algo) override {
    s_.bar.arrive_and_wait();
    if (rank_ == 0) {
      const nodusConfig_t cfg = perfConfig(algo ? algo : "");
      checkNodus(nodusCommInitAllConfig(s_.comms.data(), static_cast<int>(s_.comms.size()), &cfg),
                 "nodusCommInitAll", nullptr, 0);
    }
    s_.bar.arrive_and_wait();
    return s_.comms[static_cast<size_t>(rank_)];
  }

 private:
  ThreadShared& s_;
  int rank_;
};

int mainThreads(const Options& opt) {
  const int n = opt.threads;
  if (opt.baselineMpi) {
    std::fprintf(stderr, "nodus-perf: --baseline mpi needs an MPI launch (mpirun, without -t)\n");
    return 2;
  }
  if (opt.root >= n) {
    std::fprintf(stderr, "nodus-perf: root %d is not a rank of %d\n", opt.root, n);
    return 2;
  }
  Reporter reporter(opt, n, "threads of one process");
  std::string err;
  if (!reporter.openFiles(&err)) {
    std::fprintf(stderr, "nodus-perf: %s\n", err.c_str());
    return 1;
  }
  const int version = libraryVersion();
  std::vector<nodusComm_t> comms(static_cast<size_t>(n), nullptr);
  const nodusConfig_t cfg = perfConfig(nullptr);
  if (!opt.algoAll()) checkNodus(nodusCommInitAllConfig(comms.data(), n, &cfg), "nodusCommInitAll", nullptr, 0);
  char line[512];
  std::snprintf(line, sizeof line, "#  Ranks 0..%d: threads of pid %d on %s", n - 1,
                static_cast<int>(getpid()), hostName().c_str());
  reporter.printHeader(version, {line});

  ThreadShared shared(n);
  std::vector<uint64_t> wrong(static_cast<size_t>(n), 0);
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      ThreadGroup group(shared, r);
      Runner runner(opt, r, n, comms[static_cast<size_t>(r)], group, false,
                    r == 0 ? &reporter : nullptr);
      if (opt.algoAll()) {
        ThreadCommMaker maker(shared, r);
        wrong[static_cast<size_t>(r)] = runner.runAll(maker);
        return;
      }
      wrong[static_cast<size_t>(r)] = runner.run();
      group.barrier();  // nobody leaves while a peer may still need it
      checkNodus(nodusCommDestroy(comms[static_cast<size_t>(r)]), "nodusCommDestroy", nullptr, r);
    });
  }
  for (std::thread& t : threads) t.join();
  reporter.finish();
  return wrong[0] == 0 ? 0 : 1;
}

// ---- MPI: every rank a process -------------------------------------------------

#if NODUS_PERF_MPI
class MpiCommMaker final : public CommMaker {
 public:
  explicit MpiCommMaker(int rank) : rank_(rank) {}
  nodusComm_t create(const char* algo) override {
    const nodusConfig_t cfg = perfConfig(algo ? algo : "");
    nodusComm_t comm = nullptr;
    checkNodus(nodusCommInitMPIConfig(&comm, MPI_COMM_WORLD, &cfg), "nodusCommInitMPI", nullptr, rank_);
    return comm;
  }

 private:
  int rank_;
};

int mainMpi(int argc, char** argv, const Options& opt) {
  MPI_Init(&argc, &argv);
  gAbortWithMpi = true;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (opt.root >= size) {
    if (rank == 0)
      std::fprintf(stderr, "nodus-perf: root %d is not a rank of %d\n", opt.root, size);
    MPI_Finalize();
    return 2;
  }
  std::unique_ptr<Reporter> reporter;
  int opened = 1;
  std::string err;
  if (rank == 0) {
    reporter = std::make_unique<Reporter>(opt, size, "MPI processes");
    opened = reporter->openFiles(&err) ? 1 : 0;
  }
  MPI_Bcast(&opened, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!opened) {
    if (rank == 0) std::fprintf(stderr, "nodus-perf: %s\n", err.c_str());
    MPI_Finalize();
    return 1;
  }
  const int version = libraryVersion();
  nodusComm_t comm = nullptr;
  const nodusConfig_t cfg = perfConfig(nullptr);
  if (!opt.algoAll()) checkNodus(nodusCommInitMPIConfig(&comm, MPI_COMM_WORLD, &cfg), "nodusCommInitMPI", nullptr, rank);

  char line[kRankLine] = {};
  rankLine(rank, line);
  std::vector<char> all(rank == 0 ? static_cast<size_t>(size) * kRankLine : 1);
  MPI_Gather(line, static_cast<int>(kRankLine), MPI_CHAR, all.data(), static_cast<int>(kRankLine), MPI_CHAR, 0,
             MPI_COMM_WORLD);
  if (rank == 0) printRankLines(*reporter, version, all.data(), size);

  MpiGroup group;
  uint64_t wrong = 0;
  {
    Runner runner(opt, rank, size, comm, group, opt.baselineMpi, reporter.get());
    if (opt.algoAll()) {
      MpiCommMaker maker(rank);
      wrong = runner.runAll(maker);
    } else {
      wrong = runner.run();
    }
  }
  group.barrier();
  if (comm != nullptr) checkNodus(nodusCommDestroy(comm), "nodusCommDestroy", nullptr, rank);
  if (reporter) reporter->finish();
  MPI_Finalize();
  return wrong == 0 ? 0 : 1;
}
#endif

// ---- Processes without a launcher: the unique id through a file ---------------

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

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  std::string err;
  const bool parsed = parseArgs(argc, argv, &opt, &err);
  // Under mpirun every process parses the same line: let only the first speak.
  const bool speaker = launcherRank() == 0;
  if (!parsed) {
    if (speaker) std::fprintf(stderr, "nodus-perf: %s (see nodus-perf -h)\n", err.c_str());
    return 2;
  }
  if (opt.help) {
    if (speaker) printHelp(stdout);
    return 0;
  }
  // Before any thread exists: every communicator of the run is created after
  // this, in every process. -a all gives each communicator its own.
  if (opt.algo == "auto")
    gAlgo = "";
  else if (opt.algoColumn())
    gAlgo = opt.algo.c_str();
  // Modes that start their ranks themselves: under mpirun, say so once.
  const auto notUnderLauncher = [&](const char* why) {
    if (launcherSize() <= 1) return true;
    if (speaker) std::fprintf(stderr, "nodus-perf: %s\n", why);
    return false;
  };
  if (opt.idFileMode())
    return notUnderLauncher("--rank/--nranks/--id-file start each rank by hand; under mpirun drop them (mpirun "
                            "gives the ranks)")
               ? mainFile(opt)
               : 2;
  if (opt.threads > 0)
    return notUnderLauncher("-t runs all ranks as threads of one process; launch it without mpirun, or drop -t "
                            "to run one rank per MPI process")
               ? mainThreads(opt)
               : 2;
#if NODUS_PERF_MPI
  return mainMpi(argc, argv, opt);
#else
  std::fprintf(stderr,
               "nodus-perf: this build has no MPI support: run N ranks as threads of one process "
               "with -t N\n");
  return 2;
#endif
}
