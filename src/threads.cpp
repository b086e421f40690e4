// flx::num_threads and set_num_threads (flx/threads.hpp): the built-in CPU
// backend's thread pool, through its entry (backends/cpu/cpu_backend.hpp).
#include "flx/threads.hpp"

#include "cpu/cpu_backend.hpp"
#include "flx/error.hpp"

namespace flx {

int num_threads() { return cpu_backend::pool_max_threads(); }
int num_threads_in_use() { return cpu_backend::pool_threads_now(); }
void set_num_threads(int n) {
  FLX_CHECK(n >= 1, ArgumentError, "set_num_threads: expected a thread count of at least 1; got ", n);
  cpu_backend::set_pool_max_threads(n);
}

}  // namespace flx
