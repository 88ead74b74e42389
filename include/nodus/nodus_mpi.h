/*
 * nodusCommInitMPI: create a nodus communicator over the ranks of an MPI
 * communicator. Header-only so that libnodus itself needs no MPI headers and
 * works with whichever MPI library the program links: rank 0 of `mpiComm`
 * makes the unique id, MPI_Bcast hands it to the others, and every rank joins
 * with its MPI rank. Include <mpi.h> before (or let this header include it).
 */
#ifndef NODUS_NODUS_MPI_H
#define NODUS_NODUS_MPI_H

#include <mpi.h>

#include "nodus/nodus.h"

#ifdef __cplusplus
extern "C" {
#endif

/* nodusCommInitMPI with settings of its own (nodusConfig_t, nodus.h). */
static inline nodusResult_t nodusCommInitMPIConfig(nodusComm_t* comm, MPI_Comm mpiComm, const nodusConfig_t* config) {
  int rank = 0;
  int size = 0;
  if (comm == NULL) return nodusInvalidArgument;
  if (MPI_Comm_rank(mpiComm, &rank) != MPI_SUCCESS || MPI_Comm_size(mpiComm, &size) != MPI_SUCCESS)
    return nodusInvalidArgument;
  nodusUniqueId id;
  nodusResult_t made = nodusSuccess;
  if (rank == 0) made = nodusGetUniqueId(&id);
  /* Everyone learns whether the root could make an id, so no rank waits forever. */
  int ok = (made == nodusSuccess);
  if (MPI_Bcast(&ok, 1, MPI_INT, 0, mpiComm) != MPI_SUCCESS) return nodusSystemError;
  if (!ok) return rank == 0 ? made : nodusRemoteError;
  if (MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, mpiComm) != MPI_SUCCESS) return nodusSystemError;
  return nodusCommInitRankConfig(comm, size, id, rank, config);
}

static inline nodusResult_t nodusCommInitMPI(nodusComm_t* comm, MPI_Comm mpiComm) {
  return nodusCommInitMPIConfig(comm, mpiComm, NULL);
}

#ifdef __cplusplus
}
#endif

#endif /* NODUS_NODUS_MPI_H */
