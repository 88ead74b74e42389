// Throughput of the reduction kernels: reduce() for every type x op at 64 KiB,
// 1 MiB and 16 MiB per input, out of place (dst, a, b distinct), plus the
// in-place sum (dst == a) that the collectives use most.
//
// bytes_per_second counts memory traffic: both inputs read plus the output
// written, 3 x the per-input size per call (payload per input is a third of
// it). items_per_second counts elements reduced.
//
// Buffers are allocated and touched once for the whole run (page faults are
// expensive on the target machines), and filled with ordinary values (no
// subnormals, no overflow) before each benchmark's timed loop.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/dtype.h"
#include "kernels/reduce.h"

namespace {

constexpr size_t kMaxBytes = size_t{16} << 20;

struct Buffers {
  void* a;
  void* b;
  void* dst;
};

void* allocTouched(size_t bytes) {
  void* p = std::aligned_alloc(64, bytes);
  if (p == nullptr) std::abort();
  std::memset(p, 0, bytes);
  return p;
}

// Never freed: lives for the whole process, like the benchmark registry.
const Buffers& buffers() {
  static const Buffers bufs{allocTouched(kMaxBytes), allocTouched(kMaxBytes),
                            allocTouched(kMaxBytes)};
  return bufs;
}

template <class T>
void fillInts(void* p, size_t n, uint64_t seed) {
  T* t = static_cast<T*>(p);
  for (size_t i = 0; i < n; ++i) t[i] = T((i * 2654435761u + seed) >> 3);
}

// Values in [0.75, 1.25): sums and products stay normal and finite.
template <class Store>
void fillFloats(void* p, size_t n, uint64_t seed, Store store) {
  for (size_t i = 0; i < n; ++i) store(p, i, 0.75f + float((i * 7 + seed) % 101) / 202.0f);
}

void fill(nodusDataType_t type, void* p, size_t n, uint64_t seed) {
  using nodus::floatToBfloat16;
  using nodus::floatToHalf;
  switch (type) {
    case nodusInt8: fillInts<int8_t>(p, n, seed); break;
    case nodusUint8: fillInts<uint8_t>(p, n, seed); break;
    case nodusInt32: fillInts<int32_t>(p, n, seed); break;
    case nodusUint32: fillInts<uint32_t>(p, n, seed); break;
    case nodusInt64: fillInts<int64_t>(p, n, seed); break;
    case nodusUint64: fillInts<uint64_t>(p, n, seed); break;
    case nodusFloat16:
      fillFloats(p, n, seed,
                 [](void* q, size_t i, float v) { static_cast<uint16_t*>(q)[i] = floatToHalf(v); });
      break;
    case nodusBfloat16:
      fillFloats(p, n, seed, [](void* q, size_t i, float v) {
        static_cast<uint16_t*>(q)[i] = floatToBfloat16(v);
      });
      break;
    case nodusFloat32:
      fillFloats(p, n, seed, [](void* q, size_t i, float v) { static_cast<float*>(q)[i] = v; });
      break;
    case nodusFloat64:
      fillFloats(p, n, seed, [](void* q, size_t i, float v) { static_cast<double*>(q)[i] = v; });
      break;
    default: break;
  }
}

void BM_Reduce(benchmark::State& state, nodusDataType_t type, nodusRedOp_t op, bool inPlace) {
  const size_t bytes = size_t(state.range(0));
  const size_t n = bytes / nodus::typeSize(type);
  const Buffers& bufs = buffers();
  fill(type, bufs.a, n, 1);
  fill(type, bufs.b, n, 2);
  void* dst = inPlace ? bufs.a : bufs.dst;
  for (auto _ : state) {
    nodus::reduce(type, op, dst, bufs.a, bufs.b, n);
    benchmark::DoNotOptimize(dst);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(3 * n * nodus::typeSize(type)));
  state.SetItemsProcessed(int64_t(state.iterations()) * int64_t(n));
}

void registerAll() {
  for (int t = 0; t < nodusNumTypes; ++t) {
    const auto type = nodusDataType_t(t);
    for (int o = 0; o < nodusNumOps; ++o) {
      const auto op = nodusRedOp_t(o);
      const std::string name =
          std::string("reduce/") + nodus::typeName(type) + "/" + nodus::opName(op);
      benchmark::RegisterBenchmark(name.c_str(), BM_Reduce, type, op, false)
          ->Arg(64 << 10)
          ->Arg(1 << 20)
          ->Arg(16 << 20);
    }
    const std::string name = std::string("reduce_inplace/") + nodus::typeName(type) + "/sum";
    benchmark::RegisterBenchmark(name.c_str(), BM_Reduce, type, nodusSum, true)
        ->Arg(64 << 10)
        ->Arg(1 << 20)
        ->Arg(16 << 20);
  }
}

[[maybe_unused]] const int registered = (registerAll(), 0);

}  // namespace

BENCHMARK_MAIN();
