// The plugin's settings, read once at MPI_Init through libnodus' parameter
// registry (nodusParamGetInt: src/base/params.cc declares their names,
// defaults, ranges and help; nodus-info lists them). kDefaultMinBytes is
// what the registry's default says, kept for the plugin's own use when a
// value is refused.
#pragma once

#include <cstdint>

namespace nodus::mpi {

struct Config {
  // Calls whose per-rank block is smaller than this go to the MPI library
  // (Plugin::small says what the block is). Measured with
  // bench/mpi_preload_bench.sh -a (nodus at every size beside Open MPI 4.1.4,
  // 2 ranks over shared memory): up to 256 B per rank Open MPI takes 0.2-0.6 us
  // and nodus 0.1-0.2 us more; at 512 B Open MPI changes protocol and nodus
  // is 1.3x (AllReduce) to 2.5x (Bcast, Reduce) faster, and Allgather and
  // Reduce_scatter_block win from 512 B per rank (1 KiB received) by 1.4-1.6x.
  static constexpr uint64_t kDefaultMinBytes = 512;

  uint64_t minBytes = kDefaultMinBytes;  // NODUS_MPI_MIN_BYTES
  int verbose = 0;                       // NODUS_MPI_VERBOSE

  static Config fromEnvironment();
};

}  // namespace nodus::mpi
