// Max and mean pooling (NNlib's maxpool and meanpool) through the dnn
// table, with their autodiff rules.
#include <cmath>
#include <memory>

#include "backend/scratch.hpp"
#include "dnn_internal.hpp"

namespace flx {

namespace {

// A pool's geometry and output sizes from its input's shape (pool's checks
// on shapes alone).
std::vector<int64_t> plan_pool(const Shape& x, const std::vector<int64_t>& window, const PoolOptions& o,
                               const char* layer, WindowGeometry& g) {
  const int nsp = int(window.size());
  FLX_CHECK(nsp >= 1 && nsp <= FLX_DNN_MAX_SPATIAL, ArgumentError, layer, ": the window has ", nsp,
            " dims; flx pools over 1 to ", FLX_DNN_MAX_SPATIAL);
  FLX_CHECK(x.ndims() == nsp + 2, DimensionMismatch, layer, ": expected a ", nsp + 2,
            "-dim input (spatial..., channels, batch) for a ", nsp, "-dim window; got shape ", x);
  g.nspatial = nsp;
  g.kernel = window;
  for (int64_t k : window) FLX_CHECK(k >= 1, ArgumentError, layer, ": window sizes must be positive; got ", k);
  g.stride = o.stride ? o.stride->expand(nsp, "stride", layer, 1) : window;
  g.dilation.assign(size_t(nsp), 1);
  ops::resolve_padding(o.pad, g, layer);
  for (int i = 0; i < nsp; ++i)
    FLX_CHECK(g.pad_lo[size_t(i)] < window[size_t(i)] && g.pad_hi[size_t(i)] < window[size_t(i)], ArgumentError, layer,
              ": padding must be smaller than the window (a window of padding alone has no value); got ",
              g.pad_lo[size_t(i)], " and ", g.pad_hi[size_t(i)], " for a window of ", window[size_t(i)]);
  return ops::output_sizes(g, x, layer, "window");
}

Tensor pool(const Tensor& x, const std::vector<int64_t>& window, const PoolOptions& o, flx_pool_mode mode,
            const char* layer) {
  ops::check_defined(x, layer);
  const int nsp = int(window.size());
  WindowGeometry g;
  const std::vector<int64_t> out = plan_pool(x.shape(), window, o, layer, g);
  FLX_CHECK(is_floating(x.dtype()), TypeError, layer, ": expected a floating input; got ", x.dtype());
  flx_pool_desc d{};
  d.dtype = int32_t(x.dtype());
  d.mode = mode;
  d.nspatial = nsp;
  d.channels = x.shape()[nsp];
  d.batch = x.shape()[nsp + 1];
  Shape ys;
  for (size_t i = 0; i < FLX_DNN_MAX_SPATIAL; ++i) {
    const bool used = i < size_t(nsp);
    d.in_size[i] = used ? x.shape()[int(i)] : 1;
    d.out_size[i] = used ? out[i] : 1;
    d.window[i] = used ? window[i] : 1;
    d.stride[i] = used ? g.stride[i] : 1;
    d.pad_lo[i] = used ? g.pad_lo[i] : 0;
    d.pad_hi[i] = used ? g.pad_hi[i] : 0;
    if (used) ys.push_back(out[i]);
  }
  ys.push_back(d.channels);
  ys.push_back(d.batch);
  Tensor y = empty(x.dtype(), ys, x.device());
  const auto& be = detail::be(x);
  const int dev = detail::dev(x);
  // Training (recording, x tracked): the reserve the backward call needs.
  // An empty input or output (no images, no channels) calls no backend:
  // backend.h's descriptors hold at least one of each, and the output and
  // gradient are empty or zero (as for Conv and BatchNorm).
  const bool training = detail::is_recording() && autograd::tracked(x);
  d.training = training;
  const bool any = y.numel() > 0 && x.numel() > 0;
  auto reserve = std::make_shared<detail::Scratch>(training && any ? be.pool_reserve(dev, d) : detail::Scratch());
  if (any) {
    d.x = detail::mem(x);
    d.y = detail::mem(y);
    d.reserve = reserve->mem();
    d.reserve_bytes = reserve->bytes();
    be.pool_forward(dev, d);
  }
  autograd::record(layer, autograd::Order::FirstOnly, y, {x},
                   [d, reserve, xs = x.detach(), ys = y.detach()](const Tensor& g0, const bool*, Tensor* gi) mutable {
    const Tensor g = g0.dtype() == xs.dtype() ? g0 : g0.to(xs.dtype());
    Tensor dx = empty(xs.dtype(), xs.shape(), xs.device());
    if (dx.numel()) {
      if (ys.numel() == 0) {
        ops::fill(dx, 0);
      } else {
        d.x = detail::mem(xs);
        d.y = detail::mem(ys);
        d.dy = detail::mem(g);
        d.dx = detail::mem(dx);
        d.reserve = reserve->mem();
        d.reserve_bytes = reserve->bytes();
        detail::be(xs).pool_backward(detail::dev(xs), d);
      }
    }
    gi[0] = dx;
  });
  return y;
}

}  // namespace

Shape ops::pool_shape(const Shape& x, const std::vector<int64_t>& window, const PoolOptions& o, const char* layer) {
  WindowGeometry g;
  Shape y;
  for (int64_t v : plan_pool(x, window, o, layer, g)) y.push_back(v);
  y.push_back(x[g.nspatial]);
  y.push_back(x[g.nspatial + 1]);
  return y;
}

Tensor maxpool(const Tensor& x, const std::vector<int64_t>& window, const PoolOptions& o, const char* layer) {
  return pool(x, window, o, FLX_POOL_MAX, layer);
}
Tensor meanpool(const Tensor& x, const std::vector<int64_t>& window, const PoolOptions& o, const char* layer) {
  return pool(x, window, o, FLX_POOL_MEAN, layer);
}

Tensor lpnormpool(const Tensor& x, double p, const std::vector<int64_t>& window, const PoolOptions& o,
                  const char* layer) {
  FLX_CHECK(p > 0 && std::isfinite(p), ArgumentError, layer, ": p must lie in (0, Inf), as NNlib's lpnormpool; got ", p);
  // Each window's mean of x^p counts the padding in its size, so times the
  // window's size it is the window's sum (padding adds 0^p = 0).
  int64_t size = 1;
  for (int64_t k : window) size *= k;
  return pow(meanpool(pow(x, p), window, o, layer) * double(size), 1.0 / p);
}

}  // namespace flx
