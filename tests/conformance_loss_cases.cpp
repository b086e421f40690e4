// The conformance cases of the losses added with issue 29 (run by
// Conformance.LossesMatchTheCpu in test_conformance.cpp: every device
// against the CPU, forward and backward, in Float32, Float64, Float16 and
// BFloat16), and their half tolerances. mse and the cross-entropies are
// cases of test_conformance.cpp itself. ctc_loss runs on the CPU only: its
// case is the way the library names for other devices, ŷ moved to the CPU,
// the loss moved back, and the gradient returning to the device.
#include "conformance_case.hpp"

namespace flx::testing {

using V = std::vector<Tensor>;

namespace {
Tensor on(const Tensor& host, const Tensor& like) { return host.to(like.device()); }
Tensor labels(std::vector<int64_t> v) { return tensor(v, {int64_t(v.size())}); }
}  // namespace

std::vector<Case> loss_cases() {
  return {
      {"mae", {{3, 4}, {3, 4}}, [](const V& v) { return mae(v[0], v[1]); }},
      {"mae_none", {{3, 4}, {3, 4}}, [](const V& v) { return mae(v[0], v[1], {.agg = Agg::none}); }},
      {"msle", {{3, 4}, {3, 4}}, [](const V& v) { return msle(v[0], v[1]); }, true, 0.5, 2},
      {"huber_loss", {{3, 4}, {3, 4}}, [](const V& v) { return huber_loss(v[0], v[1], {.delta = 0.5}); }},
      {"huber_loss_sum", {{3, 4}, {3, 4}},
       [](const V& v) { return huber_loss(v[0], v[1], {.agg = Agg::sum, .delta = 0.7}); }},
      {"poisson_loss", {{3, 4}, {3, 4}}, [](const V& v) { return poisson_loss(v[0], v[1]); }, true, 0.5, 2},
      {"logitbinarycrossentropy", {{3, 4}, {3, 4}},
       [](const V& v) { return logitbinarycrossentropy(v[0] * 4.0, sigmoid(v[1])); }},
      {"kldivergence", {{3, 4}, {3, 4}}, [](const V& v) { return kldivergence(softmax(v[0]), softmax(v[1])); }},
      {"kldivergence_dim1", {{3, 4}, {3, 4}}, [](const V& v) {
         return kldivergence(softmax(v[0], 1), softmax(v[1], 1), {.agg = Agg::none, .dim = 1});
       }},
      {"label_smoothing", {{3, 4}}, [](const V& v) { return label_smoothing(v[0], 0.25); }, true, 0, 1},
      {"label_smoothing_binary", {{5}}, [](const V& v) { return label_smoothing(v[0], 0.5, {.binary = true}); },
       true, 0, 1},
      {"hinge_loss", {{3, 4}, {3, 4}}, [](const V& v) { return hinge_loss(v[0] * 2.0, sign(v[1])); }},
      {"squared_hinge_loss", {{3, 4}, {3, 4}}, [](const V& v) { return squared_hinge_loss(v[0] * 2.0, sign(v[1])); }},
      {"siamese_contrastive_loss", {{3, 4}, {3, 4}},
       [](const V& v) { return siamese_contrastive_loss(v[0], v[1], {.margin = 0.6}); }, true, 0, 1},
      {"dice_coeff_loss", {{3, 4}, {3, 4}}, [](const V& v) { return dice_coeff_loss(v[0], v[1]); }, true, 0, 1},
      {"tversky_loss", {{3, 4}, {3, 4}}, [](const V& v) { return tversky_loss(v[0], v[1]); }, true, 0, 1},
      {"binary_focal_loss", {{3, 4}, {3, 4}},
       [](const V& v) { return binary_focal_loss(sigmoid(v[0]), sigmoid(v[1])); }},
      {"binary_focal_loss_gamma", {{3, 4}, {3, 4}},
       [](const V& v) { return binary_focal_loss(sigmoid(v[0]), sigmoid(v[1]), {.gamma = 1.5}); }},
      {"focal_loss", {{3, 4}},
       [](const V& v) { return focal_loss(softmax(v[0]), on(onehotbatch({0, 2, 1, 1}, 3), v[0])); }},
      {"focal_loss_dim1", {{4, 3}, {4, 3}}, [](const V& v) {
         return focal_loss(softmax(v[0], 1), softmax(v[1], 1), {.agg = Agg::sum, .dim = 1, .gamma = 0.5});
       }},
      {"ctc_loss_on_the_cpu", {{4, 6}},
       [](const V& v) { return ctc_loss(v[0].to(Device::cpu()) * 2.0, labels({0, 2, 2, 1})).to(v[0].device()); }},
  };
}

// Float16 and BFloat16 (test_conformance.cpp's half_ulps argues the kinds).
// A loss of half operands is Float32 (computed in it from the widened
// operands) and compared with Float32's tolerance; label_smoothing keeps
// the labels' type: two scalar operations, each rounded once (exact). A
// gradient reaches a half operand through one rounding of the Float32
// gradient: exact where that is sums, products and selections (mae, huber,
// the hinges, siamese); where it passes a library function or a division
// (log, exp, softplus, pow, dice's and tversky's ratios) in float, or a
// sigmoid in the half type before the loss, as kLibm (1 ulp, 4 normwise
// back); through a softmax in the half type, as kSoftmax (8 normwise back).
const std::map<std::string, HalfUlps>& loss_half_ulps() {
  const HalfUlps exact{}, libm{{1}, {4, true}}, softmaxed{{1}, {8, true}};
  static const std::map<std::string, HalfUlps> m = {
      {"mae", exact},
      {"mae_none", exact},
      {"msle", libm},
      {"huber_loss", exact},
      {"huber_loss_sum", exact},
      {"poisson_loss", libm},
      {"logitbinarycrossentropy", libm},
      {"kldivergence", softmaxed},
      {"kldivergence_dim1", softmaxed},
      {"label_smoothing", exact},
      {"label_smoothing_binary", exact},
      {"hinge_loss", exact},
      {"squared_hinge_loss", exact},
      {"siamese_contrastive_loss", exact},
      {"dice_coeff_loss", libm},
      {"tversky_loss", libm},
      {"binary_focal_loss", libm},
      {"binary_focal_loss_gamma", libm},
      {"focal_loss", softmaxed},
      {"focal_loss_dim1", softmaxed},
      {"ctc_loss_on_the_cpu", exact},
  };
  return m;
}

}  // namespace flx::testing
