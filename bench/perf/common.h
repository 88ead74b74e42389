// nodus-perf's shared vocabulary: the MPI switch, fatal errors, the launcher's
// environment, the collectives, types and operations it times, and the input
// values with their expected results that the check compares against.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

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

namespace nodus_perf {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- Fatal errors --------------------------------------------------------------

#if NODUS_PERF_MPI
// Set once in main() before any rank runs; read-only afterwards.
extern bool gAbortWithMpi;
#endif

[[noreturn]] void dieNow();

[[noreturn, gnu::format(printf, 2, 3)]] void fatal(int rank, const char* fmt, ...);

void checkNodus(nodusResult_t result, const char* what, nodusComm_t comm, int rank);

// ---- Launcher environment ------------------------------------------------------

long envLong(const char* name, long fallback);

// Number of processes of the MPI job this process belongs to (1 when not
// launched by mpirun/mpiexec/srun).
long launcherSize();

// This process's rank in that job (0 when not launched by a launcher).
long launcherRank();

// ---- Collectives, types and operations -----------------------------------------

enum class Coll { AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AllToAll, Gather, Scatter };
inline constexpr Coll kAllColls[] = {Coll::AllReduce, Coll::AllGather, Coll::ReduceScatter, Coll::Broadcast,
                                     Coll::Reduce,    Coll::AllToAll,  Coll::Gather,        Coll::Scatter};

const char* collName(Coll c);
bool collHasOp(Coll c);
bool collHasRoot(Coll c);
// The per-rank count is the size divided among the ranks.
bool collSplitsSize(Coll c);
double busFactor(Coll c, int nranks);
nodusCollective_t collEnum(Coll c);

struct TypeInfo {
  nodusDataType_t type;
  const char* name;  // as nccl-tests prints it
  size_t size;
  bool isSigned;
  bool narrow;  // 8-bit integers and 16-bit floats: keep values (and sums) tiny
};

inline constexpr TypeInfo kTypes[] = {
    {nodusInt8, "int8", 1, true, true},      {nodusUint8, "uint8", 1, false, true},
    {nodusInt32, "int32", 4, true, false},   {nodusUint32, "uint32", 4, false, false},
    {nodusInt64, "int64", 8, true, false},   {nodusUint64, "uint64", 8, false, false},
    {nodusFloat16, "half", 2, true, true},   {nodusBfloat16, "bfloat16", 2, true, true},
    {nodusFloat32, "float", 4, true, false}, {nodusFloat64, "double", 8, true, false},
};

const TypeInfo& typeInfo(nodusDataType_t t);
const char* opName(nodusRedOp_t op);

// ---- 16-bit floats, written here so the check does not trust nodus' own --------

inline uint16_t floatToHalf(float f) {
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

inline float halfToFloat(uint16_t h) {
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

inline uint16_t floatToBf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet nan
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

inline float bf16ToFloat(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

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

Pattern patternFor(Coll c, nodusRedOp_t op);

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

}  // namespace nodus_perf
