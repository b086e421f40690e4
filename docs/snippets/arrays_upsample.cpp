#include <flx/flx.hpp>
#include <iostream>

using namespace flx;

int main() {
  Tensor x = rand(32, 32, 3, 1);  // (W, H, C, N)
  std::cout << upsample_nearest(x, {.scale = {2, 2}}).shape() << "\n";                          // (64×64×3×1)
  std::cout << upsample_nearest(x, {.size = {96, 64}}).shape() << "\n";                         // (96×64×3×1)
  std::cout << upsample_bilinear(x, {.scale = {2.5, 2.5}}).shape() << "\n";                     // (80×80×3×1)
  std::cout << upsample_bilinear(x, {.size = {64, 48}, .align_corners = false}).shape() << "\n";  // (64×48×3×1)
}
