// Without oar::mpi (OAR_HAS_MPI unset), including mpi_comm.hpp compiles, but an MpiComm does not.
// first-error: oar: MpiComm needs MPI: link your target with the oar::mpi CMake target
// expect: or use LocalComm for one process
#include <oar/dist/mpi_comm.hpp>

int main() { oar::dist::MpiComm comm; }
