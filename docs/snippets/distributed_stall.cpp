#include <flx/distributed.hpp>
#include <flx/flx.hpp>

#include <csignal>

using namespace flx;
namespace dist = flx::distributed;

int main() {
  auto backend = dist::initialize<dist::MPIBackend>({.timeout = 2});  // seconds per collective
  Tensor x = ones(4);
  dist::allreduce(backend, x);
  if (dist::local_rank(backend) == 1) std::raise(SIGSTOP);  // as `kill -STOP` would
  dist::allreduce(backend, x);  // rank 0 waits for rank 1 here, 2 s at most
}
