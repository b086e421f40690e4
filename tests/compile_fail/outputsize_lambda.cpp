// outputsize of a model holding a lambda must not compile (a lambda has no
// shape rule, and outputsize computes nothing to find one out), and the
// error must say what to do.
#include <flx/flx.hpp>

int main() {
  auto m = flx::Chain(flx::Dense(3, 2), [](const flx::Tensor& x) { return x * 2.0; });
  return int(flx::outputsize(m, flx::Shape{3, 4})[0]);
}
