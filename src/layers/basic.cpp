#include "flx/layers/basic.hpp"

#include "ops/ops_internal.hpp"

#include <cmath>
#include <cstdio>

namespace flx {

Tensor glorot_uniform(int64_t out, int64_t in) {
  double a = std::sqrt(6.0 / double(in + out));
  return rand(out, in) * (2 * a) - a;
}

namespace {
// Checked before the weight is made (a Shape would reject a negative size in its own words).
int64_t dense_in(int64_t in, int64_t out) {
  FLX_CHECK(in > 0 && out > 0, ArgumentError, "Dense: sizes must be positive; got ", in, " => ", out);
  return in;
}
}  // namespace

Dense::Dense(int64_t in, int64_t out, Activation a)
    : weight(glorot_uniform(out, dense_in(in, out))), bias(zeros(out)), act(std::move(a)) {}

Dense::Dense(Tensor w, Tensor b, Activation a) : weight(std::move(w)), bias(std::move(b)), act(std::move(a)) {
  FLX_CHECK(weight.defined() && weight.ndims() == 2, DimensionMismatch, "Dense: weight must be a matrix (out, in); got ",
            weight.defined() ? weight.shape().str() : std::string("undefined"));
  FLX_CHECK(!bias.defined() || bias.shape() == Shape{weight.shape()[0]}, DimensionMismatch, "Dense: bias must have shape (",
            weight.shape()[0], ") to match weight ", weight.shape(), "; got ", bias.shape());
}

Tensor Dense::operator()(const Tensor& x) const {
  FLX_CHECK(x.defined() && x.ndims() >= 1 && x.shape()[0] == weight.shape()[1], DimensionMismatch,
            "Dense(", weight.shape()[1], " => ", weight.shape()[0], ") expects input with ", weight.shape()[1],
            " features in dim 0; got shape ", x.defined() ? x.shape().str() : std::string("undefined"));
  // One GEMM with bias and activation fused where the backend can
  // (src/ops/dense.cpp); else, or for other activations, the ops one by one.
  using Kind = Activation::Kind;
  const auto kind = act.kind();
  if (bias.defined() && (kind == Kind::Identity || kind == Kind::Relu || kind == Kind::Gelu)) {
    const auto fused_act = kind == Activation::Kind::Relu   ? ops::DenseAct::Relu
                           : kind == Activation::Kind::Gelu ? ops::DenseAct::Gelu
                                                            : ops::DenseAct::Identity;
    if (Tensor y = ops::dense_fused(weight, x, bias, fused_act); y.defined()) return y;
  }
  Tensor h = matmul(weight, x);
  if (bias.defined()) h = h + bias;
  return act(h);
}

std::ostream& operator<<(std::ostream& os, const Activation& a) { return os << a.name(); }

namespace detail {
void show_compact(std::ostream& os, const Dense& d) {
  os << "Dense(" << d.weight.shape()[1] << " => " << d.weight.shape()[0];
  if (!d.act.is_identity()) os << ", " << d.act;
  if (!d.bias.defined()) os << "; bias=false";
  os << ")";
}
void show_parameter_count(std::ostream& os, int64_t n) { os << "  # " << underscored(n) << " parameters"; }

std::string underscored(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += '_';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

std::string format_bytes(int64_t bytes) {
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double v = double(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f %s", v, units[u]);
  return buf;
}

size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;  // count the first byte of each UTF-8 character
  return n;
}

void show_totals(std::ostream& os, int64_t trainable_arrays, int64_t trainable, int64_t other_arrays, int64_t other,
                 int64_t bytes) {
  if (trainable_arrays <= 2) return;  // Flux totals only models of more than two arrays
  if (other_arrays > 0) {
    os << std::string(9, ' ') << "# Total: " << trainable_arrays << " trainable arrays, " << underscored(trainable)
       << " parameters,\n"
       << std::string(10, ' ') << "# plus " << other_arrays << " non-trainable, " << underscored(other)
       << " parameters, summarysize " << format_bytes(bytes) << ".";
  } else {
    os << std::string(19, ' ') << "# Total: " << trainable_arrays << " arrays, " << underscored(trainable)
       << " parameters, " << format_bytes(bytes) << ".";
  }
}
}  // namespace detail

std::ostream& operator<<(std::ostream& os, const Dense& d) {
  detail::show_compact(os, d);
  detail::show_parameter_count(os, d.weight.numel() + (d.bias.defined() ? d.bias.numel() : 0));
  return os;
}

}  // namespace flx
