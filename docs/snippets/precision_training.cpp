#include <flx/flx.hpp>
#include <iostream>
using namespace flx;

int main() {
  set_seed(1);
  Tensor x = rand(4, 256);
  Tensor y = sum(x, {0});                                        // learn the sum of the features

  // BFloat16: the model converted, Float32 copies of its weights in the optimiser state.
  auto model = bf16(Chain(Dense(4, 16, relu), Dense(16, 1)));
  auto opt = setup(MixedPrecision(Float32, Adam(1e-2)), model);
  const Tensor xb = x.to(BFloat16);                              // data in the model's precision
  Tensor l;
  for (int step = 1; step <= 300; ++step) {
    auto [loss, grads] = withgradient([&](const auto& m) { return mse(m(xb), y); }, model);
    update(opt, model, std::get<0>(grads));
    l = loss;
  }
  std::cout << opt.rule() << "\n";  // MixedPrecision{Float32, Adam}(Adam(0.01, (0.9, 0.999), 1e-08))
  std::cout << std::get<0>(model.layers).weight.dtype() << " weights, " << l.dtype() << " loss\n";  // BFloat16 weights, Float32 loss

  // Float16: the same, with the loss scaled dynamically (PyTorch's GradScaler).
  auto half = f16(Chain(Dense(4, 16, relu), Dense(16, 1)));
  auto hopt = setup(MixedPrecision(Float32, Adam(1e-2)), half);
  LossScaler scaler;                                             // 2^16, x2 after 2000 good steps, x0.5 on overflow
  const Tensor xh = x.to(Float16);
  int taken = 0;
  for (int step = 1; step <= 300; ++step) {
    auto [loss, grads] = withgradient([&](const auto& m) { return scaler.scale(mse(m(xh), y)); }, half);
    taken += scaler.update(hopt, half, std::get<0>(grads));      // false: skipped (overflow), nothing changed
  }
  std::cout << (mse(half(xh), y).item<double>() < 0.05) << " " << (taken > 290) << "\n";  // 1 1
}
