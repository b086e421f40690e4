// Must NOT compile: Model holds tensors but its fields were never declared,
// so fmap (and gpu/cpu) could not see them. Flux ≤ 0.14 silently left such
// models on the CPU; flx refuses at compile time.
#include <flx/flx.hpp>

struct Model {
  flx::Tensor w;
  flx::Tensor b;
};

int main() {
  Model m{flx::ones(2, 2), flx::zeros(2)};
  auto m2 = flx::fmap([](const flx::Tensor& t) { return t; }, m);
  (void)m2;
}
