// The seed's distributed data-parallel example (Flux's DistributedUtils):
// y = x³ learned by Chain(Dense(1 => 256, tanh), Dense(256 => 1)) with
// Adam(0.001), each rank on its share of the data, for 100 epochs.
//
//   mpiexec -n 2 ./ddp            # NCCLBackend when CUDA works, else MPIBackend
//   mpiexec -n 2 ./ddp --mpi      # MPIBackend whatever the devices
//
// Every rank prints nothing but its errors; rank 0 prints the loss over all
// ranks' data each epoch, as the seed does, and at the end whether every
// rank holds the same parameters.
#include <flx/distributed.hpp>
#include <flx/flx.hpp>

#include <cstdio>
#include <cstring>

using namespace flx;
namespace dist = flx::distributed;

int train(const dist::DistributedBackend& backend, Device dev) {
  const bool root = dist::local_rank(backend) == 0;
  if (root)
    std::printf("%s: %d workers, rank 0 on %s\n", backend.name().c_str(), dist::total_workers(backend),
                dev.str().c_str());

  // Every rank draws the same data; each then takes its share of it.
  set_seed(0);
  Tensor x = rand(1, 16 * dist::total_workers(backend));
  Tensor y = x * x * x;
  auto data = dist::DistributedDataContainer(backend, std::tuple{x, y});
  auto [xs, ys] = getobs(data, 0, numobs(data));
  xs = xs | dev;
  ys = ys | dev;

  // Different initial weights on every rank, made the same by synchronize.
  set_seed(1 + uint64_t(dist::local_rank(backend)));
  auto model = dist::synchronize(backend, dist::FluxDistributedModel(Chain(Dense(1, 256, flx::tanh), Dense(256, 1)) | dev), 0);
  auto opt = setup(dist::DistributedOptimizer(backend, Adam(0.001)), model);
  opt = dist::synchronize(backend, opt, 0);

  for (int epoch = 1; epoch <= 100; ++epoch) {
    auto [l, grad] = withgradient([&](const auto& m) { return mse(m(xs), ys); }, model);
    const double global = dist::allreduce(backend, l.item<double>(), dist::ReduceOp::Avg);
    if (root && (epoch <= 3 || epoch % 10 == 0)) std::printf("Epoch %d: Loss %.6f\n", epoch, global);
    update(opt, model, std::get<0>(grad));
  }

  // The parameters agree across ranks: each one's largest difference from rank 0's.
  double worst = 0;
  for (const Tensor& p : leaves(model)) {
    Tensor mine = p | cpu;
    Tensor root_copy = dist::bcast(backend, mine.to(Device::cpu()) * 1.0, 0);
    worst = std::max(worst, maximum(abs(mine - root_copy)).item<double>());
  }
  worst = dist::allreduce(backend, worst, dist::ReduceOp::Max);
  if (root) std::printf("ranks hold the same parameters: %s (largest difference %g)\n", worst == 0 ? "yes" : "no", worst);
  return worst == 0 ? 0 : 1;
}

int main(int argc, char** argv) {
  const bool force_mpi = argc > 1 && std::strcmp(argv[1], "--mpi") == 0;
  if (!force_mpi && functional("CUDA")) {
    auto backend = dist::initialize<dist::NCCLBackend>();
    return train(backend, backend.device());
  }
  return train(dist::initialize<dist::MPIBackend>(), Device::cpu());
}
