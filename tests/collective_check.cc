// The shared multi-rank test harness; see collective_check.h.
#include "collective_check.h"

#include <dirent.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

namespace nodus_test {

// ---- Names -----------------------------------------------------------------

const char* CollName(Coll coll) {
  switch (coll) {
    case Coll::kAllReduce:
      return "AllReduce";
    case Coll::kAllGather:
      return "AllGather";
    case Coll::kReduceScatter:
      return "ReduceScatter";
    case Coll::kBroadcast:
      return "Broadcast";
    case Coll::kReduce:
      return "Reduce";
  }
  return "?";
}

const char* TypeName(nodusDataType_t type) {
  switch (type) {
    case nodusInt8:
      return "int8";
    case nodusUint8:
      return "uint8";
    case nodusInt32:
      return "int32";
    case nodusUint32:
      return "uint32";
    case nodusInt64:
      return "int64";
    case nodusUint64:
      return "uint64";
    case nodusFloat16:
      return "float16";
    case nodusBfloat16:
      return "bfloat16";
    case nodusFloat32:
      return "float32";
    case nodusFloat64:
      return "float64";
    default:
      return "?";
  }
}

const char* OpName(nodusRedOp_t op) {
  switch (op) {
    case nodusSum:
      return "sum";
    case nodusProd:
      return "prod";
    case nodusMin:
      return "min";
    case nodusMax:
      return "max";
    case nodusAvg:
      return "avg";
    default:
      return "?";
  }
}

const char* ResultName(nodusResult_t result) {
  switch (result) {
    case nodusSuccess:
      return "nodusSuccess";
    case nodusInvalidArgument:
      return "nodusInvalidArgument";
    case nodusInvalidUsage:
      return "nodusInvalidUsage";
    case nodusSystemError:
      return "nodusSystemError";
    case nodusInternalError:
      return "nodusInternalError";
    case nodusRemoteError:
      return "nodusRemoteError";
    case nodusTimeout:
      return "nodusTimeout";
    case nodusAborted:
      return "nodusAborted";
    case nodusInProgress:
      return "nodusInProgress";
    default:
      return "nodusResult(?)";
  }
}

size_t TypeSize(nodusDataType_t type) {
  switch (type) {
    case nodusInt8:
    case nodusUint8:
      return 1;
    case nodusFloat16:
    case nodusBfloat16:
      return 2;
    case nodusInt32:
    case nodusUint32:
    case nodusFloat32:
      return 4;
    case nodusInt64:
    case nodusUint64:
    case nodusFloat64:
      return 8;
    default:
      return 0;
  }
}

bool CollUsesOp(Coll coll) {
  return coll == Coll::kAllReduce || coll == Coll::kReduceScatter || coll == Coll::kReduce;
}
bool CollUsesRoot(Coll coll) { return coll == Coll::kBroadcast || coll == Coll::kReduce; }
bool CollOutputsAgree(Coll coll) {
  return coll == Coll::kAllReduce || coll == Coll::kAllGather || coll == Coll::kBroadcast;
}

std::string Describe(const CheckCase& c) {
  std::string s = CollName(c.coll);
  s += ' ';
  s += TypeName(c.type);
  if (CollUsesOp(c.coll)) {
    s += ' ';
    s += OpName(c.op);
  }
  s += " count=" + std::to_string(c.count);
  if (CollUsesRoot(c.coll)) s += " root=" + std::to_string(c.root);
  s += c.inPlace ? " in-place" : " out-of-place";
  s += c.nonBlocking ? " non-blocking" : " blocking";
  if (c.checkSliceOnly) s += " (slice checked)";
  if (c.listOutput) s += " (into separate buffers)";
  return s;
}

// ---- fp16 / bf16 -------------------------------------------------------------
// Binary floating point with `expBits` exponent and `mantBits` stored mantissa
// bits (IEEE layout: sign, biased exponent, mantissa), rounded to nearest even.

namespace {

uint32_t EncodeBinary(double v, int expBits, int mantBits) {
  const int bias = (1 << (expBits - 1)) - 1;
  const uint32_t expAllOnes = (1u << expBits) - 1;
  const uint32_t sign = std::signbit(v) ? (1u << (expBits + mantBits)) : 0u;
  if (std::isnan(v)) return sign | (expAllOnes << mantBits) | (1u << (mantBits - 1));
  const double a = std::fabs(v);
  if (std::isinf(a)) return sign | (expAllOnes << mantBits);
  if (a == 0) return sign;
  int e = 0;
  std::frexp(a, &e);     // a = f * 2^e, f in [0.5, 1)
  int exponent = e - 1;  // a in [2^exponent, 2^(exponent+1))
  const int minExponent = 1 - bias;
  if (exponent < minExponent) exponent = minExponent;  // subnormal: fixed quantum
  // a in units of the quantum 2^(exponent - mantBits); rint rounds to nearest even.
  uint64_t units = static_cast<uint64_t>(std::nearbyint(std::ldexp(a, mantBits - exponent)));
  if (units >= (uint64_t{1} << (mantBits + 1))) {  // rounded up into the next binade
    units >>= 1;
    exponent += 1;
  }
  uint32_t biased = 0;
  if (units >= (uint64_t{1} << mantBits)) {
    biased = static_cast<uint32_t>(exponent + bias);
    units -= uint64_t{1} << mantBits;
  }  // else subnormal: biased exponent 0
  if (biased >= expAllOnes) return sign | (expAllOnes << mantBits);  // overflow
  return sign | (biased << mantBits) | static_cast<uint32_t>(units);
}

double DecodeBinary(uint32_t bits, int expBits, int mantBits) {
  const int bias = (1 << (expBits - 1)) - 1;
  const uint32_t expAllOnes = (1u << expBits) - 1;
  const bool negative = (bits >> (expBits + mantBits)) & 1u;
  const uint32_t biased = (bits >> mantBits) & expAllOnes;
  const uint32_t mant = bits & ((1u << mantBits) - 1);
  double v;
  if (biased == 0) {
    v = std::ldexp(static_cast<double>(mant), 1 - bias - mantBits);
  } else if (biased == expAllOnes) {
    v = mant ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(static_cast<double>(mant | (1u << mantBits)),
                   static_cast<int>(biased) - bias - mantBits);
  }
  return negative ? -v : v;
}

// The distance between `c` (a value of the format) and its neighbour away from zero.
double UlpAt(double c, int expBits, int mantBits) {
  const int bias = (1 << (expBits - 1)) - 1;
  int exponent = 1 - bias;
  if (c != 0 && std::isfinite(c)) {
    int e = 0;
    std::frexp(std::fabs(c), &e);
    exponent = std::max(e - 1, 1 - bias);
  }
  return std::ldexp(1.0, exponent - mantBits);
}

}  // namespace

uint16_t DoubleToHalf(double v) { return static_cast<uint16_t>(EncodeBinary(v, 5, 10)); }
double HalfToDouble(uint16_t bits) { return DecodeBinary(bits, 5, 10); }
uint16_t DoubleToBfloat16(double v) { return static_cast<uint16_t>(EncodeBinary(v, 8, 7)); }
double Bfloat16ToDouble(uint16_t bits) { return DecodeBinary(bits, 8, 7); }

uint64_t HashBytes(const void* data, size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t h = 0xcbf29ce484222325ull;
  constexpr uint64_t kPrime = 0x100000001b3ull;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * kPrime;
    h ^= h >> 29;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * kPrime;
  return h ^ bytes;
}

Watchdog::Watchdog(std::string what, std::chrono::milliseconds limit) {
  thread_ = std::thread([this, what = std::move(what), limit] {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, limit, [this] { return done_; })) {
      std::fprintf(stderr, "watchdog: %s did not finish within %lld ms; exiting\n", what.c_str(),
                   static_cast<long long>(limit.count()));
      std::fflush(stderr);
      std::_Exit(124);
    }
  });
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

ScopedEnv::ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
  if (const char* old = std::getenv(name_.c_str())) {
    hadValue_ = true;
    oldValue_ = old;
  }
  setenv(name_.c_str(), value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (hadValue_)
    setenv(name_.c_str(), oldValue_.c_str(), 1);
  else
    unsetenv(name_.c_str());
}

// ---- Inputs and reference ------------------------------------------------------

namespace {

uint64_t Mix(uint64_t seed, uint64_t rank, uint64_t index) {
  uint64_t x = seed ^ (rank * 0x9E3779B97F4A7C15ull) ^ (index * 0xD1B54A32D192ED03ull);
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 32;
  return x;
}

struct GenContext {
  uint64_t seed;
  int nranks;
};

// Integer types: elements are generated, reduced and compared as T; sums and
// products are computed in uint64_t so that they wrap modulo 2^64 and then,
// truncated, modulo 2^bits: the same in any reduction order.
template <typename T>
struct IntModel {
  using Store = T;
  using Value = T;
  static constexpr bool kFloat = false;

  template <nodusRedOp_t Op>
  static T Gen(const GenContext& g, int rank, uint64_t index) {
    const uint64_t h = Mix(g.seed, static_cast<uint64_t>(rank), index);
    if constexpr (Op == nodusProd) {
      return static_cast<T>(h | 1);  // odd, so products never collapse to 0
    } else if constexpr (Op == nodusAvg) {
      // Bounded so that the sum over all ranks never overflows T: the average
      // is then the truncated quotient of the true sum, whatever nodus
      // accumulates in.
      if constexpr (std::is_signed_v<T>) {
        const uint64_t m =
            static_cast<uint64_t>(std::numeric_limits<T>::max()) / static_cast<uint64_t>(g.nranks);
        return static_cast<T>(static_cast<int64_t>(h % (2 * m + 1) - m));
      } else {
        const uint64_t m =
            static_cast<uint64_t>(std::numeric_limits<T>::max()) / static_cast<uint64_t>(g.nranks);
        return m == std::numeric_limits<uint64_t>::max() ? static_cast<T>(h)
                                                         : static_cast<T>(h % (m + 1));
      }
    } else {
      return static_cast<T>(h);  // full range: sums wrap, min/max see every sign
    }
  }
  static T Encode(T v) { return v; }

  template <nodusRedOp_t Op>
  static T Reference(const GenContext& g, uint64_t index) {
    using U = std::make_unsigned_t<T>;
    if constexpr (Op == nodusSum || Op == nodusProd) {
      uint64_t acc = Op == nodusSum ? 0 : 1;
      for (int r = 0; r < g.nranks; ++r) {
        const uint64_t v = static_cast<U>(Gen<Op>(g, r, index));
        if constexpr (Op == nodusSum)
          acc += v;
        else
          acc *= v;
      }
      return static_cast<T>(static_cast<U>(acc));
    } else if constexpr (Op == nodusMin || Op == nodusMax) {
      T acc = Gen<Op>(g, 0, index);
      for (int r = 1; r < g.nranks; ++r) {
        const T v = Gen<Op>(g, r, index);
        if constexpr (Op == nodusMin)
          acc = v < acc ? v : acc;
        else
          acc = v > acc ? v : acc;
      }
      return acc;
    } else {
      if constexpr (std::is_signed_v<T>) {
        int64_t sum = 0;
        for (int r = 0; r < g.nranks; ++r) sum += Gen<Op>(g, r, index);
        return static_cast<T>(sum / g.nranks);  // C++ division truncates toward zero
      } else {
        uint64_t sum = 0;
        for (int r = 0; r < g.nranks; ++r) sum += Gen<Op>(g, r, index);
        return static_cast<T>(sum / static_cast<uint64_t>(g.nranks));
      }
    }
  }

  // Exact comparison; avg too, since its sum cannot overflow (see Gen).
  template <nodusRedOp_t Op>
  static bool Matches(T got, T expected) {
    return got == expected;
  }

  static std::string Show(T v) {
    if constexpr (std::is_signed_v<T>)
      return std::to_string(static_cast<long long>(v));
    else
      return std::to_string(static_cast<unsigned long long>(v));
  }
};

// Floating-point types: every input is a small integer, so the reference is
// computed exactly in double and, for every op but avg, is exactly
// representable in the element type together with every partial result any
// reduction order can produce:
//  - sum/avg: |v| <= min(8, 256/nranks): partial sums stay within 256, exact even
//    in bfloat16 (8 significant bits) and float16 (11);
//  - prod: 1, -1 and 2, where 2 is only allowed when (rank + index) % 3 == 0, so
//    at most ceil(nranks/3) factors of 2 meet (2^6 = 64 at 16 ranks: no fp16
//    overflow at any rank count nodus tests run);
//  - min/max: integers in [-64, 64].
// Fmt provides the storage type and its conversions.
template <typename Fmt>
struct FloatModel {
  using Store = typename Fmt::Store;
  using Value = int32_t;  // the small integer an input element holds
  static constexpr bool kFloat = true;

  template <nodusRedOp_t Op>
  static int32_t Gen(const GenContext& g, int rank, uint64_t index) {
    const uint64_t h = Mix(g.seed, static_cast<uint64_t>(rank), index);
    if constexpr (Op == nodusProd) {
      switch (h % 8) {
        case 0:
          return -1;
        case 1:
        case 2:
          return (static_cast<uint64_t>(rank) + index) % 3 == 0 ? 2 : 1;
        default:
          return 1;
      }
    } else if constexpr (Op == nodusMin || Op == nodusMax) {
      return static_cast<int32_t>(h % 129) - 64;
    } else {
      const int32_t k = std::max(1, std::min(8, 256 / g.nranks));
      return static_cast<int32_t>(h % static_cast<uint64_t>(2 * k + 1)) - k;
    }
  }

  static Store Encode(int32_t v) {
    // Inputs lie in [-64, 64]: a table keeps the generic encoder off the hot path.
    static const auto table = [] {
      std::vector<Store> t(129);
      for (int i = 0; i < 129; ++i) t[static_cast<size_t>(i)] = Fmt::FromDouble(i - 64);
      return t;
    }();
    return table[static_cast<size_t>(v + 64)];
  }

  // The exact result (avg: the exact quotient, rounded to double).
  template <nodusRedOp_t Op>
  static double Reference(const GenContext& g, uint64_t index) {
    if constexpr (Op == nodusSum || Op == nodusAvg) {
      int64_t sum = 0;
      for (int r = 0; r < g.nranks; ++r) sum += Gen<Op>(g, r, index);
      if constexpr (Op == nodusAvg)
        return static_cast<double>(sum) / g.nranks;
      else
        return static_cast<double>(sum);
    } else if constexpr (Op == nodusProd) {
      int64_t prod = 1;
      for (int r = 0; r < g.nranks; ++r) prod *= Gen<Op>(g, r, index);
      return static_cast<double>(prod);
    } else {
      int32_t acc = Gen<Op>(g, 0, index);
      for (int r = 1; r < g.nranks; ++r) {
        const int32_t v = Gen<Op>(g, r, index);
        if constexpr (Op == nodusMin)
          acc = std::min(acc, v);
        else
          acc = std::max(acc, v);
      }
      return acc;
    }
  }

  template <nodusRedOp_t Op>
  static bool Matches(Store gotBits, double expected) {
    const double got = Fmt::ToDouble(gotBits);
    if constexpr (Op != nodusAvg) {
      return got == expected;  // exact by construction (see above); NaN never matches
    } else {
      // nodus.h: avg divides the sum by nranks, fp16/bf16 reduced in fp32 and
      // rounded once. The sum is exact, so a correctly rounded division gives
      // exactly `rounded`; an implementation that multiplies by a rounded 1/nranks,
      // or divides in fp32 and then rounds to fp16/bf16 (double rounding), can land
      // on the neighbouring value but no further: hence 1 ulp of the result type.
      const double rounded = Fmt::Round(expected);
      return std::fabs(got - rounded) <= UlpAt(rounded, Fmt::kExpBits, Fmt::kMantBits);
    }
  }

  static std::string Show(Store bits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", Fmt::ToDouble(bits));
    return buf;
  }
  static std::string ShowExpected(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
  }
};

struct HalfFmt {
  using Store = uint16_t;
  static constexpr int kExpBits = 5, kMantBits = 10;
  static uint16_t FromDouble(double v) { return DoubleToHalf(v); }
  static double ToDouble(uint16_t b) { return HalfToDouble(b); }
  static double Round(double v) { return HalfToDouble(DoubleToHalf(v)); }
};
struct Bf16Fmt {
  using Store = uint16_t;
  static constexpr int kExpBits = 8, kMantBits = 7;
  static uint16_t FromDouble(double v) { return DoubleToBfloat16(v); }
  static double ToDouble(uint16_t b) { return Bfloat16ToDouble(b); }
  static double Round(double v) { return Bfloat16ToDouble(DoubleToBfloat16(v)); }
};
struct F32Fmt {
  using Store = float;
  static constexpr int kExpBits = 8, kMantBits = 23;
  static float FromDouble(double v) { return static_cast<float>(v); }
  static double ToDouble(float b) { return b; }
  static double Round(double v) { return static_cast<float>(v); }
};
struct F64Fmt {
  using Store = double;
  static constexpr int kExpBits = 11, kMantBits = 52;
  static double FromDouble(double v) { return v; }
  static double ToDouble(double b) { return b; }
  static double Round(double v) { return v; }
};

template <typename F>
auto DispatchType(nodusDataType_t type, F&& f) {
  switch (type) {
    case nodusInt8:
      return f.template operator()<IntModel<int8_t>>();
    case nodusUint8:
      return f.template operator()<IntModel<uint8_t>>();
    case nodusInt32:
      return f.template operator()<IntModel<int32_t>>();
    case nodusUint32:
      return f.template operator()<IntModel<uint32_t>>();
    case nodusInt64:
      return f.template operator()<IntModel<int64_t>>();
    case nodusUint64:
      return f.template operator()<IntModel<uint64_t>>();
    case nodusFloat16:
      return f.template operator()<FloatModel<HalfFmt>>();
    case nodusBfloat16:
      return f.template operator()<FloatModel<Bf16Fmt>>();
    case nodusFloat32:
      return f.template operator()<FloatModel<F32Fmt>>();
    default:
      return f.template operator()<FloatModel<F64Fmt>>();
  }
}

template <typename F>
auto DispatchOp(nodusRedOp_t op, F&& f) {
  switch (op) {
    case nodusSum:
      return f.template operator()<nodusSum>();
    case nodusProd:
      return f.template operator()<nodusProd>();
    case nodusMin:
      return f.template operator()<nodusMin>();
    case nodusMax:
      return f.template operator()<nodusMax>();
    default:
      return f.template operator()<nodusAvg>();
  }
}

// Patterns that a correct library never writes by accident.
inline unsigned char GuardByte(size_t j) { return static_cast<unsigned char>(0xA5 ^ (j * 61)); }
inline unsigned char PoisonByte(size_t j, uint64_t seed) {
  return static_cast<unsigned char>(0xC3 ^ (j * 131) ^ (seed >> 7));
}

template <typename Store>
Store Load(const unsigned char* base, size_t i) {
  Store v;
  std::memcpy(&v, base + i * sizeof(Store), sizeof(Store));
  return v;
}
template <typename Store>
void StoreAt(unsigned char* base, size_t i, Store v) {
  std::memcpy(base + i * sizeof(Store), &v, sizeof(Store));
}

// Collects mismatches of one buffer: how many, and the first one in detail.
class Mismatches {
 public:
  explicit Mismatches(std::string what) : what_(std::move(what)) {}
  void Add(size_t index, const std::string& got, const std::string& expected) {
    if (bad_++ == 0) {
      first_ = index;
      got_ = got;
      expected_ = expected;
    }
  }
  void AddRaw(size_t index) { Add(index, "", ""); }
  std::string Report() const {
    if (bad_ == 0) return "";
    std::string s = what_ + ": first bad index " + std::to_string(first_);
    if (!got_.empty() || !expected_.empty()) s += " (got " + got_ + ", expected " + expected_ + ")";
    s += ", " + std::to_string(bad_) + " bad element(s); ";
    return s;
  }

 private:
  std::string what_;
  size_t bad_ = 0;
  size_t first_ = 0;
  std::string got_, expected_;
};

// dst[i] = input of `rank` at index offset + i.
template <typename M, nodusRedOp_t Op>
void FillInput(unsigned char* dst, const GenContext& g, int rank, size_t offset, size_t n) {
  for (size_t i = 0; i < n; ++i)
    StoreAt(dst, i, M::Encode(M::template Gen<Op>(g, rank, offset + i)));
}

// Whether buf[i] still holds the input of `rank` at index offset + i.
template <typename M, nodusRedOp_t Op>
std::string CheckInput(const unsigned char* buf, const GenContext& g, int rank, size_t offset,
                       size_t n, const std::string& what) {
  using Store = typename M::Store;
  Mismatches mm(what);
  for (size_t i = 0; i < n; ++i) {
    const Store expected = M::Encode(M::template Gen<Op>(g, rank, offset + i));
    const Store got = Load<Store>(buf, i);
    if (std::memcmp(&got, &expected, sizeof(Store)) != 0)
      mm.Add(i, M::Show(got), M::Show(expected));
  }
  return mm.Report();
}

// Whether buf[i] is the reduction over all ranks of index offset + i.
template <typename M, nodusRedOp_t Op>
std::string CheckReduced(const unsigned char* buf, const GenContext& g, size_t offset, size_t n,
                         const std::string& what) {
  using Store = typename M::Store;
  Mismatches mm(what);
  for (size_t i = 0; i < n; ++i) {
    const auto expected = M::template Reference<Op>(g, offset + i);
    const Store got = Load<Store>(buf, i);
    if (!M::template Matches<Op>(got, expected)) {
      if constexpr (M::kFloat)
        mm.Add(i, M::Show(got), M::ShowExpected(expected));
      else
        mm.Add(i, M::Show(got), M::Show(expected));
    }
  }
  return mm.Report();
}

std::string CheckPoison(const unsigned char* buf, size_t bytes, uint64_t seed,
                        const std::string& what) {
  Mismatches mm(what);
  for (size_t j = 0; j < bytes; ++j)
    if (buf[j] != PoisonByte(j, seed)) mm.AddRaw(j);
  return mm.Report();
}

void FillPoison(unsigned char* buf, size_t bytes, uint64_t seed) {
  for (size_t j = 0; j < bytes; ++j) buf[j] = PoisonByte(j, seed);
}

}  // namespace

// ---- Buffers -------------------------------------------------------------------

CollectiveCheck::Region::Region(size_t bytes)
    : storage_((bytes + 2 * kGuardBytes + 7) / 8), bytes_(bytes) {
  unsigned char* b = base();
  for (size_t j = 0; j < kGuardBytes; ++j) {
    b[j] = GuardByte(j);
    b[kGuardBytes + bytes + j] = GuardByte(j + kGuardBytes);
  }
}

std::string CollectiveCheck::Region::CheckGuards(const char* what) const {
  if (!allocated()) return "";
  const unsigned char* b = base();
  for (size_t j = 0; j < kGuardBytes; ++j) {
    if (b[j] != GuardByte(j))
      return std::string(what) + ": byte " +
             std::to_string(static_cast<long long>(j) - static_cast<long long>(kGuardBytes)) +
             " before the buffer was overwritten; ";
  }
  for (size_t j = 0; j < kGuardBytes; ++j) {
    if (b[kGuardBytes + bytes_ + j] != GuardByte(j + kGuardBytes))
      return std::string(what) + ": byte " + std::to_string(j) +
             " past the end of the buffer was overwritten; ";
  }
  return "";
}

// ---- One call ------------------------------------------------------------------

CollectiveCheck::CollectiveCheck(const CheckCase& c, int nranks, int rank)
    : case_(c), nranks_(nranks), rank_(rank) {
  const size_t es = TypeSize(c.type);
  const size_t n = static_cast<size_t>(nranks);
  const size_t count = c.count;
  const bool isRoot = rank == c.root;
  const GenContext g{c.seed, nranks};
  DispatchType(c.type, [&]<typename M>() {
    DispatchOp(CollUsesOp(c.coll) ? c.op : nodusSum, [&]<nodusRedOp_t Op>() {
      switch (c.coll) {
        case Coll::kAllReduce:
        case Coll::kReduce:
          if (c.inPlace) {
            recv_ = Region(count * es);
            FillInput<M, Op>(recv_.data(), g, rank, 0, count);
            sendPtr_ = recvPtr_ = recv_.data();
          } else {
            send_ = Region(count * es);
            FillInput<M, Op>(send_.data(), g, rank, 0, count);
            sendPtr_ = send_.data();
            // Reduce: recvbuf "may be NULL" off the root. Odd non-roots pass NULL,
            // even ones a poisoned buffer that must stay untouched.
            if (c.coll == Coll::kAllReduce || isRoot || rank % 2 == 0) {
              recv_ = Region(count * es);
              FillPoison(recv_.data(), recv_.bytes(), c.seed);
              recvPtr_ = recv_.data();
            }
          }
          break;
        case Coll::kAllGather:
          if (c.listOutput) {
            parts_.resize(n);
            partPtrs_.resize(n);
            for (size_t r = n; r-- > 0;) {
              parts_[r] = Region(count * es);
              FillPoison(parts_[r].data(), parts_[r].bytes(), c.seed + r);
              partPtrs_[r] = parts_[r].data();
            }
            if (c.inPlace) {
              FillInput<M, Op>(parts_[static_cast<size_t>(rank)].data(), g, rank, 0, count);
              sendPtr_ = parts_[static_cast<size_t>(rank)].data();
            } else {
              send_ = Region(count * es);
              FillInput<M, Op>(send_.data(), g, rank, 0, count);
              sendPtr_ = send_.data();
            }
            break;
          }
          recv_ = Region(n * count * es);
          FillPoison(recv_.data(), recv_.bytes(), c.seed);
          if (c.inPlace) {
            FillInput<M, Op>(recv_.data() + static_cast<size_t>(rank) * count * es, g, rank, 0,
                             count);
            sendPtr_ = recv_.data() + static_cast<size_t>(rank) * count * es;
          } else {
            send_ = Region(count * es);
            FillInput<M, Op>(send_.data(), g, rank, 0, count);
            sendPtr_ = send_.data();
          }
          recvPtr_ = recv_.data();
          break;
        case Coll::kReduceScatter:
          if (c.inPlace) {
            recv_ = Region(n * count * es);  // the whole send buffer; recvbuf is block `rank`
            FillInput<M, Op>(recv_.data(), g, rank, 0, n * count);
            sendPtr_ = recv_.data();
            recvPtr_ = recv_.data() + static_cast<size_t>(rank) * count * es;
          } else {
            send_ = Region(n * count * es);
            FillInput<M, Op>(send_.data(), g, rank, 0, n * count);
            recv_ = Region(count * es);
            FillPoison(recv_.data(), recv_.bytes(), c.seed);
            sendPtr_ = send_.data();
            recvPtr_ = recv_.data();
          }
          break;
        case Coll::kBroadcast:
          recv_ = Region(count * es);
          if (c.inPlace) {
            if (isRoot)
              FillInput<M, Op>(recv_.data(), g, rank, 0, count);
            else
              FillPoison(recv_.data(), recv_.bytes(), c.seed);
            sendPtr_ = recv_.data();
          } else {
            // Non-roots pass their own data: nodus must not read it.
            send_ = Region(count * es);
            FillInput<M, Op>(send_.data(), g, rank, 0, count);
            FillPoison(recv_.data(), recv_.bytes(), c.seed);
            sendPtr_ = send_.data();
          }
          recvPtr_ = recv_.data();
          break;
      }
      return 0;
    });
    return 0;
  });
}

nodusResult_t CollectiveCheck::Issue(nodusComm_t comm, nodusRequest_t* request) {
  comm_ = comm;
  const CheckCase& c = case_;
  switch (c.coll) {
    case Coll::kAllReduce:
      return request ? nodusIallReduce(sendPtr_, recvPtr_, c.count, c.type, c.op, comm, request)
                     : nodusAllReduce(sendPtr_, recvPtr_, c.count, c.type, c.op, comm);
    case Coll::kAllGather:
      if (c.listOutput)
        return request ? nodusIallGatherList(sendPtr_, partPtrs_.data(), c.count, c.type, comm, request)
                       : nodusAllGatherList(sendPtr_, partPtrs_.data(), c.count, c.type, comm);
      return request ? nodusIallGather(sendPtr_, recvPtr_, c.count, c.type, comm, request)
                     : nodusAllGather(sendPtr_, recvPtr_, c.count, c.type, comm);
    case Coll::kReduceScatter:
      return request ? nodusIreduceScatter(sendPtr_, recvPtr_, c.count, c.type, c.op, comm, request)
                     : nodusReduceScatter(sendPtr_, recvPtr_, c.count, c.type, c.op, comm);
    case Coll::kBroadcast:
      return request ? nodusIbroadcast(sendPtr_, recvPtr_, c.count, c.type, c.root, comm, request)
                     : nodusBroadcast(sendPtr_, recvPtr_, c.count, c.type, c.root, comm);
    case Coll::kReduce:
      return request
                 ? nodusIreduce(sendPtr_, recvPtr_, c.count, c.type, c.op, c.root, comm, request)
                 : nodusReduce(sendPtr_, recvPtr_, c.count, c.type, c.op, c.root, comm);
  }
  return nodusInternalError;
}

CheckOutcome CollectiveCheck::Verify(nodusResult_t result) const {
  const CheckCase& c = case_;
  CheckOutcome out;
  out.result = result;
  out.comparable = CollOutputsAgree(c.coll);
  const std::string prefix =
      Describe(c) + ", rank " + std::to_string(rank_) + " of " + std::to_string(nranks_) + ": ";
  if (result != nodusSuccess) {
    out.failure = prefix + "returned " + ResultName(result) + " (" + nodusGetLastError(comm_) + ")";
    return out;
  }
  const size_t es = TypeSize(c.type);
  const size_t n = static_cast<size_t>(nranks_);
  const size_t count = c.count;
  const bool isRoot = rank_ == c.root;
  const GenContext g{c.seed, nranks_};
  std::string err = send_.CheckGuards("sendbuf guard") + recv_.CheckGuards("recvbuf guard");
  for (size_t r = 0; r < parts_.size(); ++r)
    err += parts_[r].CheckGuards(("recvbufs[" + std::to_string(r) + "] guard").c_str());

  err += DispatchType(c.type, [&]<typename M>() {
    return DispatchOp(CollUsesOp(c.coll) ? c.op : nodusSum, [&]<nodusRedOp_t Op>() {
      std::string e;
      // An out-of-place send buffer is const: it must hold this rank's input still.
      if (send_.allocated()) {
        const size_t elems = c.coll == Coll::kReduceScatter ? n * count : count;
        e += CheckInput<M, Op>(send_.data(), g, rank_, 0, elems, "sendbuf modified");
      }
      switch (c.coll) {
        case Coll::kAllReduce:
          if (c.checkSliceOnly) {
            const size_t begin = count * static_cast<size_t>(rank_) / n;
            const size_t end = count * static_cast<size_t>(rank_ + 1) / n;
            e += CheckReduced<M, Op>(recv_.data() + begin * es, g, begin, end - begin,
                                     "recvbuf (slice from index " + std::to_string(begin) + ")");
          } else {
            e += CheckReduced<M, Op>(recv_.data(), g, 0, count, "recvbuf");
          }
          break;
        case Coll::kReduce:
          if (isRoot) {
            e += CheckReduced<M, Op>(recv_.data(), g, 0, count, "recvbuf at root");
          } else if (c.inPlace) {
            e += CheckInput<M, Op>(recv_.data(), g, rank_, 0, count,
                                   "in-place buffer off the root modified");
          } else if (recv_.allocated()) {
            e += CheckPoison(recv_.data(), recv_.bytes(), c.seed,
                             "recvbuf off the root written (bytes)");
          }
          break;
        case Coll::kAllGather:
          for (int r = 0; r < nranks_; ++r) {
            if (c.listOutput)
              e += CheckInput<M, Op>(parts_[static_cast<size_t>(r)].data(), g, r, 0, count,
                                     "recvbufs[" + std::to_string(r) + "]");
            else
              e += CheckInput<M, Op>(recv_.data() + static_cast<size_t>(r) * count * es, g, r, 0,
                                     count, "recvbuf block of rank " + std::to_string(r));
          }
          break;
        case Coll::kReduceScatter:
          // In place, only block `rank` of the send buffer is specified afterwards.
          e += CheckReduced<M, Op>(static_cast<const unsigned char*>(recvPtr_), g,
                                   static_cast<size_t>(rank_) * count, count, "recvbuf");
          break;
        case Coll::kBroadcast:
          e += CheckInput<M, Op>(recv_.data(), g, c.root, 0, count, "recvbuf (root's data)");
          break;
      }
      return e;
    });
  });

  if (out.comparable && c.listOutput) {
    std::vector<unsigned char> all;  // the blocks end to end: the same hash as a contiguous output
    for (const Region& part : parts_) all.insert(all.end(), part.data(), part.data() + part.bytes());
    out.outputHash = HashBytes(all.data(), all.size());
  } else if (out.comparable) {
    out.outputHash = HashBytes(recv_.data(), recv_.bytes());
  }
  if (!err.empty()) out.failure = prefix + err;
  return out;
}

CheckOutcome RunCollectiveCheck(nodusComm_t comm, const CheckCase& c) {
  int nranks = 0, rank = 0;
  nodusResult_t r = nodusCommCount(comm, &nranks);
  if (r == nodusSuccess) r = nodusCommUserRank(comm, &rank);
  if (r != nodusSuccess) {
    CheckOutcome out;
    out.result = r;
    out.failure = Describe(c) + ": nodusCommCount/UserRank returned " + ResultName(r);
    return out;
  }
  CollectiveCheck check(c, nranks, rank);
  if (!c.nonBlocking) return check.Verify(check.Issue(comm, nullptr));
  nodusRequest_t request = nullptr;
  r = check.Issue(comm, &request);
  if (r == nodusSuccess) {
    r = nodusWait(request);
    const nodusResult_t freed = nodusRequestFree(request);
    if (r == nodusSuccess && freed != nodusSuccess) r = freed;
  }
  return check.Verify(r);
}

::testing::AssertionResult Passed(const CheckOutcome& outcome) {
  if (outcome.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << outcome.failure;
}

std::string CompareAcrossRanks(const CheckCase& c, const std::vector<uint64_t>& hashByRank) {
  if (!CollOutputsAgree(c.coll) || hashByRank.empty()) return "";
  std::string s;
  for (size_t r = 1; r < hashByRank.size(); ++r) {
    if (hashByRank[r] != hashByRank[0]) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " rank %zu (hash %016" PRIx64 ")", r, hashByRank[r]);
      s += buf;
    }
  }
  if (s.empty()) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, hashByRank[0]);
  return Describe(c) + ": output differs from rank 0's (hash " + buf + ") on" + s;
}

std::string CompareAcrossRanks(const CheckCase& c, const std::vector<CheckOutcome>& byRank) {
  // Ranks whose call failed are reported by their own outcome.
  for (const CheckOutcome& o : byRank)
    if (o.result != nodusSuccess) return "";
  std::vector<uint64_t> hashes;
  hashes.reserve(byRank.size());
  for (const CheckOutcome& o : byRank) hashes.push_back(o.outputHash);
  return CompareAcrossRanks(c, hashes);
}

size_t RunCasesOnRank(nodusComm_t comm, const std::vector<CheckCase>& cases,
                      const std::function<void(const std::string&)>& fail,
                      std::vector<uint64_t>* hashes) {
  for (size_t i = 0; i < cases.size(); ++i) {
    const CheckOutcome o = RunCollectiveCheck(comm, cases[i]);
    if (hashes) hashes->push_back(o.outputHash);
    if (!o.ok()) fail(o.failure);
    if (o.result != nodusSuccess) {
      nodusCommAbort(comm);
      return i + 1;
    }
  }
  return cases.size();
}

// ---- Per-rank scenarios ----------------------------------------------------------

namespace {

std::string RankText(int rank, int nranks) {
  return "rank " + std::to_string(rank) + " of " + std::to_string(nranks) + ": ";
}

// Shared counters: plain ints in memory shared by threads or processes,
// touched only through atomic builtins.
int AtomicAdd(int* p, int v) { return __atomic_add_fetch(p, v, __ATOMIC_SEQ_CST); }
int AtomicLoad(const int* p) { return __atomic_load_n(p, __ATOMIC_SEQ_CST); }

}  // namespace

float RingValue(int rank, size_t index) {
  return static_cast<float>((index * 7 + static_cast<size_t>(rank) * 13) % 4093);
}

void IssueOrderScenario(nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
  constexpr int kRequests = 12;
  std::vector<std::unique_ptr<CollectiveCheck>> checks;
  std::vector<nodusRequest_t> requests(kRequests, nullptr);
  for (int i = 0; i < kRequests; ++i) {
    CheckCase c;
    c.coll = i % 4 == 3 ? kAllColls[static_cast<size_t>(i / 4) % 5] : Coll::kAllReduce;
    c.type = kAllTypes[static_cast<size_t>(i * 3) % 10];
    c.op = kAllOps[static_cast<size_t>(i) % 5];
    c.count = i % 3 == 0 ? 70001 : static_cast<size_t>(1 + i * 37);
    c.root = i % nranks;
    c.inPlace = i % 2 == 1;
    c.nonBlocking = true;
    c.seed = 7000 + static_cast<uint64_t>(i);
    checks.push_back(std::make_unique<CollectiveCheck>(c, nranks, rank));
    const nodusResult_t issued = checks.back()->Issue(comm, &requests[static_cast<size_t>(i)]);
    if (issued != nodusSuccess) {
      fail(RankText(rank, nranks) + "issuing " + Describe(c) + " returned " + ResultName(issued) +
           ": " + nodusGetLastError(comm));
      nodusCommAbort(comm);
      for (int j = 0; j < i; ++j) nodusRequestFree(requests[static_cast<size_t>(j)]);
      return;
    }
  }
  std::vector<nodusResult_t> results(kRequests, nodusSuccess);
  std::vector<bool> done(kRequests, false);
  int remaining = kRequests;
  bool reportedOrder = false;
  while (remaining > 0) {
    // Latest first: once request i is seen done, every j < i tested after it must be.
    bool laterDone = false;
    for (int i = kRequests - 1; i >= 0; --i) {
      const size_t k = static_cast<size_t>(i);
      if (done[k]) {
        laterDone = true;
        continue;
      }
      int d = 0;
      const nodusResult_t t = nodusTest(requests[k], &d);
      if (d) {
        done[k] = true;
        results[k] = t;
        --remaining;
        laterDone = true;
      } else {
        if (t != nodusSuccess) {
          fail(RankText(rank, nranks) + "nodusTest of an incomplete request returned " +
               ResultName(t));
        }
        if (laterDone && !reportedOrder) {
          reportedOrder = true;
          fail(RankText(rank, nranks) + "request " + std::to_string(i) +
               " is not done although a later one is (completion out of issue order)");
        }
      }
    }
    std::this_thread::yield();
  }
  for (int i = 0; i < kRequests; ++i) {
    const size_t k = static_cast<size_t>(i);
    const nodusResult_t freed = nodusRequestFree(requests[k]);
    if (freed != nodusSuccess) fail(std::string("nodusRequestFree returned ") + ResultName(freed));
    const CheckOutcome o = checks[k]->Verify(results[k]);
    if (!o.ok()) fail("request " + std::to_string(i) + ": " + o.failure);
  }
}

void WaitLastScenario(nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
  constexpr int kRequests = 6;
  std::vector<std::unique_ptr<CollectiveCheck>> checks;
  std::vector<nodusRequest_t> requests(kRequests, nullptr);
  for (int i = 0; i < kRequests; ++i) {
    CheckCase c;
    c.type = i % 2 ? nodusFloat32 : nodusInt32;
    c.op = nodusSum;
    c.count = 20000 + static_cast<size_t>(i);
    c.nonBlocking = true;
    c.seed = 900 + static_cast<uint64_t>(i);
    checks.push_back(std::make_unique<CollectiveCheck>(c, nranks, rank));
    const nodusResult_t issued = checks.back()->Issue(comm, &requests[static_cast<size_t>(i)]);
    if (issued != nodusSuccess) {
      fail(RankText(rank, nranks) + "issuing returned " + ResultName(issued));
      nodusCommAbort(comm);
      for (int j = 0; j < i; ++j) nodusRequestFree(requests[static_cast<size_t>(j)]);
      return;
    }
  }
  const nodusResult_t last = nodusWait(requests[kRequests - 1]);
  for (int i = 0; i < kRequests; ++i) {
    const size_t k = static_cast<size_t>(i);
    int d = 0;
    nodusResult_t t = nodusTest(requests[k], &d);
    if (!d) {
      fail(RankText(rank, nranks) + "request " + std::to_string(i) +
           " not done after waiting for the last one");
      t = nodusWait(requests[k]);
    }
    if (i == kRequests - 1 && last != t)
      fail(std::string("nodusWait returned ") + ResultName(last) + " but nodusTest " +
           ResultName(t));
    const CheckOutcome o = checks[k]->Verify(t);
    if (!o.ok()) fail(o.failure);
    nodusRequestFree(requests[k]);
  }
}

void BackgroundProgressScenario(nodusComm_t comm, int rank, int nranks, Coll coll,
                                const FailFn& fail) {
  CheckCase c;
  c.coll = coll;
  c.type = nodusFloat32;
  c.op = nodusSum;
  // 4 MiB: beyond the single-round algorithms, so completing takes many
  // dependent pipelined steps that a poll-driven library could not finish in
  // the two nodusTest calls below.
  c.count = size_t{1} << 20;
  c.root = nranks - 1;
  c.nonBlocking = true;
  c.seed = 4242;
  {
    // Warm-up (blocking, same signature): first-call costs such as planning
    // and touching fresh buffers are not what this scenario measures.
    CheckCase warm = c;
    warm.nonBlocking = false;
    warm.seed = 4241;
    const CheckOutcome o = RunCollectiveCheck(comm, warm);
    if (!o.ok()) {
      fail("warm-up: " + o.failure);
      return;
    }
  }
  CollectiveCheck check(c, nranks, rank);
  nodusRequest_t request = nullptr;
  const nodusResult_t issued = check.Issue(comm, &request);
  if (issued != nodusSuccess) {
    fail(RankText(rank, nranks) + Describe(c) + ": issue returned " + ResultName(issued));
    nodusCommAbort(comm);
    return;
  }
  // "Other work", then a look. nodusTest only reads the request's state, and
  // a handful of looks cannot drive the many pipelined steps of this
  // collective, so completion proves background progress. The looks back off
  // (50 ms, then 1, 2, 4, 8, 16 s) because two loaded cores running
  // sanitizer builds of several ranks may take seconds to get there.
  int d = 0;
  nodusResult_t t = nodusSuccess;
  int waitedMs = 0;
  for (int delayMs = 50; delayMs <= 16000; delayMs = delayMs == 50 ? 1000 : delayMs * 2) {
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    waitedMs += delayMs;
    t = nodusTest(request, &d);
    if (d) break;
    std::fprintf(stderr, "note: %s, %snot complete %d ms after issue; looking again later\n",
                 Describe(c).c_str(), RankText(rank, nranks).c_str(), waitedMs);
  }
  if (!d) {
    fail(Describe(c) + ", " + RankText(rank, nranks) + "not complete " + std::to_string(waitedMs) +
         " ms after issue without polling (no background progress)");
    t = nodusWait(request);
  }
  const CheckOutcome o = check.Verify(t);
  if (!o.ok()) fail(o.failure);
  nodusRequestFree(request);
}

void IbarrierIsendIrecvScenario(nodusComm_t comm, int rank, int nranks, int* arrived,
                                const FailFn& fail) {
  std::this_thread::sleep_for(std::chrono::milliseconds(5 * rank));
  AtomicAdd(arrived, 1);
  nodusRequest_t barrier = nullptr;
  nodusResult_t r = nodusIbarrier(comm, &barrier);
  if (r == nodusSuccess) r = nodusWait(barrier);
  if (r != nodusSuccess) {
    fail(RankText(rank, nranks) + "Ibarrier returned " + ResultName(r));
    nodusCommAbort(comm);
    return;
  }
  if (AtomicLoad(arrived) != nranks)
    fail(RankText(rank, nranks) + "Ibarrier completed before every rank arrived");
  nodusRequestFree(barrier);

  // Pairs (0,1), (2,3), ...: outside a group requests of one communicator run
  // in issue order, so the lower rank sends first and the higher receives first.
  const int peer = rank ^ 1;
  if (peer >= nranks) return;
  const size_t count = 50001;
  std::vector<int64_t> out(count), in(count, -1);
  for (size_t i = 0; i < count; ++i) out[i] = static_cast<int64_t>(i) * 1000 + rank;
  nodusRequest_t first = nullptr, second = nullptr;
  nodusResult_t a, b;
  if (rank < peer) {
    a = nodusIsend(out.data(), count, nodusInt64, peer, comm, &first);
    b = nodusIrecv(in.data(), count, nodusInt64, peer, comm, &second);
  } else {
    a = nodusIrecv(in.data(), count, nodusInt64, peer, comm, &first);
    b = nodusIsend(out.data(), count, nodusInt64, peer, comm, &second);
  }
  if (a != nodusSuccess || b != nodusSuccess) {
    fail(RankText(rank, nranks) + "Isend/Irecv returned " + ResultName(a) + "/" + ResultName(b));
    nodusCommAbort(comm);
    return;
  }
  const nodusResult_t w = nodusWait(second);
  if (w != nodusSuccess) fail(RankText(rank, nranks) + "Wait returned " + ResultName(w));
  int d = 0;
  const nodusResult_t t = nodusTest(first, &d);
  if (!d || t != nodusSuccess)
    fail(RankText(rank, nranks) +
         "the first request is not done (or failed) although the second is");
  nodusRequestFree(first);
  nodusRequestFree(second);
  for (size_t i = 0; i < count; ++i) {
    if (in[i] != static_cast<int64_t>(i) * 1000 + peer) {
      fail(RankText(rank, nranks) + "Irecv from " + std::to_string(peer) + " wrong at index " +
           std::to_string(i));
      break;
    }
  }
}

void GroupRingScenario(nodusComm_t comm, int rank, int nranks, size_t count, const FailFn& fail) {
  std::vector<float> out(count + 1), in(count + 1, -1.0f);  // never empty: no null pointers
  for (size_t i = 0; i < count; ++i) out[i] = RingValue(rank, i);
  const int to = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;
  const nodusResult_t g = nodusGroupStart();
  const nodusResult_t s = nodusSend(out.data(), count, nodusFloat32, to, comm);
  const nodusResult_t v = nodusRecv(in.data(), count, nodusFloat32, from, comm);
  const nodusResult_t e = nodusGroupEnd();
  if (g != nodusSuccess || s != nodusSuccess || v != nodusSuccess || e != nodusSuccess) {
    fail(RankText(rank, nranks) + "GroupStart/Send/Recv/GroupEnd returned " + ResultName(g) + "/" +
         ResultName(s) + "/" + ResultName(v) + "/" + ResultName(e) + ": " +
         nodusGetLastError(comm));
    return;
  }
  for (size_t i = 0; i < count; ++i) {
    if (in[i] != RingValue(from, i)) {
      fail("group ring of " + std::to_string(nranks) + " ranks, " + std::to_string(count) +
           " floats: " + RankText(rank, nranks) + "received wrong data at index " +
           std::to_string(i));
      break;
    }
  }
  if (in[count] != -1.0f) fail(RankText(rank, nranks) + "Recv wrote past its count");
}

void GroupRequestsScenario(nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
  std::vector<std::unique_ptr<CollectiveCheck>> checks;
  std::vector<nodusRequest_t> requests;
  std::vector<nodusResult_t> issued;
  nodusGroupStart();
  for (int i = 0; i < 5; ++i) {
    CheckCase c;
    c.coll = kAllColls[static_cast<size_t>(i)];
    c.type = nodusBfloat16;
    c.op = nodusMax;
    c.root = i % nranks;
    c.count = 3001 + static_cast<size_t>(i);
    c.nonBlocking = true;
    c.seed = 31 + static_cast<uint64_t>(i);
    checks.push_back(std::make_unique<CollectiveCheck>(c, nranks, rank));
    requests.push_back(nullptr);
    issued.push_back(checks.back()->Issue(comm, &requests.back()));
  }
  const nodusResult_t e = nodusGroupEnd();
  if (e != nodusSuccess) fail(RankText(rank, nranks) + "GroupEnd returned " + ResultName(e));
  for (size_t i = 0; i < checks.size(); ++i) {
    if (issued[i] != nodusSuccess) {
      fail(RankText(rank, nranks) + "issuing in a group returned " + ResultName(issued[i]));
      continue;
    }
    int d = 0;
    nodusResult_t t = nodusTest(requests[i], &d);
    if (!d) {
      fail(RankText(rank, nranks) + "request " + std::to_string(i) +
           " of the group not done after nodusGroupEnd");
      t = nodusWait(requests[i]);
    }
    const CheckOutcome o = checks[i]->Verify(t);
    if (!o.ok()) fail(o.failure);
    nodusRequestFree(requests[i]);
  }
}

// Several calls of one group whose plans use the communicator's scratch
// (in-place AllReduce and ReduceScatter: direct, tree, halving-doubling),
// of growing size: each must get its own scratch, and the group's later,
// larger calls must not move the scratch of its earlier ones.
void GroupScratchScenario(nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
  std::vector<std::unique_ptr<CollectiveCheck>> checks;
  std::vector<nodusResult_t> issued;
  const size_t counts[] = {5, 64, 300, 1000, 20000, 70000};
  nodusGroupStart();
  for (size_t i = 0; i < std::size(counts); ++i) {
    CheckCase c;
    c.coll = i % 3 == 2 ? Coll::kReduceScatter : Coll::kAllReduce;
    c.type = i % 2 ? nodusFloat64 : nodusInt32;
    c.op = nodusSum;
    c.count = counts[i];
    c.inPlace = true;
    c.seed = 4242 + static_cast<uint64_t>(i);
    checks.push_back(std::make_unique<CollectiveCheck>(c, nranks, rank));
    issued.push_back(checks.back()->Issue(comm, nullptr));
  }
  const nodusResult_t e = nodusGroupEnd();
  if (e != nodusSuccess) fail(RankText(rank, nranks) + "GroupEnd returned " + ResultName(e));
  for (size_t i = 0; i < checks.size(); ++i) {
    const CheckOutcome o = checks[i]->Verify(e != nodusSuccess ? e : issued[i]);
    if (!o.ok()) fail(o.failure);
  }
}

void NestedGroupsScenario(nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
  std::vector<std::unique_ptr<CollectiveCheck>> checks;
  std::vector<nodusResult_t> issued;
  nodusResult_t groupCalls = nodusGroupStart();
  for (int i = 0; i < 10; ++i) {
    if (i == 3 && groupCalls == nodusSuccess) groupCalls = nodusGroupStart();
    if (i == 7 && groupCalls == nodusSuccess)
      groupCalls = nodusGroupEnd();  // inner: launches nothing
    CheckCase c;
    c.coll = kAllColls[static_cast<size_t>(i) % 5];
    c.type = kAllTypes[static_cast<size_t>(i)];
    c.op = kAllOps[static_cast<size_t>(i + 1) % 5];
    c.root = (i + 1) % nranks;
    c.count = 777 + static_cast<size_t>(i) * 100;
    c.inPlace = i % 3 == 0;
    c.seed = 8080 + static_cast<uint64_t>(i);
    checks.push_back(std::make_unique<CollectiveCheck>(c, nranks, rank));
    issued.push_back(checks.back()->Issue(comm, nullptr));
  }
  const nodusResult_t e = nodusGroupEnd();
  if (groupCalls != nodusSuccess || e != nodusSuccess) {
    fail(RankText(rank, nranks) + "nested GroupStart/End returned " + ResultName(groupCalls) +
         ", outer GroupEnd " + ResultName(e));
  }
  for (size_t i = 0; i < checks.size(); ++i) {
    const CheckOutcome o = checks[i]->Verify(e != nodusSuccess ? e : issued[i]);
    if (!o.ok()) fail(o.failure);
  }
}

void SendRecvPairsScenario(nodusComm_t comm, int rank, int nranks, const FailFn& fail) {
  int pairIndex = 0;
  for (int from = 0; from < nranks; ++from) {
    for (int to = 0; to < nranks; ++to) {
      if (from == to) continue;
      ++pairIndex;
      if (rank != from && rank != to) continue;
      const nodusDataType_t type = kAllTypes[static_cast<size_t>(pairIndex) % 10];
      const size_t es = TypeSize(type);
      const size_t counts[2] = {static_cast<size_t>(pairIndex) * 1111 % 70001,
                                pairIndex % 4 == 0 ? 0 : static_cast<size_t>(pairIndex) + 5};
      for (int m = 0; m < 2; ++m) {
        const size_t bytes = counts[m] * es;
        std::vector<unsigned char> expected(bytes + 1);
        for (size_t j = 0; j < bytes; ++j) {
          expected[j] = static_cast<unsigned char>(
              (j * 29 + static_cast<size_t>(from * 7 + to * 3 + m * 101)) % 251);
        }
        const std::string what = "message " + std::to_string(m) + " " + std::to_string(from) +
                                 "->" + std::to_string(to) + " (" + TypeName(type) + " x " +
                                 std::to_string(counts[m]) + ")";
        if (rank == from) {
          const nodusResult_t s = nodusSend(expected.data(), counts[m], type, to, comm);
          if (s != nodusSuccess) {
            fail(what + ": Send returned " + ResultName(s));
            nodusCommAbort(comm);
            return;
          }
        } else {
          std::vector<unsigned char> got(bytes + 64, 0xEE);
          const nodusResult_t v = nodusRecv(got.data(), counts[m], type, from, comm);
          if (v != nodusSuccess) {
            fail(what + ": Recv returned " + ResultName(v));
            nodusCommAbort(comm);
            return;
          }
          if (std::memcmp(got.data(), expected.data(), bytes) != 0)
            fail(what + " arrived wrong or out of order");
          for (size_t j = bytes; j < bytes + 64; ++j) {
            if (got[j] != 0xEE) {
              fail(what + ": Recv wrote past its count");
              break;
            }
          }
        }
      }
    }
  }
}

void BarrierScenario(nodusComm_t comm, int rank, int nranks, int* arrived, const FailFn& fail) {
  for (int round = 0; round < kBarrierRounds; ++round) {
    if (rank == round % nranks) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    AtomicAdd(&arrived[round], 1);
    const nodusResult_t b = nodusBarrier(comm);
    if (b != nodusSuccess) {
      fail(RankText(rank, nranks) + "Barrier returned " + ResultName(b));
      nodusCommAbort(comm);
      return;
    }
    if (AtomicLoad(&arrived[round]) != nranks) {
      fail(RankText(rank, nranks) + "left barrier round " + std::to_string(round) +
           " before every rank entered it");
    }
  }
}

// ---- Forked ranks ----------------------------------------------------------------

void RankReport::Fail(const std::string& message) {
  ++failures;
  std::fprintf(stderr, "[pid %d] %s\n", static_cast<int>(getpid()), message.c_str());
  std::fflush(stderr);
  const std::string line = message + "\n";
  const size_t room = kTextBytes - 1 - std::min(textUsed, kTextBytes - 1);
  const size_t n = std::min(room, line.size());
  std::memcpy(text + textUsed, line.data(), n);
  textUsed += n;
  text[textUsed] = '\0';
}

ForkedRanks::ForkedRanks(int nranks)
    : nranks_(nranks),
      pids_(static_cast<size_t>(nranks), -1),
      status_(static_cast<size_t>(nranks), 0),
      reaped_(static_cast<size_t>(nranks), false),
      timedOut_(static_cast<size_t>(nranks), false) {
  mappedBytes_ = sizeof(RankReport) * static_cast<size_t>(std::max(nranks, 1));
  void* p = mmap(nullptr, mappedBytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::abort();
  }
  std::memset(p, 0, mappedBytes_);
  reports_ = static_cast<RankReport*>(p);
}

ForkedRanks::~ForkedRanks() {
  KillAll();
  munmap(reports_, mappedBytes_);
}

void ForkedRanks::KillAll() {
  for (size_t r = 0; r < pids_.size(); ++r) {
    if (pids_[r] > 0 && !reaped_[r]) {
      kill(pids_[r], SIGKILL);
      int st = 0;
      while (waitpid(pids_[r], &st, 0) < 0 && errno == EINTR) {
      }
      status_[r] = st;
      reaped_[r] = true;
    }
  }
}

struct SharedUniqueId::Shared {
  std::atomic<int> state;  // 0 not yet, 1 made, -1 failed
  nodusUniqueId id;
};

SharedUniqueId::SharedUniqueId() {
  void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  shared_ = p == MAP_FAILED ? nullptr : new (p) Shared{};
}

SharedUniqueId::~SharedUniqueId() {
  if (shared_) munmap(shared_, sizeof(Shared));
}

nodusResult_t SharedUniqueId::Make() {
  nodusUniqueId id;
  const nodusResult_t r = nodusGetUniqueId(&id);
  if (!shared_) return nodusSystemError;
  shared_->id = id;
  shared_->state.store(r == nodusSuccess ? 1 : -1, std::memory_order_release);
  return r;
}

bool SharedUniqueId::Get(nodusUniqueId* id, std::chrono::milliseconds limit) const {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (shared_) {
    const int st = shared_->state.load(std::memory_order_acquire);
    if (st == 1) {
      *id = shared_->id;
      return true;
    }
    if (st < 0 || std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

bool ForkedRanks::Start(const std::function<int(int, RankReport&)>& body) {
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t parent = getpid();
  for (int r = 0; r < nranks_; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      KillAll();
      return false;
    }
    if (pid == 0) {
      // Never outlive the test (its watchdog, a crash, a kill).
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(125);
      const int status = body(r, reports_[r]);
      std::fflush(stdout);
      std::fflush(stderr);
      _exit(status);
    }
    pids_[static_cast<size_t>(r)] = pid;
  }
  return true;
}

void ForkedRanks::Wait(std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    bool running = false;
    for (size_t r = 0; r < pids_.size(); ++r) {
      if (pids_[r] <= 0 || reaped_[r]) continue;
      int st = 0;
      const pid_t got = waitpid(pids_[r], &st, WNOHANG);
      if (got == pids_[r]) {
        status_[r] = st;
        reaped_[r] = true;
      } else {
        running = true;
      }
    }
    if (!running) return;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (size_t r = 0; r < pids_.size(); ++r)
    if (pids_[r] > 0 && !reaped_[r]) timedOut_[r] = true;
  KillAll();
}

bool ForkedRanks::exitedNormally(int rank) const {
  const size_t r = static_cast<size_t>(rank);
  return reaped_[r] && WIFEXITED(status_[r]);
}

int ForkedRanks::exitStatus(int rank) const {
  return exitedNormally(rank) ? WEXITSTATUS(status_[static_cast<size_t>(rank)]) : -1;
}

int ForkedRanks::termSignal(int rank) const {
  const size_t r = static_cast<size_t>(rank);
  return reaped_[r] && WIFSIGNALED(status_[r]) ? WTERMSIG(status_[r]) : 0;
}

std::string ForkedRanks::Describe(int rank) const {
  std::string s = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid(rank)) + ") ";
  if (timedOut(rank))
    s += "did not finish in time and was killed";
  else if (exitedNormally(rank))
    s += "exited with status " + std::to_string(exitStatus(rank));
  else if (termSignal(rank))
    s += "was killed by signal " + std::to_string(termSignal(rank));
  else
    s += "never ran";
  const RankReport& rep = reports_[rank];
  if (rep.textUsed)
    s += ":\n" + std::string(rep.text, std::min(rep.textUsed, RankReport::kTextBytes - 1));
  return s;
}

std::string ForkedRanks::Failures() const {
  std::string s;
  for (int r = 0; r < nranks_; ++r)
    if (exitStatus(r) != 0) s += Describe(r) + "\n";
  if (s.empty()) return s;
  // First how every rank ended, in one line each (the paragraphs below can
  // be long enough for a log's tail to cut): a rank that exited with 0 while
  // the others waited on it tells a different story from one killed.
  std::string summary;
  for (int r = 0; r < nranks_; ++r) {
    summary += "rank " + std::to_string(r) + ": ";
    if (timedOut(r))
      summary += "timed out";
    else if (exitedNormally(r))
      summary += "exit " + std::to_string(exitStatus(r));
    else if (termSignal(r))
      summary += "signal " + std::to_string(termSignal(r)) + " (" + strsignal(termSignal(r)) + ")";
    else
      summary += "never ran";
    summary += r + 1 < nranks_ ? "; " : "\n";
  }
  return summary + s;
}

std::unique_ptr<ForkedRanks> RunForkedComms(int nranks, std::chrono::milliseconds limit, const ForkedSetup& setup,
                                            const ForkedBody& body) {
  SharedUniqueId shared;
  auto ranks = std::make_unique<ForkedRanks>(nranks);
  const bool started = ranks->Start([&](int rank, RankReport& report) {
    if (setup && !setup(rank, report)) return 2;
    nodusUniqueId id;
    if (rank == 0 && shared.Make() != nodusSuccess) {
      report.Fail(std::string("nodusGetUniqueId failed: ") + nodusGetLastError(nullptr));
      return 2;
    }
    if (!shared.Get(&id, limit)) {
      report.Fail("rank " + std::to_string(rank) + ": no unique id from rank 0");
      return 2;
    }
    nodusComm_t comm = nullptr;
    const nodusResult_t r = nodusCommInitRank(&comm, nranks, id, rank);
    if (r != nodusSuccess) {
      report.Fail("rank " + std::to_string(rank) + ": nodusCommInitRank returned " + ResultName(r) + ": " +
                  nodusGetLastError(nullptr));
      return 2;
    }
    body(comm, rank, nranks, report);
    const nodusResult_t d = nodusCommDestroy(comm);
    if (d != nodusSuccess) report.Fail("rank " + std::to_string(rank) + ": nodusCommDestroy returned " + ResultName(d));
    return report.failures ? 1 : 0;
  });
  EXPECT_TRUE(started);
  ranks->Wait(limit);
  const std::string failures = ranks->Failures();
  EXPECT_TRUE(failures.empty()) << nranks << " forked ranks:\n" << failures;
  return ranks;
}

FailFn ReportTo(RankReport& report) {
  return [&report](const std::string& m) {
    if (report.failures < 20)
      report.Fail(m);
    else
      ++report.failures;
  };
}

void RunForkedMatrix(int nranks, std::chrono::milliseconds limit, const std::vector<CheckCase>& cases,
                     const ForkedSetup& setup) {
  ASSERT_LE(cases.size(), RankReport::kMaxHashes);
  auto ranks = RunForkedComms(nranks, limit, setup, [&](nodusComm_t comm, int, int, RankReport& report) {
    std::vector<uint64_t> hashes;
    RunCasesOnRank(comm, cases, ReportTo(report), &hashes);
    for (uint64_t h : hashes) report.AddHash(h);
  });
  size_t common = cases.size();
  for (int r = 0; r < nranks; ++r) common = std::min(common, ranks->report(r).numHashes);
  EXPECT_EQ(common, cases.size()) << "not every case ran on every rank";
  int differing = 0;
  for (size_t i = 0; i < common; ++i) {
    std::vector<uint64_t> hashes;
    for (int r = 0; r < nranks; ++r) hashes.push_back(ranks->report(r).hashes[i]);
    const std::string differ = CompareAcrossRanks(cases[i], hashes);
    if (!differ.empty() && ++differing <= 20) ADD_FAILURE() << differ;
  }
  EXPECT_EQ(differing, 0) << "cases whose output differs across ranks";
}

std::set<std::string> NodusShmEntries() {
  std::set<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (const dirent* e = readdir(d))
      if (std::strncmp(e->d_name, "nodus", 5) == 0) names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

std::string NodusShmLeaks(const std::set<std::string>& before, std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    std::string leaked;
    for (const std::string& name : NodusShmEntries())
      if (!before.count(name)) leaked += " /dev/shm/" + name;
    if (leaked.empty()) return "";
    if (std::chrono::steady_clock::now() >= deadline) return "left in /dev/shm:" + leaked;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// ---- The matrix ----------------------------------------------------------------

std::vector<size_t> DefaultCounts(int nranks, size_t large) {
  const size_t n = static_cast<size_t>(std::max(nranks, 1));
  while (n > 1 && large % n == 0) ++large;
  std::vector<size_t> counts;
  for (size_t v : {size_t{0}, size_t{1}, size_t{7}, n - 1, large})
    if (std::find(counts.begin(), counts.end(), v) == counts.end()) counts.push_back(v);
  return counts;
}

std::vector<CheckCase> MakeMatrix(int nranks, const MatrixOptions& options) {
  const std::vector<size_t> counts =
      options.counts.empty() ? DefaultCounts(nranks) : options.counts;
  const std::vector<nodusDataType_t> types =
      options.types.empty()
          ? std::vector<nodusDataType_t>(std::begin(kAllTypes), std::end(kAllTypes))
          : options.types;
  const std::vector<Coll> colls =
      options.colls.empty() ? std::vector<Coll>(std::begin(kAllColls), std::end(kAllColls))
                            : options.colls;
  std::vector<CheckCase> cases;
  uint64_t serial = 0;
  int rootTurn = 0;
  for (size_t ci = 0; ci < colls.size(); ++ci) {
    const Coll coll = colls[ci];
    for (size_t ti = 0; ti < types.size(); ++ti) {
      const size_t numOps = CollUsesOp(coll) ? std::size(kAllOps) : 1;
      for (size_t oi = 0; oi < numOps; ++oi) {
        for (size_t ki = 0; ki < counts.size(); ++ki) {
          size_t count = counts[ki];
          const bool large = count >= MatrixOptions::kLargeCount;
          if (large && options.scaleLargeBlockCounts &&
              (coll == Coll::kAllGather || coll == Coll::kReduceScatter)) {
            const size_t n = static_cast<size_t>(nranks);
            count = std::max<size_t>(count / n, 2) | 1;
            while (n > 1 && count % n == 0) count += 2;
          }
          if (!options.allOpsAtLargeCounts && CollUsesOp(coll) &&
              count >= MatrixOptions::kLargeCount &&
              oi != (ti + static_cast<size_t>(coll == Coll::kReduce ? 2 : 0) +
                     static_cast<size_t>(static_cast<int>(coll))) %
                        numOps)
            continue;
          for (int inPlace = 0; inPlace < 2; ++inPlace) {
            CheckCase c;
            c.coll = coll;
            c.type = types[ti];
            c.op = kAllOps[oi];
            c.count = count;
            c.inPlace = inPlace != 0;
            c.nonBlocking = (ki + static_cast<size_t>(inPlace) + oi) % 2 == 1;
            c.root = CollUsesRoot(coll) ? rootTurn++ % nranks : 0;
            c.seed = Mix(options.seed, 0x5eedull, serial++);
            c.checkSliceOnly =
                large && options.sliceChecksAtLargeCounts && coll == Coll::kAllReduce;
            c.listOutput = options.listAllGather && coll == Coll::kAllGather && (ki + ti) % 2 == 1;
            cases.push_back(c);
          }
        }
      }
    }
  }
  return cases;
}

}  // namespace nodus_test
