#include <flx/flx.hpp>
#include <iostream>

using namespace flx;

int main() {
  auto model = Chain(Conv({3, 3}, 3, 16, {.pad = 1}), GroupNorm(16, 4, relu), Upsample({.scale = {2}}));
  std::cout << model << "\n";
  std::cout << outputsize(model, Shape{32, 32, 3, 8}) << "\n";
  try {
    GroupNorm(16, 4)(rand(8, 8, 12, 1));
  } catch (const DimensionMismatch& e) {
    std::cout << std::string(e.what()).substr(0, std::string(e.what()).find(" [")) << "\n";
  }
  auto [g] = gradient([](const auto& m) { return sum(m(rand(8, 8, 3, 2))); }, model);
  std::cout << std::get<1>(g.layers).scale.shape() << "\n";
  for (const auto& [name, t] : state(model)) std::cout << name << " " << t.shape() << "\n";
}
