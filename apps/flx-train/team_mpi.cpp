#include "team_mpi.hpp"

#include <algorithm>
#include <cstdio>

namespace flx_train {

namespace dist = flx::distributed;

namespace {

// The GPU backend's name, or "CPU": --device, else get_device()'s.
std::string backend_of(const Args& a) {
  return a.device.empty() ? std::string(flx::get_device().backend()) : a.device;
}

dist::DistributedBackend start(const Args& a) {
  if (backend_of(a) == "CUDA") return dist::initialize<dist::NCCLBackend>();
  return dist::initialize<dist::MPIBackend>();
}

flx::Device pick_device(const Args& a, const dist::DistributedBackend& b) {
  const std::string name = backend_of(a);
  if (name == "CUDA") return dist::get_distributed_backend<dist::NCCLBackend>().device();
  if (name == "CPU") return flx::Device::cpu();
  if (a.ordinal_given) return flx::get_device(name, a.ordinal);
  const auto n = int(flx::devices(name).size());
  return flx::get_device(name, dist::node_rank(b) % std::max(n, 1));
}

}  // namespace

MpiTeam::MpiTeam(const Args& a) : backend_(start(a)), device_(pick_device(a, backend_)) {}

int MpiTeam::fail(const std::string& message) const { dist::abort(backend_, "flx-train: " + message, 1); }

int MpiTeam::fail_to_start(const std::string& message) {
  if (dist::initialized<dist::MPIBackend>())
    dist::abort(dist::get_distributed_backend<dist::MPIBackend>(), "flx-train: " + message, 1);
  std::fprintf(stderr, "flx-train: %s\n", message.c_str());
  return 1;
}

std::string MpiTeam::describe() const {
  return ", " + std::to_string(size()) + " rank" + (size() == 1 ? "" : "s") + " (" + backend_.name() + ")";
}

}  // namespace flx_train
