// The examples of Flux's GPU guide, in C++ with flx: the basic example, a
// Dense layer and a Chain moved with fmap/gpu, and a custom model declared
// with FLX_FUNCTOR. Runs unchanged with or without a GPU.
#include <flx/flx.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>

using namespace flx;

struct ActorCritic {
  Tensor actor;
  Tensor critic;
};
FLX_FUNCTOR(ActorCritic, actor, critic)  // FLX_FUNCTOR(ActorCritic, actor) would move only actor

int main() {
  set_seed(2024);
  // ---- the basic example --------------------------------------------------
  Tensor W = rand(2, 5) | gpu;  // a 2×5 tensor on the GPU, if there is one
  Tensor b = rand(2) | gpu;
  auto predict = [&](const Tensor& x) { return matmul(W, x) + b; };
  auto loss = [&](const Tensor& x, const Tensor& y) { return sum(square(predict(x) - y)); };
  Tensor x = rand(5) | gpu, y = rand(2) | gpu;  // dummy data
  double l = loss(x, y).item<double>();         // ~ 3

  // the same loss by hand, from the values copied back to the host
  auto w = (W | cpu).to_vector<double>(), bv = (b | cpu).to_vector<double>();
  auto xv = (x | cpu).to_vector<double>(), yv = (y | cpu).to_vector<double>();
  double hand = 0;
  for (int i = 0; i < 2; ++i) {
    double p = bv[i];
    for (int j = 0; j < 5; ++j) p += w[size_t(i + 2 * j)] * xv[size_t(j)];
    hand += (p - yv[size_t(i)]) * (p - yv[size_t(i)]);
  }
  bool agree = std::fabs(l - hand) <= 1e-5 * std::max(1.0, hand);
  std::printf("basic example: loss = %.6f, by hand = %.6f (%s)\n", l, hand, agree ? "agree" : "DISAGREE");

  // Gradients work exactly as before.
  auto [gW, gb] = gradient([&](const Tensor& W_, const Tensor& b_) {
    return sum(square(matmul(W_, x) + b_ - y));
  }, W, b);
  std::cout << "dloss/db = " << (gb | cpu) << "\n";

  // ---- layers and models ----------------------------------------------------
  auto d = Dense(10, 5, sigmoid);
  d = fmap(gpu, d);
  std::cout << "d = " << d << "\n";
  std::cout << "d(x) has shape " << d(rand(10) | gpu).shape() << "\n";

  auto m = Chain(Dense(10, 5, sigmoid), Dense(5, 2), softmax);
  m = fmap(gpu, m);
  std::cout << "m = " << (m | cpu) << "\n";
  std::cout << "m(x) = " << (m(rand(10) | gpu) | cpu) << "\n";

  // ---- a custom model --------------------------------------------------------
  ActorCritic ac{ones(2, 2), ones(2)};
  ac = fmap(gpu, ac);  // declared with FLX_FUNCTOR, so both fields move
  std::cout << "ActorCritic.actor on " << ac.actor.device() << ", critic on " << ac.critic.device() << "\n";

  // ---- cu: CUDA or a clear error ------------------------------------------------
  try {
    auto dc = fmap(cu, d);
    std::cout << "cu: moved to " << dc.weight.device() << "\n";
  } catch (const BackendUnavailable& e) {
    std::cout << "cu: " << e.what() << "\n";
  }
  return agree ? 0 : 1;
}
