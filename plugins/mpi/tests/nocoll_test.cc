// A program that never calls a collective: point-to-point around a ring,
// communicators created and freed. The preload must change nothing (same
// output digest) and count nothing.
#include <vector>

#include "harness.h"

using harness::Harness;

int main(int argc, char** argv) {
  Harness h(&argc, &argv);
  const int p = h.size, me = h.rank;
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  std::vector<long> token(4096);
  for (int round = 0; round < 20; ++round) {
    for (size_t i = 0; i < token.size(); ++i) token[i] = me * 1000 + round * 7 + static_cast<long>(i);
    std::vector<long> got(token.size(), -1);
    MPI_Request reqs[2];
    MPI_Irecv(got.data(), static_cast<int>(got.size()), MPI_LONG, (me + p - 1) % p, round, dup, &reqs[0]);
    MPI_Isend(token.data(), static_cast<int>(token.size()), MPI_LONG, (me + 1) % p, round, dup, &reqs[1]);
    MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i)
      bad += got[i] != ((me + p - 1) % p) * 1000 + round * 7 + static_cast<long>(i);
    h.check(bad == 0, "round %d: %d wrong", round, bad);
    h.digest(got.data(), got.size() * sizeof(long));
  }
  MPI_Comm_free(&dup);
  if (h.preloaded) {
    for (int c = 0; c < NODUS_MPI_NUM_COLLS; ++c) {
      const nodus_mpi_counters_t k = h.counters(c);
      uint64_t any = k.nodus_calls;
      for (int r = 0; r < NODUS_MPI_NUM_REASONS; ++r) any += k.fallback_calls[r];
      h.check(any == 0, "collective %d counted %llu calls in a program without collectives", c,
              static_cast<unsigned long long>(any));
    }
  }
  return h.finish("nocoll_test");
}
