#include "perf/common.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

namespace nodus_perf {

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

const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "allreduce";
    case Coll::AllGather: return "allgather";
    case Coll::ReduceScatter: return "reducescatter";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::AllToAll: return "alltoall";
    case Coll::Gather: return "gather";
    case Coll::Scatter: return "scatter";
  }
  return "?";
}

bool collHasOp(Coll c) {
  return c == Coll::AllReduce || c == Coll::ReduceScatter || c == Coll::Reduce;
}
bool collHasRoot(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter;
}
// The per-rank count is the size divided among the ranks.
bool collSplitsSize(Coll c) {
  return c == Coll::AllGather || c == Coll::ReduceScatter || c == Coll::AllToAll || c == Coll::Gather ||
         c == Coll::Scatter;
}

double busFactor(Coll c, int nranks) {
  const double p = nranks;
  switch (c) {
    case Coll::AllReduce: return 2.0 * (p - 1) / p;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll:
    case Coll::Gather:
    case Coll::Scatter: return (p - 1) / p;
    case Coll::Broadcast:
    case Coll::Reduce: return 1.0;
  }
  return 1.0;
}

nodusCollective_t collEnum(Coll c) {
  switch (c) {
    case Coll::AllReduce: return nodusCollAllReduce;
    case Coll::AllGather: return nodusCollAllGather;
    case Coll::ReduceScatter: return nodusCollReduceScatter;
    case Coll::Broadcast: return nodusCollBroadcast;
    case Coll::Reduce: return nodusCollReduce;
    case Coll::AllToAll: return nodusCollAllToAll;
    case Coll::Gather: return nodusCollGather;
    case Coll::Scatter: return nodusCollScatter;
  }
  return nodusCollAllReduce;
}

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

Pattern patternFor(Coll c, nodusRedOp_t op) {
  if (!collHasOp(c)) return Pattern::Data;
  switch (op) {
    case nodusProd: return Pattern::Prod;
    case nodusMin: return Pattern::Min;
    case nodusMax: return Pattern::Max;
    default: return Pattern::Sum;  // sum and avg
  }
}

}  // namespace nodus_perf
