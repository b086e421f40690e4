// Convolution (cross-correlation with groups, stride, dilation and per-side
// padding), forward and both backward passes, as im2col + GEMM:
//   forward          col = im2col(x); y[n, g] = col[n, g] * w[g]  (+ bias)
//   backward data    dcol[n, g] = dy[n, g] * w[g]^T; dx = col2im(dcol)
//   backward filter  dw[g] += col[n, g]^T * dy[n, g] over n; db = sums of dy
// with, per sample n and group g, column-major matrices
//   col[n, g]  P x Kg (P output points, Kg = cin/groups * kernel volume)
//   w[g]       Kg x cout_g (w is row-major OIHW: each output channel's
//              weights are one contiguous column)
//   y[n, g]    P x cout_g, leading dimension P (WHCN is a P x cout matrix)
// so every product is a plain GEMM on the tensors as they lie, one CLBlast
// call per sample (strided-batched over the groups when groups > 1). The
// col matrix lives in the workspace libflx allocates after asking
// conv_workspace: room for a chunk of samples, so a large batch goes through
// a bounded buffer a chunk at a time (im2col and col2im run once per chunk).
// Padding differs per side freely: im2col reads it as zeros, col2im skips it.
// Float16 and BFloat16 multiply in float, as the compute table's gemm does:
// col holds floats, and the workspace also holds w and a chunk of y (or dy)
// converted to float, so each result is rounded to its dtype once.
#include <algorithm>
#include <string>

#include "ocl_blas.hpp"
#include "ocl_dnn.hpp"

namespace flx_ocl {
namespace {

// At most this many bytes of im2col buffer (a chunk of samples); a single
// sample that needs more gets a buffer of its size.
constexpr uint64_t kIm2colBytes = uint64_t(64) << 20;

// A descriptor's shape, checked, with unused spatial dims set to 1.
struct ConvShape {
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, ker[3] = {1, 1, 1}, str[3] = {1, 1, 1}, dil[3] = {1, 1, 1},
          pad[3] = {0, 0, 0};
  int64_t batch = 0, cin = 0, cout = 0, groups = 1, cin_g = 0, cout_g = 0;
  int64_t P = 1, kvol = 1, ivol = 1, Kg = 0;  // output points, window taps, input points, col columns per group
  size_t es = 0;             // bytes of an element
  bool half = false;         // Float16 or BFloat16: the products run in float
  size_t ges = 0;            // bytes of an element of the products (col, and the halves' float copies)
  uint64_t fixed = 0;        // bytes of workspace whatever the chunk: w in float for the halves
  uint64_t per_sample = 0;   // bytes of workspace per sample of a chunk: col (and y or dy in float for the halves)
  int64_t chunk = 1;        // samples per im2col, at most kIm2colBytes of col
  uint64_t workspace = 0;   // bytes conv_workspace asks for
};

ConvShape check_conv(Device& dv, const flx_conv_desc& d, const char* op) {
  dnn::check_struct_size(d, op, "flx_conv_desc");
  dnn::require_dnn_dtype(dv, d.dtype, op);
  ConvShape s;
  s.es = dtype_size(d.dtype);
  s.half = is_half(d.dtype);
  s.ges = s.half ? 4 : s.es;
  if (d.nspatial < 1 || d.nspatial > FLX_DNN_MAX_SPATIAL)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": nspatial must be 1 to " +
                                        std::to_string(FLX_DNN_MAX_SPATIAL) + " spatial dims; got " +
                                        std::to_string(d.nspatial));
  s.groups = dnn::positive(d.groups, op, "groups");
  if (d.batch < 0) raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": negative batch " + std::to_string(d.batch));
  s.batch = d.batch;
  s.cin = dnn::positive(d.in_channels, op, "in_channels");
  s.cout = dnn::positive(d.out_channels, op, "out_channels");
  if (s.cin % s.groups || s.cout % s.groups)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": in_channels (" + std::to_string(s.cin) +
                                        ") and out_channels (" + std::to_string(s.cout) +
                                        ") must both be multiples of groups (" + std::to_string(s.groups) +
                                        "); change the channel counts or the groups");
  s.cin_g = s.cin / s.groups;
  s.cout_g = s.cout / s.groups;
  for (int k = 0; k < d.nspatial; ++k) {
    const std::string dim = "[" + std::to_string(k) + "]";
    s.in[k] = dnn::positive(d.in_size[k], op, "in_size" + dim);
    s.ker[k] = dnn::positive(d.kernel[k], op, "kernel" + dim);
    s.str[k] = dnn::positive(d.stride[k], op, "stride" + dim);
    s.dil[k] = dnn::positive(d.dilation[k], op, "dilation" + dim);
    if (d.pad_lo[k] < 0 || d.pad_hi[k] < 0)
      raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": padding of dim " + std::to_string(k) +
                                          " must be >= 0; got pad_lo " + std::to_string(d.pad_lo[k]) + ", pad_hi " +
                                          std::to_string(d.pad_hi[k]));
    s.pad[k] = d.pad_lo[k];
    const int64_t span = s.in[k] + d.pad_lo[k] + d.pad_hi[k] - s.dil[k] * (s.ker[k] - 1) - 1;
    if (span < 0)
      raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": in dim " + std::to_string(k) + " the kernel of " +
                                          std::to_string(s.ker[k]) + " (dilation " + std::to_string(s.dil[k]) +
                                          ") is wider than the padded input of " +
                                          std::to_string(s.in[k] + d.pad_lo[k] + d.pad_hi[k]));
    const int64_t expect = span / s.str[k] + 1;
    if (d.out_size[k] != expect)
      raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": out_size" + dim + " is " + std::to_string(d.out_size[k]) +
                                          "; backend.h's rule (in + pad_lo + pad_hi - dilation * (kernel - 1) - 1) "
                                          "/ stride + 1 gives " + std::to_string(expect));
    s.out[k] = expect;
  }
  s.P = s.out[0] * s.out[1] * s.out[2];
  s.kvol = s.ker[0] * s.ker[1] * s.ker[2];
  s.ivol = s.in[0] * s.in[1] * s.in[2];
  s.Kg = s.cin_g * s.kvol;
  s.per_sample = (uint64_t(s.cin) * uint64_t(s.kvol) + (s.half ? uint64_t(s.cout) : 0)) * uint64_t(s.P) * s.ges;
  s.fixed = s.half ? uint64_t(s.cout) * uint64_t(s.Kg) * 4 : 0;
  s.chunk = std::clamp<int64_t>(int64_t(kIm2colBytes / s.per_sample), 1, std::max<int64_t>(s.batch, 1));
  s.workspace = s.batch ? s.fixed + uint64_t(s.chunk) * s.per_sample : 0;
  return s;
}

// The workspace the call got: the chunk shrinks to what fits (at least one
// sample must).
int64_t usable_chunk(Device& dv, const flx_conv_desc& d, const ConvShape& s, const char* op) {
  if (s.batch == 0) return 0;
  const int64_t fits =
      d.workspace.buf && d.workspace_bytes >= s.fixed ? int64_t((d.workspace_bytes - s.fixed) / s.per_sample) : 0;
  if (fits < 1)
    raise(FLX_ERR_INVALID_ARGUMENT,
          std::string(op) + " needs a workspace of at least " + std::to_string(s.fixed + s.per_sample) +
              " bytes (one sample's im2col matrix; conv_workspace says " + std::to_string(s.workspace) + "); got " +
              (d.workspace.buf ? std::to_string(d.workspace_bytes) + " bytes" : std::string("none")));
  const int64_t chunk = std::min(s.chunk, fits);
  dnn::check_operand(dv, d.workspace, int64_t((s.fixed + uint64_t(chunk) * s.per_sample) / s.ges), s.ges,
                     "conv workspace");
  return chunk;
}

// The workspace, in elements of the products: col for `chunk` samples,
// then for the halves w and `chunk` samples of y or dy in float.
struct Launch {
  Device& dv;
  cl_command_queue q;
  const flx_conv_desc& d;
  const ConvShape& s;
  int64_t chunk;
  size_t col_at() const { return d.workspace.offset / s.ges; }
  size_t w_at() const { return col_at() + size_t(chunk * s.cin * s.kvol * s.P); }
  size_t img_at() const { return w_at() + size_t(s.cout * s.Kg); }

  // im2col (from x) or col2im (into dx) of samples [n0, n0 + nb).
  void cols(const char* kernel, flx_mem tensor, int64_t n0, int64_t nb) const {
    const size_t items = size_t(nb * s.cin * (kernel[0] == 'i' ? s.kvol * s.P : s.ivol));
    const cl_mem ws = as_mem(d.workspace), t = as_mem(tensor);
    const cl_long wo = cl_long(d.workspace.offset), to = cl_long(tensor.offset);
    const cl_long4 in = dnn::long4_of(s.in), out = dnn::long4_of(s.out), ker = dnn::long4_of(s.ker),
                   str = dnn::long4_of(s.str), dil = dnn::long4_of(s.dil), pad = dnn::long4_of(s.pad);
    if (kernel[0] == 'i')
      launch(dv, q, kDnnKernels, d.dtype, kernel, items, t, to, ws, wo, cl_long(n0), cl_long(nb), cl_long(s.cin), in,
             out, ker, str, dil, pad);
    else
      launch(dv, q, kDnnKernels, d.dtype, kernel, items, ws, wo, t, to, cl_long(n0), cl_long(nb), cl_long(s.cin), in,
             out, ker, str, dil, pad);
  }
  // The matrices of sample n (chunk slot `slot`), group 0; the batch stride
  // steps through the groups.
  BlasMatrix col(int64_t slot) const {
    return {as_mem(d.workspace), col_at() + size_t(slot * s.cin * s.kvol * s.P), size_t(s.P), size_t(s.Kg * s.P)};
  }
  // y or dy of sample n (the halves: its float copy in chunk slot `slot`)
  BlasMatrix image(flx_mem m, int64_t n, int64_t slot) const {
    if (s.half)
      return {as_mem(d.workspace), img_at() + size_t(slot * s.cout * s.P), size_t(s.P), size_t(s.cout_g * s.P)};
    return {as_mem(m), m.offset / s.es + size_t(n * s.cout * s.P), size_t(s.P), size_t(s.cout_g * s.P)};
  }
  BlasMatrix weights(flx_mem m) const {  // w or dw (the halves: its float copy)
    if (s.half) return {as_mem(d.workspace), w_at(), size_t(s.Kg), size_t(s.cout_g * s.Kg)};
    return {as_mem(m), m.offset / s.es, size_t(s.Kg), size_t(s.cout_g * s.Kg)};
  }
  void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const BlasMatrix& a, const BlasMatrix& b, double beta,
            const BlasMatrix& c) const {
    blas_gemm(q, s.half ? FLX_F32 : d.dtype, ta, tb, size_t(m), size_t(n), size_t(k), 1.0, a, b, beta, c,
              size_t(s.groups));
  }
  // The halves: n elements of m from element `first` to float at workspace element `at`, and back (adding
  // the bias b, when set, before the one rounding).
  void to_float(flx_mem m, int64_t first, int64_t n, size_t at) const {
    launch(dv, q, kDnnKernels, d.dtype, "to_float_k", size_t(n), as_mem(m), cl_long(m.offset + first * s.es),
           as_mem(d.workspace), cl_long(at * 4), cl_long(n));
  }
  void from_float(size_t at, flx_mem m, int64_t first, int64_t n, flx_mem b) const {
    launch(dv, q, kDnnKernels, d.dtype, "from_float_k", size_t(n), as_mem(d.workspace), cl_long(at * 4), as_mem(m),
           cl_long(m.offset + first * s.es), cl_long(n), as_mem(b), cl_long(b.offset), cl_int(b.buf != nullptr),
           cl_long(s.P), cl_long(s.cout));
  }
  void fill_zero(flx_mem m, int64_t elems) const {
    const double zero = 0;  // all-zero bits are 0.0 in every floating dtype
    check_cl(clEnqueueFillBuffer(q, as_mem(m), &zero, s.es, m.offset, size_t(elems) * s.es, 0, nullptr, nullptr),
             "clEnqueueFillBuffer");
  }
};

void conv_any(int dev, const flx_conv_desc& d, flx_conv_pass pass, flx_stream st, const char* op) {
  Device& dv = device(dev);
  const ConvShape s = check_conv(dv, d, op);
  const int64_t nx = s.batch * s.cin * s.ivol, ny = s.batch * s.cout * s.P, nw = s.cout * s.Kg;
  // Every operand before anything is queued.
  switch (pass) {
    case FLX_CONV_FORWARD:
      dnn::check_operand(dv, d.x, nx, s.es, "conv x");
      dnn::check_operand(dv, d.w, nw, s.es, "conv w");
      dnn::check_operand(dv, d.y, ny, s.es, "conv y");
      if (d.b.buf) dnn::check_operand(dv, d.b, s.cout, s.es, "conv b");
      break;
    case FLX_CONV_BACKWARD_DATA:
      dnn::check_operand(dv, d.dy, ny, s.es, "conv dy");
      dnn::check_operand(dv, d.w, nw, s.es, "conv w");
      dnn::check_operand(dv, d.dx, nx, s.es, "conv dx");
      break;
    case FLX_CONV_BACKWARD_FILTER:
      dnn::check_operand(dv, d.x, nx, s.es, "conv x");
      dnn::check_operand(dv, d.dy, ny, s.es, "conv dy");
      dnn::check_operand(dv, d.dw, nw, s.es, "conv dw");
      if (d.db.buf) dnn::check_operand(dv, d.db, s.cout, s.es, "conv db");
      break;
    case FLX_CONV_BACKWARD:  // minor 13's conv_backward: not in this backend's table, never asked
      break;
  }
  const int64_t chunk = usable_chunk(dv, d, s, op);
  const Launch L{dv, queue_of(dv, st), d, s, chunk};
  if (s.batch == 0) {  // nothing to convolve; the filter's gradients are zero
    if (pass == FLX_CONV_BACKWARD_FILTER) {
      L.fill_zero(d.dw, nw);
      if (d.db.buf) L.fill_zero(d.db, s.cout);
    }
    return;
  }
  if (s.half && pass != FLX_CONV_BACKWARD_FILTER) L.to_float(d.w, 0, nw, L.w_at());
  const int64_t img = s.cout * s.P;  // elements of y per sample
  for (int64_t n0 = 0; n0 < s.batch; n0 += chunk) {
    const int64_t nb = std::min(chunk, s.batch - n0);
    switch (pass) {
      case FLX_CONV_FORWARD:
        L.cols("im2col_k", d.x, n0, nb);
        for (int64_t i = 0; i < nb; ++i)  // y[n, g] = col[n, g] * w[g]
          L.gemm(false, false, s.P, s.cout_g, s.Kg, L.col(i), L.weights(d.w), 0.0, L.image(d.y, n0 + i, i));
        if (s.half) L.from_float(L.img_at(), d.y, n0 * img, nb * img, d.b);
        break;
      case FLX_CONV_BACKWARD_DATA:
        if (s.half) L.to_float(d.dy, n0 * img, nb * img, L.img_at());
        for (int64_t i = 0; i < nb; ++i)  // dcol[n, g] = dy[n, g] * w[g]^T
          L.gemm(false, true, s.P, s.Kg, s.cout_g, L.image(d.dy, n0 + i, i), L.weights(d.w), 0.0, L.col(i));
        L.cols("col2im_k", d.dx, n0, nb);
        break;
      case FLX_CONV_BACKWARD_FILTER:
        L.cols("im2col_k", d.x, n0, nb);
        if (s.half) L.to_float(d.dy, n0 * img, nb * img, L.img_at());
        for (int64_t i = 0; i < nb; ++i)  // dw[g] (+)= col[n, g]^T * dy[n, g]: the first sample overwrites
          L.gemm(true, false, s.Kg, s.cout_g, s.P, L.col(i), L.image(d.dy, n0 + i, i), n0 + i == 0 ? 0.0 : 1.0,
                 L.weights(d.dw));
        break;
      case FLX_CONV_BACKWARD:  // never asked (above)
        break;
    }
  }
  if (s.half && pass == FLX_CONV_BACKWARD_FILTER) L.from_float(L.w_at(), d.dw, 0, nw, flx_mem{});
  if (pass == FLX_CONV_FORWARD && d.b.buf && !s.half)
    launch(dv, L.q, kDnnKernels, d.dtype, "bias_add_k", size_t(ny), as_mem(d.y), cl_long(d.y.offset), as_mem(d.b),
           cl_long(d.b.offset), cl_long(s.P), cl_long(s.cout), cl_long(ny));
  if (pass == FLX_CONV_BACKWARD_FILTER && d.db.buf)
    launch(dv, L.q, kDnnKernels, d.dtype, "channel_sum_k",
           dnn::per_channel_items(dv, d.dtype, "channel_sum_k", s.cout), as_mem(d.dy), cl_long(d.dy.offset),
           as_mem(d.db), cl_long(d.db.offset), cl_long(s.P), cl_long(s.cout), cl_long(s.batch));
}

}  // namespace

int conv_workspace(void*, int dev, const flx_conv_desc* d, int32_t pass, uint64_t* bytes) {
  return guard("conv_workspace", [&] {
    if (pass < FLX_CONV_FORWARD || pass > FLX_CONV_BACKWARD_FILTER)
      raise(FLX_ERR_INVALID_ARGUMENT, "conv_workspace: pass must be 0 (forward), 1 (backward data) or 2 (backward "
                                      "filter); got " + std::to_string(pass));
    *bytes = check_conv(device(dev), *d, "conv").workspace;
  });
}
int conv_forward(void*, int dev, const flx_conv_desc* d, flx_stream s) {
  return guard("conv_forward", [&] { conv_any(dev, *d, FLX_CONV_FORWARD, s, "conv"); });
}
int conv_backward_data(void*, int dev, const flx_conv_desc* d, flx_stream s) {
  return guard("conv_backward_data", [&] { conv_any(dev, *d, FLX_CONV_BACKWARD_DATA, s, "conv (backward data)"); });
}
int conv_backward_filter(void*, int dev, const flx_conv_desc* d, flx_stream s) {
  return guard("conv_backward_filter",
               [&] { conv_any(dev, *d, FLX_CONV_BACKWARD_FILTER, s, "conv (backward filter)"); });
}

}  // namespace flx_ocl
