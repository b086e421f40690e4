// How a backward pass is watched from outside autograd: autograd's own
// interface (src/autodiff.cpp calls the observers), which flx::distributed
// uses through its internal interface (internal/distributed_interface.hpp
// includes this). Exported with FLX_API for that library, not public API.
#pragma once

#include <vector>

#include "flx/export.hpp"
#include "flx/tensor.hpp"

namespace flx::internal {

// Watches backward passes (DistributedOptimizer does, to start averaging a
// gradient across processes while the rest of the pass computes). A pass
// tells every observer which tensors it differentiates for (their ids,
// Tensor::id), then each of their gradients as soon as it is final, on the
// thread running the pass, then that it has ended. Observers are held
// weakly: one that is destroyed is dropped. While none is registered a
// pass pays one relaxed atomic load. (libflx's autograd uses this class.)
class FLX_API GradientObserver {
 public:
  virtual ~GradientObserver() = default;
  virtual void pass_begins(const std::vector<const void*>& sources) = 0;
  // grad is undefined never: a tracked tensor that gets no gradient is not
  // reported (pass_ends says the pass is over).
  virtual void gradient_ready(const void* source, const Tensor& grad) = 0;
  virtual void pass_ends() = 0;
};

}  // namespace flx::internal
