#include "stats.h"

#include <cinttypes>
#include <cstdio>
#include <string>

#include "log.h"

namespace nodus::mpi {
namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;
}  // namespace

namespace detail {
thread_local ThreadBlock tStatsBlock __attribute__((tls_model("initial-exec")));
}  // namespace detail

Stats::Block& Stats::adopt() {
  auto b = std::make_unique<Block>();
  detail::tStatsBlock = {this, b.get()};
  std::lock_guard<std::mutex> lock(mu_);
  blocks_.push_back(std::move(b));
  return *blocks_.back();
}

nodus_mpi_counters_t Stats::get(int coll) const {
  nodus_mpi_counters_t c{};
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& b : blocks_) {
    const Row& r = b->rows[coll];
    c.nodus_calls += r.calls.load(kRelaxed);
    c.nodus_bytes += r.bytes.load(kRelaxed);
    c.staged_calls += r.staged.load(kRelaxed);
    for (int i = 0; i < NODUS_MPI_NUM_REASONS; ++i) {
      c.fallback_calls[i] += r.fbCalls[i].load(kRelaxed);
      c.fallback_bytes[i] += r.fbBytes[i].load(kRelaxed);
    }
  }
  return c;
}

void Stats::report(int nranks, uint64_t minBytes) const {
  logMessage("calls of this process (%d rank(s) in MPI_COMM_WORLD), NODUS_MPI_MIN_BYTES=%" PRIu64 ":", nranks,
             minBytes);
  logMessage("%-24s %12s %16s %8s %14s  %s", "collective", "nodus calls", "nodus bytes", "staged", "MPI calls",
             "MPI calls by reason (bytes)");
  bool any = false;
  for (int coll = 0; coll < NODUS_MPI_NUM_COLLS; ++coll) {
    const nodus_mpi_counters_t c = get(coll);
    uint64_t fb = 0;
    std::string why;
    for (int i = 0; i < NODUS_MPI_NUM_REASONS; ++i) {
      if (c.fallback_calls[i] == 0) continue;
      fb += c.fallback_calls[i];
      char part[96];
      std::snprintf(part, sizeof part, "%s%s %" PRIu64 " (%" PRIu64 ")", why.empty() ? "" : ", ",
                    nodus_mpi_reason_name(i), c.fallback_calls[i], c.fallback_bytes[i]);
      why += part;
    }
    if (c.nodus_calls == 0 && fb == 0) continue;
    any = true;
    logMessage("%-24s %12" PRIu64 " %16" PRIu64 " %8" PRIu64 " %14" PRIu64 "  %s", nodus_mpi_coll_name(coll),
               c.nodus_calls, c.nodus_bytes, c.staged_calls, fb, why.empty() ? "-" : why.c_str());
  }
  if (!any) logMessage("(no intercepted collective was called)");
}

}  // namespace nodus::mpi

extern "C" {

__attribute__((visibility("default"))) const char* nodus_mpi_coll_name(int coll) {
  static const char* const kNames[NODUS_MPI_NUM_COLLS] = {
      "allreduce",  "allgather",  "reduce_scatter_block",  "reduce_scatter",  "bcast",  "reduce",  "barrier",
      "iallreduce", "iallgather", "ireduce_scatter_block", "ireduce_scatter", "ibcast", "ireduce", "ibarrier"};
  return coll >= 0 && coll < NODUS_MPI_NUM_COLLS ? kNames[coll] : "?";
}

__attribute__((visibility("default"))) const char* nodus_mpi_reason_name(int reason) {
  static const char* const kNames[NODUS_MPI_NUM_REASONS] = {
      "small", "op", "datatype", "intercomm", "one-rank", "init-failed", "nodus-error", "not-ready", "args"};
  return reason >= 0 && reason < NODUS_MPI_NUM_REASONS ? kNames[reason] : "?";
}

}  // extern "C"
