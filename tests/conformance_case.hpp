// A case of the device conformance suite (tests/test_conformance.cpp): an
// op (or layer, or loss) of some inputs, run on a device and on the CPU,
// forward and backward, and the Float16/BFloat16 tolerances of a case, in
// ulps. Shared by the files that list cases.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "ulps.hpp"

namespace flx::testing {

struct Case {
  std::string name;
  std::vector<Shape> shapes;
  std::function<Tensor(const std::vector<Tensor>&)> f;
  bool differentiable = true;
  double lo = -1, hi = 1;  // input range
  // Backends that need not pass the case yet ("OpenCL"): NotImplemented
  // from one of them skips the case there, with its reason. Every other
  // backend must pass it, but for a plugin of an older ABI minor than this
  // libflx's, which need not run what came after it (skip_reason).
  std::vector<std::string> not_required_on = {};
};

struct HalfUlps {
  UlpTolerance forward, gradient;
};

// The array operations (include/flx/arrays.hpp, and sin/cos/erf,
// logsumexp, var/std, batched_mul): conformance_array_cases.cpp, with
// their half tolerances (a case not named there is exact: 0 ulps).
std::vector<Case> array_op_cases();
const std::map<std::string, HalfUlps>& array_op_half_ulps();
// NNlib's activations of tests/conformance_activation_cases.cpp, with their
// half tolerances (every case named there).
std::vector<Case> activation_cases();
const std::map<std::string, HalfUlps>& activation_half_ulps();
// The layers of tests/conformance_layer_cases.cpp.
std::vector<Case> layer_cases();
const std::map<std::string, HalfUlps>& layer_half_ulps();
// GRUv3, Recurrence, EmbeddingBag, WeightNorm and the attention's additive
// bias: conformance_seq_cases.cpp, with their half tolerances (every case
// named there).
std::vector<Case> sequence_layer_cases();
const std::map<std::string, HalfUlps>& sequence_layer_half_ulps();

// Every loss of Flux.Losses beyond mse and the cross-entropies, and
// ctc_loss's CPU round trip: conformance_loss_cases.cpp, with their half
// tolerances (every case named there).
std::vector<Case> loss_cases();
const std::map<std::string, HalfUlps>& loss_half_ulps();

}  // namespace flx::testing
