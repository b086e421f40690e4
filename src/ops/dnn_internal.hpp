// Shared by the dnn ops (dnn_conv.cpp, dnn_pool.cpp, dnn_norm.cpp): window
// geometry and the descriptors' common fields. Not installed.
#pragma once

#include <vector>

#include "flx/backend.h"
#include "flx/dnn.hpp"
#include "ops_internal.hpp"

namespace flx::detail {
// Uniform [0, 1) numbers made on device d from the global generator (dropout's mask).
Tensor rand_on(DType t, const Shape& s, Device d);
}  // namespace flx::detail

namespace flx::ops {

static_assert(kMaxSpatialDims == FLX_DNN_MAX_SPATIAL, "flx/dnn.hpp and backend.h agree on the spatial dims");

// Padding resolved into g.pad_lo / g.pad_hi (g's kernel, stride and dilation
// set); `transposed`: SamePad's rule for a transposed convolution.
void resolve_padding(const Padding& p, WindowGeometry& g, const char* layer, bool transposed = false);
// backend.h's output size per spatial dim for input shape `in` (spatial dims
// first); DimensionMismatch naming the layer when the window does not fit,
// ArgumentError when the padded input overflows int64.
std::vector<int64_t> output_sizes(const WindowGeometry& g, const Shape& in, const char* layer, const char* what);

// The output shapes of crosscor (and conv), conv_transpose and the pools for
// inputs and weights of these shapes, with the ops' own checks on shapes
// (the same errors, the same words): the layers' shape rules (outputsize).
Shape crosscor_shape(const Shape& x, const Shape& w, const ConvOptions& o, const char* layer);
Shape conv_transpose_shape(const Shape& x, const Shape& w, const ConvOptions& o, const std::vector<int64_t>& out_pad,
                           const char* layer);
Shape pool_shape(const Shape& x, const std::vector<int64_t>& window, const PoolOptions& o, const char* layer);
Shape flatten_shape(const Shape& x);

// A tensor's backend, device ordinal and memory, checked to be floating and
// on the device of `ref`.
void check_dnn_operand(const Tensor& t, const Tensor& ref, const char* what, const char* layer);

// A descriptor's memory field for an optional tensor: a NULL buf when t is
// undefined (no bias, no running statistics).
inline flx_mem mem_or_null(const Tensor& t) { return t.defined() ? detail::mem(t) : flx_mem{}; }

}  // namespace flx::ops
