// The conformance cases of the normalisation, upsampling and convolution
// layers of issue 28 (GroupNorm, InstanceNorm, Upsample, PixelShuffle,
// DepthwiseConv, ConvTranspose's outpad) and of issues 39 and 40
// (ConvTranspose's outpad past the stride, LPNormPool), run by
// Conformance.NormUpsampleAndConvLayersMatchTheCpu in test_conformance.cpp:
// every device against the CPU, forward and backward, in Float32, Float64,
// Float16 and BFloat16. Each layer is built from the case's inputs (its
// arrays set from them), so its parameters' gradients are compared too.
#include "conformance_case.hpp"

namespace flx::testing {

using V = std::vector<Tensor>;

std::vector<Case> layer_cases() {
  return {
      {"groupnorm", {{3, 2, 6, 2}, {6}, {6}}, [](const V& v) {
         GroupNorm l(6, 3, flx::tanh);
         l.scale = v[1];
         l.bias = v[2];
         return l(v[0]);
       }},
      {"groupnorm_features", {{8, 3}}, [](const V& v) { return GroupNorm(8, 2, {.affine = false})(v[0]); }},
      // An epsilon below cuDNN's batch-norm least (1e-5): a backend without
      // the dnn table's groupnorm composes it from maps, not batchnorm.
      {"groupnorm_small_epsilon", {{5, 4, 2}, {4}, {4}}, [](const V& v) {
         GroupNorm l(4, 2, {.epsilon = 1e-7});
         l.scale = v[1];
         l.bias = v[2];
         return l(v[0]);
       }},
      {"instancenorm_affine", {{4, 3, 2, 2}, {2}, {2}}, [](const V& v) {
         InstanceNorm l(2, {.affine = true});
         l.scale = v[1];
         l.bias = v[2];
         return l(v[0]);
       }},
      {"instancenorm_running_stats", {{5, 3, 2}, {3}}, [](const V& v) {
         InstanceNorm l(3, {.track_stats = true});
         l.running_mean = (v[1] * 0.5).detach();  // from the inputs: on their device
         l.running_var = (v[1] * v[1] + 0.5).detach();
         return testmode(l)(v[0]);
       }},
      {"upsample_layer_nearest", {{3, 2, 2, 1}}, [](const V& v) { return Upsample({.scale = {2}})(v[0]); }},
      {"upsample_layer_bilinear", {{3, 4, 2, 1}},
       [](const V& v) { return Upsample({.mode = "bilinear", .size = {5, 7}})(v[0]); }},
      {"pixelshuffle_layer", {{2, 3, 8, 1}}, [](const V& v) { return PixelShuffle(2)(v[0]); }},
      {"depthwiseconv", {{6, 5, 3, 2}, {3, 3, 2, 3}, {6}},  // multiplier 2, 3 input channels
       [](const V& v) { return DepthwiseConv(v[1], Tensor(), {}, {.pad = 1})(v[0]) + reshape(v[2], {1, 1, 6, 1}); }},
      {"convtranspose_outpad", {{4, 3, 4, 2}, {3, 3, 3, 4}, {3}},
       [](const V& v) { return ConvTranspose(v[1], v[2], {}, {.stride = 2, .pad = 1, .outpad = {1, 0}})(v[0]); }},
      // An outpad past the stride, below the dilation: rows no input reaches.
      {"convtranspose_outpad_dilated", {{5, 2, 2}, {3, 3, 2}, {3}},
       [](const V& v) { return ConvTranspose(v[1], v[2], {}, {.pad = 1, .dilation = 3, .outpad = 2})(v[0]); }},
      // Positive inputs: a non-integer power of a negative one is NaN.
      {"lpnormpool", {{6, 5, 2, 2}},
       [](const V& v) { return LPNormPool(1.5, {2, 2}, {.stride = 1, .pad = 1})(v[0]); }, true, 0.1, 1.0},
  };
}

// Float16 and BFloat16 (test_conformance.cpp's half_ulps argues the kinds):
// the normalisations divide by a square root of a sum, each device summing
// in its own order: 2 ulps of the largest output forward, 8 backward (as
// batchnorm's); the convolutions are products: 1 and 4; the upsampling
// layers and PixelShuffle are the array ops' own, exact (0).
const std::map<std::string, HalfUlps>& layer_half_ulps() {
  const HalfUlps kNorm{{2, true}, {8, true}}, kProducts{{1, true}, {4, true}};
  static const std::map<std::string, HalfUlps> m = {
      {"groupnorm", kNorm},
      {"groupnorm_features", kNorm},
      {"instancenorm_affine", kNorm},
      {"instancenorm_running_stats", kNorm},
      {"depthwiseconv", kProducts},
      {"convtranspose_outpad", kProducts},
      {"convtranspose_outpad_dilated", kProducts},
      {"lpnormpool", kNorm},  // a power of a window's sum: as a normalisation's
  };
  return m;
}

}  // namespace flx::testing
