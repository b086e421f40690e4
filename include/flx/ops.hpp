// Math on tensors. Elementwise operators broadcast with Julia's rule
// (leading dims align; size-1 dims stretch). Dims are 0-based. Element-type
// promotion is described in docs/dtypes.md. Every op here is differentiable
// where that makes sense.
#pragma once

#include "flx/export.hpp"

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
FLX_API Tensor scalar_op(ScalarOp op, const Tensor& t, double s, bool s_floating, bool scalar_left);
}  // namespace detail

FLX_API Tensor operator+(const Tensor& a, const Tensor& b);
FLX_API Tensor operator-(const Tensor& a, const Tensor& b);
FLX_API Tensor operator*(const Tensor& a, const Tensor& b);  // elementwise; matmul() is the matrix product
FLX_API Tensor operator/(const Tensor& a, const Tensor& b);
FLX_API Tensor operator-(const Tensor& a);

FLX_API Tensor operator==(const Tensor& a, const Tensor& b);
FLX_API Tensor operator!=(const Tensor& a, const Tensor& b);
FLX_API Tensor operator<(const Tensor& a, const Tensor& b);
FLX_API Tensor operator<=(const Tensor& a, const Tensor& b);
FLX_API Tensor operator>(const Tensor& a, const Tensor& b);
FLX_API Tensor operator>=(const Tensor& a, const Tensor& b);

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

FLX_API Tensor pow(const Tensor& x, double p);  // x .^ p
FLX_API Tensor pow(const Tensor& x, const Tensor& p);
FLX_API Tensor square(const Tensor& x);
FLX_API Tensor sqrt(const Tensor& x);
FLX_API Tensor exp(const Tensor& x);
FLX_API Tensor log(const Tensor& x);
FLX_API Tensor abs(const Tensor& x);
FLX_API Tensor sign(const Tensor& x);
FLX_API Tensor clamp(const Tensor& x, double lo, double hi);
FLX_API Tensor maximum(const Tensor& a, const Tensor& b);  // elementwise; NaN propagates, as Julia's max
FLX_API Tensor minimum(const Tensor& a, const Tensor& b);
FLX_API Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);  // cond ? a : b
FLX_API Tensor xlogy(const Tensor& x, const Tensor& y);  // x*log(y), 0 where x == 0
// sin, cos and the error function (integers compute in Float32).
FLX_API Tensor sin(const Tensor& x);
FLX_API Tensor cos(const Tensor& x);
FLX_API Tensor erf(const Tensor& x);

// Matrix product: matrix×vector, matrix×matrix, and batched (dims 3+ are
// batch dims, broadcast as in NNlib's batched_mul and torch.matmul: a batch
// dim of size 1, or a missing one, stretches to the other operand's).
FLX_API Tensor matmul(const Tensor& a, const Tensor& b);
// NNlib's batched_mul(a, b): C[:, :, k...] = a[:, :, k...] * b[:, :, k...],
// with at least one operand a batch (3 or more dims); a matrix, or a batch
// dim of size 1, is shared by every product (matmul with the batch rule
// stated).
FLX_API Tensor batched_mul(const Tensor& a, const Tensor& b);

// Reductions: whole tensor (a 0-dim tensor), or over dims (kept as size 1,
// as Julia's sum(x; dims) does, even when dims name every dim). NaN
// propagates through maximum and minimum.
using Dims = std::vector<int>;
FLX_API Tensor sum(const Tensor& x);
FLX_API Tensor sum(const Tensor& x, const Dims& dims);
FLX_API Tensor mean(const Tensor& x);
FLX_API Tensor mean(const Tensor& x, const Dims& dims);
FLX_API Tensor maximum(const Tensor& x);
FLX_API Tensor maximum(const Tensor& x, const Dims& dims);
FLX_API Tensor minimum(const Tensor& x);
FLX_API Tensor minimum(const Tensor& x, const Dims& dims);
// log(sum(exp(x))) without overflow (NNlib's logsumexp): whole tensor
// (0-dim), or over dims (kept as size 1). Its gradient is softmax over them.
FLX_API Tensor logsumexp(const Tensor& x);
FLX_API Tensor logsumexp(const Tensor& x, const Dims& dims);
// Variance and standard deviation, Julia's (Statistics): corrected, i.e.
// divided by n - 1 (NaN for one element), unless corrected is false (by n).
// std is flx::std: qualify it where the namespace std is visible too.
FLX_API Tensor var(const Tensor& x);
FLX_API Tensor var(const Tensor& x, const Dims& dims, bool corrected = true);
FLX_API Tensor std(const Tensor& x);
FLX_API Tensor std(const Tensor& x, const Dims& dims, bool corrected = true);
// 0-based Int64 indices, dim dropped; the first NaN counts as the largest
// (Julia's findmax, torch.argmax).
FLX_API Tensor argmax(const Tensor& x, int dim);

FLX_API Tensor reshape(const Tensor& x, const Shape& s);  // shares storage; one dim may be -1
FLX_API Tensor permutedims(const Tensor& x, const std::vector<int>& perm);
FLX_API Tensor transpose(const Tensor& x);  // 2-d permutedims(x, {1, 0})

// gather(x, idx): x[.., idx] along the last dim (NNlib.gather): the result
// has x's leading dims followed by idx's shape; indices are 0-based integers.
// Differentiable in x (repeated indices add up their gradients).
FLX_API Tensor gather(const Tensor& x, const Tensor& idx);

// onehotbatch(labels, n): (n, N) Bool, column j has a 1 at labels[j] (0-based).
FLX_API Tensor onehotbatch(const Tensor& labels, int64_t nclasses);
FLX_API Tensor onehotbatch(const std::vector<int64_t>& labels, int64_t nclasses);
// onecold(x): the 0-based index of the largest entry of each column (Int64);
// a column holding NaN gives the index of its first NaN, as in Flux.
FLX_API Tensor onecold(const Tensor& x);

}  // namespace flx
