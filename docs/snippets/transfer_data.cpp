#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

int main() {
  // 10 observations of 4 features (columns), and their labels.
  Tensor X = reshape(tensor(std::vector<float>(40, 1.0f), {40}), {4, 10});
  Tensor Y = tensor(std::vector<int64_t>{0, 1, 2, 0, 1, 2, 0, 1, 2, 0}, {10});

  // 1. Batches are moved one at a time, the next while the current computes.
  auto gpu_train_loader = DataLoader(std::tuple{X, Y}, {.batchsize = 4, .shuffle = true, .seed = 1}) | gpu;
  std::cout << gpu_train_loader.size() << " batches per epoch\n";
  for (int epoch = 1; epoch <= 2; ++epoch)
    for (auto [x, y] : gpu_train_loader)
      std::cout << "epoch " << epoch << ": x " << x.shape() << ", y " << y.shape() << "\n";

  // 2. All data moved first; batches are gathered on the device.
  auto loader = DataLoader(std::tuple{X, Y} | gpu, {.batchsize = 5});
  for (auto [x, y] : loader) std::cout << "on " << get_device(x) << ": " << x.shape() << "\n";

  // mapobs: a transformation applied to each batch as it is made.
  auto scaled = DataLoader(mapobs([](const Tensor& x) { return x * 2.0; }, X), {.batchsize = 10});
  for (Tensor x : scaled) std::cout << "sum " << sum(x).item<float>() << "\n";
}
