// nodus-info: what this build of nodus is and what it would do here —
// version, build options, transports and algorithms, every parameter with
// its current value and help.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "base/settings.h"
#include "base/socket.h"
#include "nodus/nodus.h"
#include "transports/registry.h"

using namespace nodus;

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
      printf("usage: nodus-info\nPrints the nodus version, build options, transports, algorithms and parameters.\n");
      return 0;
    }
    fprintf(stderr, "nodus-info: unknown argument %s (try --help)\n", argv[i]);
    return 2;
  }
  int v = 0;
  nodusGetVersion(&v);
  printf("nodus %d.%d.%d\n", v / 10000, (v / 100) % 100, v % 100);
  printf("\nBuild\n");
#ifdef NDEBUG
  printf("  assertions    off\n");
#else
  printf("  assertions    on\n");
#endif
  printf("  compiler      %s\n", __VERSION__);
#if defined(__SANITIZE_ADDRESS__)
  printf("  sanitizer     address\n");
#elif defined(__SANITIZE_THREAD__)
  printf("  sanitizer     thread\n");
#endif
  printf("\nTransports (tried in this order for each peer)\n");
  for (const TransportEntry& t : transportTable()) printf("  %-10s available\n", t.name);
  printf("  %-10s not built yet\n", "verbs");
  Settings settings;
  const Status envStatus = Settings::fromEnvironment(&settings);
  std::vector<NetInterface> ifs;
  Status st = selectInterfaces(settings, &ifs);
  if (st.isOk()) {
    std::string names;
    for (const NetInterface& i : ifs) names += (names.empty() ? "" : ", ") + i.name;
    printf("  tcp would use: %s (NODUS_SOCKET_IFNAME)\n", names.c_str());
  } else {
    printf("  tcp: %s\n", st.message().c_str());
  }
  printf("\nAlgorithms\n");
  for (const Algorithm* a : algorithms()) printf("  %-10s %s\n", a->name, a->help);
  printf("\nParameters (environment)\n");
  for (const ParamInfo& p : allParams()) {
    printf("  %-24s = %-12s%s  range %s\n      %s\n", p.name, settings.text(p).c_str(), settings.given(p) ? " (set)" : "",
           rangeText(p).c_str(), p.help);
    if (p.oldName) printf("      (formerly %s, still read)\n", p.oldName);
  }
  if (!envStatus.isOk()) {
    printf("\nError: %s (that value is shown at its default; a communicator would refuse it)\n",
           envStatus.message().c_str());
    return 1;
  }
  return 0;
}
