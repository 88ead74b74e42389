// Typed reduction kernels: the only place that knows how to combine elements.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nodus/nodus.h"

namespace nodus {

// dst[i] = a[i] (op) b[i] for i < n. dst may alias a or b exactly (not partially).
// nodusAvg reduces as a sum here; the division happens in finalizeAvg.
// fp16 / bf16 are widened to fp32, combined, and rounded to nearest-even once.
void reduce(nodusDataType_t type, nodusRedOp_t op, void* dst, const void* a, const void* b,
            size_t n);

// dst[i] = (a[i] + b[i]) / divisor: the last reduction of an average, fused so
// the sum is rounded only once for fp16/bf16. Integer types truncate.
void reduceAvgFinal(nodusDataType_t type, void* dst, const void* a, const void* b, size_t n,
                    int divisor);

// dst[i] = src[i] / divisor (average of a single contribution, or after a copy).
void scaleAvg(nodusDataType_t type, void* dst, const void* src, size_t n, int divisor);

// Conversions used by the kernels and by tests (round to nearest even; NaN kept).
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);
float bfloat16ToFloat(uint16_t b);
uint16_t floatToBfloat16(float f);

// The portable (SSE2 baseline) variants the dispatch falls back to, exposed
// so tests can check them on machines where the AVX2 ones are chosen.
namespace detail {
void reducePortable(nodusDataType_t type, nodusRedOp_t op, void* dst, const void* a, const void* b,
                    size_t n);
void reduceAvgFinalPortable(nodusDataType_t type, void* dst, const void* a, const void* b, size_t n,
                            int divisor);
void scaleAvgPortable(nodusDataType_t type, void* dst, const void* src, size_t n, int divisor);
bool kernelsUseAvx2();
}  // namespace detail

}  // namespace nodus
