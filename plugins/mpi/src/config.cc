#include "config.h"

#include "log.h"
#include "nodus/nodus.h"

namespace nodus::mpi {
namespace {

// Through libnodus' registry (nodusParamGetInt): one parser, one default, one
// range. A value it refuses is said once and the default taken, since the
// program's MPI calls must go on (on MPI where nodus cannot help).
long long param(const char* name, long long fallback) {
  int64_t v = 0;
  if (nodusParamGetInt(name, &v) == nodusSuccess) return v;
  logMessage("%s; using the default %lld", nodusGetLastError(nullptr), fallback);
  return fallback;
}

}  // namespace

Config Config::fromEnvironment() {
  Config c;
  c.minBytes = static_cast<uint64_t>(param("NODUS_MPI_MIN_BYTES", static_cast<long long>(kDefaultMinBytes)));
  c.verbose = static_cast<int>(param("NODUS_MPI_VERBOSE", 0));
  return c;
}

}  // namespace nodus::mpi
