/*
 * libnodus_mpi — what a program can ask the interposer while it is preloaded.
 *
 * The library is meant to be loaded with LD_PRELOAD into an unmodified MPI
 * program, so a program that wants these answers looks the functions up with
 * dlsym(RTLD_DEFAULT, "nodus_mpi_stats") and so on: without the library the
 * lookup fails and the program runs on as a plain MPI program. The tests of
 * plugins/mpi/tests do exactly that.
 */
#ifndef NODUS_MPI_PLUGIN_H
#define NODUS_MPI_PLUGIN_H

#include <mpi.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The intercepted collectives, blocking then non-blocking. */
enum nodus_mpi_coll {
  NODUS_MPI_ALLREDUCE = 0,
  NODUS_MPI_ALLGATHER,
  NODUS_MPI_REDUCE_SCATTER_BLOCK,
  NODUS_MPI_REDUCE_SCATTER,
  NODUS_MPI_BCAST,
  NODUS_MPI_REDUCE,
  NODUS_MPI_BARRIER,
  NODUS_MPI_IALLREDUCE,
  NODUS_MPI_IALLGATHER,
  NODUS_MPI_IREDUCE_SCATTER_BLOCK,
  NODUS_MPI_IREDUCE_SCATTER,
  NODUS_MPI_IBCAST,
  NODUS_MPI_IREDUCE,
  NODUS_MPI_IBARRIER,
  NODUS_MPI_NUM_COLLS
};

/* Why a call went to the MPI library instead of nodus. */
enum nodus_mpi_reason {
  NODUS_MPI_FB_SMALL = 0,   /* fewer bytes than NODUS_MPI_MIN_BYTES (or none at all) */
  NODUS_MPI_FB_OP,          /* user-defined op, or one nodus lacks (LAND, BAND, MAXLOC, ...) */
  NODUS_MPI_FB_DATATYPE,    /* a reduction over a derived type or a predefined one nodus
                               cannot reduce exactly (LONG_DOUBLE, SHORT, C_BOOL, pairs, ...) */
  NODUS_MPI_FB_INTERCOMM,   /* an inter-communicator */
  NODUS_MPI_FB_ONE_RANK,    /* a communicator of one process */
  NODUS_MPI_FB_INIT_FAILED, /* nodus could not create a communicator for it (on some rank) */
  NODUS_MPI_FB_NODUS_ERROR, /* nodus failed on this communicator: this call was re-run by MPI,
                               or an earlier one failed and the communicator stays with MPI */
  NODUS_MPI_FB_NOT_READY,   /* a non-blocking call or a barrier on a communicator that has no
                               nodus communicator yet (creating one is a blocking collective) */
  NODUS_MPI_FB_ARGS,        /* arguments MPI rejects or leaves undefined: MPI reports them */
  NODUS_MPI_NUM_REASONS
};

typedef struct {
  uint64_t nodus_calls;    /* calls that nodus carried out */
  uint64_t nodus_bytes;    /* their sizes (see README.md for what a call's size is) */
  uint64_t staged_calls;   /* of nodus_calls: through a scratch buffer (non-contiguous type
                              packed/unpacked, or Reduce_scatter with unequal counts) */
  uint64_t fallback_calls[NODUS_MPI_NUM_REASONS];
  uint64_t fallback_bytes[NODUS_MPI_NUM_REASONS];
} nodus_mpi_counters_t;

/* Where a communicator stands. */
enum nodus_mpi_comm_state {
  NODUS_MPI_COMM_NONE = 0,        /* no collective has needed nodus on it yet */
  NODUS_MPI_COMM_ACTIVE = 1,      /* eligible calls go to nodus */
  NODUS_MPI_COMM_UNSUITABLE = 2,  /* an inter-communicator or a single process */
  NODUS_MPI_COMM_INIT_FAILED = 3, /* nodus init failed on some rank: MPI for good */
  NODUS_MPI_COMM_DISABLED = 4     /* nodus failed later: MPI for good */
};

/* This process's counters for one collective. Returns 0, or -1 for a bad index. */
int nodus_mpi_stats(int coll, nodus_mpi_counters_t* out);
/* One of enum nodus_mpi_comm_state (-1 when the library is not initialised). */
int nodus_mpi_comm_state(MPI_Comm comm);
/* The threshold in force (NODUS_MPI_MIN_BYTES, agreed over MPI_COMM_WORLD). */
long long nodus_mpi_min_bytes(void);
/* Short names, as the NODUS_MPI_VERBOSE report prints them. */
const char* nodus_mpi_coll_name(int coll);
const char* nodus_mpi_reason_name(int reason);
/* Testing only: aborts the nodus communicator behind `comm` so that its next
 * nodus call fails the way a runtime failure would. Call it on every rank of
 * `comm` at the same point. Returns 0, or -1 when `comm` has no active one. */
int nodus_mpi_inject_fault(MPI_Comm comm);

#ifdef __cplusplus
}
#endif

#endif /* NODUS_MPI_PLUGIN_H */
