#include <flx/flx.hpp>
#include <iostream>

using namespace flx;

int main() {
  Tensor x = tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});  // [1 3 5; 2 4 6]
  std::cout << vcat(x, x * 10) << "\n";
  std::cout << cumsum(x, 1) << "\n";
  std::cout << pad_reflect(selectdim(x, 0, 1), {2, 1}) << "\n";  // the row [2 4 6], mirrored
  std::vector<Tensor> halves = chunk(x, 2);  // along the last dim: views of x's storage
  std::cout << halves[0].shape() << " " << halves[1].shape() << "\n";
  std::cout << stack({x, x, x}, 1).shape() << "\n";
  Tensor img = rand(8, 8, 12, 1);  // (W, H, C, N)
  std::cout << upsample_bilinear(img, {.scale = {2, 2}}).shape() << "\n";
  std::cout << pixel_shuffle(img, 2).shape() << "\n";
  // Every op is differentiable: the gradient of sum(cumsum(x, 1)) counts,
  // for each element, the sums it is part of.
  auto [g] = gradient([](const Tensor& x) { return sum(cumsum(x, 1)); }, x);
  std::cout << g << "\n";
  std::cout << flx::std(x, {1}) << "\n";  // corrected, as Julia's: sqrt(4)
}
