// The most host memory one process can ever fill: the machine's RAM and
// swap together, or its cgroup's limit (memory.max and memory.swap.max,
// cgroup v2) where that is lower. Where the kernel overcommits without limit
// (vm.overcommit_memory=1, as on the H100 machines flx was first run on),
// malloc grants terabytes and the first write ends in the OOM killer or
// hours of paging; flx refuses such an allocation up front with a typed
// OutOfMemory instead (the CPU backend's alloc, host_vector).
#pragma once

#include <sys/sysinfo.h>

#include <cstdint>
#include <fstream>
#include <string>

namespace flx::backend_common {

namespace detail {
// A cgroup v2 limit file's value; UINT64_MAX for "max", a missing file or junk.
inline uint64_t cgroup_limit(const char* path) {
  std::ifstream f(path);
  std::string v;
  if (!(f >> v) || v == "max") return UINT64_MAX;
  try {
    return std::stoull(v);
  } catch (...) {
    return UINT64_MAX;
  }
}
}  // namespace detail

inline uint64_t host_memory_limit() {
  static const uint64_t limit = [] {
    uint64_t machine = UINT64_MAX;
    struct sysinfo si {};
    if (sysinfo(&si) == 0) machine = (uint64_t(si.totalram) + si.totalswap) * si.mem_unit;
    const uint64_t mem = detail::cgroup_limit("/sys/fs/cgroup/memory.max");
    if (mem == UINT64_MAX) return machine;
    const uint64_t swap = detail::cgroup_limit("/sys/fs/cgroup/memory.swap.max");
    const uint64_t group = swap == UINT64_MAX || mem + swap < mem ? UINT64_MAX : mem + swap;
    return group < machine ? group : machine;
  }();
  return limit;
}

}  // namespace flx::backend_common
