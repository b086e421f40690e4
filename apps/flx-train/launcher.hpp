// Is this process one of several that an MPI launcher started? Without
// --distributed each would train alone on all the data and write the same
// checkpoint directory, so flx-train refuses (main.cpp). Read from the
// environment the launchers give their processes; MPI is not started.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>

namespace flx_train {

struct LaunchedWorld {
  std::string variable;  // the environment variable that says so, e.g. OMPI_COMM_WORLD_SIZE
  int64_t size = 1;      // how many processes it started
};

namespace detail {
inline std::optional<int64_t> env_count(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < 1) return std::nullopt;
  return int64_t(n);
}
}  // namespace detail

// The first launcher's world found: OpenMPI (mpiexec, mpirun), MPICH's and
// Intel MPI's Hydra (PMI_SIZE), Slurm's srun (SLURM_STEP_NUM_TASKS, or
// SLURM_NTASKS in a task that srun started: SLURM_PROCID is set; a batch
// script's own shell has neither a step's count nor more than one task).
inline std::optional<LaunchedWorld> launched_world() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS"})
    if (auto n = detail::env_count(name)) return LaunchedWorld{name, *n};
  if (std::getenv("SLURM_PROCID"))
    if (auto n = detail::env_count("SLURM_NTASKS")) return LaunchedWorld{"SLURM_NTASKS", *n};
  return std::nullopt;
}

}  // namespace flx_train
