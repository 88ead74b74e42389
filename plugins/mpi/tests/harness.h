// What the plugin's test programs share. Each program is a plain MPI program:
// it runs unchanged with and without libnodus_mpi preloaded, checks every
// result against values it computes itself, and — when the library is there
// (found with dlsym) — also checks where each call went, from the library's
// counters. Its own bookkeeping uses PMPI_* so that it never shows up in them.
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#include <dlfcn.h>
#include <mpi.h>

#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "nodus_mpi_plugin.h"

namespace harness {

struct Api {
  int (*stats)(int, nodus_mpi_counters_t*) = nullptr;
  int (*commState)(MPI_Comm) = nullptr;
  long long (*minBytes)() = nullptr;
  int (*injectFault)(MPI_Comm) = nullptr;
  const char* (*reasonName)(int) = nullptr;
};

class Harness {
 public:
  Harness(int* argc, char*** argv, int threadLevel = -1) {
    if (threadLevel < 0) {
      MPI_Init(argc, argv);
    } else {
      int provided = 0;
      MPI_Init_thread(argc, argv, threadLevel, &provided);
      providedLevel = provided;
    }
    PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &size);
    api.stats = reinterpret_cast<int (*)(int, nodus_mpi_counters_t*)>(dlsym(RTLD_DEFAULT, "nodus_mpi_stats"));
    api.commState = reinterpret_cast<int (*)(MPI_Comm)>(dlsym(RTLD_DEFAULT, "nodus_mpi_comm_state"));
    api.minBytes = reinterpret_cast<long long (*)()>(dlsym(RTLD_DEFAULT, "nodus_mpi_min_bytes"));
    api.injectFault = reinterpret_cast<int (*)(MPI_Comm)>(dlsym(RTLD_DEFAULT, "nodus_mpi_inject_fault"));
    api.reasonName = reinterpret_cast<const char* (*)(int)>(dlsym(RTLD_DEFAULT, "nodus_mpi_reason_name"));
    preloaded = api.stats && api.commState && api.minBytes && api.injectFault && api.reasonName;
    for (int i = 1; i < *argc; ++i)
      if (std::strcmp((*argv)[i], "--expect-init-fail") == 0) expectInitFail = true;
    const char* want = std::getenv("NODUS_MPI_TEST_EXPECT_PRELOAD");
    if (want && *want) check(preloaded == (std::atoi(want) != 0), "libnodus_mpi %s preloaded but the test expected %s",
                             preloaded ? "is" : "is not", std::atoi(want) ? "it" : "not");
  }

  int rank = 0, size = 1;
  int providedLevel = -1;
  bool preloaded = false;
  bool expectInitFail = false;
  Api api;
  int failures = 0;

  long long minBytes() const { return preloaded ? api.minBytes() : 0; }
  int commState(MPI_Comm c) const { return preloaded ? api.commState(c) : -1; }

  [[gnu::format(printf, 3, 4)]] bool check(bool ok, const char* fmt, ...) {
    if (ok) return true;
    if (++failures <= 20) {
      char msg[512];
      va_list ap;
      va_start(ap, fmt);
      std::vsnprintf(msg, sizeof msg, fmt, ap);
      va_end(ap);
      std::fprintf(stderr, "FAIL rank %d: %s\n", rank, msg);
    }
    return false;
  }

  nodus_mpi_counters_t counters(int coll) const {
    nodus_mpi_counters_t c{};
    if (preloaded) api.stats(coll, &c);
    return c;
  }

  // Where a call is expected to go: to nodus, or to MPI for `reason`.
  struct Route {
    bool nodus;
    int reason;
  };
  static Route toNodus() { return {true, -1}; }
  static Route toMpi(int reason) { return {false, reason}; }

  // Checks that exactly one call of `coll` went where `want` says since `before`.
  void expectRoute(int coll, const nodus_mpi_counters_t& before, Route want, const char* what) {
    if (!preloaded) return;
    const nodus_mpi_counters_t after = counters(coll);
    const uint64_t dn = after.nodus_calls - before.nodus_calls;
    if (want.nodus) {
      check(dn == 1, "%s: expected the call on nodus, nodus calls went up by %" PRIu64 "%s", what, dn,
            dn ? "" : describeFallback(before, after).c_str());
    } else {
      const uint64_t df = after.fallback_calls[want.reason] - before.fallback_calls[want.reason];
      check(dn == 0 && df == 1, "%s: expected MPI for reason %s, got nodus +%" PRIu64 ", that reason +%" PRIu64 "%s",
            what, api.reasonName(want.reason), dn, df, describeFallback(before, after).c_str());
    }
  }

  std::string describeFallback(const nodus_mpi_counters_t& a, const nodus_mpi_counters_t& b) const {
    std::string s;
    for (int i = 0; i < NODUS_MPI_NUM_REASONS; ++i)
      if (b.fallback_calls[i] != a.fallback_calls[i]) s += std::string(" (MPI: ") + api.reasonName(i) + ")";
    return s;
  }

  // FNV-1a over results that must be identical with and without the preload.
  void digest(const void* data, size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < bytes; ++i) hash_ = (hash_ ^ p[i]) * 0x100000001b3ULL;
  }

  // Agrees on the outcome, prints it (and the digest) on rank 0, finalises.
  int finish(const char* name) {
    int total = 0;
    PMPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    uint64_t combined = 0;
    uint64_t mine = hash_ ^ static_cast<uint64_t>(rank) * 0x9e3779b97f4a7c15ULL;
    PMPI_Allreduce(&mine, &combined, 1, MPI_UINT64_T, MPI_BXOR, MPI_COMM_WORLD);
    if (rank == 0) {
      std::printf("digest: %016" PRIx64 "\n", combined);
      std::printf("%s: %s (%d ranks, %s, %d failure(s))\n", name, total ? "FAILED" : "ALL OK", size,
                  preloaded ? "libnodus_mpi preloaded" : "plain MPI", total);
      std::fflush(stdout);
    }
    MPI_Finalize();
    return total ? 1 : 0;
  }

 private:
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace harness
