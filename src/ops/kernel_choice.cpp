// The one choice between a backend's fused kernel and the composition of
// differentiable ops that means the same (ops_internal.hpp, use_kernel).
#include "backend/backend.hpp"
#include "ops_internal.hpp"

namespace flx::ops {

bool use_kernel(const Tensor& x, std::initializer_list<int32_t> fused_ops, autograd::Order order) {
  // A kernel recorded as differentiating once gives no second derivative:
  // inside a nested gradient call (which may ask for one) the composition,
  // which differentiates to any order, runs instead.
  if (order == autograd::Order::FirstOnly && autograd::recording_depth() >= 2) return false;
  const detail::Backend& be = detail::be(x);
  for (int32_t op : fused_ops)
    if (be.fused_supports(detail::dev(x), op, nullptr) != FLX_OK) return false;
  return true;
}

}  // namespace flx::ops
