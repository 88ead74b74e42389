// Unit tests of the reduction kernels (src/kernels/reduce.cc) and of the type
// and op names (src/base/dtype.cc).
//
// Every kernel result is compared with a scalar reference written here without
// the kernels' bit tricks: fp16/bf16 are decoded and rounded with ldexp/frexp/
// nearbyint in double, fp32 arithmetic is done in double and rounded once
// (exact: double has more than 2*24+2 bits), integers wrap through __int128.
// Both the dispatched kernels and the baseline (non-AVX2) ones are checked.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "kernels/copy.h"
#include "kernels/reduce.h"


namespace {

using i128 = __int128;
using u128 = unsigned __int128;

// ---- Reference conversions ---------------------------------------------------------

bool halfIsNan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x03ff) != 0; }
bool bf16IsNan(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x007f) != 0; }

double refHalfToDouble(uint16_t h) {
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  if (e == 31) return m ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
  if (e == 0) return sign * std::ldexp(double(m), -24);
  return sign * std::ldexp(double(1024 + m), e - 25);
}

double refBf16ToDouble(uint16_t b) {
  const double sign = (b & 0x8000) ? -1.0 : 1.0;
  const int e = (b >> 7) & 0xff;
  const int m = b & 0x7f;
  if (e == 255) return m ? std::numeric_limits<double>::quiet_NaN() : sign * HUGE_VAL;
  if (e == 0) return sign * std::ldexp(double(m), -133);
  return sign * std::ldexp(double(128 + m), e - 134);
}

// Rounds v to a binary format with `mantBits` explicit mantissa bits, minimum
// normal exponent `minExp` and exponent bias `bias`, to nearest even; values at
// or above `infFrom` become infinity. Returns the encoding (NaN: quiet NaN).
uint16_t refRound(double v, int mantBits, int minExp, int bias, double infFrom, uint16_t expMask) {
  if (std::isnan(v)) return uint16_t(expMask | (1u << (mantBits - 1)));
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  const double a = std::fabs(v);
  if (a >= infFrom) return sign | expMask;
  if (a == 0) return sign;
  int e;
  std::frexp(a, &e);                // a = f * 2^e, f in [0.5, 1)
  int E = std::max(e - 1, minExp);  // exponent of the leading bit, clamped for subnormals
  const double scaled = std::ldexp(a, mantBits - E);  // exact: in [0, 2^(mantBits+1))
  double r = std::nearbyint(scaled);                  // default mode: to nearest even
  const double implicit = std::ldexp(1.0, mantBits);
  if (r == 2 * implicit) {  // rounded up to the next binade
    r = implicit;
    ++E;
  }
  if (r < implicit) return uint16_t(sign | uint16_t(r));  // subnormal (E == minExp)
  return uint16_t(sign | uint16_t((E + bias) << mantBits) | uint16_t(r - implicit));
}

// 65520 is halfway between 65504 and 2^16: ties to even, i.e. to infinity.
uint16_t refToHalf(double v) { return refRound(v, 10, -14, 15, 65520.0, 0x7c00); }
// (2 - 2^-8) * 2^127 is halfway between the largest bf16 and 2^128.
uint16_t refToBf16(double v) {
  return refRound(v, 7, -126, 127, std::ldexp(2.0 - std::ldexp(1.0, -8), 127), 0x7f80);
}

float bitsToFloat(uint32_t u) { return std::bit_cast<float>(u); }
uint32_t floatBits(float f) { return std::bit_cast<uint32_t>(f); }

// ---- Conversions -------------------------------------------------------------------

TEST(HalfConversion, EveryPatternWidensExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = nodus::halfToFloat(uint16_t(h));
    if (halfIsNan(uint16_t(h))) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << h;
      continue;
    }
    const double want = refHalfToDouble(uint16_t(h));
    ASSERT_EQ(double(f), want) << std::hex << "half 0x" << h;
    ASSERT_EQ(std::signbit(f), std::signbit(want)) << std::hex << "half 0x" << h;
  }
}

TEST(HalfConversion, EveryPatternRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t back = nodus::floatToHalf(nodus::halfToFloat(uint16_t(h)));
    if (halfIsNan(uint16_t(h))) {
      ASSERT_TRUE(halfIsNan(back)) << std::hex << "NaN 0x" << h << " came back as 0x" << back;
    } else {
      ASSERT_EQ(back, h) << std::hex << "half 0x" << h;
    }
  }
}

TEST(HalfConversion, KnownValues) {
  using nodus::floatToHalf;
  using nodus::halfToFloat;
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(0.1f), 0x2e66);
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.99f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);  // tie -> even -> overflow
  EXPECT_EQ(floatToHalf(1e6f), 0x7c00);
  EXPECT_EQ(floatToHalf(-1e30f), 0xfc00);
  EXPECT_EQ(floatToHalf(FLT_MAX), 0x7c00);
  EXPECT_EQ(floatToHalf(HUGE_VALF), 0x7c00);
  EXPECT_EQ(floatToHalf(-HUGE_VALF), 0xfc00);
  EXPECT_EQ(floatToHalf(0x1p-14f), 0x0400);         // smallest normal
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);         // smallest subnormal
  EXPECT_EQ(floatToHalf(0x1.8p-24f), 0x0002);       // 1.5 ulp: tie -> even (2)
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);         // 0.5 ulp: tie -> even (0)
  EXPECT_EQ(floatToHalf(0x1.000002p-25f), 0x0001);  // just above the tie
  EXPECT_EQ(floatToHalf(0x1.ffcp-15f), 0x0400);     // 1023.5 ulp: tie -> 1024 = normal
  EXPECT_EQ(floatToHalf(1e-8f), 0x0000);
  EXPECT_EQ(floatToHalf(-1e-8f), 0x8000);
  EXPECT_EQ(floatToHalf(2049.0f), 0x6800);    // tie between 2048 and 2050 -> 2048
  EXPECT_EQ(floatToHalf(2051.0f), 0x6802);    // tie between 2050 and 2052 -> 2052
  EXPECT_EQ(floatToHalf(0x1p-149f), 0x0000);  // fp32 subnormal
  EXPECT_TRUE(halfIsNan(floatToHalf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(halfIsNan(floatToHalf(bitsToFloat(0x7f800001))));  // payload below half's bits
  EXPECT_TRUE(halfIsNan(floatToHalf(bitsToFloat(0xff800001))));
  EXPECT_TRUE(halfIsNan(floatToHalf(bitsToFloat(0x7fffffff))));
  EXPECT_EQ(halfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(halfToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(halfToFloat(0x0001), 0x1p-24f);
  EXPECT_EQ(halfToFloat(0x03ff), 0x1.ff8p-15f);
  EXPECT_EQ(halfToFloat(0x0400), 0x1p-14f);
  EXPECT_EQ(halfToFloat(0x7c00), HUGE_VALF);
  EXPECT_EQ(halfToFloat(0xfc00), -HUGE_VALF);
  EXPECT_TRUE(std::signbit(halfToFloat(0x8000)));
  EXPECT_EQ(halfToFloat(0x8000), 0.0f);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7c01)));
  EXPECT_TRUE(std::isnan(halfToFloat(0xfe00)));
}

// Every rounding boundary of the half format: each representable value, the
// midpoint to the next one and the floats on either side of that midpoint.
TEST(HalfConversion, NarrowingMatchesReferenceAtEveryMidpoint) {
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const double v = refHalfToDouble(uint16_t(h));
    const double next = h + 1 == 0x7c00 ? 65536.0 : refHalfToDouble(uint16_t(h + 1));
    const float mid = float((v + next) / 2);  // 12 significant bits: exact in fp32
    ASSERT_EQ(double(mid), (v + next) / 2);
    for (float x : {float(v), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, HUGE_VALF)}) {
      for (float s : {x, -x}) {
        ASSERT_EQ(nodus::floatToHalf(s), refToHalf(s))
            << std::hexfloat << s << " (fp32 0x" << std::hex << floatBits(s) << ")";
      }
    }
  }
}

TEST(HalfConversion, NarrowingMatchesReferenceOnFloatSweep) {
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4093) {
    const float f = bitsToFloat(uint32_t(u));
    const uint16_t got = nodus::floatToHalf(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(halfIsNan(got)) << std::hex << u;
    } else {
      ASSERT_EQ(got, refToHalf(f)) << std::hex << "fp32 0x" << u;
    }
  }
}

TEST(Bfloat16Conversion, EveryPatternWidensExactlyAndRoundTrips) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = nodus::bfloat16ToFloat(uint16_t(b));
    const uint16_t back = nodus::floatToBfloat16(f);
    if (bf16IsNan(uint16_t(b))) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << b;
      ASSERT_TRUE(bf16IsNan(back)) << std::hex << "NaN 0x" << b << " came back as 0x" << back;
      continue;
    }
    const double want = refBf16ToDouble(uint16_t(b));
    ASSERT_EQ(double(f), want) << std::hex << "bf16 0x" << b;
    ASSERT_EQ(std::signbit(f), std::signbit(want)) << std::hex << "bf16 0x" << b;
    ASSERT_EQ(back, b) << std::hex << "bf16 0x" << b;
  }
}

TEST(Bfloat16Conversion, KnownValues) {
  using nodus::floatToBfloat16;
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBfloat16(-2.0f), 0xc000);
  EXPECT_EQ(floatToBfloat16(1.00390625f), 0x3f80);  // 1 + 2^-8: tie -> even (1)
  EXPECT_EQ(floatToBfloat16(1.01171875f), 0x3f82);  // 1 + 3*2^-8: tie -> even (1 + 2^-6)
  EXPECT_EQ(floatToBfloat16(std::nextafter(1.00390625f, 2.0f)), 0x3f81);  // above the tie
  EXPECT_EQ(floatToBfloat16(257.0f), 0x4380);   // tie between 256 and 258 -> 256
  EXPECT_EQ(floatToBfloat16(259.0f), 0x4382);   // tie between 258 and 260 -> 260
  EXPECT_EQ(floatToBfloat16(FLT_MAX), 0x7f80);  // rounds up to infinity
  EXPECT_EQ(floatToBfloat16(-FLT_MAX), 0xff80);
  EXPECT_EQ(floatToBfloat16(HUGE_VALF), 0x7f80);
  EXPECT_EQ(floatToBfloat16(0x1p-133f), 0x0001);    // smallest subnormal
  EXPECT_EQ(floatToBfloat16(0x1p-134f), 0x0000);    // tie -> even (0)
  EXPECT_EQ(floatToBfloat16(0x1.8p-133f), 0x0002);  // tie -> even (2)
  EXPECT_EQ(floatToBfloat16(-0.0f), 0x8000);
  EXPECT_TRUE(bf16IsNan(floatToBfloat16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(bf16IsNan(floatToBfloat16(bitsToFloat(0x7f800001))));  // must not become inf
  EXPECT_TRUE(bf16IsNan(floatToBfloat16(bitsToFloat(0xff800001))));
  EXPECT_TRUE(bf16IsNan(floatToBfloat16(bitsToFloat(0x7fffffff))));  // must not carry into sign
  EXPECT_EQ(nodus::bfloat16ToFloat(0x3f80), 1.0f);
  EXPECT_EQ(nodus::bfloat16ToFloat(0x7f80), HUGE_VALF);
}

TEST(Bfloat16Conversion, NarrowingMatchesReferenceAtEveryMidpoint) {
  for (uint32_t b = 0; b < 0x7f80; ++b) {
    const double v = refBf16ToDouble(uint16_t(b));
    const double next = b + 1 == 0x7f80 ? std::ldexp(1.0, 128) : refBf16ToDouble(uint16_t(b + 1));
    const float mid = float((v + next) / 2);  // 9 significant bits: exact in fp32
    ASSERT_EQ(double(mid), (v + next) / 2);
    for (float x : {float(v), mid, std::nextafter(mid, 0.0f), std::nextafter(mid, HUGE_VALF)}) {
      for (float s : {x, -x}) {
        ASSERT_EQ(nodus::floatToBfloat16(s), refToBf16(s))
            << std::hexfloat << s << " (fp32 0x" << std::hex << floatBits(s) << ")";
      }
    }
  }
}

TEST(Bfloat16Conversion, NarrowingMatchesReferenceOnFloatSweep) {
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 4093) {
    const float f = bitsToFloat(uint32_t(u));
    const uint16_t got = nodus::floatToBfloat16(f);
    if (std::isnan(f)) {
      ASSERT_TRUE(bf16IsNan(got)) << std::hex << u;
    } else {
      ASSERT_EQ(got, refToBf16(f)) << std::hex << "fp32 0x" << u;
    }
  }
}

// ---- Per-type references -------------------------------------------------------------

constexpr nodusRedOp_t kOps[] = {nodusSum, nodusProd, nodusMin, nodusMax, nodusAvg};

template <class T>
T randomInt(std::mt19937_64& rng) {
  switch (rng() % 3) {
    case 0: return T(int64_t(rng() % 33) - 16);  // small, both signs (wraps for unsigned)
    case 1: return T(rng() % 1000);
    default: return T(rng());  // full range
  }
}

template <class T, nodusDataType_t Type>
struct IntTraits {
  using S = T;
  static constexpr nodusDataType_t type = Type;
  static constexpr bool isSigned = std::is_signed_v<T>;
  using W = std::conditional_t<isSigned, i128, u128>;

  // v modulo 2^bits, as T (two's complement for signed types).
  static S wrap(W v) {
    constexpr int bits = 8 * sizeof(T);
    if constexpr (isSigned) {
      const i128 mod = i128(1) << bits;
      i128 r = v % mod;
      if (r < 0) r += mod;
      if (r >= mod / 2) r -= mod;
      return S(int64_t(r));
    } else {
      return S(uint64_t(v & ((u128(1) << bits) - 1)));
    }
  }
  static S sum(S a, S b) { return wrap(W(a) + W(b)); }
  static S ref(nodusRedOp_t op, S a, S b) {
    switch (op) {
      case nodusSum:
      case nodusAvg: return sum(a, b);
      case nodusProd: return wrap(W(a) * W(b));
      case nodusMin: return b < a ? b : a;
      case nodusMax: return a < b ? b : a;
      default: return 0;
    }
  }
  static S refAvgFinal(S a, S b, int divisor) { return divide(sum(a, b), divisor); }
  static S refScale(S a, int divisor) { return divide(a, divisor); }
  static S divide(S v, int divisor) {
    if constexpr (isSigned) {
      return S(int64_t(v) / int64_t(divisor));  // truncates toward zero
    } else {
      return S(uint64_t(v) / uint64_t(divisor));
    }
  }
  static bool isNan(S) { return false; }
  static bool dontCare(nodusRedOp_t, S, S) { return false; }
  static bool same(S x, S y) { return x == y; }
  static std::string show(S v) {
    return std::to_string(std::conditional_t<isSigned, int64_t, uint64_t>(v));
  }
  static std::vector<S> edges() {
    using L = std::numeric_limits<T>;
    std::vector<S> e = {
        0, 1, 2, 3, S(7), S(100), L::max(), L::min(), S(L::max() - 1), S(L::max() / 2 + 1)};
    if constexpr (isSigned) {
      e.insert(e.end(), {S(-1), S(-2), S(-3), S(-100), S(L::min() + 1)});
    } else {
      e.insert(e.end(), {S(L::max() - 2), S(L::max() / 3)});
    }
    if constexpr (sizeof(T) >= 4) e.insert(e.end(), {S(65536), S(46341), S(-46341)});
    if constexpr (sizeof(T) == 8) {
      e.insert(e.end(), {S(int64_t(1) << 32), S(3037000500LL), S(-3037000500LL)});
    }
    return e;
  }
  static std::vector<std::pair<S, S>> specialPairs() { return {}; }
  static S random(std::mt19937_64& rng) { return randomInt<T>(rng); }
  static std::vector<int> divisors() { return {1, 2, 3, 4, 7, 10, 64, 1000, 65537, 2147483647}; }
};

// fp32 / fp64. fp32 arithmetic is done in double and rounded once, which gives
// the correctly rounded fp32 result for + * /.
template <class T, nodusDataType_t Type>
struct FloatTraits {
  using S = T;
  static constexpr nodusDataType_t type = Type;
  static T add(T a, T b) { return T(double(a) + double(b)); }
  static T mul(T a, T b) { return T(double(a) * double(b)); }
  static T div(T a, int d) { return T(double(a) / double(d)); }
  static S ref(nodusRedOp_t op, S a, S b) {
    switch (op) {
      case nodusSum:
      case nodusAvg: return add(a, b);
      case nodusProd: return mul(a, b);
      case nodusMin: return b < a ? b : a;
      case nodusMax: return a < b ? b : a;
      default: return 0;
    }
  }
  static S refAvgFinal(S a, S b, int divisor) { return div(add(a, b), divisor); }
  static S refScale(S a, int divisor) { return div(a, divisor); }
  static bool isNan(S v) { return std::isnan(v); }
  // min/max of a NaN is unspecified.
  static bool dontCare(nodusRedOp_t op, S a, S b) {
    return (op == nodusMin || op == nodusMax) && (isNan(a) || isNan(b));
  }
  static bool same(S x, S y) { return std::memcmp(&x, &y, sizeof(S)) == 0; }
  static std::string show(S v) {
    std::ostringstream os;
    os << std::hexfloat << v;
    return os.str();
  }
  static std::vector<S> edges() {
    using L = std::numeric_limits<T>;
    return {T(0),          T(-0.0),         T(1),
            T(-1),         T(0.1),          T(3),
            T(1e-3),       L::max(),        -L::max(),
            L::min(),      L::denorm_min(), -L::denorm_min(),
            L::infinity(), -L::infinity(),  L::quiet_NaN(),
            L::epsilon()};
  }
  static std::vector<std::pair<S, S>> specialPairs() {
    using L = std::numeric_limits<T>;
    return {{L::max(), L::max()},
            {T(1), L::epsilon() / 2},
            {T(1), L::epsilon() / 2 * 3},
            {L::min(), T(0.5)}};
  }
  static S random(std::mt19937_64& rng) {
    if (rng() % 4 == 0) {  // any bit pattern: subnormals, inf, NaN
      using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
      return std::bit_cast<T>(U(rng()));
    }
    return T(std::ldexp(double(int64_t(rng() % 2000001) - 1000000), int(rng() % 41) - 30));
  }
  static std::vector<int> divisors() { return {1, 2, 3, 4, 7, 10, 64, 1000}; }
};

// fp16 / bf16 through a reference codec: widen exactly, combine in fp32 (via
// double, rounded once), narrow once.
template <nodusDataType_t Type>
struct SmallFloatTraits {
  using S = uint16_t;
  static constexpr nodusDataType_t type = Type;
  static constexpr bool half = Type == nodusFloat16;
  static double widen(S v) { return half ? refHalfToDouble(v) : refBf16ToDouble(v); }
  static S narrow(float f) { return half ? refToHalf(f) : refToBf16(f); }
  // The fp32 result of an operation on fp32 operands, computed in double.
  static float f32(double v) { return float(v); }
  static S ref(nodusRedOp_t op, S a, S b) {
    switch (op) {
      case nodusSum:
      case nodusAvg: return narrow(f32(widen(a) + widen(b)));
      case nodusProd: return narrow(f32(widen(a) * widen(b)));
      case nodusMin: return widen(b) < widen(a) ? b : a;
      case nodusMax: return widen(a) < widen(b) ? b : a;
      default: return 0;
    }
  }
  static S refAvgFinal(S a, S b, int divisor) {
    const float s = f32(widen(a) + widen(b));
    return narrow(f32(double(s) / divisor));
  }
  static S refScale(S a, int divisor) { return narrow(f32(widen(a) / divisor)); }
  static bool isNan(S v) { return half ? halfIsNan(v) : bf16IsNan(v); }
  static bool dontCare(nodusRedOp_t op, S a, S b) {
    return (op == nodusMin || op == nodusMax) && (isNan(a) || isNan(b));
  }
  static bool same(S x, S y) { return x == y; }
  static std::string show(S v) {
    std::ostringstream os;
    os << "0x" << std::hex << v << " (" << std::hexfloat << widen(v) << ")";
    return os.str();
  }
  static std::vector<S> edges() {
    if constexpr (half) {
      return {0x0000, 0x8000, 0x0001, 0x8001, 0x0002, 0x03ff, 0x0400, 0x8400, 0x3c00,
              0xbc00, 0x3800, 0x4000, 0x6800, 0x6801, 0x7bff, 0xfbff, 0x7bfe, 0x7800,
              0x4c00, 0x4bff, 0x5bff, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0x3555};
    } else {
      return {0x0000, 0x8000, 0x0001, 0x8001, 0x007f, 0x0080, 0x3f80,
              0xbf80, 0x3f00, 0x4380, 0x4381, 0x3b80, 0x3f81, 0x7f7f,
              0xff7f, 0x7f00, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0x3eab};
    }
  }
  static std::vector<std::pair<S, S>> specialPairs() {
    if constexpr (half) {
      return {{0x6800, 0x3c00},   // 2048 + 1: tie -> 2048
              {0x6801, 0x3c00},   // 2050 + 1: tie -> 2052
              {0x7bff, 0x4c00},   // 65504 + 16 = 65520: tie -> inf
              {0x7bff, 0x4bff},   // 65504 + 15.99 -> 65504
              {0x0001, 0x0001},   // subnormal + subnormal
              {0x03ff, 0x0001},   // -> smallest normal
              {0x0001, 0x3800},   // * 0.5: 2^-25, tie -> 0
              {0x0003, 0x3800},   // * 0.5: 1.5 * 2^-24, tie -> 2 * 2^-24
              {0x5c00, 0x5c00},   // 256 * 256 = 65536 -> inf
              {0x7c00, 0xfc00}};  // inf - inf -> NaN
    } else {
      return {{0x4380, 0x3f80},   // 256 + 1: tie -> 256
              {0x4381, 0x3f80},   // 258 + 1: tie -> 260
              {0x3f80, 0x3b80},   // 1 + 2^-8: tie -> 1
              {0x3f81, 0x3b80},   // (1 + 2^-7) + 2^-8: tie -> 1 + 2^-6
              {0x7f7f, 0x7f7f},   // overflow -> inf
              {0x0001, 0x0001},   // subnormals
              {0x0001, 0x3f00},   // * 0.5: tie -> 0
              {0x7f80, 0xff80}};  // inf - inf -> NaN
    }
  }
  static S random(std::mt19937_64& rng) {
    if (rng() % 2 == 0) return S(rng());  // any pattern
    // Moderate values, whose sums and products round rather than overflow.
    const float v = float(std::ldexp(double(int(rng() % 2001) - 1000), int(rng() % 13) - 12));
    return half ? nodus::floatToHalf(v) : nodus::floatToBfloat16(v);
  }
  static std::vector<int> divisors() { return {1, 2, 3, 4, 7, 10, 64, 1000}; }
};

using Int8T = IntTraits<int8_t, nodusInt8>;
using Uint8T = IntTraits<uint8_t, nodusUint8>;
using Int32T = IntTraits<int32_t, nodusInt32>;
using Uint32T = IntTraits<uint32_t, nodusUint32>;
using Int64T = IntTraits<int64_t, nodusInt64>;
using Uint64T = IntTraits<uint64_t, nodusUint64>;
using HalfT = SmallFloatTraits<nodusFloat16>;
using Bf16T = SmallFloatTraits<nodusBfloat16>;
using Float32T = FloatTraits<float, nodusFloat32>;
using Float64T = FloatTraits<double, nodusFloat64>;

// ---- Harness ------------------------------------------------------------------------

using ReduceFn = void (*)(nodusDataType_t, nodusRedOp_t, void*, const void*, const void*, size_t);
using AvgFinalFn = void (*)(nodusDataType_t, void*, const void*, const void*, size_t, int);
using ScaleFn = void (*)(nodusDataType_t, void*, const void*, size_t, int);

struct Impl {
  const char* name;
  ReduceFn reduce;
  AvgFinalFn avgFinal;
  ScaleFn scale;
};

const Impl kImpls[] = {
    {"dispatched", nodus::reduce, nodus::reduceAvgFinal, nodus::scaleAvg},
    {"portable", nodus::detail::reducePortable, nodus::detail::reduceAvgFinalPortable,
     nodus::detail::scaleAvgPortable},
};

// Lengths around every vector width and tail.
constexpr size_t kLengths[] = {1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 65};

// Operand pairs: all pairs of edge values, the special pairs, then random ones.
template <class Tr>
void makeInputs(std::vector<typename Tr::S>& a, std::vector<typename Tr::S>& b) {
  using S = typename Tr::S;
  a.clear();
  b.clear();
  const std::vector<S> e = Tr::edges();
  for (S x : e) {
    for (S y : e) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  for (auto [x, y] : Tr::specialPairs()) {
    a.push_back(x);
    b.push_back(y);
  }
  std::mt19937_64 rng(0x6e6f647573ull + uint64_t(Tr::type));
  for (int i = 0; i < 301; ++i) {
    a.push_back(Tr::random(rng));
    b.push_back(Tr::random(rng));
  }
}

template <class Tr>
typename Tr::S sentinel() {
  typename Tr::S s;
  std::memset(&s, 0x5a, sizeof s);
  return s;
}

// Compares got[0, n) with want, ignoring elements marked dontCare; reports the
// first mismatch and the number of mismatches.
template <class Tr>
void expectElements(const typename Tr::S* got, const std::vector<typename Tr::S>& want,
                    const std::vector<char>& dontCare, const typename Tr::S* x,
                    const typename Tr::S* y, size_t n, const std::string& what) {
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    if (dontCare[i]) continue;
    const bool ok = Tr::isNan(want[i]) ? Tr::isNan(got[i]) : Tr::same(got[i], want[i]);
    if (!ok && bad++ == 0) {
      ADD_FAILURE() << what << ", element " << i << ": inputs " << Tr::show(x[i])
                    << (y ? ", " + Tr::show(y[i]) : std::string()) << " gave " << Tr::show(got[i])
                    << ", want " << Tr::show(want[i]);
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": mismatching elements";
}

template <class Tr>
std::string label(const Impl& impl, const char* op, const char* layout, size_t n) {
  std::ostringstream os;
  os << impl.name << " " << nodus::typeName(Tr::type) << " " << op << " " << layout << " n=" << n;
  return os.str();
}

template <class Tr>
void checkReduce() {
  using S = typename Tr::S;
  std::vector<S> a, b;
  makeInputs<Tr>(a, b);
  const size_t total = a.size();
  for (nodusRedOp_t op : kOps) {
    std::vector<S> want(total), wantSelf(total);
    std::vector<char> dc(total), dcSelf(total);
    for (size_t i = 0; i < total; ++i) {
      want[i] = Tr::ref(op, a[i], b[i]);
      dc[i] = Tr::dontCare(op, a[i], b[i]);
      wantSelf[i] = Tr::ref(op, a[i], a[i]);
      dcSelf[i] = Tr::dontCare(op, a[i], a[i]);
    }
    const char* opn = nodus::opName(op);
    for (const Impl& impl : kImpls) {
      std::vector<size_t> lengths(std::begin(kLengths), std::end(kLengths));
      lengths.push_back(total);
      for (size_t n : lengths) {
        // Out of place, into a buffer with a guard element after n.
        std::vector<S> dst(n + 1, sentinel<Tr>());
        impl.reduce(Tr::type, op, dst.data(), a.data(), b.data(), n);
        expectElements<Tr>(dst.data(), want, dc, a.data(), b.data(), n,
                           label<Tr>(impl, opn, "dst!=a,b", n));
        EXPECT_TRUE(Tr::same(dst[n], sentinel<Tr>()))
            << label<Tr>(impl, opn, "dst!=a,b", n) << ": wrote past the end";
        // In place into a, into b, and all three the same buffer.
        std::vector<S> x(a.begin(), a.begin() + long(n)), y(b.begin(), b.begin() + long(n));
        impl.reduce(Tr::type, op, x.data(), x.data(), b.data(), n);
        expectElements<Tr>(x.data(), want, dc, a.data(), b.data(), n,
                           label<Tr>(impl, opn, "dst==a", n));
        impl.reduce(Tr::type, op, y.data(), a.data(), y.data(), n);
        expectElements<Tr>(y.data(), want, dc, a.data(), b.data(), n,
                           label<Tr>(impl, opn, "dst==b", n));
        std::vector<S> z(a.begin(), a.begin() + long(n));
        impl.reduce(Tr::type, op, z.data(), z.data(), z.data(), n);
        expectElements<Tr>(z.data(), wantSelf, dcSelf, a.data(), a.data(), n,
                           label<Tr>(impl, opn, "dst==a==b", n));
      }
      // Misaligned: every pointer one element into its buffer.
      const size_t n = total - 1;
      std::vector<S> dst(total + 1, sentinel<Tr>());
      impl.reduce(Tr::type, op, dst.data() + 1, a.data() + 1, b.data() + 1, n);
      std::vector<S> wantShifted(want.begin() + 1, want.end());
      std::vector<char> dcShifted(dc.begin() + 1, dc.end());
      expectElements<Tr>(dst.data() + 1, wantShifted, dcShifted, a.data() + 1, b.data() + 1, n,
                         label<Tr>(impl, opn, "misaligned", n));
      EXPECT_TRUE(Tr::same(dst[0], sentinel<Tr>()) && Tr::same(dst[total], sentinel<Tr>()))
          << label<Tr>(impl, opn, "misaligned", n) << ": wrote outside [dst, dst + n)";
    }
  }
}

template <class Tr>
void checkAverage() {
  using S = typename Tr::S;
  std::vector<S> a, b;
  makeInputs<Tr>(a, b);
  const size_t total = a.size();
  const std::vector<char> dc(total, 0);
  for (int divisor : Tr::divisors()) {
    std::vector<S> wantAvg(total), wantScale(total);
    for (size_t i = 0; i < total; ++i) {
      wantAvg[i] = Tr::refAvgFinal(a[i], b[i], divisor);
      wantScale[i] = Tr::refScale(a[i], divisor);
    }
    const std::string d = " divisor=" + std::to_string(divisor);
    for (const Impl& impl : kImpls) {
      for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{17}, total}) {
        std::vector<S> dst(n + 1, sentinel<Tr>());
        impl.avgFinal(Tr::type, dst.data(), a.data(), b.data(), n, divisor);
        expectElements<Tr>(dst.data(), wantAvg, dc, a.data(), b.data(), n,
                           label<Tr>(impl, "avgFinal", "dst!=a,b", n) + d);
        EXPECT_TRUE(Tr::same(dst[n], sentinel<Tr>())) << "avgFinal wrote past the end" << d;

        std::vector<S> x(a.begin(), a.begin() + long(n)), y(b.begin(), b.begin() + long(n));
        impl.avgFinal(Tr::type, x.data(), x.data(), b.data(), n, divisor);
        expectElements<Tr>(x.data(), wantAvg, dc, a.data(), b.data(), n,
                           label<Tr>(impl, "avgFinal", "dst==a", n) + d);
        impl.avgFinal(Tr::type, y.data(), a.data(), y.data(), n, divisor);
        expectElements<Tr>(y.data(), wantAvg, dc, a.data(), b.data(), n,
                           label<Tr>(impl, "avgFinal", "dst==b", n) + d);

        std::fill(dst.begin(), dst.end(), sentinel<Tr>());
        impl.scale(Tr::type, dst.data(), a.data(), n, divisor);
        expectElements<Tr>(dst.data(), wantScale, dc, a.data(), nullptr, n,
                           label<Tr>(impl, "scaleAvg", "dst!=src", n) + d);
        EXPECT_TRUE(Tr::same(dst[n], sentinel<Tr>())) << "scaleAvg wrote past the end" << d;
        std::vector<S> z(a.begin(), a.begin() + long(n));
        impl.scale(Tr::type, z.data(), z.data(), n, divisor);
        expectElements<Tr>(z.data(), wantScale, dc, a.data(), nullptr, n,
                           label<Tr>(impl, "scaleAvg", "dst==src", n) + d);
      }
    }
  }
}

// ---- Tests over every type x op -----------------------------------------------------------

template <class Tr>
class KernelTest : public ::testing::Test {};

using AllTypes = ::testing::Types<Int8T, Uint8T, Int32T, Uint32T, Int64T, Uint64T, HalfT, Bf16T,
                                  Float32T, Float64T>;

struct TypeNames {
  template <class Tr>
  static std::string GetName(int) {
    return nodus::typeName(Tr::type);
  }
};

TYPED_TEST_SUITE(KernelTest, AllTypes, TypeNames);

TYPED_TEST(KernelTest, ReduceMatchesReference) { checkReduce<TypeParam>(); }

TYPED_TEST(KernelTest, AverageMatchesReference) { checkAverage<TypeParam>(); }

TYPED_TEST(KernelTest, ZeroElementsTouchNothing) {
  for (const Impl& impl : kImpls) {
    for (nodusRedOp_t op : kOps) impl.reduce(TypeParam::type, op, nullptr, nullptr, nullptr, 0);
    impl.avgFinal(TypeParam::type, nullptr, nullptr, nullptr, 0, 3);
    impl.avgFinal(TypeParam::type, nullptr, nullptr, nullptr, 0, 1);
    impl.scale(TypeParam::type, nullptr, nullptr, 0, 3);
    impl.scale(TypeParam::type, nullptr, nullptr, 0, 1);
  }
  using S = typename TypeParam::S;
  S dst = sentinel<TypeParam>(), a{}, b{};
  nodus::reduce(TypeParam::type, nodusSum, &dst, &a, &b, 0);
  nodus::reduceAvgFinal(TypeParam::type, &dst, &a, &b, 0, 2);
  nodus::scaleAvg(TypeParam::type, &dst, &a, 0, 2);
  EXPECT_TRUE(TypeParam::same(dst, sentinel<TypeParam>()));
}

// ---- Known results (not through the reference) ------------------------------------------

template <class S>
S reduceOne(nodusDataType_t type, nodusRedOp_t op, S a, S b) {
  S d;
  nodus::reduce(type, op, &d, &a, &b, 1);
  return d;
}

template <class S>
S avgOne(nodusDataType_t type, S a, S b, int divisor) {
  S d;
  nodus::reduceAvgFinal(type, &d, &a, &b, 1, divisor);
  return d;
}

TEST(KernelKnownResults, IntegersWrap) {
  EXPECT_EQ(reduceOne<int8_t>(nodusInt8, nodusSum, 127, 1), -128);
  EXPECT_EQ(reduceOne<uint8_t>(nodusUint8, nodusSum, 255, 1), 0);
  EXPECT_EQ(reduceOne<int8_t>(nodusInt8, nodusProd, -128, -1), -128);
  EXPECT_EQ(reduceOne<uint8_t>(nodusUint8, nodusProd, 16, 16), 0);
  EXPECT_EQ(reduceOne<int32_t>(nodusInt32, nodusSum, INT32_MAX, 1), INT32_MIN);
  EXPECT_EQ(reduceOne<int32_t>(nodusInt32, nodusProd, 65536, 65536), 0);
  EXPECT_EQ(reduceOne<uint32_t>(nodusUint32, nodusProd, 0xffffffffu, 0xffffffffu), 1u);
  EXPECT_EQ(reduceOne<int64_t>(nodusInt64, nodusProd, INT64_MIN, -1), INT64_MIN);
  EXPECT_EQ(reduceOne<uint64_t>(nodusUint64, nodusSum, UINT64_MAX, 2), 1u);
  EXPECT_EQ(reduceOne<int32_t>(nodusInt32, nodusMin, -5, 3), -5);
  EXPECT_EQ(reduceOne<uint32_t>(nodusUint32, nodusMax, 0x80000000u, 5), 0x80000000u);
  EXPECT_EQ(reduceOne<int8_t>(nodusInt8, nodusAvg, 100, 100), -56);  // avg reduces as a sum
}

TEST(KernelKnownResults, IntegerAverageTruncates) {
  EXPECT_EQ(avgOne<int8_t>(nodusInt8, 100, 100, 3), -18);  // wrapped sum -56, / 3
  EXPECT_EQ(avgOne<int32_t>(nodusInt32, -7, 0, 2), -3);
  EXPECT_EQ(avgOne<int32_t>(nodusInt32, 7, 0, 2), 3);
  EXPECT_EQ(avgOne<uint32_t>(nodusUint32, 0xffffffffu, 0, 2), 0x7fffffffu);
  EXPECT_EQ(avgOne<uint32_t>(nodusUint32, 0xffffffffu, 0, 1), 0xffffffffu);
  EXPECT_EQ(avgOne<int64_t>(nodusInt64, INT64_MIN, 0, 3), INT64_MIN / 3);
  EXPECT_EQ(avgOne<uint64_t>(nodusUint64, UINT64_MAX, 0, 7), UINT64_MAX / 7);
  int32_t v = -9;
  nodus::scaleAvg(nodusInt32, &v, &v, 1, 4);
  EXPECT_EQ(v, -2);
}

TEST(KernelKnownResults, HalfRoundsOnceToNearestEven) {
  EXPECT_EQ(reduceOne<uint16_t>(nodusFloat16, nodusSum, 0x6800, 0x3c00), 0x6800);  // 2048 + 1
  EXPECT_EQ(reduceOne<uint16_t>(nodusFloat16, nodusSum, 0x6801, 0x3c00), 0x6802);  // 2050 + 1
  EXPECT_EQ(reduceOne<uint16_t>(nodusFloat16, nodusSum, 0x7bff, 0x4c00), 0x7c00);  // 65520
  EXPECT_EQ(reduceOne<uint16_t>(nodusFloat16, nodusSum, 0x7bff, 0x4bff), 0x7bff);
  EXPECT_EQ(reduceOne<uint16_t>(nodusFloat16, nodusSum, 0x0001, 0x0001), 0x0002);
  EXPECT_EQ(reduceOne<uint16_t>(nodusFloat16, nodusSum, 0x03ff, 0x0001), 0x0400);
  EXPECT_EQ(reduceOne<uint16_t>(nodusFloat16, nodusProd, 0x0003, 0x3800), 0x0002);
  EXPECT_EQ(reduceOne<uint16_t>(nodusFloat16, nodusProd, 0x5c00, 0x5c00), 0x7c00);
  EXPECT_EQ(reduceOne<uint16_t>(nodusFloat16, nodusMin, 0xbc00, 0x3c00), 0xbc00);
  EXPECT_EQ(reduceOne<uint16_t>(nodusFloat16, nodusMax, 0x0001, 0x8400), 0x0001);
  EXPECT_TRUE(halfIsNan(reduceOne<uint16_t>(nodusFloat16, nodusSum, 0x7c00, 0xfc00)));
  // The sum 131008 overflows fp16 but not fp32: one rounding, after the division.
  EXPECT_EQ(avgOne<uint16_t>(nodusFloat16, 0x7bff, 0x7bff, 2), 0x7bff);
}

TEST(KernelKnownResults, Bfloat16RoundsOnceToNearestEven) {
  EXPECT_EQ(reduceOne<uint16_t>(nodusBfloat16, nodusSum, 0x4380, 0x3f80), 0x4380);  // 256 + 1
  EXPECT_EQ(reduceOne<uint16_t>(nodusBfloat16, nodusSum, 0x4381, 0x3f80), 0x4382);  // 258 + 1
  EXPECT_EQ(reduceOne<uint16_t>(nodusBfloat16, nodusSum, 0x3f80, 0x3b80), 0x3f80);  // 1 + 2^-8
  EXPECT_EQ(reduceOne<uint16_t>(nodusBfloat16, nodusSum, 0x7f7f, 0x7f7f), 0x7f80);
  EXPECT_EQ(reduceOne<uint16_t>(nodusBfloat16, nodusSum, 0x0001, 0x0001), 0x0002);
  EXPECT_TRUE(bf16IsNan(reduceOne<uint16_t>(nodusBfloat16, nodusSum, 0x7f80, 0xff80)));
  // Two elements: both halves of a 32-bit word.
  const uint16_t a[2] = {0x4381, 0x3f80}, b[2] = {0x3f80, 0x3b80};
  uint16_t d[2];
  nodus::reduce(nodusBfloat16, nodusSum, d, a, b, 2);
  EXPECT_EQ(d[0], 0x4382);
  EXPECT_EQ(d[1], 0x3f80);
}

TEST(KernelKnownResults, FloatMinMaxPickPerConvention) {
  // (b < a ? b : a) and (a < b ? b : a): with equal operands the first wins.
  const float m = reduceOne<float>(nodusFloat32, nodusMin, 0.0f, -0.0f);
  EXPECT_FALSE(std::signbit(m));
  const float M = reduceOne<float>(nodusFloat32, nodusMax, -0.0f, 0.0f);
  EXPECT_TRUE(std::signbit(M));
  EXPECT_EQ(reduceOne<double>(nodusFloat64, nodusMin, 2.0, -HUGE_VAL), -HUGE_VAL);
  // NaN: unspecified result, but it must not crash.
  (void)reduceOne<float>(nodusFloat32, nodusMin, NAN, 1.0f);
  (void)reduceOne<uint16_t>(nodusFloat16, nodusMax, 0x7e00, 0x3c00);
}

TEST(KernelDispatch, ReportsVariant) {
  // Informational: which variant the dispatched tests above exercised.
  std::printf("reduce kernels: %s\n", nodus::detail::kernelsUseAvx2() ? "AVX2/F16C" : "baseline");
  SUCCEED();
}

// ---- Names ----------------------------------------------------------------------------------

TEST(DataTypeNames, EveryTypeAndOpHasItsName) {
  const char* types[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                         "uint64", "float16", "bfloat16", "float32", "float64"};
  for (int t = 0; t < nodusNumTypes; ++t)
    EXPECT_STREQ(nodus::typeName(nodusDataType_t(t)), types[t]);
  EXPECT_STREQ(nodus::typeName(nodusNumTypes), "?");
  EXPECT_STREQ(nodus::typeName(nodusDataType_t(15)), "?");
  const char* ops[] = {"sum", "prod", "min", "max", "avg"};
  for (int o = 0; o < nodusNumOps; ++o) EXPECT_STREQ(nodus::opName(nodusRedOp_t(o)), ops[o]);
  EXPECT_STREQ(nodus::opName(nodusNumOps), "?");
  EXPECT_STREQ(nodus::opName(nodusRedOp_t(7)), "?");
}

// ---- streamingCopy ---------------------------------------------------------------

// Every length around the 16- and 64-byte blocks, from and to every
// alignment: the bytes arrive, and nothing around the destination changes.
TEST(StreamingCopy, CopiesEveryLengthAndAlignmentAndNothingElse) {
  std::vector<unsigned char> src(600), dst(700);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<unsigned char>(i * 37 + 11);
  for (size_t n : {0, 1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 511})
    for (size_t from = 0; from < 17; ++from)
      for (size_t to = 0; to < 33; ++to) {
        std::fill(dst.begin(), dst.end(), 0xEE);
        nodus::streamingCopy(dst.data() + 64 + to, src.data() + from, n);
        for (size_t i = 0; i < dst.size(); ++i) {
          const bool inside = i >= 64 + to && i < 64 + to + n;
          const unsigned char want = inside ? src[from + i - 64 - to] : 0xEE;
          ASSERT_EQ(dst[i], want) << "n " << n << " from +" << from << " to +" << to << " byte " << i;
        }
      }
}

TEST(StreamingCopy, CopiesALargeBuffer) {
  std::vector<uint64_t> src(1 << 17), dst(1 << 17, 0);
  for (size_t i = 0; i < src.size(); ++i) src[i] = i * 0x9E3779B97F4A7C15ull;
  nodus::streamingCopy(dst.data(), src.data(), src.size() * sizeof(uint64_t));
  EXPECT_EQ(dst, src);
#if defined(__x86_64__)
  EXPECT_TRUE(nodus::streamingCopyStreams());
#endif
}

}  // namespace
