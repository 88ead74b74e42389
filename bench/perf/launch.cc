#include "perf/launch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

namespace nodus_perf {

std::string hostName() {
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) return "?";
  return host;
}

void rankLine(int rank, char (&line)[kRankLine]) {
  std::snprintf(line, kRankLine, "#  Rank %4d Pid %7d on %s", rank, static_cast<int>(getpid()), hostName().c_str());
}

void printRankLines(Reporter& reporter, int version, const char* gathered, int n) {
  std::vector<std::string> lines;
  const int shown = std::min(n, 64);
  for (int r = 0; r < shown; ++r) {
    const char* l = gathered + static_cast<size_t>(r) * kRankLine;
    lines.emplace_back(l, strnlen(l, kRankLine));
  }
  if (shown < n) lines.push_back("#  ... and " + std::to_string(n - shown) + " more ranks");
  reporter.printHeader(version, lines);
}

int libraryVersion() {
  int v = 0;
  checkNodus(nodusGetVersion(&v), "nodusGetVersion", nullptr, 0);
  return v;
}

}  // namespace nodus_perf
