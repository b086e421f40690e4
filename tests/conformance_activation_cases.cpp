// The conformance cases of NNlib's activations added with issue 29 (run by
// Conformance.ActivationsMatchTheCpu in test_conformance.cpp: every device
// against the CPU, forward and backward, in Float32, Float64, Float16 and
// BFloat16), and their half tolerances. Each is a map op of the op list
// (include/flx/backend_ops.h) with its fused derivative; rrelu while
// training is the binary op RRELU of x and slopes drawn from the seed, which
// every device draws alike; glu is slices and sigmoid.
#include "conformance_case.hpp"

namespace flx::testing {

using V = std::vector<Tensor>;

std::vector<Case> activation_cases() {
  return {
      {"hardsigmoid", {{9}}, [](const V& v) { return hardsigmoid(v[0]); }, true, -4, 4},
      {"hardtanh", {{9}}, [](const V& v) { return hardtanh(v[0]); }, true, -2, 2},
      {"relu6", {{9}}, [](const V& v) { return relu6(v[0]); }, true, -2, 8},
      {"gelu_sigmoid", {{8}}, [](const V& v) { return gelu_sigmoid(v[0]); }, true, -3, 3},
      {"hardswish", {{9}}, [](const V& v) { return hardswish(v[0]); }, true, -4, 4},
      {"selu", {{8}}, [](const V& v) { return selu(v[0]); }, true, -3, 3},
      {"logsigmoid", {{8}}, [](const V& v) { return logsigmoid(v[0]); }, true, -4, 4},
      {"logcosh", {{8}}, [](const V& v) { return logcosh(v[0]); }, true, -3, 3},
      {"mish", {{8}}, [](const V& v) { return mish(v[0]); }, true, -3, 3},
      {"tanhshrink", {{8}}, [](const V& v) { return tanhshrink(v[0]); }, true, -3, 3},
      {"softshrink", {{9}}, [](const V& v) { return softshrink(v[0]); }, true, -2, 2},
      {"softshrink_lambda", {{9}}, [](const V& v) { return softshrink(v[0], 1.25); }, true, -3, 3},
      {"trelu", {{9}}, [](const V& v) { return trelu(v[0]); }, true, -1, 3},
      {"trelu_theta", {{9}}, [](const V& v) { return trelu(v[0], -0.5); }, true, -2, 2},
      {"lisht", {{8}}, [](const V& v) { return lisht(v[0]); }, true, -3, 3},
      {"rrelu_eval", {{9}}, [](const V& v) { return rrelu(v[0], 0.1, 0.3, false); }, true, -2, 2},
      // Slopes drawn on the device: Philox gives every device the CPU's
      // numbers for one seed, so the seed is set inside, for the forward
      // and the gradient's call alike. (rrelu's default, training inside
      // gradient only, is test_activations.cpp's: here a plugin older than
      // RRELU could run the forward but not the gradient, which this suite
      // does not catch.)
      {"rrelu_train", {{5, 4}}, [](const V& v) {
         set_seed(31);
         return rrelu(v[0], 0.1, 0.3, true);
       }, true, -2, 2},
      {"glu", {{6, 3}}, [](const V& v) { return glu(v[0]); }, true, -3, 3},
      {"glu_dim1", {{3, 4, 2}}, [](const V& v) { return glu(v[0], 1); }, true, -3, 3},
  };
}

// Float16 and BFloat16 (test_conformance.cpp's half_ulps argues the kinds):
// a body with a library function (exp, log1p, tanh) or a float division
// (hardσ's (x + 3)/6, and its derivative's g/6; hardswish's) is kLibm: 1 ulp
// forward, 4 normwise backward. tanhshrink (x − tanh x) and logcosh (|x| +
// log1p(e^{−2|x|}) − log 2) cancel near 0, where a float ulp of tanh or
// log1p is many ulps of a tiny result: 1 ulp of the largest output
// (normwise). The clamps, softshrink, trelu and rrelu are selections, sums
// and products rounded once: exact (0) on every device.
const std::map<std::string, HalfUlps>& activation_half_ulps() {
  const HalfUlps kLibm{{1}, {4, true}}, kCancels{{1, true}, {4, true}}, kExact{};
  static const std::map<std::string, HalfUlps> m = {
      {"hardsigmoid", kLibm},   {"hardtanh", kExact},     {"relu6", kExact},
      {"gelu_sigmoid", kLibm},  {"hardswish", kLibm},     {"selu", kLibm},
      {"logsigmoid", kLibm},    {"logcosh", kCancels},       {"mish", kLibm},
      {"tanhshrink", kCancels},    {"softshrink", kExact},   {"softshrink_lambda", kExact},
      {"trelu", kExact},        {"trelu_theta", kExact},  {"lisht", kLibm},
      {"rrelu_eval", kExact},   {"rrelu_train", kExact},
      {"glu", kLibm},           {"glu_dim1", kLibm},
  };
  return m;
}

}  // namespace flx::testing
