// The built-in CPU backend's entry, the one header of it that libflx
// includes: its core table, served to the registry at start-up like a
// plugin's, and its thread pool's size.
#pragma once

#include "flx/backend.h"

namespace flx::cpu_backend {
const flx_backend* core();
// Its thread pool, behind flx::num_threads and set_num_threads
// (src/threads.cpp; cpu_pool.hpp has the rules).
int pool_max_threads();
int pool_threads_now();
void set_pool_max_threads(int n);
}
