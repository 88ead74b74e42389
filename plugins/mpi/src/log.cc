#include "log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace nodus::mpi {
namespace {
std::atomic<int> gRank{-1};
}

void setLogRank(int rank) { gRank.store(rank, std::memory_order_relaxed); }

void logMessage(const char* fmt, ...) {
  // One fprintf per message so that lines of concurrent ranks do not interleave.
  char text[1024];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  const int rank = gRank.load(std::memory_order_relaxed);
  if (rank >= 0) std::fprintf(stderr, "nodus-mpi: rank %d: %s\n", rank, text);
  else std::fprintf(stderr, "nodus-mpi: %s\n", text);
}

}  // namespace nodus::mpi
