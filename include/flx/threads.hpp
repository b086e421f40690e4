// Threads of the CPU backend (its elementwise loops, reductions and GEMM),
// as torch.get_num_threads / torch.set_num_threads.
//
// The default is FLX_NUM_THREADS, else OMP_NUM_THREADS, else the cores this
// process may use (affinity mask and cgroup CPU limit). Up to that maximum
// the backend uses no more threads than there are free cores: cores that
// other threads or processes keep busy are left to them, re-measured about
// every 50 ms (FLX_ADAPTIVE_THREADS=0 turns this off).
#pragma once

#include "flx/export.hpp"

namespace flx {

FLX_API int num_threads();            // the most threads CPU work uses
FLX_API int num_threads_in_use();     // the threads it uses now, after leaving busy cores alone
FLX_API void set_num_threads(int n);  // n >= 1; throws ArgumentError otherwise

}  // namespace flx
