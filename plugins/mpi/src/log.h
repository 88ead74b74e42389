// The plugin's one way to speak: "nodus-mpi: rank R: ..." on stderr.
#pragma once

namespace nodus::mpi {

// Set once the MPI_COMM_WORLD rank is known (-1 before).
void setLogRank(int rank);
[[gnu::format(printf, 1, 2)]] void logMessage(const char* fmt, ...);

}  // namespace nodus::mpi
