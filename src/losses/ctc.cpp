// NNlib's ctc_loss (src/ctc.jl; Graves et al. 2006, Graves 2012 ch. 7): the
// forward (α) and backward (β) recursions over the label sequence with
// blanks between and around its labels, in log space, on the host in
// Float64. One recorded op: its backward rule scales the gradient computed
// with the loss, softmax(ŷ) - the posterior of each class at each step.
// CPU tensors only: on another device it raises NotImplemented.
#include <cmath>
#include <limits>
#include <vector>

#include "../autograd.hpp"
#include "losses/loss_utils.hpp"

namespace flx {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// log(exp(a) + exp(b)) without overflow; -Inf is the log of zero.
double logaddexp(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  if (a < b) std::swap(a, b);
  return a + std::log1p(std::exp(b - a));
}

struct CtcResult {
  double loss;
  std::vector<double> grad;  // d loss / d ŷ, (classes, time) column-major
};

// logits: (C, T) column-major; labels in [0, C - 2]; blank = C - 1.
CtcResult ctc(const std::vector<double>& logits, int64_t C, int64_t T, const std::vector<int64_t>& labels) {
  const int64_t blank = C - 1;
  // logsoftmax over the classes of each step.
  std::vector<double> lp(logits.size());
  for (int64_t t = 0; t < T; ++t) {
    const double* x = &logits[size_t(t * C)];
    double m = kNegInf;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, x[c]);
    double s = 0;
    for (int64_t c = 0; c < C; ++c) s += std::exp(x[c] - m);
    const double lse = m + std::log(s);
    for (int64_t c = 0; c < C; ++c) lp[size_t(t * C + c)] = x[c] - lse;
  }
  // z′: blank, l1, blank, l2, ..., blank.
  const int64_t U = 2 * int64_t(labels.size()) + 1;
  std::vector<int64_t> z(size_t(U), blank);
  for (size_t i = 0; i < labels.size(); ++i) z[2 * i + 1] = labels[i];
  auto at = [U](std::vector<double>& a, int64_t u, int64_t t) -> double& { return a[size_t(t * U + u)]; };
  auto emit = [&](int64_t u, int64_t t) { return lp[size_t(t * C + z[size_t(u)])]; };
  // A step may skip the blank between two different labels (Eq. 7.9's f(u)).
  auto may_skip = [&](int64_t u) { return u > 1 && z[size_t(u)] != blank && z[size_t(u)] != z[size_t(u - 2)]; };

  std::vector<double> alpha(size_t(U * T), kNegInf), beta(size_t(U * T), kNegInf);
  at(alpha, 0, 0) = emit(0, 0);
  if (U > 1) at(alpha, 1, 0) = emit(1, 0);
  for (int64_t t = 1; t < T; ++t)
    for (int64_t u = 0; u < U; ++u) {
      double a = at(alpha, u, t - 1);
      if (u > 0) a = logaddexp(a, at(alpha, u - 1, t - 1));
      if (may_skip(u)) a = logaddexp(a, at(alpha, u - 2, t - 1));
      at(alpha, u, t) = a == kNegInf ? kNegInf : a + emit(u, t);
    }
  const double logp = logaddexp(at(alpha, U - 1, T - 1), U > 1 ? at(alpha, U - 2, T - 1) : kNegInf);
  CtcResult r{-logp, std::vector<double>(lp.size(), 0.0)};
  if (logp == kNegInf) return r;  // no alignment: +Inf, and no gradient (NNlib's would be NaN)

  // β(u, t): log p of the rest of the path after step t (the emission at t excluded).
  at(beta, U - 1, T - 1) = 0;
  if (U > 1) at(beta, U - 2, T - 1) = 0;
  for (int64_t t = T - 2; t >= 0; --t)
    for (int64_t u = U - 1; u >= 0; --u) {
      double b = emit(u, t + 1) + at(beta, u, t + 1);
      if (u + 1 < U) b = logaddexp(b, emit(u + 1, t + 1) + at(beta, u + 1, t + 1));
      if (u + 2 < U && may_skip(u + 2)) b = logaddexp(b, emit(u + 2, t + 1) + at(beta, u + 2, t + 1));
      at(beta, u, t) = b;
    }
  // Posterior of class c at step t: Σ over the u with z′(u) = c of α β / p.
  std::vector<double> post(lp.size(), kNegInf);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t u = 0; u < U; ++u) {
      double& p = post[size_t(t * C + z[size_t(u)])];
      p = logaddexp(p, at(alpha, u, t) + at(beta, u, t));
    }
  for (size_t i = 0; i < lp.size(); ++i) r.grad[i] = std::exp(lp[i]) - std::exp(post[i] - logp);
  return r;
}

}  // namespace

Tensor ctc_loss(const Tensor& yhat, const Tensor& y) {
  FLX_CHECK(yhat.defined() && y.defined(), ArgumentError, "ctc_loss: got an undefined tensor");
  FLX_CHECK(yhat.device().is_cpu(), NotImplemented, "ctc_loss runs on the CPU only; ŷ is on ", yhat.device(),
            ": move it to the CPU, ctc_loss(yhat.to(Device::cpu()), y) (the gradient returns to ", yhat.device(),
            ")");
  FLX_CHECK(yhat.ndims() == 2, DimensionMismatch, "ctc_loss: ŷ must be (classes, time), as NNlib's; got ",
            yhat.shape());
  FLX_CHECK(y.ndims() <= 1, DimensionMismatch, "ctc_loss: the labels y must be a vector; got ", y.shape());
  FLX_CHECK(is_integral(y.dtype()), TypeError, "ctc_loss: the labels y must be integers (0-based); got ",
            y.dtype());
  const int64_t C = yhat.size(0), T = yhat.size(1);
  FLX_CHECK(C >= 1 && T >= 1, ArgumentError, "ctc_loss: ŷ ", yhat.shape(),
            " needs at least one class (the blank) and one time step");
  const std::vector<int64_t> labels = y.to_vector<int64_t>();
  for (size_t i = 0; i < labels.size(); ++i)
    FLX_CHECK(labels[i] >= 0 && labels[i] < C - 1, ArgumentError, "ctc_loss: label ", labels[i], " at position ", i,
              " of y ", y.shape(), " is not a class of ŷ ", yhat.shape(), ": labels are 0-based, in [0, ", C - 2,
              "], and ", C - 1, " (the last class) is the blank");
  Tensor x = losses::widened(yhat);
  if (!is_floating(x.dtype())) x = x.to(DType::Float32);
  const CtcResult r = ctc(x.to_vector<double>(), C, T, labels);
  Tensor out = full(x.dtype(), r.loss, Shape{});
  const Tensor grad = tensor(r.grad, x.shape()).to(x.dtype());
  autograd::record("ctc_loss", autograd::Order::FirstOnly, out, {x},
                   [grad](const Tensor& g, const bool* needs, Tensor* gi) {
                     if (needs[0]) gi[0] = g * grad;
                   });
  return out;
}

}  // namespace flx
