// nodus-perf: the collective benchmark of nodus, in nccl-tests' language.
//
// For each collective, data type, reduction and size it times the out-of-place
// and the in-place form (n iterations after w warmups, a barrier before, the
// slowest rank's average per iteration), then, with -c 1, runs the call once
// more on fresh inputs and compares every output element with a value this file
// computes on its own. Only the public API (nodus.h, nodus_mpi.h) is used, so
// the benchmark is also an end-to-end test of what users get.
//
// Launch:  mpirun -np N nodus-perf ...   one rank per process (needs MPI)
//          nodus-perf -t N ...           N ranks as threads of one process
//          nodus-perf --rank R --nranks N --id-file PATH ...
//                                        rank R of N processes started by hand
//                                        (the unique id goes through PATH)
//
// Sizes are total bytes as in nccl-tests: AllReduce/Broadcast/Reduce move
// `size` bytes per rank, AllGather's size is what each rank receives
// (nranks * sendcount), ReduceScatter's what each rank sends (nranks * recvcount).
// busbw = algbw * factor, factor 2(p-1)/p for AllReduce, (p-1)/p for AllGather
// and ReduceScatter, 1 for Broadcast and Reduce.

// The parts live in perf/: common.h (collectives, types, inputs, checks),
// options.h (the command line), group.h (the ranks' synchronisation),
// reporter.h (the table, CSV and JSON), runner.h (one rank's sweep) and
// launch.h (threads, mpirun, id file: launch_*.cc).

#include <cstdio>
#include <string>

#include "perf/common.h"
#include "perf/launch.h"
#include "perf/options.h"
#include "perf/runner.h"

int main(int argc, char** argv) {
  using namespace nodus_perf;
  Options opt;
  std::string err;
  const bool parsed = parseArgs(argc, argv, &opt, &err);
  // Under mpirun every process parses the same line: let only the first speak.
  const bool speaker = launcherRank() == 0;
  if (!parsed) {
    if (speaker) std::fprintf(stderr, "nodus-perf: %s (see nodus-perf -h)\n", err.c_str());
    return 2;
  }
  if (opt.help) {
    if (speaker) printHelp(stdout);
    return 0;
  }
  // Before any thread exists: every communicator of the run is created after
  // this, in every process. -a all gives each communicator its own.
  if (opt.algo == "auto")
    gAlgo = "";
  else if (opt.algoColumn())
    gAlgo = opt.algo.c_str();
  // Modes that start their ranks themselves: under mpirun, say so once.
  const auto notUnderLauncher = [&](const char* why) {
    if (launcherSize() <= 1) return true;
    if (speaker) std::fprintf(stderr, "nodus-perf: %s\n", why);
    return false;
  };
  if (opt.idFileMode())
    return notUnderLauncher("--rank/--nranks/--id-file start each rank by hand; under mpirun drop them (mpirun "
                            "gives the ranks)")
               ? mainFile(opt)
               : 2;
  if (opt.threads > 0)
    return notUnderLauncher("-t runs all ranks as threads of one process; launch it without mpirun, or drop -t "
                            "to run one rank per MPI process")
               ? mainThreads(opt)
               : 2;
#if NODUS_PERF_MPI
  return mainMpi(argc, argv, opt);
#else
  std::fprintf(stderr,
               "nodus-perf: this build has no MPI support: run N ranks as threads of one process "
               "with -t N\n");
  return 2;
#endif
}
