// Usable cores and the load of other threads on them (see cpu_load.hpp).
#include "cpu_load.hpp"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace flx::cpu_backend {
namespace {

// A cgroup CPU limit in cores (quota / period), or 0 when there is none.
double cgroup_cpu_limit() {
  // cgroup v2: "max 100000" or "200000 100000" in the process's cgroup.
  std::ifstream v2("/sys/fs/cgroup/cpu.max");
  std::string quota;
  double period = 0;
  if (v2 >> quota >> period && quota != "max" && period > 0) return std::stod(quota) / period;
  // cgroup v1: cfs_quota_us is -1 when unlimited.
  std::ifstream q("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), p("/sys/fs/cgroup/cpu/cpu.cfs_period_us");
  double qv = 0, pv = 0;
  if (q >> qv && p >> pv && qv > 0 && pv > 0) return qv / pv;
  return 0;
}

}  // namespace

int usable_cores() {
  int n = 0;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) n = CPU_COUNT(&set);
  if (n <= 0) n = int(std::thread::hardware_concurrency());
  if (double limit = cgroup_cpu_limit(); limit > 0) n = std::min(n, std::max(1, int(std::ceil(limit - 0.01))));
  return std::max(n, 1);
}

LoadMonitor::LoadMonitor() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) {
      if (int(mask_.size()) <= c) mask_.resize(size_t(c) + 1, false);
      mask_[size_t(c)] = true;
    }
  ncpu_ = std::max(1, int(CPU_COUNT(&set)));
  uint64_t b, t;
  available_ = read(b, t);
}

// Sums the busy and total jiffies of the CPUs in our mask.
bool LoadMonitor::read(uint64_t& busy, uint64_t& total) const {
  FILE* f = std::fopen("/proc/stat", "re");
  if (!f) return false;
  busy = total = 0;
  char line[512];
  bool any = false;
  while (std::fgets(line, sizeof line, f)) {
    if (std::strncmp(line, "cpu", 3) != 0) break;  // the cpu lines come first
    unsigned cpu;
    unsigned long long user, nice, sys, idle, iowait, irq, softirq, steal;
    if (std::sscanf(line, "cpu%u %llu %llu %llu %llu %llu %llu %llu %llu", &cpu, &user, &nice, &sys, &idle, &iowait,
                    &irq, &softirq, &steal) != 9)
      continue;  // the aggregate "cpu " line
    if (cpu >= mask_.size() || !mask_[cpu]) continue;
    uint64_t b = user + nice + sys + irq + softirq + steal;
    busy += b;
    total += b + idle + iowait;
    any = true;
  }
  std::fclose(f);
  return any;
}

double LoadMonitor::sample(int64_t wall_ns, int64_t our_cpu_ns) {
  uint64_t busy, total;
  if (!available_ || !read(busy, total)) return -1;
  bool had = have_prev_;
  uint64_t db = busy - busy_, dt = total - total_;
  busy_ = busy;
  total_ = total;
  have_prev_ = true;
  if (!had || dt == 0 || wall_ns <= 0) return -1;
  double busy_cores = double(ncpu_) * double(db) / double(dt);
  double ours = double(our_cpu_ns) / double(wall_ns);
  return std::max(0.0, busy_cores - ours);
}

}  // namespace flx::cpu_backend
