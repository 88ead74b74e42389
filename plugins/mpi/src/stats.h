// Per-process counters of where each intercepted call went, and the
// NODUS_MPI_VERBOSE report printed at MPI_Finalize.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "nodus_mpi_plugin.h"

namespace nodus::mpi {

namespace detail {
struct ThreadBlock {
  const void* owner = nullptr;
  void* block = nullptr;
};
// initial-exec: the library is preloaded, so its TLS is static and reaching
// it is one load (the default model calls __tls_get_addr on every access).
extern thread_local ThreadBlock tStatsBlock __attribute__((tls_model("initial-exec")));
}  // namespace detail

class Stats {
 public:
  // Inline: counting is on every call's path, the fall-backs' included.
  void nodus(int coll, uint64_t bytes, bool staged) noexcept {
    Row& r = mine().rows[coll];
    bump(r.calls, 1);
    bump(r.bytes, bytes);
    if (staged) bump(r.staged, 1);
  }
  void fallback(int coll, int reason, uint64_t bytes) noexcept {
    Row& r = mine().rows[coll];
    bump(r.fbCalls[reason], 1);
    bump(r.fbBytes[reason], bytes);
  }
  nodus_mpi_counters_t get(int coll) const;
  // One line per collective that was called at all.
  void report(int nranks, uint64_t minBytes) const;

 private:
  struct Row {
    std::atomic<uint64_t> calls{0}, bytes{0}, staged{0};
    std::array<std::atomic<uint64_t>, NODUS_MPI_NUM_REASONS> fbCalls{}, fbBytes{};
  };
  // Each thread counts in its own block, so counting costs plain loads and
  // stores (a locked add on every call costs about as much as the rest of the
  // fall-back path), and a reader sums the blocks. Atomics only so that a
  // reader may look while a thread counts.
  struct Block {
    std::array<Row, NODUS_MPI_NUM_COLLS> rows{};
  };
  Block& mine() {
    if (detail::tStatsBlock.owner == this) [[likely]]
      return *static_cast<Block*>(detail::tStatsBlock.block);
    return adopt();
  }
  // Only the owning thread writes a counter: a plain load and store.
  static void bump(std::atomic<uint64_t>& c, uint64_t by) {
    c.store(c.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
  }
  // A thread's first count: gives it a block.
  [[gnu::cold, gnu::noinline]] Block& adopt();

  mutable std::mutex mu_;                      // the list, not the counts
  std::vector<std::unique_ptr<Block>> blocks_;  // one per thread that ever counted; kept
};

}  // namespace nodus::mpi
