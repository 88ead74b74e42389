// Runtime nodus failures (made with the nodus_mpi_inject_fault hook, which
// aborts a communicator's nodus communicator on every rank at the same point):
//  - a blocking call whose inputs survive is redone through MPI, right result;
//    the communicator stays with MPI from then on;
//  - an in-place call is not redone (its input may be half overwritten): it
//    reports MPI_ERR_OTHER through the communicator's error handler;
//  - a non-blocking call that nodus cannot start reports MPI_ERR_OTHER; the
//    next blocking call moves the communicator to MPI;
//  - other communicators are unaffected.
// Preloaded runs only (without the library there is nothing to inject).
#include <vector>

#include "harness.h"

using harness::Harness;

namespace {

constexpr int kN = 5003;

int v(int rank, int i) { return (i * 5 + rank * 11) % 13 - 6; }

int sumOf(int nranks, int i) {
  int s = 0;
  for (int r = 0; r < nranks; ++r) s += v(r, i);
  return s;
}

MPI_Comm freshComm(Harness& h) {
  MPI_Comm c;
  MPI_Comm_dup(MPI_COMM_WORLD, &c);
  MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  // One large call creates its nodus communicator.
  std::vector<int> in(kN, 1), out(kN);
  MPI_Allreduce(in.data(), out.data(), kN, MPI_INT, MPI_SUM, c);
  h.check(h.commState(c) == NODUS_MPI_COMM_ACTIVE, "a fresh communicator is in state %d", h.commState(c));
  return c;
}

void checkSum(Harness& h, const std::vector<int>& out, const char* what) {
  int bad = 0;
  for (int i = 0; i < kN; ++i) bad += out[i] != sumOf(h.size, i);
  h.check(bad == 0, "%s: %d wrong", what, bad);
}

}  // namespace

int main(int argc, char** argv) {
  Harness h(&argc, &argv);
  if (!h.preloaded) {
    h.check(false, "fault_test needs libnodus_mpi preloaded");
    return h.finish("fault_test");
  }
  std::vector<int> in(kN), out(kN);
  for (int i = 0; i < kN; ++i) in[i] = v(h.rank, i);

  // Out of place: redone through MPI.
  {
    MPI_Comm c = freshComm(h);
    h.check(h.api.injectFault(c) == 0, "inject_fault refused an active communicator");
    auto before = h.counters(NODUS_MPI_ALLREDUCE);
    int rc = MPI_Allreduce(in.data(), out.data(), kN, MPI_INT, MPI_SUM, c);
    h.check(rc == MPI_SUCCESS, "the redone Allreduce returned %d", rc);
    h.expectRoute(NODUS_MPI_ALLREDUCE, before, Harness::toMpi(NODUS_MPI_FB_NODUS_ERROR), "Allreduce after a fault");
    checkSum(h, out, "Allreduce redone after a fault");
    h.check(h.commState(c) == NODUS_MPI_COMM_DISABLED, "state %d after a fault", h.commState(c));
    // From now on MPI, for the same reason.
    before = h.counters(NODUS_MPI_BCAST);
    std::vector<int> b(kN, h.rank == 0 ? 3 : 0);
    rc = MPI_Bcast(b.data(), kN, MPI_INT, 0, c);
    h.check(rc == MPI_SUCCESS && b[kN - 1] == 3, "Bcast after a fault");
    h.expectRoute(NODUS_MPI_BCAST, before, Harness::toMpi(NODUS_MPI_FB_NODUS_ERROR), "Bcast after a fault");
    MPI_Comm_free(&c);
  }

  // A Bcast (its non-roots have no input to lose) is redone too.
  {
    MPI_Comm c = freshComm(h);
    h.api.injectFault(c);
    std::vector<double> b(kN, h.rank == 1 % h.size ? 2.5 : -1.0);
    const auto before = h.counters(NODUS_MPI_BCAST);
    const int rc = MPI_Bcast(b.data(), kN, MPI_DOUBLE, 1 % h.size, c);
    h.check(rc == MPI_SUCCESS && b[0] == 2.5 && b[kN - 1] == 2.5, "Bcast redone after a fault");
    h.expectRoute(NODUS_MPI_BCAST, before, Harness::toMpi(NODUS_MPI_FB_NODUS_ERROR), "Bcast after a fault");
    MPI_Comm_free(&c);
  }

  // In place: an error, not a wrong answer.
  {
    MPI_Comm c = freshComm(h);
    h.api.injectFault(c);
    std::vector<int> io = in;
    int rc = MPI_Allreduce(MPI_IN_PLACE, io.data(), kN, MPI_INT, MPI_SUM, c);
    h.check(rc == MPI_ERR_OTHER, "an in-place Allreduce after a fault returned %d, expected MPI_ERR_OTHER", rc);
    io = in;
    rc = MPI_Allreduce(MPI_IN_PLACE, io.data(), kN, MPI_INT, MPI_SUM, c);
    h.check(rc == MPI_SUCCESS, "the next in-place Allreduce returned %d", rc);
    checkSum(h, io, "in-place Allreduce on MPI after a fault");
    MPI_Comm_free(&c);
  }

  // Non-blocking: the request cannot be started.
  {
    MPI_Comm c = freshComm(h);
    h.api.injectFault(c);
    MPI_Request r = MPI_REQUEST_NULL;
    int rc = MPI_Iallreduce(in.data(), out.data(), kN, MPI_INT, MPI_SUM, c, &r);
    h.check(rc == MPI_ERR_OTHER && r == MPI_REQUEST_NULL, "Iallreduce after a fault returned %d", rc);
    rc = MPI_Allreduce(in.data(), out.data(), kN, MPI_INT, MPI_SUM, c);
    h.check(rc == MPI_SUCCESS, "the blocking Allreduce after a failed Iallreduce returned %d", rc);
    checkSum(h, out, "Allreduce after a failed Iallreduce");
    h.check(h.commState(c) == NODUS_MPI_COMM_DISABLED, "state %d after a failed Iallreduce", h.commState(c));
    rc = MPI_Iallreduce(in.data(), out.data(), kN, MPI_INT, MPI_SUM, c, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    checkSum(h, out, "Iallreduce on MPI after a fault");
    MPI_Comm_free(&c);
  }

  // MPI_COMM_WORLD never saw a fault.
  const auto before = h.counters(NODUS_MPI_ALLREDUCE);
  MPI_Allreduce(in.data(), out.data(), kN, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  h.expectRoute(NODUS_MPI_ALLREDUCE, before, Harness::toNodus(), "Allreduce on MPI_COMM_WORLD");
  checkSum(h, out, "Allreduce on MPI_COMM_WORLD");
  return h.finish("fault_test");
}
