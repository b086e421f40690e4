// Direct loops in double for the dnn table's primitives (include/flx/backend.h,
// "the dnn table"): the reference that every backend's convolution, pooling
// and batch normalisation, forward and backward, is checked against. Written
// from the definitions in backend.h, one output element at a time, with no
// cleverness to share a bug with a library. Shapes as the descriptors give
// them: WHCN, spatial dim 0 (W) fastest; unused spatial dims are 1.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace flx::testing::dnn_ref {

using Dims = std::array<int64_t, 3>;

// One spatial layout: sizes and window parameters for up to 3 dims (dims
// past nspatial are 1, stride 1, no padding).
struct Window {
  int nspatial = 2;
  Dims in{1, 1, 1}, out{1, 1, 1}, kernel{1, 1, 1}, stride{1, 1, 1}, dilation{1, 1, 1}, pad_lo{0, 0, 0},
      pad_hi{0, 0, 0};
  // backend.h's rule for the output size
  void fill_out() {
    for (int i = 0; i < 3; ++i)
      out[size_t(i)] = (in[size_t(i)] + pad_lo[size_t(i)] + pad_hi[size_t(i)] -
                        dilation[size_t(i)] * (kernel[size_t(i)] - 1) - 1) /
                           stride[size_t(i)] +
                       1;
  }
  int64_t in_numel() const { return in[0] * in[1] * in[2]; }
  int64_t out_numel() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_numel() const { return kernel[0] * kernel[1] * kernel[2]; }
};

struct ConvShape {
  Window win;
  int64_t batch = 1, cin = 1, cout = 1, groups = 1;
  size_t x_size() const { return size_t(win.in_numel() * cin * batch); }
  size_t w_size() const { return size_t(win.kernel_numel() * (cin / groups) * cout); }
  size_t y_size() const { return size_t(win.out_numel() * cout * batch); }
};

namespace detail {
// Offset of spatial point p of channel c, sample n, in a (sizes..., C, N) tensor.
inline int64_t at(const Dims& sizes, const Dims& p, int64_t c, int64_t channels, int64_t n) {
  return ((n * channels + c) * sizes[2] + p[2]) * sizes[1] * sizes[0] + p[1] * sizes[0] + p[0];
}
// Calls f(o, k, i, inside) for every output point o, window point k and the
// input point i it reads (inside: i within the input; else padding).
template <class F>
void each_tap(const Window& w, F&& f) {
  Dims o{}, k{}, i{};
  for (o[2] = 0; o[2] < w.out[2]; ++o[2])
    for (o[1] = 0; o[1] < w.out[1]; ++o[1])
      for (o[0] = 0; o[0] < w.out[0]; ++o[0])
        for (k[2] = 0; k[2] < w.kernel[2]; ++k[2])
          for (k[1] = 0; k[1] < w.kernel[1]; ++k[1])
            for (k[0] = 0; k[0] < w.kernel[0]; ++k[0]) {
              bool inside = true;
              for (size_t d = 0; d < 3; ++d) {
                i[d] = o[d] * w.stride[d] - w.pad_lo[d] + k[d] * w.dilation[d];
                inside = inside && i[d] >= 0 && i[d] < w.in[d];
              }
              f(o, k, i, inside);
            }
}
}  // namespace detail

// y = conv(x, w) + b (cross-correlation with groups); b may be empty.
inline std::vector<double> conv_forward(const ConvShape& s, const std::vector<double>& x,
                                        const std::vector<double>& w, const std::vector<double>& b) {
  std::vector<double> y(s.y_size(), 0.0);
  const int64_t cin_g = s.cin / s.groups, cout_g = s.cout / s.groups;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t co = 0; co < s.cout; ++co) {
      const int64_t g = co / cout_g;
      for (int64_t ci = 0; ci < cin_g; ++ci)
        detail::each_tap(s.win, [&](const Dims& o, const Dims& k, const Dims& i, bool inside) {
          if (!inside) return;
          y[size_t(detail::at(s.win.out, o, co, s.cout, n))] +=
              x[size_t(detail::at(s.win.in, i, g * cin_g + ci, s.cin, n))] *
              w[size_t(detail::at(s.win.kernel, k, ci, cin_g, co))];
        });
      if (!b.empty())
        for (int64_t p = 0; p < s.win.out_numel(); ++p) y[size_t((n * s.cout + co) * s.win.out_numel() + p)] += b[size_t(co)];
    }
  return y;
}

// dx from dy and w: the adjoint of conv_forward in x.
inline std::vector<double> conv_backward_data(const ConvShape& s, const std::vector<double>& dy,
                                              const std::vector<double>& w) {
  std::vector<double> dx(s.x_size(), 0.0);
  const int64_t cin_g = s.cin / s.groups, cout_g = s.cout / s.groups;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t co = 0; co < s.cout; ++co) {
      const int64_t g = co / cout_g;
      for (int64_t ci = 0; ci < cin_g; ++ci)
        detail::each_tap(s.win, [&](const Dims& o, const Dims& k, const Dims& i, bool inside) {
          if (!inside) return;
          dx[size_t(detail::at(s.win.in, i, g * cin_g + ci, s.cin, n))] +=
              dy[size_t(detail::at(s.win.out, o, co, s.cout, n))] * w[size_t(detail::at(s.win.kernel, k, ci, cin_g, co))];
        });
    }
  return dx;
}

// dw from x and dy (the adjoint in w); *db, when given, the sums of dy per channel.
inline std::vector<double> conv_backward_filter(const ConvShape& s, const std::vector<double>& x,
                                                const std::vector<double>& dy, std::vector<double>* db = nullptr) {
  std::vector<double> dw(s.w_size(), 0.0);
  const int64_t cin_g = s.cin / s.groups, cout_g = s.cout / s.groups;
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t co = 0; co < s.cout; ++co) {
      const int64_t g = co / cout_g;
      for (int64_t ci = 0; ci < cin_g; ++ci)
        detail::each_tap(s.win, [&](const Dims& o, const Dims& k, const Dims& i, bool inside) {
          if (!inside) return;
          dw[size_t(detail::at(s.win.kernel, k, ci, cin_g, co))] +=
              x[size_t(detail::at(s.win.in, i, g * cin_g + ci, s.cin, n))] * dy[size_t(detail::at(s.win.out, o, co, s.cout, n))];
        });
    }
  if (db) {
    db->assign(size_t(s.cout), 0.0);
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t co = 0; co < s.cout; ++co)
        for (int64_t p = 0; p < s.win.out_numel(); ++p) (*db)[size_t(co)] += dy[size_t((n * s.cout + co) * s.win.out_numel() + p)];
  }
  return dw;
}

struct PoolShape {
  Window win;  // kernel = the window; dilation 1
  int64_t batch = 1, channels = 1;
  bool max = true;  // else mean, padding counted
  size_t x_size() const { return size_t(win.in_numel() * channels * batch); }
  size_t y_size() const { return size_t(win.out_numel() * channels * batch); }
};

inline std::vector<double> pool_forward(const PoolShape& s, const std::vector<double>& x) {
  const double init = s.max ? -std::numeric_limits<double>::infinity() : 0.0;
  std::vector<double> y(s.y_size(), init);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c)
      detail::each_tap(s.win, [&](const Dims& o, const Dims&, const Dims& i, bool inside) {
        double& out = y[size_t(detail::at(s.win.out, o, c, s.channels, n))];
        if (s.max) {
          if (!inside) return;
          const double v = x[size_t(detail::at(s.win.in, i, c, s.channels, n))];
          if (v > out || std::isnan(v)) out = std::isnan(out) ? out : v;
        } else if (inside) {
          out += x[size_t(detail::at(s.win.in, i, c, s.channels, n))] / double(s.win.kernel_numel());
        }
      });
  return y;
}

// dx: max sends dy to the first largest element of its window (window order:
// dim 0 fastest is row-major's last index, the libraries' order); mean
// spreads dy / window size over the window's inside points.
inline std::vector<double> pool_backward(const PoolShape& s, const std::vector<double>& x, const std::vector<double>& dy) {
  std::vector<double> dx(s.x_size(), 0.0);
  const std::vector<double> y = pool_forward(s, x);
  for (int64_t n = 0; n < s.batch; ++n)
    for (int64_t c = 0; c < s.channels; ++c) {
      std::vector<bool> sent(size_t(s.win.out_numel()), false);
      detail::each_tap(s.win, [&](const Dims& o, const Dims&, const Dims& i, bool inside) {
        const int64_t yo = detail::at(s.win.out, o, c, s.channels, n);
        if (!inside) return;
        const int64_t xi = detail::at(s.win.in, i, c, s.channels, n);
        if (!s.max) {
          dx[size_t(xi)] += dy[size_t(yo)] / double(s.win.kernel_numel());
        } else {
          const size_t op = size_t(o[0] + s.win.out[0] * (o[1] + s.win.out[1] * o[2]));
          if (!sent[op] && x[size_t(xi)] == y[size_t(yo)]) {
            dx[size_t(xi)] += dy[size_t(yo)];
            sent[op] = true;
          }
        }
      });
    }
  return dx;
}

struct BatchNormShape {
  int64_t spatial = 1, channels = 1, batch = 1;
  double epsilon = 1e-5, momentum = 0.1;
  size_t x_size() const { return size_t(spatial * channels * batch); }
};

struct BatchNormForward {
  std::vector<double> y, mean, invstd, running_mean, running_var;
};

// Training forward (batch statistics; running ones moved as Flux's), or
// inference from running_mean/var when training is false. scale and bias
// empty: 1 and 0.
inline BatchNormForward batchnorm_forward(const BatchNormShape& s, bool training, const std::vector<double>& x,
                                          const std::vector<double>& scale, const std::vector<double>& bias,
                                          const std::vector<double>& running_mean,
                                          const std::vector<double>& running_var) {
  BatchNormForward r;
  r.y.assign(s.x_size(), 0.0);
  r.mean.assign(size_t(s.channels), 0.0);
  r.invstd.assign(size_t(s.channels), 0.0);
  r.running_mean = running_mean;
  r.running_var = running_var;
  const int64_t m = s.spatial * s.batch;
  auto idx = [&](int64_t p, int64_t c, int64_t n) { return size_t((n * s.channels + c) * s.spatial + p); };
  for (int64_t c = 0; c < s.channels; ++c) {
    double mean = 0, var = 0;
    if (training) {
      for (int64_t n = 0; n < s.batch; ++n)
        for (int64_t p = 0; p < s.spatial; ++p) mean += x[idx(p, c, n)];
      mean /= double(m);
      for (int64_t n = 0; n < s.batch; ++n)
        for (int64_t p = 0; p < s.spatial; ++p) var += (x[idx(p, c, n)] - mean) * (x[idx(p, c, n)] - mean);
      var /= double(m);
      if (!r.running_mean.empty()) {
        const size_t ci = size_t(c);
        r.running_mean[ci] = (1 - s.momentum) * r.running_mean[ci] + s.momentum * mean;
        r.running_var[ci] = (1 - s.momentum) * r.running_var[ci] + s.momentum * (m > 1 ? var * double(m) / double(m - 1) : var);
      }
    } else {
      mean = running_mean[size_t(c)];
      var = running_var[size_t(c)];
    }
    const double invstd = 1 / std::sqrt(var + s.epsilon);
    r.mean[size_t(c)] = mean;
    r.invstd[size_t(c)] = invstd;
    const double g = scale.empty() ? 1 : scale[size_t(c)], b = bias.empty() ? 0 : bias[size_t(c)];
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t p = 0; p < s.spatial; ++p) r.y[idx(p, c, n)] = g * (x[idx(p, c, n)] - mean) * invstd + b;
  }
  return r;
}

struct BatchNormBackward {
  std::vector<double> dx, dscale, dbias;
};

// The training forward's gradients (batch statistics depend on x).
inline BatchNormBackward batchnorm_backward(const BatchNormShape& s, const std::vector<double>& x,
                                            const std::vector<double>& dy, const std::vector<double>& scale) {
  const BatchNormForward f = batchnorm_forward(s, true, x, {}, {}, {}, {});
  BatchNormBackward r;
  r.dx.assign(s.x_size(), 0.0);
  r.dscale.assign(size_t(s.channels), 0.0);
  r.dbias.assign(size_t(s.channels), 0.0);
  const double m = double(s.spatial * s.batch);
  auto idx = [&](int64_t p, int64_t c, int64_t n) { return size_t((n * s.channels + c) * s.spatial + p); };
  for (int64_t c = 0; c < s.channels; ++c) {
    const double mean = f.mean[size_t(c)], invstd = f.invstd[size_t(c)], g = scale.empty() ? 1 : scale[size_t(c)];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t p = 0; p < s.spatial; ++p) {
        const double xhat = (x[idx(p, c, n)] - mean) * invstd;
        sum_dy += dy[idx(p, c, n)];
        sum_dy_xhat += dy[idx(p, c, n)] * xhat;
      }
    r.dbias[size_t(c)] = sum_dy;
    r.dscale[size_t(c)] = sum_dy_xhat;
    for (int64_t n = 0; n < s.batch; ++n)
      for (int64_t p = 0; p < s.spatial; ++p) {
        const double xhat = (x[idx(p, c, n)] - mean) * invstd;
        r.dx[idx(p, c, n)] = g * invstd * (dy[idx(p, c, n)] - sum_dy / m - xhat * sum_dy_xhat / m);
      }
  }
  return r;
}

}  // namespace flx::testing::dnn_ref
