// Typed reduction kernels.
//
// Every kernel is one plain loop `dst[i] = store(f(load(a[i]), load(b[i])))`
// where load/store convert between the storage type and the type the arithmetic
// happens in, and f is a small inlined element function. GCC auto-vectorises
// these loops at -O3. They are compiled twice: for the baseline ISA (SSE2 on
// x86-64) and inside an AVX2 region chosen at run time. Two types get loops of
// their own because the plain form vectorises badly:
//  - bf16 is processed two elements per 32-bit word (see bf16PairLoop), which
//    turns the conversions into one shift or one mask per element;
//  - fp16 uses F16C in the AVX2 variant: converting by bit manipulation costs
//    dozens of vector instructions per element, F16C one.
// All variants give bit-identical results (same fp32 arithmetic, exact
// widening, one round-to-nearest-even narrowing); only NaN payloads, which the
// API leaves unspecified, may differ.
//
// Aliasing: dst may equal a or b exactly. The pointers are not restrict: each
// iteration reads a[i] and b[i] before writing dst[i], and GCC's run-time
// overlap check accepts a dependence distance of zero, so the in-place case
// runs the vector loop too (the benchmark measures it).
#include "kernels/reduce.h"

#include <bit>
#include <cstring>
#include <type_traits>

#include "base/dtype.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define NODUS_KERNELS_X86 1
#define NODUS_TARGET_AVX2 __attribute__((target("avx2,f16c")))
#else
#define NODUS_KERNELS_X86 0
#endif

// Everything below is forced inline into the few dispatch functions, so that
// the AVX2 variant really compiles the loops for AVX2.
#define NODUS_ALWAYS_INLINE __attribute__((always_inline)) inline
#define NODUS_LAMBDA_INLINE __attribute__((always_inline))

namespace nodus {


namespace {

// ---- Conversions ------------------------------------------------------------------

NODUS_ALWAYS_INLINE float h2f(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;  // exponent and mantissa
  // Normal: the 10-bit mantissa moves to the top of fp32's 23 bits and the
  // exponent is rebiased from 15 to 127.
  const uint32_t normal = (em << 13) + (112u << 23);
  // Inf / NaN: all-ones exponent, mantissa (the NaN payload) kept.
  const uint32_t special = (em << 13) | 0x7f800000u;
  // Subnormal and zero: the value is em * 2^-24, exact in fp32.
  const uint32_t sub = std::bit_cast<uint32_t>(float(int32_t(em)) * 0x1p-24f);
  uint32_t r = em < 0x0400u ? sub : normal;
  r = em >= 0x7c00u ? special : r;
  return std::bit_cast<float>(r | sign);
}

NODUS_ALWAYS_INLINE uint16_t f2h(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t ax = x & 0x7fffffffu;
  // Normal half range: rebias the exponent (127 -> 15) and round the 13 dropped
  // bits to nearest even. A carry out of the mantissa bumps the exponent, which
  // is exactly right, up to and including rounding to infinity.
  const uint32_t r = ax - (112u << 23);
  const uint32_t normal = (r + 0x0fffu + ((r >> 13) & 1u)) >> 13;
  // Below 2^-14 the result is a count of 2^-24 units. Adding 0.5f (whose ulp is
  // 2^-24) makes the FPU round |f| to that grid, to nearest even; the low bits
  // of the sum are then the count (0x400 when it rounds up to the smallest
  // normal, which is also that value's encoding).
  const uint32_t sub =
      std::bit_cast<uint32_t>(std::bit_cast<float>(ax) + 0.5f) - std::bit_cast<uint32_t>(0.5f);
  uint32_t h = ax < 0x38800000u ? sub : normal;
  h = ax >= 0x47800000u ? 0x7c00u : h;                           // >= 2^16: overflow to inf
  h = ax > 0x7f800000u ? (0x7e00u | ((ax >> 13) & 0x3ffu)) : h;  // NaN: quieted, payload kept
  return uint16_t(h | sign);
}

NODUS_ALWAYS_INLINE float b2f(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

// fp32 -> bf16 in the high half of the word; the low half is garbage.
NODUS_ALWAYS_INLINE uint32_t f2bRaw(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = x + 0x7fffu + ((x >> 16) & 1u);  // nearest even
  const uint32_t nan = x | 0x00400000u;                     // quieted, payload kept
  return f != f ? nan : rounded;
}

NODUS_ALWAYS_INLINE uint16_t f2b(float f) { return uint16_t(f2bRaw(f) >> 16); }

// ---- Storage <-> compute ---------------------------------------------------------

template <class T>
struct Native {
  using S = T;  // in memory
  using C = T;  // arithmetic
  static NODUS_ALWAYS_INLINE C load(S v) { return v; }
  static NODUS_ALWAYS_INLINE S store(C v) { return v; }
};

struct Half {
  using S = uint16_t;
  using C = float;
  static NODUS_ALWAYS_INLINE C load(S v) { return h2f(v); }
  static NODUS_ALWAYS_INLINE S store(C v) { return f2h(v); }
};

struct BHalf {
  using S = uint16_t;
  using C = float;
  static NODUS_ALWAYS_INLINE C load(S v) { return b2f(v); }
  static NODUS_ALWAYS_INLINE S store(C v) { return f2b(v); }
};

// ---- Element arithmetic ---------------------------------------------------------

// Integers wrap modulo 2^bits: compute in an unsigned type at least as wide as
// unsigned int (so that uint8 * uint8 does not promote to signed int), narrow.
template <class T>
using Wide = decltype(std::make_unsigned_t<T>() + 0u);

template <class T>
NODUS_ALWAYS_INLINE T add(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    return T(Wide<T>(x) + Wide<T>(y));
  } else {
    return x + y;
  }
}

template <class T>
NODUS_ALWAYS_INLINE T mul(T x, T y) {
  if constexpr (std::is_integral_v<T>) {
    return T(Wide<T>(x) * Wide<T>(y));
  } else {
    return x * y;
  }
}

// v / divisor, truncating for integers. divisor >= 2: the entry points turn
// divisor 1 into a sum or a copy.
template <class T>
NODUS_ALWAYS_INLINE T divide(T v, int divisor) {
  if constexpr (std::is_floating_point_v<T>) {
    return v / T(divisor);
  } else if constexpr (sizeof(T) <= 4) {
    // x86 has no SIMD integer division, so divide in floating point (fp32 for
    // 8-bit v, fp64 for 32-bit v: v converts exactly), which is exact after
    // truncation: with a p-bit significand and |v| < 2^p, the quotient's
    // rounding error, at most |v / divisor| * 2^-p, is below 1/divisor, the
    // least distance from a non-integral quotient to an integer, so truncation
    // lands where integer division does. (An 8-bit v with a divisor beyond
    // 2^24, inexact in fp32, still gives |quotient| < 1, hence 0.) The quotient
    // of a uint32 by 2 or more fits int32, whose conversions vectorise.
    using F = std::conditional_t<sizeof(T) == 1, float, double>;
    F fv;
    if constexpr (std::is_same_v<T, uint32_t>) {
      fv = F(int32_t(v ^ 0x80000000u)) + F(2147483648.0);  // exact, and vectorises
    } else {
      fv = F(v);
    }
    return T(int32_t(fv / F(divisor)));
  } else if constexpr (std::is_signed_v<T>) {
    return T(v / int64_t(divisor));
  } else {
    return T(v / uint64_t(divisor));
  }
}

// Element functions in the compute type.
struct AddOp {
  template <class C>
  NODUS_ALWAYS_INLINE C operator()(C x, C y) const {
    return add(x, y);
  }
};
struct MulOp {
  template <class C>
  NODUS_ALWAYS_INLINE C operator()(C x, C y) const {
    return mul(x, y);
  }
};
// min/max are (y < x ? y : x) and (x < y ? y : x), NaN results unspecified.
// They select an input rather than compute a value, so the loops copy the
// stored element (no narrowing, which also makes them exact for fp16/bf16).
struct MinOp {
  static constexpr bool selects = true;
  template <class C>
  NODUS_ALWAYS_INLINE bool takeSecond(C x, C y) const {
    return y < x;
  }
};
struct MaxOp {
  static constexpr bool selects = true;
  template <class C>
  NODUS_ALWAYS_INLINE bool takeSecond(C x, C y) const {
    return x < y;
  }
};
template <class F>
constexpr bool kSelects = requires {
  F::selects;
};
struct AvgFinalOp {
  int divisor;
  template <class C>
  NODUS_ALWAYS_INLINE C operator()(C x, C y) const {
    return divide(add(x, y), divisor);
  }
};
struct ScaleOp {
  int divisor;
  template <class C>
  NODUS_ALWAYS_INLINE C operator()(C x) const {
    return divide(x, divisor);
  }
};

// ---- Loops ----------------------------------------------------------------------------

// bf16, two per 32-bit word: the high element's bits, low half masked off, are
// already an fp32 pattern; the low element's become one shifted up. Both
// halves are treated alike and stored back where they were, so this holds for
// either byte order.
NODUS_ALWAYS_INLINE float bfLo(uint32_t w) { return std::bit_cast<float>(w << 16); }
NODUS_ALWAYS_INLINE float bfHi(uint32_t w) { return std::bit_cast<float>(w & 0xffff0000u); }
NODUS_ALWAYS_INLINE uint32_t loadWord(const unsigned char* p) {
  uint32_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}
NODUS_ALWAYS_INLINE void storeWord(unsigned char* p, uint32_t w) { std::memcpy(p, &w, sizeof w); }

template <class F>
NODUS_ALWAYS_INLINE void bf16PairLoop(void* dst, const void* a, const void* b, size_t n, F f) {
  unsigned char* d = static_cast<unsigned char*>(dst);
  const unsigned char* x = static_cast<const unsigned char*>(a);
  const unsigned char* y = static_cast<const unsigned char*>(b);
  const size_t words = n / 2;
  for (size_t i = 0; i < words; ++i) {
    const uint32_t wx = loadWord(x + 4 * i), wy = loadWord(y + 4 * i);
    if constexpr (kSelects<F>) {
      const uint32_t takeY = (f.takeSecond(bfLo(wx), bfLo(wy)) ? 0x0000ffffu : 0u) |
                             (f.takeSecond(bfHi(wx), bfHi(wy)) ? 0xffff0000u : 0u);
      storeWord(d + 4 * i, (wx & ~takeY) | (wy & takeY));
    } else {
      storeWord(d + 4 * i, (f2bRaw(f(bfLo(wx), bfLo(wy))) >> 16) |
                               (f2bRaw(f(bfHi(wx), bfHi(wy))) & 0xffff0000u));
    }
  }
  if (n % 2) {
    uint16_t vx, vy, r;
    std::memcpy(&vx, x + 4 * words, 2);
    std::memcpy(&vy, y + 4 * words, 2);
    if constexpr (kSelects<F>) {
      r = f.takeSecond(b2f(vx), b2f(vy)) ? vy : vx;
    } else {
      r = f2b(f(b2f(vx), b2f(vy)));
    }
    std::memcpy(d + 4 * words, &r, 2);
  }
}

template <class F>
NODUS_ALWAYS_INLINE void bf16PairLoop(void* dst, const void* src, size_t n, F f) {
  unsigned char* d = static_cast<unsigned char*>(dst);
  const unsigned char* x = static_cast<const unsigned char*>(src);
  const size_t words = n / 2;
  for (size_t i = 0; i < words; ++i) {
    const uint32_t w = loadWord(x + 4 * i);
    storeWord(d + 4 * i, (f2bRaw(f(bfLo(w))) >> 16) | (f2bRaw(f(bfHi(w))) & 0xffff0000u));
  }
  if (n % 2) {
    uint16_t v;
    std::memcpy(&v, x + 4 * words, 2);
    const uint16_t r = f2b(f(b2f(v)));
    std::memcpy(d + 4 * words, &r, 2);
  }
}

template <class K, class F>
NODUS_ALWAYS_INLINE void binaryLoop(void* dst, const void* a, const void* b, size_t n, F f) {
  if constexpr (std::is_same_v<K, BHalf>) {
    bf16PairLoop(dst, a, b, n, f);
  } else {
    using S = typename K::S;
    S* d = static_cast<S*>(dst);
    const S* x = static_cast<const S*>(a);
    const S* y = static_cast<const S*>(b);
    for (size_t i = 0; i < n; ++i) {
      if constexpr (kSelects<F>) {
        d[i] = f.takeSecond(K::load(x[i]), K::load(y[i])) ? y[i] : x[i];
      } else {
        d[i] = K::store(f(K::load(x[i]), K::load(y[i])));
      }
    }
  }
}

template <class K, class F>
NODUS_ALWAYS_INLINE void unaryLoop(void* dst, const void* src, size_t n, F f) {
  if constexpr (std::is_same_v<K, BHalf>) {
    bf16PairLoop(dst, src, n, f);
  } else {
    using S = typename K::S;
    S* d = static_cast<S*>(dst);
    const S* x = static_cast<const S*>(src);
    for (size_t i = 0; i < n; ++i) d[i] = K::store(f(K::load(x[i])));
  }
}

template <class K>
NODUS_ALWAYS_INLINE void reduceTyped(nodusRedOp_t op, void* dst, const void* a, const void* b,
                                     size_t n) {
  switch (op) {
    case nodusSum:
    case nodusAvg: binaryLoop<K>(dst, a, b, n, AddOp{}); break;
    case nodusProd: binaryLoop<K>(dst, a, b, n, MulOp{}); break;
    case nodusMin: binaryLoop<K>(dst, a, b, n, MinOp{}); break;
    case nodusMax: binaryLoop<K>(dst, a, b, n, MaxOp{}); break;
    default: break;
  }
}

// Calls fn.template operator()<Codec>() for the codec of `type`.
template <class Fn>
NODUS_ALWAYS_INLINE void withCodec(nodusDataType_t type, Fn&& fn) {
  switch (type) {
    case nodusInt8: fn.template operator()<Native<int8_t>>(); break;
    case nodusUint8: fn.template operator()<Native<uint8_t>>(); break;
    case nodusInt32: fn.template operator()<Native<int32_t>>(); break;
    case nodusUint32: fn.template operator()<Native<uint32_t>>(); break;
    case nodusInt64: fn.template operator()<Native<int64_t>>(); break;
    case nodusUint64: fn.template operator()<Native<uint64_t>>(); break;
    case nodusFloat16: fn.template operator()<Half>(); break;
    case nodusBfloat16: fn.template operator()<BHalf>(); break;
    case nodusFloat32: fn.template operator()<Native<float>>(); break;
    case nodusFloat64: fn.template operator()<Native<double>>(); break;
    default: break;
  }
}

NODUS_ALWAYS_INLINE void reduceAll(nodusDataType_t type, nodusRedOp_t op, void* dst, const void* a,
                                   const void* b, size_t n) {
  withCodec(type, [&]<class K>() NODUS_LAMBDA_INLINE { reduceTyped<K>(op, dst, a, b, n); });
}

NODUS_ALWAYS_INLINE void avgFinalAll(nodusDataType_t type, void* dst, const void* a, const void* b,
                                     size_t n, int divisor) {
  withCodec(type, [&]<class K>()
                      NODUS_LAMBDA_INLINE { binaryLoop<K>(dst, a, b, n, AvgFinalOp{divisor}); });
}

NODUS_ALWAYS_INLINE void scaleAll(nodusDataType_t type, void* dst, const void* src, size_t n,
                                  int divisor) {
  withCodec(type,
            [&]<class K>() NODUS_LAMBDA_INLINE { unaryLoop<K>(dst, src, n, ScaleOp{divisor}); });
}

// ---- AVX2 / F16C variant -------------------------------------------------------------

#if NODUS_KERNELS_X86
// Every function here carries NODUS_TARGET_AVX2; the portable templates they
// call are inlined into them and so compiled for AVX2 as well.

NODUS_ALWAYS_INLINE NODUS_TARGET_AVX2 __m256 loadHalf8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

NODUS_ALWAYS_INLINE NODUS_TARGET_AVX2 void storeHalf8(uint16_t* p, __m256 v) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT));
}

// f combines 8 fp32 lanes. The tail goes through the same f on a padded copy,
// so every element is computed the same way.
template <class F>
NODUS_ALWAYS_INLINE NODUS_TARGET_AVX2 void halfLoopF16C(void* dst, const void* a, const void* b,
                                                        size_t n, F f) {
  uint16_t* d = static_cast<uint16_t*>(dst);
  const uint16_t* x = static_cast<const uint16_t*>(a);
  const uint16_t* y = static_cast<const uint16_t*>(b);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 x0 = loadHalf8(x + i), x1 = loadHalf8(x + i + 8);
    const __m256 y0 = loadHalf8(y + i), y1 = loadHalf8(y + i + 8);
    storeHalf8(d + i, f(x0, y0));
    storeHalf8(d + i + 8, f(x1, y1));
  }
  for (; i + 8 <= n; i += 8) storeHalf8(d + i, f(loadHalf8(x + i), loadHalf8(y + i)));
  if (i < n) {
    const size_t rest = n - i;
    uint16_t tx[8] = {}, ty[8] = {}, td[8];
    std::memcpy(tx, x + i, rest * sizeof(uint16_t));
    std::memcpy(ty, y + i, rest * sizeof(uint16_t));
    storeHalf8(td, f(loadHalf8(tx), loadHalf8(ty)));
    std::memcpy(d + i, td, rest * sizeof(uint16_t));
  }
}

// Element functions on 8 fp32 lanes (structs rather than captureless lambdas,
// whose function-pointer thunks would be compiled without AVX).
struct AddPs {
  NODUS_ALWAYS_INLINE NODUS_TARGET_AVX2 __m256 operator()(__m256 x, __m256 y) const {
    return _mm256_add_ps(x, y);
  }
};
struct MulPs {
  NODUS_ALWAYS_INLINE NODUS_TARGET_AVX2 __m256 operator()(__m256 x, __m256 y) const {
    return _mm256_mul_ps(x, y);
  }
};
// minps(p, q) is (p < q ? p : q) and maxps(p, q) is (p > q ? p : q): these are
// MinOp's (y < x ? y : x) and MaxOp's (x < y ? y : x). The pick is exactly
// representable, so the narrowing keeps it (a NaN may come back quieted).
struct MinPs {
  NODUS_ALWAYS_INLINE NODUS_TARGET_AVX2 __m256 operator()(__m256 x, __m256 y) const {
    return _mm256_min_ps(y, x);
  }
};
struct MaxPs {
  NODUS_ALWAYS_INLINE NODUS_TARGET_AVX2 __m256 operator()(__m256 x, __m256 y) const {
    return _mm256_max_ps(y, x);
  }
};
struct AvgFinalPs {
  __m256 divisor;
  NODUS_ALWAYS_INLINE NODUS_TARGET_AVX2 __m256 operator()(__m256 x, __m256 y) const {
    return _mm256_div_ps(_mm256_add_ps(x, y), divisor);
  }
};
struct ScalePs {  // unary: the second operand is ignored
  __m256 divisor;
  NODUS_ALWAYS_INLINE NODUS_TARGET_AVX2 __m256 operator()(__m256 x, __m256) const {
    return _mm256_div_ps(x, divisor);
  }
};

NODUS_TARGET_AVX2 void reduceAvx2(nodusDataType_t type, nodusRedOp_t op, void* dst, const void* a,
                                  const void* b, size_t n) {
  if (type != nodusFloat16) return reduceAll(type, op, dst, a, b, n);  // compiled for AVX2 here
  switch (op) {
    case nodusSum:
    case nodusAvg: halfLoopF16C(dst, a, b, n, AddPs{}); break;
    case nodusProd: halfLoopF16C(dst, a, b, n, MulPs{}); break;
    case nodusMin: halfLoopF16C(dst, a, b, n, MinPs{}); break;
    case nodusMax: halfLoopF16C(dst, a, b, n, MaxPs{}); break;
    default: break;
  }
}

NODUS_TARGET_AVX2 void avgFinalAvx2(nodusDataType_t type, void* dst, const void* a, const void* b,
                                    size_t n, int divisor) {
  if (type != nodusFloat16) return avgFinalAll(type, dst, a, b, n, divisor);
  halfLoopF16C(dst, a, b, n, AvgFinalPs{_mm256_set1_ps(float(divisor))});
}

NODUS_TARGET_AVX2 void scaleAvx2(nodusDataType_t type, void* dst, const void* src, size_t n,
                                 int divisor) {
  if (type != nodusFloat16) return scaleAll(type, dst, src, n, divisor);
  halfLoopF16C(dst, src, src, n, ScalePs{_mm256_set1_ps(float(divisor))});
}

// AVX2 and F16C present, and the OS saving the ymm registers (XCR0 bits 1-2).
bool cpuHasAvx2F16c() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const unsigned osxsave = 1u << 27, avx = 1u << 28, f16c = 1u << 29;
  if ((ecx & (osxsave | avx | f16c)) != (osxsave | avx | f16c)) return false;
  unsigned xcr0, xcr0High;
  __asm__("xgetbv" : "=a"(xcr0), "=d"(xcr0High) : "c"(0));
  if ((xcr0 & 6u) != 6u) return false;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return (ebx & (1u << 5)) != 0;  // AVX2
}
#endif  // NODUS_KERNELS_X86

bool useAvx2() {
#if NODUS_KERNELS_X86
  static const bool supported = cpuHasAvx2F16c();
  return supported;
#else
  return false;
#endif
}

// x / 1 is x: a plain copy (also sidesteps divide()'s divisor >= 2 rule).
void copyElements(nodusDataType_t type, void* dst, const void* src, size_t n) {
  if (n != 0 && dst != src) std::memmove(dst, src, n * typeSize(type));
}

}  // namespace

// ---- API --------------------------------------------------------------------------------

float halfToFloat(uint16_t h) { return h2f(h); }
uint16_t floatToHalf(float f) { return f2h(f); }
float bfloat16ToFloat(uint16_t b) { return b2f(b); }
uint16_t floatToBfloat16(float f) { return f2b(f); }

namespace detail {

void reducePortable(nodusDataType_t type, nodusRedOp_t op, void* dst, const void* a, const void* b,
                    size_t n) {
  reduceAll(type, op, dst, a, b, n);
}

void reduceAvgFinalPortable(nodusDataType_t type, void* dst, const void* a, const void* b, size_t n,
                            int divisor) {
  if (divisor == 1) return reducePortable(type, nodusSum, dst, a, b, n);
  avgFinalAll(type, dst, a, b, n, divisor);
}

void scaleAvgPortable(nodusDataType_t type, void* dst, const void* src, size_t n, int divisor) {
  if (divisor == 1) return copyElements(type, dst, src, n);
  scaleAll(type, dst, src, n, divisor);
}

bool kernelsUseAvx2() { return useAvx2(); }

}  // namespace detail

void reduce(nodusDataType_t type, nodusRedOp_t op, void* dst, const void* a, const void* b,
            size_t n) {
#if NODUS_KERNELS_X86
  if (useAvx2()) return reduceAvx2(type, op, dst, a, b, n);
#endif
  detail::reducePortable(type, op, dst, a, b, n);
}

void reduceAvgFinal(nodusDataType_t type, void* dst, const void* a, const void* b, size_t n,
                    int divisor) {
  if (divisor == 1) return reduce(type, nodusSum, dst, a, b, n);
#if NODUS_KERNELS_X86
  if (useAvx2()) return avgFinalAvx2(type, dst, a, b, n, divisor);
#endif
  detail::reduceAvgFinalPortable(type, dst, a, b, n, divisor);
}

void scaleAvg(nodusDataType_t type, void* dst, const void* src, size_t n, int divisor) {
  if (divisor == 1) return copyElements(type, dst, src, n);
#if NODUS_KERNELS_X86
  if (useAvx2()) return scaleAvx2(type, dst, src, n, divisor);
#endif
  detail::scaleAvgPortable(type, dst, src, n, divisor);
}

}  // namespace nodus
