// docs/layers.md: the initialisers and the layers' .init (.init_kernel, .init_recurrent_kernel) and .bias options.
#include <flx/flx.hpp>
#include <iostream>

using namespace flx;

int main() {
  set_seed(1);
  auto model = Chain(Conv({3, 3}, 3, 16, relu, {.pad = 1, .init = kaiming_normal, .bias = false}),
                     Dense(16, 10, {.init = [](const Shape& s) { return truncated_normal(s, {.std = 0.02}); }}));
  std::cout << glorot_uniform({3, 3, 16, 32}, {.gain = 2}).shape() << "\n";  // (3×3×16×32)
  std::cout << sparse_init({4, 3}, {.sparsity = 0.5}).shape() << "\n";  // (4×3)
  std::cout << std::get<0>(model.layers) << "\n";  // Conv((3, 3), 3 => 16, relu, pad=1, bias=false)  # 432 parameters
  auto lstm = LSTM(16, 32, {.bias = false, .init_recurrent_kernel = orthogonal});
  std::cout << lstm << "\n";  // LSTM(16 => 32; bias=false)  # 6_144 parameters
}
