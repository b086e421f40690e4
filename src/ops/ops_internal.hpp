// Helpers shared by the op implementations: raw kernel launches (no
// autodiff), broadcasting, and the reductions backward rules need.
#pragma once

#include <initializer_list>
#include <optional>

#include "../autograd.hpp"
#include "../tensor_impl.hpp"
#include "backend/descriptors.hpp"
#include "flx/activations.hpp"
#include "flx/ops.hpp"

namespace flx::ops {

// An elementwise operand: a tensor, or a scalar when t is null.
struct Arg {
  const Tensor* t = nullptr;
  double scalar = 0;
};

Shape broadcast_shape(const Shape& a, const Shape& b, const char* op);
void check_defined(const Tensor& t, const char* op);
void check_same_device(const Tensor& a, const Tensor& b, const char* op);

// out = op(args...) over `shape`; inputs must already share in_dtype.
Tensor raw_map(int op, DType in_dtype, DType out_dtype, const Shape& shape, std::initializer_list<Arg> args,
               double alpha = 0, double beta = 0);
// Same, written into an existing contiguous tensor of that shape.
void raw_map_into(const Tensor& out, int op, DType in_dtype, std::initializer_list<Arg> args, double alpha = 0,
                  double beta = 0);
// A unary map op with its autodiff rule (activations, math functions).
Tensor activate(int op, const Tensor& x, double alpha = 0);
Tensor raw_unary(int op, const Tensor& x, double alpha = 0, double beta = 0);
Tensor raw_binary(int op, const Tensor& a, const Tensor& b, double alpha = 0, double beta = 0);
Tensor raw_cast(const Tensor& x, DType t);
// out = scale * reduce(x) over the dims in mask (kept as size 1).
Tensor raw_reduce(int op, const Tensor& x, uint32_t mask, double scale = 1.0);
// Sum g down to `shape` (the inverse of broadcasting), and broadcast g up to
// `shape`: backward rules of each other, differentiable to any order.
Tensor sum_to(const Tensor& g, const Shape& shape);
Tensor broadcast_to(const Tensor& g, const Shape& shape);
void fill(const Tensor& t, double v);
// An Int64 index of idx (any device) outside [0, n), if there is one: the
// smallest if negative, else the largest. On the host a scan; on a device
// one count read back (a round trip), plus two when one is outside.
std::optional<int64_t> index_outside(const Tensor& idx, int64_t n);
// gather(x, idx) for Int64 indices on x's device that the caller has already
// checked to lie in range (DataLoader checks them on the host).
Tensor gather_checked(const Tensor& x, const Tensor& idx);

// C = op(A) op(B), batched over dims 2+ (linalg.cpp): raw, and recorded
// (its rule is made of gemm, so it differentiates to any order).
Tensor raw_gemm(const Tensor& a, bool ta, const Tensor& b, bool tb);
Tensor gemm(const Tensor& a, bool ta, const Tensor& b, bool tb);

// The one place that chooses between a backend's fused kernel and the
// composition of differentiable ops that means the same (kernel_choice.cpp):
// true where x's backend supports every op of fused_ops (flx_fused_op codes,
// include/flx/backend_fused.h: a forward op and its backward op together)
// and, for a kernel whose record differentiates once (Order::FirstOnly), the
// call is not inside a nested gradient call, where a second derivative may be
// asked for and only the composition gives it. An empty fused_ops: a kernel
// of src/ops' own (the recurrent scan), where only the order counts. Every
// op of src/ops with a fused kernel asks here; no layer asks which kernels
// a backend has.
bool use_kernel(const Tensor& x, std::initializer_list<int32_t> fused_ops, autograd::Order order);

// The activations a Dense layer can fuse into its GEMM.
enum class DenseAct { Identity, Relu, Gelu };
// act(w * x .+ b) as one GEMM with a fused epilogue (dense.cpp), recorded,
// with a backward rule that fuses the bias gradient into the weight
// gradient's GEMM where the backend can. An undefined tensor when the fused
// path does not apply (the backend has no gemm_epilogue or answered
// FLX_ERR_UNSUPPORTED, shapes other than matrix × matrix, mixed dtypes or
// devices): the caller then runs the unfused ops, which give the same
// result or raise the usual error. Nothing has run in that case.
Tensor dense_fused(const Tensor& w, const Tensor& x, const Tensor& b, DenseAct act);
// act(w * x .+ b) (b may be undefined): the one op behind Dense and the
// recurrent layers' input projections. It chooses: dense_fused where the
// activation is one a GEMM epilogue takes and the backend fuses, else
// matmul, + and the activation one by one (the same result, to rounding).
Tensor dense(const Tensor& w, const Tensor& x, const Tensor& b, const Activation& act);

// x (spatial..., channels, batch), Float32 or Float64, with each (group,
// sample) set of spatial * channels / groups values normalised by its own
// mean and biased variance, then times scale and plus bias (per channel, of
// x's dtype; undefined: none), recorded (dnn_groupnorm.cpp). GroupNorm's,
// InstanceNorm's (groups = channels) and LayerNorm's (one group) forward
// pass. It chooses the backend's fused kernel or the composition itself
// (the kernel where the backend has it and the call is first-order), and
// differentiates to any order.
Tensor group_norm(const Tensor& x, const Tensor& scale, const Tensor& bias, int64_t groups, double epsilon,
                  const std::string& layer);

// xs (each of one shape, dtype and device) stacked along a new last dim:
// (dims..., n), each a contiguous slot (Julia's stack(xs)). Differentiable.
Tensor stack_last(const std::vector<Tensor>& xs);

uint32_t dims_mask(const Tensor& x, const Dims& dims, const char* op);

// ---- one dim at a time (arrays): x viewed as (inner, n, outer) around dim.
struct Around {
  int64_t inner = 1, n = 1, outer = 1;
};
Around around(const Shape& s, int dim);
// Indices [start, stop) along dim (dim < ndims), dim kept: a view sharing
// x's storage when the range is contiguous (outer == 1), else a strided
// copy. Recorded; its rule is pad_dim.
Tensor slice_dim(const Tensor& x, int dim, int64_t start, int64_t stop);
// x with lo zeros before and hi after it along dim. Recorded; its rule is
// slice_dim, so the two differentiate each other to any order.
Tensor pad_dim(const Tensor& x, int dim, int64_t lo, int64_t hi);
// x[.., idx[j], ..] along dim, idx Int64 on x's device, in range (checked
// by the caller), and its adjoint: zeros of n along dim plus g[.., j, ..]
// added at idx[j]. Recorded, each the other's rule.
Tensor gather_dim(const Tensor& x, int dim, const Tensor& idx);
Tensor scatter_dim(const Tensor& g, int dim, const Tensor& idx, int64_t n);
// Host indices as an Int64 tensor on `like`'s device.
Tensor index_tensor(const std::vector<int64_t>& idx, const Tensor& like);

// The resampling ops' sizes (resample.cpp), shared with the Upsample and
// PixelShuffle layers' shape rules: floor(scale · in) along `dim`, and r^d
// (pixel_shuffle's channels per output channel); an ArgumentError naming
// `op` where either passes int64.
int64_t scaled_size(double scale, int64_t in, const std::string& op, int dim);
int64_t upscale_channels(int64_t r, int d, const std::string& op);

}  // namespace flx::ops
