// Must NOT compile: synchronize updates an optimiser state in place, so a
// const one cannot be synchronized. The error must say to pass the state
// itself, not that a struct's fields are undeclared (what the generic
// synchronize of a model would otherwise say of OptState).
#include <flx/distributed.hpp>
#include <flx/flx.hpp>

int main() {
  auto model = flx::Dense(2, 3);
  const flx::OptState opt = flx::setup(flx::Adam(), model);
  flx::distributed::MPIBackend backend;
  auto synced = flx::distributed::synchronize(backend, opt, 0);
  (void)synced;
}
