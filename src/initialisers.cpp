// Flux's initialisers (src/utils.jl there): the draws come from the global
// generator (rand, randn); what needs more than scaling a draw (the inverse
// CDF of truncated_normal, orthogonal's QR, sparse_init's shuffles) is done
// on the host in double, then rounded to Float32 once.
#include "flx/initialisers.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "flx/error.hpp"
#include "flx/ops.hpp"

namespace flx {

namespace {

int64_t product(const Shape& s, int from, int to) {
  int64_t p = 1;
  for (int k = from; k < to; ++k) p *= s[k];
  return p;
}

// erf⁻¹ on (-1, 1) (±inf at ±1): Giles' approximation, then Newton steps on erf.
double erfinv(double y) {
  if (y <= -1) return -HUGE_VAL;
  if (y >= 1) return HUGE_VAL;
  const double w0 = -std::log((1.0 - y) * (1.0 + y));
  double x;
  if (w0 < 5.0) {
    const double w = w0 - 2.5;
    double p = 2.81022636e-08;
    p = 3.43273939e-07 + p * w;
    p = -3.5233877e-06 + p * w;
    p = -4.39150654e-06 + p * w;
    p = 0.00021858087 + p * w;
    p = -0.00125372503 + p * w;
    p = -0.00417768164 + p * w;
    p = 0.246640727 + p * w;
    p = 1.50140941 + p * w;
    x = p * y;
  } else {
    const double w = std::sqrt(w0) - 3.0;
    double p = -0.000200214257;
    p = 0.000100950558 + p * w;
    p = 0.00134934322 + p * w;
    p = -0.00367342844 + p * w;
    p = 0.00573950773 + p * w;
    p = -0.0076224613 + p * w;
    p = 0.00943887047 + p * w;
    p = 1.00167406 + p * w;
    p = 2.83297682 + p * w;
    x = p * y;
  }
  for (int i = 0; i < 3; ++i) {
    const double d = 2.0 / std::sqrt(M_PI) * std::exp(-x * x);
    if (d == 0) break;
    x -= (std::erf(x) - y) / d;
  }
  return x;
}

std::vector<float> to_float(const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); }

// Q of a rows × cols (rows ≥ cols) column-major matrix with a positive
// diagonal of R: Gram-Schmidt, each column orthogonalised twice.
std::vector<double> q_factor(std::vector<double> a, int64_t rows, int64_t cols) {
  for (int64_t j = 0; j < cols; ++j) {
    double* v = a.data() + j * rows;
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t i = 0; i < j; ++i) {
        const double* q = a.data() + i * rows;
        double dot = 0;
        for (int64_t r = 0; r < rows; ++r) dot += q[r] * v[r];
        for (int64_t r = 0; r < rows; ++r) v[r] -= dot * q[r];
      }
    double norm = 0;
    for (int64_t r = 0; r < rows; ++r) norm += v[r] * v[r];
    norm = std::sqrt(norm);
    FLX_CHECK(norm > 0, ArgumentError, "orthogonal: the normal draw was rank-deficient; draw again");
    for (int64_t r = 0; r < rows; ++r) v[r] /= norm;
  }
  return a;
}

void check_dims(const Shape& dims, const char* name) {
  for (int k = 0; k < dims.ndims(); ++k)
    FLX_CHECK(dims[k] >= 0, ArgumentError, name, ": dims must not be negative; got ", dims);
}

}  // namespace

std::pair<int64_t, int64_t> nfan(const Shape& dims) {
  const int n = dims.ndims();
  if (n == 0) return {1, 1};
  if (n == 1) return {1, dims[0]};
  if (n == 2) return {dims[1], dims[0]};
  const int64_t k = product(dims, 0, n - 2);
  return {k * dims[n - 2], k * dims[n - 1]};
}

namespace detail {

Tensor GlorotUniformImpl::draw(const Shape& dims, const GlorotOptions& o) {
  check_dims(dims, "glorot_uniform");
  const auto [fan_in, fan_out] = nfan(dims);
  const double a = o.gain * std::sqrt(6.0 / double(fan_in + fan_out));
  return rand(dims) * (2 * a) - a;
}

Tensor GlorotNormalImpl::draw(const Shape& dims, const GlorotOptions& o) {
  check_dims(dims, "glorot_normal");
  const auto [fan_in, fan_out] = nfan(dims);
  return randn(dims) * (o.gain * std::sqrt(2.0 / double(fan_in + fan_out)));
}

Tensor KaimingUniformImpl::draw(const Shape& dims, const KaimingOptions& o) {
  check_dims(dims, "kaiming_uniform");
  const double bound = o.gain * std::sqrt(3.0 / double(nfan(dims).first));
  return rand(dims) * (2 * bound) - bound;
}

Tensor KaimingNormalImpl::draw(const Shape& dims, const KaimingOptions& o) {
  check_dims(dims, "kaiming_normal");
  return randn(dims) * (o.gain / std::sqrt(double(nfan(dims).first)));
}

Tensor TruncatedNormalImpl::draw(const Shape& dims, const TruncatedNormalOptions& o) {
  check_dims(dims, "truncated_normal");
  FLX_CHECK(o.std > 0 && o.lo < o.hi, ArgumentError, "truncated_normal: expected std > 0 and lo < hi; got std=", o.std,
            ", lo=", o.lo, ", hi=", o.hi);
  auto cdf = [](double x) { return 0.5 * (1 + std::erf(x / std::sqrt(2.0))); };
  const double l = cdf((o.lo - o.mean) / o.std), u = cdf((o.hi - o.mean) / o.std);
  std::vector<double> xs = rand(Float64, dims).to_vector<double>();
  for (double& x : xs) {
    const double z = erfinv(x * 2 * (u - l) + (2 * l - 1));
    x = std::clamp(z * o.std * std::sqrt(2.0) + o.mean, o.lo, o.hi);
  }
  return tensor(to_float(xs), dims);
}

Tensor OrthogonalImpl::draw(const Shape& dims, const OrthogonalOptions& o) {
  check_dims(dims, "orthogonal");
  FLX_CHECK(dims.ndims() >= 2, ArgumentError, "orthogonal: needs two or more dims (a matrix, or an array read as ",
            "prod(dims[0:end-1]) × dims[end]); got ", dims);
  const int n = dims.ndims();
  const int64_t rows = product(dims, 0, n - 1), cols = dims[n - 1];
  const bool wide = rows < cols;
  const int64_t r = wide ? cols : rows, c = wide ? rows : cols;  // r ≥ c
  const std::vector<double> q = q_factor(randn(Float64, Shape{r, c}).to_vector<double>(), r, c);
  std::vector<float> out(size_t(rows * cols));
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i)
      out[size_t(i + j * rows)] = float(o.gain * (wide ? q[size_t(j + i * r)] : q[size_t(i + j * r)]));
  return tensor(out, dims);
}

Tensor SparseInitImpl::draw(const Shape& dims, const SparseInitOptions& o) {
  FLX_CHECK(dims.ndims() == 2, ArgumentError,
            "sparse_init: only 2-dimensional outputs are supported for sparse initialization; got dims ", dims);
  check_dims(dims, "sparse_init");
  FLX_CHECK(o.sparsity.has_value(), ArgumentError,
            "sparse_init: .sparsity (the fraction of each column set to zero) is required");
  FLX_CHECK(*o.sparsity >= 0, ArgumentError, "sparse_init: .sparsity must be at least 0; got ", *o.sparsity);
  const int64_t rows = dims[0], cols = dims[1];
  const int64_t zeros = int64_t(std::ceil(std::min(1.0, *o.sparsity) * double(rows)));
  std::vector<float> v = (randn(dims) * o.std).to_vector<float>();
  const std::vector<double> keys = rand(Float64, dims).to_vector<double>();  // a random order of each column
  std::vector<int64_t> order(static_cast<size_t>(rows));
  for (int64_t j = 0; j < cols; ++j) {
    std::iota(order.begin(), order.end(), 0);
    const double* key = keys.data() + j * rows;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return key[a] < key[b]; });
    for (int64_t k = 0; k < zeros; ++k) v[size_t(order[size_t(k)] + j * rows)] = 0.0f;
  }
  return tensor(v, dims);
}

Tensor IdentityInitImpl::draw(const Shape& dims, const IdentityInitOptions& o) {
  check_dims(dims, "identity_init");
  const int n = dims.ndims();
  FLX_CHECK(n >= 1, ArgumentError, "identity_init: needs at least one dim; got ", dims);
  FLX_CHECK(o.shift.size() <= size_t(n), ArgumentError, "identity_init: .shift takes at most one value per dim (",
            n, "); got ", o.shift.size());
  std::vector<float> w(size_t(dims.numel()), 0.0f);
  if (n == 1 || w.empty()) return tensor(w, dims);  // a bias: zeros
  // Column-major strides.
  std::vector<int64_t> stride(size_t(n), 1);
  for (int k = 1; k < n; ++k) stride[size_t(k)] = stride[size_t(k - 1)] * dims[k - 1];
  auto shifted = [&](std::vector<int64_t> idx) {
    int64_t at = 0;
    for (int k = 0; k < n; ++k) {
      const int64_t s = size_t(k) < o.shift.size() ? o.shift[size_t(k)] : 0;
      idx[size_t(k)] = ((idx[size_t(k)] + s) % dims[k] + dims[k]) % dims[k];
      at += idx[size_t(k)] * stride[size_t(k)];
    }
    return at;
  };
  const int64_t nin = dims[n - 2], nout = dims[n - 1];
  std::vector<int64_t> idx(size_t(n), 0);
  for (int k = 0; k + 2 < n; ++k) idx[size_t(k)] = (dims[k] - 1) / 2;  // Julia's cld(d, 2), 0-based
  for (int64_t i = 0; i < std::min(nin, nout); ++i) {
    idx[size_t(n - 2)] = i;
    idx[size_t(n - 1)] = i;
    w[size_t(shifted(idx))] = float(o.gain);
  }
  return tensor(w, dims);
}

}  // namespace detail

}  // namespace flx
