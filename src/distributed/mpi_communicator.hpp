// MPIBackend's communicator: collectives on tensors of any device through
// the MPI engine. Not installed.
#pragma once

#include "distributed/communicator.hpp"
#include "distributed/mpi_engine.hpp"

namespace flx::distributed::detail {

// ArgumentError/TypeError for a collective that cannot be made: an
// undefined tensor, a root that is no rank, an op the element type lacks.
void check_collective(const Communicator& c, Collective kind, const Tensor& x, ReduceOp op, int root);

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MpiEngine& e, bool cuda_aware);
  std::string name() const override { return "MPIBackend"; }
  std::unique_ptr<Work> start(Collective kind, const Tensor& x, ReduceOp op, int root,
                              const std::string& what) override;
  [[noreturn]] void abort(const std::string& message, int code) override;
  bool cuda_aware() const { return cuda_aware_; }
  MpiEngine& engine() { return engine_; }

 private:
  MpiEngine& engine_;
  bool cuda_aware_;
};

}  // namespace flx::distributed::detail
