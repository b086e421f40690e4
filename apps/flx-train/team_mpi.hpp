// flx-train --distributed: the ranks of an MPI job (team.hpp says what
// train() asks of a team). Each rank trains on its share of the images
// (DistributedDataContainer), the gradients are averaged in buckets
// (DistributedOptimizer), and the leader's model, optimiser state and
// position reach the others through synchronize. Built only with
// flx::distributed (FLX_HAVE_DISTRIBUTED).
#pragma once

#include <flx/distributed.hpp>
#include <flx/flx.hpp>

#include <cstdint>
#include <string>

#include "args.hpp"

namespace flx_train {

class MpiTeam {
 public:
  static constexpr bool distributed = true;
  // Initialises MPI (NCCL too when the device is CUDA) and picks this
  // rank's device: a CUDA GPU is NCCLBackend's (node_rank % ndevices);
  // another GPU backend's device is also node_rank % ndevices unless
  // --device gave an ordinal.
  explicit MpiTeam(const Args& a);

  int rank() const { return backend_.rank(); }
  int size() const { return backend_.size(); }
  bool leader() const { return rank() == 0; }
  flx::Device device() const { return device_; }
  template <class R>
  flx::distributed::DistributedOptimizer rule(const R& r) const {
    return flx::distributed::DistributedOptimizer(backend_, r);
  }
  template <class D>
  auto share(D data) const {
    return flx::distributed::DistributedDataContainer(backend_, std::move(data));
  }
  double sum(double v) const { return flx::distributed::allreduce(backend_, v, flx::distributed::ReduceOp::Sum); }
  bool all(bool ok) const {
    return flx::distributed::allreduce(backend_, ok ? 1.0 : 0.0, flx::distributed::ReduceOp::Min) == 1.0;
  }
  // Every rank takes rank 0's parameters, optimiser moments and step
  // counts, and where training stands (after --resume, only rank 0 read them).
  template <class M>
  void synchronize(M& model, flx::OptState& opt, int& epoch, int64_t& step) const {
    namespace d = flx::distributed;
    d::synchronize(backend_, d::FluxDistributedModel(model), 0);  // in place: model shares the tensors
    d::synchronize(backend_, opt, 0);
    epoch = d::synchronize(backend_, epoch, 0);
    step = d::synchronize(backend_, step, 0);
  }
  // Ends the job on every rank (MPI_Abort) with the message and this rank's number.
  [[noreturn]] int fail(const std::string& message) const;
  // The same when MPI started but the team could not be made (NCCL or the
  // device failed); exit status 1 when MPI itself did not start.
  static int fail_to_start(const std::string& message);
  std::string describe() const;  // ", 2 ranks (MPIBackend)"

 private:
  flx::distributed::DistributedBackend backend_;
  flx::Device device_;
};

}  // namespace flx_train
