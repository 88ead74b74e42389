// <mpi.h> for the plugin's own sources: only MPI's C interface is used (Open
// MPI's deprecated C++ bindings do not build warning-free).
#pragma once

#ifndef OMPI_SKIP_MPICXX
#define OMPI_SKIP_MPICXX 1
#endif
#ifndef MPICH_SKIP_MPICXX
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>
