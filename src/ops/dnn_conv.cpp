// Convolutions: crosscor (the dnn table's primitive), conv (Flux's true
// convolution: the kernel flipped first), conv_transpose (the primitive's
// input gradient run forward), with their autodiff rules.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "dnn_internal.hpp"

namespace flx {

namespace ops {

namespace {
// The function that converts a model to dtype t (Flux's f32, f64, ...).
const char* model_conversion(DType t) {
  switch (t) {
    case DType::Float16: return "f16(model)";
    case DType::BFloat16: return "bf16(model)";
    case DType::Float64: return "f64(model)";
    default: return "f32(model)";
  }
}
}  // namespace

void check_dnn_operand(const Tensor& t, const Tensor& ref, const char* what, const char* layer) {
  FLX_CHECK(t.defined(), ArgumentError, layer, ": the ", what, " is undefined");
  FLX_CHECK(is_floating(t.dtype()), TypeError, layer, ": expected a floating ", what, "; got ", t.dtype());
  // The hint converts the input to the layer's dtype (a floating input may
  // instead keep its own and the model follow it).
  FLX_CHECK(is_floating(ref.dtype()), TypeError, layer, ": expected a floating input, as the ", what, " (",
            t.dtype(), "); got ", ref.dtype(), "; convert the input to the layer's type (x.to(", t.dtype(), "))");
  FLX_CHECK(t.dtype() == ref.dtype(), TypeError, layer, ": the ", what, " is ", t.dtype(), " but the input is ",
            ref.dtype(), "; convert the input to the layer's type (x.to(", t.dtype(), ")) or the model to the input's (",
            model_conversion(ref.dtype()), ")");
  FLX_CHECK(t.device() == ref.device(), DeviceMismatch, layer, ": the ", what, " is on ", t.device(),
            " but the input is on ", ref.device(), "; move both to one device (model | device)");
}

namespace {

Shape join(const std::vector<int64_t>& spatial, int64_t channels, int64_t batch) {
  Shape s;
  for (int64_t v : spatial) s.push_back(v);
  s.push_back(channels);
  s.push_back(batch);
  return s;
}

// The descriptor of a cross-correlation from input spatial sizes `in` to
// `out`; memory fields unset.
flx_conv_desc conv_desc(const WindowGeometry& g, DType t, int64_t batch, int64_t cin, int64_t cout, int64_t groups,
                        const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  flx_conv_desc d{};
  d.dtype = int32_t(t);
  d.nspatial = g.nspatial;
  d.groups = int32_t(groups);
  d.batch = batch;
  d.in_channels = cin;
  d.out_channels = cout;
  for (size_t i = 0; i < FLX_DNN_MAX_SPATIAL; ++i) {
    const bool used = i < size_t(g.nspatial);
    d.in_size[i] = used ? in[i] : 1;
    d.out_size[i] = used ? out[i] : 1;
    d.kernel[i] = used ? g.kernel[i] : 1;
    d.stride[i] = used ? g.stride[i] : 1;
    d.dilation[i] = used ? g.dilation[i] : 1;
    d.pad_lo[i] = used ? g.pad_lo[i] : 0;
    d.pad_hi[i] = used ? g.pad_hi[i] : 0;
  }
  return d;
}

// The rank checks shared by every convolution, on shapes: a weight
// (kernel..., a, b) for nspatial = w.ndims() - 2 and an input of as many
// spatial dims; returns nspatial.
int check_conv_shapes(const Shape& x, const Shape& w, const char* layer) {
  FLX_CHECK(w.ndims() >= 3 && w.ndims() <= FLX_DNN_MAX_SPATIAL + 2, DimensionMismatch, layer,
            ": the weight must be (kernel..., in, out) with 1 to ", FLX_DNN_MAX_SPATIAL, " kernel dims; got shape ",
            w);
  const int nsp = w.ndims() - 2;
  FLX_CHECK(x.ndims() == nsp + 2, DimensionMismatch, layer, ": expected a ", nsp + 2, "-dim input (",
            nsp == 1 ? "W" : nsp == 2 ? "W, H" : "W, H, D", ", channels, batch) for a weight of shape ", w,
            "; got shape ", x, nsp + 1 == x.ndims() ? " (add the batch dim: reshape(x, {..., 1}))" : "");
  return nsp;
}

// The same on tensors, with their element types and devices.
int check_conv_ranks(const Tensor& x, const Tensor& w, const char* layer) {
  check_defined(x, layer);
  check_dnn_operand(w, x, "weight", layer);
  const int nsp = check_conv_shapes(x.shape(), w.shape(), layer);
  FLX_CHECK(is_floating(x.dtype()), TypeError, layer, ": expected a floating input; got ", x.dtype());
  return nsp;
}

std::vector<int64_t> spatial_of(const Shape& x, int nsp) {
  std::vector<int64_t> v(static_cast<size_t>(nsp));
  for (int i = 0; i < nsp; ++i) v[size_t(i)] = x[i];
  return v;
}

// A cross-correlation's geometry and output sizes, from its input's and
// weight's shapes (the checks of crosscor on shapes alone).
struct ConvPlan {
  WindowGeometry g;
  std::vector<int64_t> in, out;
  int64_t cin = 0, cout = 0, batch = 0;
};
ConvPlan plan_crosscor(const Shape& x, const Shape& w, const ConvOptions& o, const char* layer) {
  const int nsp = check_conv_shapes(x, w, layer);
  const int64_t groups = o.groups, cin = x[nsp], batch = x[nsp + 1];
  const int64_t cin_g = w[nsp], cout = w[nsp + 1];
  FLX_CHECK(groups >= 1, ArgumentError, layer, ": groups must be at least 1; got ", groups);
  FLX_CHECK(cin_g * groups == cin, DimensionMismatch, layer, ": expected ", cin_g * groups,
            " input channels (dim ", nsp, " of the input; the weight ", w, " with groups=", groups,
            "); got ", cin, " in an input of shape ", x);
  FLX_CHECK(cout % groups == 0, DimensionMismatch, layer, ": the ", cout,
            " output channels of the weight are not a multiple of groups=", groups);
  ConvPlan p;
  p.g = conv_geometry(spatial_of(w, nsp), o, layer);
  p.in = spatial_of(x, nsp);
  p.out = ops::output_sizes(p.g, x, layer, "kernel");
  p.cin = cin;
  p.cout = cout;
  p.batch = batch;
  return p;
}

// dx of a cross-correlation (d's geometry) from dy and w.
Tensor conv_input_grad(flx_conv_desc d, const Tensor& dy, const Tensor& w, const Shape& x_shape) {
  Tensor dx = empty(w.dtype(), x_shape, w.device());
  if (dx.numel() == 0) return dx;
  if (dy.numel() == 0) {
    fill(dx, 0);
    return dx;
  }
  d.dy = detail::mem(dy);
  d.w = detail::mem(w);
  d.dx = detail::mem(dx);
  detail::be(w).conv(detail::dev(w), d, FLX_CONV_BACKWARD_DATA);
  return dx;
}
// dw (and db when wanted) of a cross-correlation from x and dy.
void conv_weight_grad(flx_conv_desc d, const Tensor& x, const Tensor& dy, const Shape& w_shape, Tensor* dw,
                      Tensor* db) {
  *dw = empty(x.dtype(), w_shape, x.device());
  if (db) *db = empty(x.dtype(), Shape{d.out_channels}, x.device());
  if (x.numel() == 0 || dy.numel() == 0) {
    fill(*dw, 0);
    if (db) fill(*db, 0);
    return;
  }
  d.x = detail::mem(x);
  d.dy = detail::mem(dy);
  d.dw = detail::mem(*dw);
  d.db = db ? detail::mem(*db) : flx_mem{};
  detail::be(x).conv(detail::dev(x), d, FLX_CONV_BACKWARD_FILTER);
}
// dx, dw and db (when with_bias) in one backend call, where the backend
// has it (it may share work between them: the CPU reorders dy once); false
// when it has not, or an operand is empty.
bool conv_grads_together(flx_conv_desc d, const Tensor& x, const Tensor& dy, const Tensor& w, bool with_bias,
                         Tensor* gi) {
  if (!detail::be(x).has_conv_backward() || x.numel() == 0 || dy.numel() == 0 || w.numel() == 0) return false;
  gi[0] = empty(x.dtype(), x.shape(), x.device());
  gi[1] = empty(x.dtype(), w.shape(), x.device());
  if (with_bias) gi[2] = empty(x.dtype(), Shape{d.out_channels}, x.device());
  d.x = detail::mem(x);
  d.w = detail::mem(w);
  d.dy = detail::mem(dy);
  d.dx = detail::mem(gi[0]);
  d.dw = detail::mem(gi[1]);
  d.db = with_bias ? detail::mem(gi[2]) : flx_mem{};
  detail::be(x).conv(detail::dev(x), d, FLX_CONV_BACKWARD);
  return true;
}
Tensor as_dtype(const Tensor& g, DType t) { return g.dtype() == t ? g : g.to(t); }

}  // namespace
}  // namespace ops

Shape ops::crosscor_shape(const Shape& x, const Shape& w, const ConvOptions& o, const char* layer) {
  const ops::ConvPlan p = ops::plan_crosscor(x, w, o, layer);
  return ops::join(p.out, p.cout, p.batch);
}

Tensor crosscor(const Tensor& x, const Tensor& w, const Tensor& b, const ConvOptions& o, const char* layer) {
  ops::check_conv_ranks(x, w, layer);
  const ops::ConvPlan p = ops::plan_crosscor(x.shape(), w.shape(), o, layer);
  const int64_t groups = o.groups, cin = p.cin, cout = p.cout, batch = p.batch;
  if (b.defined()) {
    ops::check_dnn_operand(b, x, "bias", layer);
    FLX_CHECK(b.shape() == Shape{cout}, DimensionMismatch, layer, ": the bias must have shape (", cout,
              ") for ", cout, " output channels; got ", b.shape());
  }
  const WindowGeometry& g = p.g;
  const std::vector<int64_t>&in = p.in, &out = p.out;
  flx_conv_desc d = ops::conv_desc(g, x.dtype(), batch, cin, cout, groups, in, out);
  Tensor y = empty(x.dtype(), ops::join(out, cout, batch), x.device());
  if (y.numel()) {
    d.x = detail::mem(x);
    d.w = detail::mem(w);
    d.b = ops::mem_or_null(b);
    d.y = detail::mem(y);
    detail::be(x).conv(detail::dev(x), d, FLX_CONV_FORWARD);
  }
  // First order: the rule runs the backend's fused backward passes.
  autograd::record(layer, autograd::Order::FirstOnly, y, {x, w, b},
                   [d, xs = x.detach(), ws = w.detach()](const Tensor& g0, const bool* needs, Tensor* gi) {
    const Tensor g = ops::as_dtype(g0, xs.dtype());
    if (needs[0] && needs[1] && ops::conv_grads_together(d, xs, g, ws, needs[2], gi)) return;
    if (needs[0]) gi[0] = ops::conv_input_grad(d, g, ws, xs.shape());
    if (needs[1] || needs[2]) {
      Tensor dw, db;
      ops::conv_weight_grad(d, xs, g, ws.shape(), &dw, needs[2] ? &db : nullptr);
      if (needs[1]) gi[1] = dw;
      if (needs[2]) gi[2] = db;
    }
  });
  return y;
}

Tensor flip_kernel(const Tensor& w, int nspatial) {
  ops::check_defined(w, "flip_kernel");
  FLX_CHECK(nspatial >= 0 && nspatial <= w.ndims(), ArgumentError, "flip_kernel: ", nspatial,
            " spatial dims in a weight of shape ", w.shape());
  // The spatial dims lead (column-major), so flipping all of them reverses
  // the linear index within each kernel's block of prod(kernel) elements:
  // one gather along that block, whatever the number of spatial dims.
  int64_t block = 1;
  for (int dim = 0; dim < nspatial; ++dim) block *= w.shape()[dim];
  Tensor out = w;
  if (block > 1) {
    std::vector<int64_t> rev(static_cast<size_t>(block));
    for (int64_t i = 0; i < block; ++i) rev[size_t(i)] = block - 1 - i;
    const Tensor idx = tensor(rev).to(w.device());
    flx_index_desc d{};
    d.dtype = int32_t(w.dtype());
    d.inner = 1;
    d.outer = block ? w.numel() / block : 0;
    d.axis_len = block;
    d.nidx = block;
    out = empty(w.dtype(), w.shape(), w.device());
    if (out.numel()) {
      d.src = detail::mem(w);
      d.dst = detail::mem(out);
      d.idx = detail::mem(idx);
      detail::be(w).gather(detail::dev(w), d);
    }
  }
  if (out.impl() == w.impl()) return w;
  // A reversal is its own adjoint: differentiable to any order.
  autograd::record("flip_kernel", autograd::Order::Higher, out, {w},
                   [nspatial](const Tensor& g, const bool*, Tensor* gi) { gi[0] = flip_kernel(g, nspatial); });
  return out;
}

Tensor conv(const Tensor& x, const Tensor& w, const Tensor& b, const ConvOptions& o, const char* layer) {
  ops::check_conv_ranks(x, w, layer);
  return crosscor(x, flip_kernel(w, w.ndims() - 2), b, o, layer);
}

namespace ops {
namespace {
// A transposed convolution's geometry and output sizes, from its input's and
// weight's shapes (conv_transpose's checks on shapes alone).
struct TransposePlan {
  WindowGeometry g;
  std::vector<int64_t> in, out;
  int64_t cin = 0, cout_g = 0, batch = 0;
};
TransposePlan plan_conv_transpose(const Shape& xs, const Shape& ws, const ConvOptions& o,
                                  const std::vector<int64_t>& out_pad, const char* layer) {
  const int nsp = check_conv_shapes(xs, ws, layer);
  const int64_t groups = o.groups, cin = xs[nsp], batch = xs[nsp + 1];
  const int64_t cout_g = ws[nsp], cin_w = ws[nsp + 1];
  FLX_CHECK(groups >= 1, ArgumentError, layer, ": groups must be at least 1; got ", groups);
  FLX_CHECK(cin_w == cin, DimensionMismatch, layer, ": expected ", cin_w, " input channels (dim ", nsp,
            " of the input; the weight ", ws, " is (kernel..., out / groups, in)); got ", cin,
            " in an input of shape ", xs);
  FLX_CHECK(cin % groups == 0, DimensionMismatch, layer, ": the ", cin,
            " input channels are not a multiple of groups=", groups);
  const WindowGeometry g = conv_geometry(spatial_of(ws, nsp), o, layer, true);
  std::vector<int64_t> extra = out_pad.empty() ? o.outpad.expand(nsp, "outpad", layer, 0) : out_pad;
  FLX_CHECK(extra.size() == size_t(nsp), ArgumentError, layer, ": outpad takes one value per spatial dim (", nsp,
            "); got ", extra.size());
  const std::vector<int64_t> in = spatial_of(xs, nsp);
  std::vector<int64_t> out(static_cast<size_t>(nsp));
  for (size_t i = 0; i < out.size(); ++i) {
    FLX_CHECK(extra[i] >= 0 && extra[i] < std::max(g.stride[i], g.dilation[i]), ArgumentError, layer,
              ": outpad must be at least 0 and below the stride or the dilation; got ", extra[i], " for dim ", i);
    // (in - 1) × stride + (kernel - 1) × dilation + 1 + outpad - padding,
    // in int64 (the extent and the padding's sum fit: conv_geometry).
    int64_t grown = 0;
    const bool fits = !__builtin_mul_overflow(in[i] - 1, g.stride[i], &grown) &&
                      !__builtin_add_overflow(grown, g.dilation[i] * (g.kernel[i] - 1) + 1, &grown) &&
                      !__builtin_add_overflow(grown, extra[i], &grown);
    FLX_CHECK(fits, ArgumentError, layer, ": the output of an input of shape ", xs, " with stride ",
              g.stride[i], " in dim ", i, " would be larger than the largest int64 (",
              std::numeric_limits<int64_t>::max(), "); use a smaller stride");
    if (__builtin_sub_overflow(grown, g.pad_lo[i] + g.pad_hi[i], &out[i])) out[i] = 0;
    FLX_CHECK(out[i] >= 1, DimensionMismatch, layer, ": the padding leaves no output in dim ", i,
              " for an input of shape ", xs);
  }
  return {g, in, out, cin, cout_g, batch};
}
}  // namespace
}  // namespace ops

Shape ops::conv_transpose_shape(const Shape& x, const Shape& w, const ConvOptions& o,
                                const std::vector<int64_t>& out_pad, const char* layer) {
  const ops::TransposePlan p = ops::plan_conv_transpose(x, w, o, out_pad, layer);
  return ops::join(p.out, p.cout_g * o.groups, p.batch);
}

namespace {
// y plus the bias b (one per output channel), checked against x's device and dtype.
Tensor add_conv_bias(const Tensor& y, const Tensor& b, const Tensor& x, int64_t channels, int nsp, const char* layer) {
  ops::check_dnn_operand(b, x, "bias", layer);
  FLX_CHECK(b.shape() == Shape{channels}, DimensionMismatch, layer, ": the bias must have shape (", channels, ") for ",
            channels, " output channels; got ", b.shape());
  std::vector<int64_t> bs(size_t(nsp + 2), 1);
  bs[size_t(nsp)] = channels;
  return y + reshape(b, Shape(bs));
}
}  // namespace

Tensor conv_transpose(const Tensor& x, const Tensor& w0, const Tensor& b, const ConvOptions& o,
                      const std::vector<int64_t>& out_pad, const char* layer) {
  const int nsp = ops::check_conv_ranks(x, w0, layer);
  const ops::TransposePlan p = ops::plan_conv_transpose(x.shape(), w0.shape(), o, out_pad, layer);
  const int64_t groups = o.groups, cin = p.cin, batch = p.batch, cout_g = p.cout_g;
  const WindowGeometry& g = p.g;
  const std::vector<int64_t> extra = out_pad.empty() ? o.outpad.expand(nsp, "outpad", layer, 0) : out_pad;
  bool rows_beyond = false;  // an outpad of at least the stride
  for (int i = 0; i < nsp; ++i) rows_beyond = rows_beyond || extra[size_t(i)] >= g.stride[size_t(i)];
  if (rows_beyond) {
    // An outpad of at least the stride (allowed below the dilation, as
    // PyTorch allows it) adds rows that no input reaches, which the
    // backends' transposed convolution (a convolution's input gradient,
    // whose sizes must match a forward one) cannot make. So: the whole
    // unpadded output of those dims, the outpad's rows added as zeros at its
    // end, then the padding cut off; the bias after. Same values, and
    // differentiable through the slice and pad.
    ConvOptions whole = o;
    std::vector<int64_t> pads, no_outpad(size_t(nsp), 0);
    for (int i = 0; i < nsp; ++i) {
      const bool widen = extra[size_t(i)] >= g.stride[size_t(i)];
      pads.push_back(widen ? 0 : g.pad_lo[size_t(i)]);
      pads.push_back(widen ? 0 : g.pad_hi[size_t(i)]);
      if (!widen) no_outpad[size_t(i)] = extra[size_t(i)];
    }
    whole.pad = Padding(pads);
    Tensor y = conv_transpose(x, w0, Tensor(), whole, no_outpad, layer);
    for (int i = 0; i < nsp; ++i) {
      if (extra[size_t(i)] < g.stride[size_t(i)]) continue;
      y = ops::pad_dim(y, i, 0, extra[size_t(i)]);
      y = ops::slice_dim(y, i, g.pad_lo[size_t(i)], g.pad_lo[size_t(i)] + p.out[size_t(i)]);
    }
    return b.defined() ? add_conv_bias(y, b, x, cout_g * groups, nsp, layer) : y;
  }
  const std::vector<int64_t>&in = p.in, &out = p.out;
  // The cross-correlation whose input gradient this is: from the output
  // (cout_g * groups channels) to x (cin channels), kernel flipped as
  // Flux's ConvTranspose (the transpose of a true convolution).
  const Tensor w = flip_kernel(w0, nsp);
  const flx_conv_desc d = ops::conv_desc(g, x.dtype(), batch, cout_g * groups, cin, groups, out, in);
  Tensor y = ops::conv_input_grad(d, x, w, ops::join(out, cout_g * groups, batch));
  autograd::record(layer, autograd::Order::FirstOnly, y, {x, w},
                   [d, xs = x.detach(), ws = w.detach(), ys = y.shape()](const Tensor& g0, const bool* needs, Tensor* gi) {
    const Tensor gy = ops::as_dtype(g0, xs.dtype());
    if (needs[0]) {  // the forward cross-correlation of the output's gradient
      flx_conv_desc f = d;
      Tensor gx = empty(xs.dtype(), xs.shape(), xs.device());
      if (gx.numel()) {
        f.x = detail::mem(gy);
        f.w = detail::mem(ws);
        f.b = {};
        f.y = detail::mem(gx);
        detail::be(xs).conv(detail::dev(xs), f, FLX_CONV_FORWARD);
      }
      gi[0] = gx;
    }
    if (needs[1]) {
      Tensor dw;
      ops::conv_weight_grad(d, gy, xs, ws.shape(), &dw, nullptr);
      gi[1] = dw;
    }
  });
  return b.defined() ? add_conv_bias(y, b, x, cout_g * groups, nsp, layer) : y;
}

}  // namespace flx
