// Adam and AdamW (Optimisers.jl) computed independently of flx in Float64,
// for the tests that check flx's fused Adam steps (the frontend's descriptor
// and every backend's kernel) against it. The gradients must differ from step
// to step: with a constant gradient g the bias-corrected moments are g and g²
// whatever β is, so swapped or repeated β would not show.
#pragma once

#include <cmath>
#include <cstddef>
#include <vector>

#include "flx/flx.hpp"

namespace flx::testing {

struct AdamSettings {
  double eta = 0.001, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8;
  double lambda = 0;   // AdamW's weight decay; 0 is Adam
  bool couple = true;  // AdamW: x -= η(unit + λx) when coupled, else x -= η·unit + λx
};

// x after one step per entry of grads (each of x's size), from zero moments:
//   m ← β₁m + (1-β₁)g,  v ← β₂v + (1-β₂)g²,  unit = (m/(1-β₁ᵗ)) / (√(v/(1-β₂ᵗ)) + ϵ)
inline std::vector<double> adam_closed_form(std::vector<double> x, const std::vector<std::vector<double>>& grads,
                                            const AdamSettings& s) {
  std::vector<double> m(x.size(), 0.0), v(x.size(), 0.0);
  for (size_t t = 1; t <= grads.size(); ++t) {
    const std::vector<double>& g = grads[t - 1];
    const double c1 = 1 - std::pow(s.beta1, double(t)), c2 = 1 - std::pow(s.beta2, double(t));
    for (size_t i = 0; i < x.size(); ++i) {
      m[i] = s.beta1 * m[i] + (1 - s.beta1) * g[i];
      v[i] = s.beta2 * v[i] + (1 - s.beta2) * g[i] * g[i];
      const double unit = (m[i] / c1) / (std::sqrt(v[i] / c2) + s.epsilon);
      x[i] -= s.couple ? s.eta * (unit + s.lambda * x[i]) : s.eta * unit + s.lambda * x[i];
    }
  }
  return x;
}

// Gradients for `steps` steps of n elements whose magnitude alternates
// between about 1 and 0.01 (signs at random): β₁ and β₂ weight that history
// differently, so with η = 0.1 and β = (0.8, 0.95) steps that swap them, or
// use β₁ for both moments, end hundreds of Float16 ulps from the closed form.
inline std::vector<std::vector<double>> changing_gradients(int64_t n, int steps = 8) {
  set_seed(21);
  std::vector<std::vector<double>> out;
  for (int k = 0; k < steps; ++k)
    out.push_back(((rand(Float64, {n}) - 0.5) * (k % 2 ? 0.02 : 2.0)).to_vector<double>());
  return out;
}

}  // namespace flx::testing
