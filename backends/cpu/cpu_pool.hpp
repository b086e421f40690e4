// The CPU backend's one thread pool: flx's loops and the GEMM tiles it hands
// OpenBLAS (single-threaded per call) all run on it, so no two pools ever
// spin against each other.
//
// Built to degrade gracefully on a shared machine:
//  - the calling thread takes part and chunks are claimed dynamically, so a
//    helper that the OS has not scheduled yet delays nothing: the caller
//    takes its chunks;
//  - helpers spin briefly (tens of microseconds) after a loop, then sleep
//    on a futex: an idle pool costs no CPU;
//  - it uses no more threads than free cores: every ~50 ms it measures how
//    many of our cores other threads keep busy (cpu_load.hpp) and leaves
//    those cores to them, since a loop split across a core we share waits
//    for a whole scheduler time slice at its end;
//  - work below a grain runs on the calling thread without waking anyone.
//
// Thread counts: FLX_NUM_THREADS, else OMP_NUM_THREADS (as PyTorch reads
// it), else the usable cores; flx::set_num_threads() at run time.
// FLX_ADAPTIVE_THREADS=0 turns the load measurement off (a fixed count).
#pragma once

#include <cstdint>
#include <type_traits>

namespace flx::cpu_backend {

// The threads a parallel loop uses now (1: the caller alone).
int pool_threads_now();
// The most threads loops may use, and setting it (n >= 1).
int pool_max_threads();
void set_pool_max_threads(int n);

// Turns the load measurement on or off (tests; FLX_ADAPTIVE_THREADS=0).
void set_pool_adaptive(bool on);
// Whether the load of other threads can be measured here (/proc/stat).
bool pool_load_measured();

using RangeFn = void (*)(void* ctx, int64_t begin, int64_t end);
void parallel_for_impl(int64_t n, int64_t grain, RangeFn fn, void* ctx);

// Runs f(begin, end) over sub-ranges covering [0, n), each of at least
// `grain` items (but the last), on up to pool_threads_now() threads. f must
// not throw. Ranges below 2 grains run inline on the caller.
// The sub-ranges change with the threads in use, so what f computes for an
// index must not depend on them: work whose result would (a sum over the
// range) is cut into pieces fixed by its size, and parallel_for runs over
// the pieces (cpu_gemm_tiles.hpp, the whole-tensor reduction), so that
// results are the same bits at any thread count and load.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (grain < 1) grain = 1;
  if (n < 2 * grain) {
    if (n > 0) f(int64_t(0), n);
    return;
  }
  using Fn = std::remove_reference_t<F>;
  parallel_for_impl(
      n, grain, [](void* c, int64_t b, int64_t e) { (*static_cast<Fn*>(c))(b, e); },
      const_cast<void*>(static_cast<const void*>(&f)));
}

}  // namespace flx::cpu_backend
