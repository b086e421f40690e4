#include <flx/flx.hpp>
#include <iostream>
using namespace flx;

int main() {
  Tensor W = rand(2, 5) | gpu;          // 2×5 Float32, on the GPU if there is one
  Tensor b = rand(2) | gpu;
  auto predict = [&](const Tensor& x) { return matmul(W, x) + b; };
  auto loss = [&](const Tensor& x, const Tensor& y) { return sum(square(predict(x) - y)); };
  Tensor x = rand(5) | gpu, y = rand(2) | gpu;
  std::cout << loss(x, y).item<float>() << "\n";   // about 4

  auto model = Chain(Dense(10, 5, sigmoid), Dense(5, 2), softmax);
  std::cout << model << "\n";
  auto opt = setup(Adam(1e-3), model);
  Tensor xs = rand(10, 64), ys = onehotbatch(std::vector<int64_t>(64, 1), 2);
  auto [l, grads] = withgradient([&](const auto& m) { return crossentropy(m(xs), ys); }, model);
  update(opt, model, std::get<0>(grads));
}
