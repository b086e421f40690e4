// The CPU backend's thread pool (see cpu_pool.hpp for the policy).
#include "cpu_pool.hpp"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "cpu_load.hpp"
#include "flx/error.hpp"
#include "flx/threads.hpp"
#include "backend_common/env_switch.hpp"

namespace flx::cpu_backend {
namespace {

constexpr int64_t kSpinNs = 60'000;        // helpers spin this long after a loop, then sleep
constexpr int64_t kSampleNs = 50'000'000;  // the load of other threads is re-measured this often
constexpr int64_t kChunksPerThread = 4;    // dynamic chunks per thread, for balance
constexpr int64_t kMaxChunks = 0xffff;     // chunk indices are 16 bits of the claim word

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
int64_t cpu_ns(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return 0;
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// FLX_NUM_THREADS, else OMP_NUM_THREADS (its first entry); 0 when neither
// holds a positive count. A bad value is reported once and ignored.
int env_threads() {
  for (const char* name : {"FLX_NUM_THREADS", "OMP_NUM_THREADS"}) {
    const char* v = std::getenv(name);
    if (!v || !*v) continue;
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (end != v && n >= 1 && n <= 4096 && (*end == '\0' || *end == ',')) return int(n);
    std::fprintf(stderr, "flx: ignoring %s=\"%s\": expected a positive thread count\n", name, v);
  }
  return 0;
}
bool env_adaptive() { return backend_common::env_switch("FLX_ADAPTIVE_THREADS", true); }

thread_local bool t_in_loop = false;        // inside a pool loop (helpers always): nested loops run inline
thread_local int64_t t_sampled_at = -1;     // when this thread last measured the load
thread_local int64_t t_cpu_at_sample = 0;   // its CPU time then

class Pool {
 public:
  Pool() : adaptive_(env_adaptive()), usable_(usable_cores()) {
    int n = env_threads();
    max_ = n > 0 ? n : usable_;
    now_ = max_.load();
  }
  int threads_now() {
    std::unique_lock lock(mutex_, std::try_to_lock);
    if (lock) maybe_adapt();
    return now_;
  }
  int max_threads() const { return max_; }
  bool load_measured() const { return monitor_.available(); }
  void set_adaptive(bool on) {
    std::lock_guard lock(mutex_);
    adaptive_ = on;
    now_ = max_.load();
    last_sample_ns_ = 0;
  }
  void set_max_threads(int n) {
    std::lock_guard lock(mutex_);
    max_ = n;
    now_ = n;
    last_sample_ns_ = 0;  // measure afresh
  }
  void run(int64_t n, int64_t grain, RangeFn fn, void* ctx);

 private:
  struct alignas(64) Helper {
    std::atomic<uint32_t> signal{0};  // the loop (epoch) this helper is asked to join
    std::atomic<bool> sleeping{false};
    clockid_t clock{};
    std::thread thread;
  };

  // Claim word: epoch << 32 | next chunk << 16 | number of chunks.
  bool claim(uint32_t epoch, uint32_t& idx) {
    uint64_t w = claim_.load(std::memory_order_acquire);
    for (;;) {
      uint32_t next = uint32_t(w >> 16) & 0xffff, total = uint32_t(w) & 0xffff;
      if (uint32_t(w >> 32) != epoch || next >= total) return false;
      if (claim_.compare_exchange_weak(w, w + (uint64_t(1) << 16), std::memory_order_acq_rel)) {
        idx = next;
        return true;
      }
    }
  }
  // Runs chunks of loop `epoch` until none is left. The loop's fields are
  // read only after a chunk is claimed: until that chunk is done the
  // caller is still waiting, so they cannot change.
  void work(uint32_t epoch) {
    uint32_t idx;
    while (claim(epoch, idx)) {
      int64_t b = int64_t(idx) * chunk_, e = std::min(n_, b + chunk_);
      fn_(ctx_, b, e);
      done_.fetch_add(1, std::memory_order_release);
    }
  }
  void helper_main(Helper& h) {
    t_in_loop = true;
    uint32_t seen = 0;
    for (;;) {
      uint32_t g = h.signal.load(std::memory_order_acquire);
      if (g == seen) {
        int64_t start = now_ns();
        for (int spins = 1; (g = h.signal.load(std::memory_order_acquire)) == seen; ++spins) {
          cpu_relax();
          if (spins % 64 == 0 && now_ns() - start > kSpinNs) {
            // Sleep. The caller stores the signal, then reads `sleeping`;
            // we store `sleeping`, then read the signal (both seq_cst), so
            // one of us sees the other: no wake-up is lost.
            h.sleeping.store(true);
            while ((g = h.signal.load()) == seen) h.signal.wait(seen);
            h.sleeping.store(false);
            break;
          }
        }
      }
      seen = g;
      work(g);
    }
  }
  void ensure_helpers(int n) {
    while (int(helpers_.size()) < n) {
      auto h = std::make_unique<Helper>();
      Helper* hp = h.get();
      try {
        hp->thread = std::thread([this, hp] { helper_main(*hp); });
      } catch (const std::system_error&) {
        return;  // no more threads to be had: loops use fewer
      }
      if (pthread_getcpuclockid(hp->thread.native_handle(), &hp->clock) != 0) hp->clock = CLOCK_THREAD_CPUTIME_ID;
      hp->thread.detach();  // the pool lives until the process exits
      helpers_.push_back(std::move(h));
    }
  }
  // Every kSampleNs: leave the cores that other threads keep busy to them
  // (of those we may use; at most the maximum).
  void maybe_adapt() {
    if (!adaptive_ || max_ <= 1) return;
    int64_t t = now_ns();
    if (t - last_sample_ns_ < kSampleNs) return;
    int64_t mine = cpu_ns(CLOCK_THREAD_CPUTIME_ID), helpers = 0;
    for (auto& h : helpers_) helpers += cpu_ns(h->clock);
    // Our CPU time is only known when this thread also took the last sample.
    bool same_thread = t_sampled_at == last_sample_ns_;
    double others = monitor_.sample(t - last_sample_ns_, (mine - t_cpu_at_sample) + (helpers - helpers_cpu_));
    if (same_thread && others >= 0) {
      int busy = int(std::ceil(others - 0.4));  // a competitor using 0.4 core or less is not worth a core
      now_ = std::clamp(usable_ - busy, 1, max_.load());
    }
    last_sample_ns_ = t_sampled_at = t;
    t_cpu_at_sample = mine;
    helpers_cpu_ = helpers;
  }

  std::mutex mutex_;  // one loop at a time; a second caller runs its loop inline
  std::vector<std::unique_ptr<Helper>> helpers_;
  RangeFn fn_ = nullptr;
  void* ctx_ = nullptr;
  int64_t n_ = 0, chunk_ = 1;
  std::atomic<uint64_t> claim_{0};
  std::atomic<uint32_t> done_{0};
  uint32_t epoch_ = 0;
  std::atomic<int> max_{1}, now_{1};
  bool adaptive_;
  const int usable_;  // cores we may run on (affinity, cgroup limit)
  LoadMonitor monitor_;
  int64_t last_sample_ns_ = 0;
  int64_t helpers_cpu_ = 0;

  friend Pool& pool();
};

void Pool::run(int64_t n, int64_t grain, RangeFn fn, void* ctx) {
  if (t_in_loop) return fn(ctx, 0, n);
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock) return fn(ctx, 0, n);
  maybe_adapt();
  int threads = now_;
  if (threads > 1) ensure_helpers(threads - 1);
  threads = std::min<int>(threads, int(helpers_.size()) + 1);
  int64_t nchunks = std::min({n / grain, int64_t(threads) * kChunksPerThread, kMaxChunks});
  if (threads <= 1 || nchunks < 2) return fn(ctx, 0, n);
  chunk_ = (n + nchunks - 1) / nchunks;
  nchunks = (n + chunk_ - 1) / chunk_;
  fn_ = fn;
  ctx_ = ctx;
  n_ = n;
  done_.store(0, std::memory_order_relaxed);
  if (++epoch_ == 0) ++epoch_;  // 0 is every helper's initial "seen"
  claim_.store(uint64_t(epoch_) << 32 | uint64_t(nchunks), std::memory_order_release);
  int wake = int(std::min<int64_t>(threads - 1, nchunks - 1));
  for (int i = 0; i < wake; ++i) {
    Helper& h = *helpers_[size_t(i)];
    h.signal.store(epoch_);
    if (h.sleeping.load()) h.signal.notify_one();
  }
  t_in_loop = true;
  work(epoch_);
  t_in_loop = false;
  // Chunks still running were claimed by helpers that are running them.
  for (int spins = 0; done_.load(std::memory_order_acquire) != uint32_t(nchunks); ++spins) {
    if (spins < 4096) cpu_relax();
    else std::this_thread::yield();
  }
}

// One pool per process, never destroyed (its helpers may be asleep in it at
// exit); a child after fork() starts a new one, since it has no helpers.
Pool*& pool_ptr() {
  static Pool* p = nullptr;
  return p;
}
Pool& pool() {
  static std::once_flag once;
  std::call_once(once, [] {
    pool_ptr() = new Pool();
    pthread_atfork(nullptr, nullptr, [] { pool_ptr() = new Pool(); });
  });
  return *pool_ptr();
}

}  // namespace

int pool_threads_now() { return pool().threads_now(); }
int pool_max_threads() { return pool().max_threads(); }
void set_pool_max_threads(int n) { pool().set_max_threads(n); }
void set_pool_adaptive(bool on) { pool().set_adaptive(on); }
bool pool_load_measured() { return pool().load_measured(); }
void parallel_for_impl(int64_t n, int64_t grain, RangeFn fn, void* ctx) { pool().run(n, grain, fn, ctx); }

}  // namespace flx::cpu_backend
