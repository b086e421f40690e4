#include <flx/flx.hpp>
#include <iostream>
using namespace flx;

int main() {
  Tensor x = tensor(std::vector<float>{-4, -1, -0.25, 0.5, 2, 7});
  std::cout << hardsigmoid(x) << "\n";
  std::cout << softshrink(x) << "\n";        // λ = 0.5
  std::cout << trelu(x, 0.5) << "\n";        // θ = 0.5 (default 1)
  auto model = Chain(Dense(6, 8, selu), glu, Dense(4, 2, logsigmoid));
  std::cout << model << "\n";
}
