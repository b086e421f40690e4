// NCCLBackend's communicator: collectives on CUDA tensors through the CUDA
// plugin's "comm" table (NCCL), bootstrapped over MPI. Not installed.
#pragma once

#include <memory>

#include "distributed/communicator.hpp"
#include "distributed/mpi_communicator.hpp"

namespace flx::distributed::detail {

// Joins every rank in one NCCL communicator, each on the GPU node_rank of
// its machine (rank 0's unique id sent with MPI). DistributedError saying
// why when there is no CUDA GPU, no NCCL, or fewer GPUs than ranks here.
std::shared_ptr<Communicator> start_nccl(MpiCommunicator& mpi);
// The GPU of an NCCL communicator.
Device nccl_device(const Communicator& c);

}  // namespace flx::distributed::detail
