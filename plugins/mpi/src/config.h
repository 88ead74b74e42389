// The plugin's settings, read once at MPI_Init. Declared (name, default, help)
// in nodus' central registry, src/core/params.cc, so that nodus-info lists
// them; read here because the registry is internal to libnodus (the plugin
// links only its C API). Keep the defaults equal.
#pragma once

#include <cstdint>

namespace nodus::mpi {

struct Config {
  // Calls smaller than this go to the MPI library. Measured with
  // bench/mpi_preload_bench.sh -a (nodus at every size beside Open MPI 4.1,
  // 2 ranks over shared memory; plugins/mpi/README.md): Open MPI's 8-256 B
  // AllReduce/AllGather take 0.17-0.22 us and nodus' 0.26-0.31 us; nodus
  // overtakes at 512 B for AllReduce and 1 KiB for AllGather (and for Bcast,
  // Reduce, Reduce_scatter_block, which it wins there by 1.6-2.2x).
  static constexpr uint64_t kDefaultMinBytes = 1024;

  uint64_t minBytes = kDefaultMinBytes;  // NODUS_MPI_MIN_BYTES
  int verbose = 0;                       // NODUS_MPI_VERBOSE

  static Config fromEnvironment();
};

}  // namespace nodus::mpi
