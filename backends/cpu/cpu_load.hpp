// How many cores the CPU backend may use, and how many of them other
// threads keep busy: the inputs of the thread pool's "no more threads than
// free cores" rule.
#pragma once

#include <cstdint>
#include <vector>

namespace flx::cpu_backend {

// Cores this process may run on: its affinity mask, capped by a cgroup
// (v2 cpu.max or v1 cfs quota) CPU limit. At least 1.
int usable_cores();

// Measures, between two calls of sample(), the cores that threads other
// than ours kept busy: the busy time of the CPUs in our affinity mask
// (/proc/stat, steal time included) minus the CPU time of our own threads.
// Busy competitors anywhere, in this process or another, count; so does
// time a hypervisor steals.
class LoadMonitor {
 public:
  LoadMonitor();
  // False when /proc/stat cannot be read (not Linux, a sandbox without it).
  bool available() const { return available_; }
  // our_cpu_ns: CPU time of our threads since the previous call. Returns the
  // cores others kept busy over that interval (>= 0), or a negative value
  // when there is no previous sample to compare with.
  double sample(int64_t wall_ns, int64_t our_cpu_ns);

 private:
  bool read(uint64_t& busy, uint64_t& total) const;
  std::vector<bool> mask_;  // CPUs we may run on, by index
  int ncpu_ = 1;
  bool available_ = false;
  bool have_prev_ = false;
  uint64_t busy_ = 0, total_ = 0;
};

}  // namespace flx::cpu_backend
