#include "config.h"

#include <cerrno>
#include <cstdlib>

#include "log.h"

namespace nodus::mpi {
namespace {

// Integers as nodus' own parameters take them: decimal or 0x, with an
// optional k/M/G suffix (powers of 1024).
bool parseSize(const char* text, long long* out) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 0);
  if (errno != 0 || end == text || v < 0) return false;
  long long mult = 1;
  if (*end == 'k' || *end == 'K') mult = 1LL << 10, ++end;
  else if (*end == 'm' || *end == 'M') mult = 1LL << 20, ++end;
  else if (*end == 'g' || *end == 'G') mult = 1LL << 30, ++end;
  if (*end != '\0' || v > (1LL << 62) / mult) return false;
  *out = v * mult;
  return true;
}

long long envSize(const char* name, long long fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  long long x = 0;
  if (parseSize(v, &x)) return x;
  logMessage("%s=\"%s\" is not a non-negative integer; using the default %lld", name, v, fallback);
  return fallback;
}

}  // namespace

Config Config::fromEnvironment() {
  Config c;
  c.minBytes = static_cast<uint64_t>(envSize("NODUS_MPI_MIN_BYTES", static_cast<long long>(kDefaultMinBytes)));
  c.verbose = static_cast<int>(envSize("NODUS_MPI_VERBOSE", 0));
  return c;
}

}  // namespace nodus::mpi
