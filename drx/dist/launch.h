#pragma once
// Whether a process was started by an MPI launcher, header-only so that a program built
// without MPI (where drx/dist itself is not built) can still tell a user that mpirun started it.
#include <cstdlib>

namespace drx::dist {

// Whether mpirun started this process: Open MPI sets OMPI_COMM_WORLD_SIZE, MPICH's and Intel's
// PMI launchers PMI_SIZE, and PMIx launchers (srun --mpi=pmix, prterun) PMIX_RANK, so a tool can
// run distributed without being asked.
inline bool launched_by_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

}  // namespace drx::dist
