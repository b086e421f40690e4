// A Chain learning y = x³ on [-1, 1] with Adam: the loss falls by 10× or
// more. Runs on whatever get_device/gpu finds (the CPU without a GPU).
#include <flx/flx.hpp>

#include <cstdio>

using namespace flx;

int main() {
  set_seed(7);
  Tensor x = (rand(1, 256) * 2.0 - 1.0) | gpu;  // 256 observations of 1 feature
  Tensor y = x * x * x;
  auto model = Chain(Dense(1, 32, flx::tanh), Dense(32, 32, flx::tanh), Dense(32, 1)) | gpu;
  auto opt = setup(Adam(0.01), model);
  double first = 0, last = 0;
  for (int epoch = 0; epoch <= 500; ++epoch) {
    auto [l, grads] = withgradient([&](const auto& m) { return mse(m(x), y); }, model);
    update(opt, model, std::get<0>(grads));
    last = l.item<double>();
    if (epoch == 0) first = last;
    if (epoch % 100 == 0) std::printf("epoch %3d  loss %.6f\n", epoch, last);
  }
  double ratio = first / last;
  std::printf("loss fell from %.6f to %.6f (%.1fx)\n", first, last, ratio);
  return ratio >= 10 ? 0 : 1;
}
