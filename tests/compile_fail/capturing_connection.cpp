// A connection that captures a tensor must not compile: gpu() and setup()
// would never see it (the error must say what a connection may be).
#include <flx/flx.hpp>

int main() {
  flx::Tensor scale = flx::ones(2);
  auto m = flx::SkipConnection(flx::Dense(2, 2), [scale](const flx::Tensor& a, const flx::Tensor& b) { return a * scale + b; });
  return int(m(flx::ones(2)).numel());
}
