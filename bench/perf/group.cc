#include "perf/group.h"

#include <algorithm>

namespace nodus_perf {

void ThreadGroup::barrier() { s_.bar.arrive_and_wait(); }

double ThreadGroup::maxAll(double v) {
  s_.doubles[rank_] = v;
  s_.bar.arrive_and_wait();
  const double m = *std::max_element(s_.doubles.begin(), s_.doubles.end());
  s_.bar.arrive_and_wait();  // nobody overwrites a slot before all have read
  return m;
}

uint64_t ThreadGroup::sumAll(uint64_t v) {
  s_.counts[rank_] = v;
  s_.bar.arrive_and_wait();
  uint64_t sum = 0;
  for (uint64_t c : s_.counts) sum += c;
  s_.bar.arrive_and_wait();
  return sum;
}

#if NODUS_PERF_MPI
void MpiGroup::barrier() { MPI_Barrier(MPI_COMM_WORLD); }

double MpiGroup::maxAll(double v) {
  double m = 0;
  MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return m;
}

uint64_t MpiGroup::sumAll(uint64_t v) {
  uint64_t s = 0;
  MPI_Allreduce(&v, &s, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  return s;
}

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

}  // namespace nodus_perf
