// MPI_THREAD_MULTIPLE: several threads, each with its own communicator,
// creating nodus communicators, running blocking and non-blocking collectives
// and completing requests at the same time (the plugin's tables are shared).
#include <thread>
#include <vector>

#include "harness.h"

using harness::Harness;

namespace {

constexpr int kThreads = 3;
constexpr int kN = 4099;

void worker(MPI_Comm comm, int id, int* failures) {
  int p = 0, me = 0;
  PMPI_Comm_size(comm, &p);
  PMPI_Comm_rank(comm, &me);
  std::vector<double> in(kN), out(kN), ibuf(kN);
  int bad = 0;
  for (int it = 0; it < 20; ++it) {
    for (int i = 0; i < kN; ++i) in[i] = (i + it + id) % 9 + me;
    MPI_Request reqs[2];
    MPI_Iallreduce(in.data(), out.data(), kN, MPI_DOUBLE, MPI_SUM, comm, &reqs[0]);
    for (int i = 0; i < kN; ++i) ibuf[i] = me == it % p ? i * 0.5 + id : -1;
    MPI_Ibcast(ibuf.data(), kN, MPI_DOUBLE, it % p, comm, &reqs[1]);
    if (it % 2) {
      MPI_Waitall(2, reqs, MPI_STATUSES_IGNORE);
    } else {
      int flag = 0;
      while (!flag) MPI_Testall(2, reqs, &flag, MPI_STATUSES_IGNORE);
    }
    for (int i = 0; i < kN; ++i) {
      const double want = p * ((i + it + id) % 9) + p * (p - 1) / 2.0;
      bad += out[i] != want;
      bad += ibuf[i] != i * 0.5 + id;
    }
    MPI_Allreduce(MPI_IN_PLACE, in.data(), kN, MPI_DOUBLE, MPI_MAX, comm);
    for (int i = 0; i < kN; ++i) bad += in[i] != (i + it + id) % 9 + (p - 1);
  }
  *failures = bad;
}

}  // namespace

int main(int argc, char** argv) {
  Harness h(&argc, &argv, MPI_THREAD_MULTIPLE);
  if (h.providedLevel < MPI_THREAD_MULTIPLE) {
    if (h.rank == 0) std::printf("thread_test: MPI_THREAD_MULTIPLE not provided (%d); nothing to test\n", h.providedLevel);
    return h.finish("thread_test");
  }
  std::vector<MPI_Comm> comms(kThreads);
  for (MPI_Comm& c : comms) MPI_Comm_dup(MPI_COMM_WORLD, &c);
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, comms[t], t, &failures[t]);
  for (std::thread& t : threads) t.join();
  for (int t = 0; t < kThreads; ++t) h.check(failures[t] == 0, "thread %d: %d wrong values", t, failures[t]);
  if (h.preloaded)
    for (int t = 0; t < kThreads; ++t)
      h.check(h.commState(comms[t]) == NODUS_MPI_COMM_ACTIVE, "thread %d's communicator: state %d", t,
              h.commState(comms[t]));
  if (h.preloaded) {
    const nodus_mpi_counters_t a = h.counters(NODUS_MPI_IALLREDUCE);
    h.check(a.nodus_calls > 0, "no Iallreduce went to nodus");
  }
  for (MPI_Comm& c : comms) MPI_Comm_free(&c);
  return h.finish("thread_test");
}
