// nodus-perf's three ways of starting its ranks (threads, mpirun, processes
// started by hand with an id file), and what they share: the header's rank
// lines and the library version.
#pragma once

#include <cstddef>
#include <string>

#include "perf/options.h"
#include "perf/reporter.h"

namespace nodus_perf {

std::string hostName();

// The header's line about each rank: the same width for every rank, so the
// lines can be gathered as fixed-size blocks.
inline constexpr size_t kRankLine = 320;

void rankLine(int rank, char (&line)[kRankLine]);

// Rank 0's header, from every rank's line gathered in rank order (the first 64).
void printRankLines(Reporter& reporter, int version, const char* gathered, int n);

int libraryVersion();

// Every rank a thread of this process (-t N).
int mainThreads(const Options& opt);

#if NODUS_PERF_MPI
// Every rank an MPI process (mpirun).
int mainMpi(int argc, char** argv, const Options& opt);
#endif

// This process one rank of processes started without a launcher (--rank,
// --nranks, --id-file).
int mainFile(const Options& opt);

}  // namespace nodus_perf
