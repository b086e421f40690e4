// Math on tensors. Elementwise operators broadcast with Julia's rule
// (leading dims align; size-1 dims stretch). Dims are 0-based. Element-type
// promotion is described in docs/dtypes.md. Every op here is differentiable
// where that makes sense.
#pragma once

#include <concepts>
#include <initializer_list>
#include <vector>

#include "flx/tensor.hpp"

namespace flx {

template <class S>
concept Scalar = std::is_arithmetic_v<S>;

namespace detail {
enum class ScalarOp : int { Add, Sub, Mul, Div, Eq, Ne, Lt, Le, Gt, Ge };
// A tensor-scalar op; the scalar's C++ kind (integral or floating) steers
// promotion: an integer tensor with a floating scalar becomes Float32.
Tensor scalar_op(ScalarOp op, const Tensor& t, double s, bool s_floating, bool scalar_left);
}  // namespace detail

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);  // elementwise; matmul() is the matrix product
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);

Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);

#define FLX_SCALAR_OPERATOR(SYM, CODE)                                                          \
  template <Scalar S>                                                                           \
  Tensor operator SYM(const Tensor& t, S s) {                                                   \
    return detail::scalar_op(detail::ScalarOp::CODE, t, double(s), std::is_floating_point_v<S>, false);          \
  }                                                                                             \
  template <Scalar S>                                                                           \
  Tensor operator SYM(S s, const Tensor& t) {                                                   \
    return detail::scalar_op(detail::ScalarOp::CODE, t, double(s), std::is_floating_point_v<S>, true);           \
  }
FLX_SCALAR_OPERATOR(+, Add)
FLX_SCALAR_OPERATOR(-, Sub)
FLX_SCALAR_OPERATOR(*, Mul)
FLX_SCALAR_OPERATOR(/, Div)
FLX_SCALAR_OPERATOR(==, Eq)
FLX_SCALAR_OPERATOR(!=, Ne)
FLX_SCALAR_OPERATOR(<, Lt)
FLX_SCALAR_OPERATOR(<=, Le)
FLX_SCALAR_OPERATOR(>, Gt)
FLX_SCALAR_OPERATOR(>=, Ge)
#undef FLX_SCALAR_OPERATOR

Tensor pow(const Tensor& x, double p);  // x .^ p
Tensor pow(const Tensor& x, const Tensor& p);
Tensor square(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor maximum(const Tensor& a, const Tensor& b);  // elementwise; NaN propagates, as Julia's max
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);  // cond ? a : b
Tensor xlogy(const Tensor& x, const Tensor& y);  // x*log(y), 0 where x == 0
// sin, cos and the error function (integers compute in Float32).
Tensor sin(const Tensor& x);
Tensor cos(const Tensor& x);
Tensor erf(const Tensor& x);

// Matrix product: matrix×vector, matrix×matrix, and batched (dims 3+ are
// batch dims, broadcast as in NNlib's batched_mul and torch.matmul: a batch
// dim of size 1, or a missing one, stretches to the other operand's).
Tensor matmul(const Tensor& a, const Tensor& b);
// NNlib's batched_mul(a, b): C[:, :, k...] = a[:, :, k...] * b[:, :, k...],
// with at least one operand a batch (3 or more dims); a matrix, or a batch
// dim of size 1, is shared by every product (matmul with the batch rule
// stated).
Tensor batched_mul(const Tensor& a, const Tensor& b);

// Reductions: whole tensor (a 0-dim tensor), or over dims (kept as size 1,
// as Julia's sum(x; dims) does, even when dims name every dim). NaN
// propagates through maximum and minimum.
using Dims = std::vector<int>;
Tensor sum(const Tensor& x);
Tensor sum(const Tensor& x, const Dims& dims);
Tensor mean(const Tensor& x);
Tensor mean(const Tensor& x, const Dims& dims);
Tensor maximum(const Tensor& x);
Tensor maximum(const Tensor& x, const Dims& dims);
Tensor minimum(const Tensor& x);
Tensor minimum(const Tensor& x, const Dims& dims);
// log(sum(exp(x))) without overflow (NNlib's logsumexp): whole tensor
// (0-dim), or over dims (kept as size 1). Its gradient is softmax over them.
Tensor logsumexp(const Tensor& x);
Tensor logsumexp(const Tensor& x, const Dims& dims);
// Variance and standard deviation, Julia's (Statistics): corrected, i.e.
// divided by n - 1 (NaN for one element), unless corrected is false (by n).
// std is flx::std: qualify it where the namespace std is visible too.
Tensor var(const Tensor& x);
Tensor var(const Tensor& x, const Dims& dims, bool corrected = true);
Tensor std(const Tensor& x);
Tensor std(const Tensor& x, const Dims& dims, bool corrected = true);
// 0-based Int64 indices, dim dropped; the first NaN counts as the largest
// (Julia's findmax, torch.argmax).
Tensor argmax(const Tensor& x, int dim);

Tensor reshape(const Tensor& x, const Shape& s);  // shares storage; one dim may be -1
Tensor permutedims(const Tensor& x, const std::vector<int>& perm);
Tensor transpose(const Tensor& x);  // 2-d permutedims(x, {1, 0})

// gather(x, idx): x[.., idx] along the last dim (NNlib.gather): the result
// has x's leading dims followed by idx's shape; indices are 0-based integers.
// Differentiable in x (repeated indices add up their gradients).
Tensor gather(const Tensor& x, const Tensor& idx);

// onehotbatch(labels, n): (n, N) Bool, column j has a 1 at labels[j] (0-based).
Tensor onehotbatch(const Tensor& labels, int64_t nclasses);
Tensor onehotbatch(const std::vector<int64_t>& labels, int64_t nclasses);
// onecold(x): the 0-based index of the largest entry of each column (Int64);
// a column holding NaN gives the index of its first NaN, as in Flux.
Tensor onecold(const Tensor& x);

}  // namespace flx
