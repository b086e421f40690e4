#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

int main() {
  set_seed(1);
  Tensor W = rand(2, 5) | gpu;  // on the GPU if there is one, else the CPU
  Tensor b = rand(2) | gpu;

  auto predict = [&](const Tensor& x) { return matmul(W, x) + b; };
  auto loss = [&](const Tensor& x, const Tensor& y) { return sum(square(predict(x) - y)); };

  Tensor x = rand(5) | gpu, y = rand(2) | gpu;  // dummy data
  std::cout << "loss: " << loss(x, y).item<float>() << "\n";

  auto d = Dense(10, 5, sigmoid);
  d = fmap(gpu, d);
  std::cout << d << "\n";
  std::cout << "d(x): " << d(rand(10) | gpu).shape() << "\n";

  auto m = Chain(Dense(10, 5, sigmoid), Dense(5, 2), softmax);
  m = fmap(gpu, m);
  std::cout << (m(rand(10) | gpu) | cpu) << "\n";
}
