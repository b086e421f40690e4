// What the CPU backend's oneDNN paths share: the engine, the calling
// thread's stream and thread count, the bounded cache of primitives, host
// scratch memory, and the conversion of whatever oneDNN throws into a
// status. Not installed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <new>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cpu_common.hpp"

namespace flx::cpu_backend::onednn {

using dims = dnnl::memory::dims;
using tag = dnnl::memory::format_tag;

dnnl::engine& engine();
// The calling thread's stream: oneDNN's CPU streams are cheap, but one
// stream is not meant to be used from several threads at once.
dnnl::stream& stream();

// Makes oneDNN on the calling thread use n threads (its OpenMP count).
void use_threads(int n);

// The bytes of a cache key: the parameters a primitive was made for.
class Key {
 public:
  explicit Key(const char* kind) : bytes_(kind) { bytes_.push_back('\0'); }
  template <class T>
  Key& add(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes_.append(reinterpret_cast<const char*>(&v), sizeof v);
    return *this;
  }
  template <class T, size_t N>
  Key& add_array(const T (&a)[N]) {
    for (const T& v : a) add(v);
    return *this;
  }
  const std::string& str() const { return bytes_; }

 private:
  std::string bytes_;
};

// A bounded least-recently-used cache of made primitives (and what belongs
// with them), shared by all threads. make() runs outside the lock, so two
// threads may both make a missing entry; the one stored first stays.
// Entries are immutable once made and held by shared_ptr, so an entry that
// is evicted while another thread still executes it lives until it is done
// (oneDNN primitives may be executed from several threads at once).
template <class V>
class Cache {
 public:
  explicit Cache(size_t capacity) : capacity_(capacity) {}
  template <class Make>
  std::shared_ptr<const V> get(const Key& key, Make&& make) {
    {
      std::lock_guard lock(mutex_);
      auto it = index_.find(key.str());
      if (it != index_.end()) {
        order_.splice(order_.begin(), order_, it->second);
        return it->second->second;
      }
    }
    auto made = std::make_shared<const V>(make());
    std::lock_guard lock(mutex_);
    auto it = index_.find(key.str());
    if (it != index_.end()) return it->second->second;
    order_.emplace_front(key.str(), made);
    index_.emplace(key.str(), order_.begin());
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return made;
  }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<const V>>;
  size_t capacity_;
  std::mutex mutex_;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
};

// Entries each primitive cache keeps at most: enough for the distinct
// layers of a large network at a few batch sizes and thread counts.
inline constexpr size_t kCacheEntries = 256;

// Rounded up to 64 bytes: the parts of one scratch buffer stay aligned.
inline uint64_t aligned(uint64_t bytes) { return (bytes + 63) / 64 * 64; }

// Host memory for a call: the caller's workspace when it holds `bytes`,
// else a buffer of its own (64-byte aligned, freed with the object) from
// the backend's allocator, which keeps large blocks for reuse: a fresh
// buffer from the system each call (an LSTM's backward asks for 15 MB)
// paid page faults and page clearing for all of it every step.
class Scratch {
 public:
  Scratch(flx_mem given, uint64_t given_bytes, uint64_t bytes) {
    if (bytes == 0) return;
    if (given.buf && given_bytes >= bytes) {
      ptr_ = addr(given);
      return;
    }
    flx_buffer b = nullptr;
    if (alloc(nullptr, 0, size_t(bytes), nullptr, &b) != FLX_OK) throw std::bad_alloc();
    own_.reset(reinterpret_cast<char*>(b));
    ptr_ = own_.get();
  }
  char* at(uint64_t offset) const { return ptr_ + offset; }

 private:
  struct Free {
    void operator()(char* p) const { cpu_backend::free(nullptr, 0, reinterpret_cast<flx_buffer>(p), nullptr); }
  };
  std::unique_ptr<char, Free> own_;
  char* ptr_ = nullptr;
};

// dims of a (spatial..., channels, batch) tensor in oneDNN's order: batch,
// channels, then the spatial dims slowest first (D, H, W).
inline dims activation_dims(int nspatial, int64_t batch, int64_t channels, const int64_t* spatial) {
  dims d{batch, channels};
  for (int i = nspatial - 1; i >= 0; --i) d.push_back(spatial[i]);
  return d;
}
// The spatial parameters (strides, paddings, ...) slowest first, minus
// `minus` (1 turns flx's dilation into oneDNN's "dilates").
inline dims spatial_dims(int nspatial, const int64_t* v, int64_t minus = 0) {
  dims d;
  for (int i = nspatial - 1; i >= 0; --i) d.push_back(v[i] - minus);
  return d;
}
// The plain (row-major, dense) layout of a tensor of `rank` dims: flx's.
inline tag plain_tag(size_t rank) {
  switch (rank) {
    case 1:
      return tag::a;
    case 2:
      return tag::ab;
    case 3:
      return tag::abc;
    case 4:
      return tag::abcd;
    case 5:
      return tag::abcde;
    default:
      return tag::abcdef;
  }
}
inline dnnl::memory::desc plain_f32(const dims& d) {
  return dnnl::memory::desc(d, dnnl::memory::data_type::f32, plain_tag(d.size()));
}
// A memory object over flx's tensor (no copy).
inline dnnl::memory wrap(const dnnl::memory::desc& md, void* p) { return dnnl::memory(md, engine(), p); }

// A primitive with the reorders between flx's plain layouts and the ones
// it chose (format `any`), and the layout of its host scratch memory: its
// own scratchpad (scratchpad_mode::user, so that concurrent calls never
// share one) and a buffer per reordered argument. Or, when oneDNN refused
// the case (`refused`, with oneDNN's reason), nothing: the caller runs the
// direct loops.
struct Planned {
  struct Arg {
    int id;                           // DNNL_ARG_*
    dnnl::memory::desc plain, inner;  // flx's layout, the primitive's
    bool out;                         // written by the primitive
    bool reordered;                   // inner != plain: through `reorder` and the scratch at `offset`
    dnnl::reorder reorder;
    uint64_t offset;
  };
  bool refused = false;
  std::string why;
  std::string impl;  // oneDNN's implementation (onednn::describe), where it made one
  dnnl::primitive prim;
  std::vector<Arg> args;
  dnnl::memory::desc scratchpad;
  uint64_t scratch_bytes = 0;  // everything, the scratchpad first, the buffers in the order of the args

  // The argument `id` (nullptr when the primitive has none).
  const Arg* arg(int id) const;
  // The scratch a run needs when argument `id`, the last one laid out,
  // comes in the primitive's own layout (ArgPtr::inner): its buffer is not.
  uint64_t scratch_without(int id) const;
};
struct ArgSpec {
  int id;
  dnnl::memory::desc plain;
  bool out;
};
// The plan for primitive `prim` of `pd` (made with user scratchpad) and
// its arguments in flx's layouts.
Planned plan(const dnnl::primitive_desc& pd, dnnl::primitive prim, const std::vector<ArgSpec>& args);
// An attribute with the scratchpad in the caller's hands.
dnnl::primitive_attr user_scratchpad();
// Runs p on the calling thread's stream with the tensors at `ptrs` (an
// address per argument id; const ones are only read) and host scratch of
// p.scratch_bytes at `scratch`; waits for it. An argument marked `inner`
// is in the primitive's own layout already (no reorder).
struct ArgPtr {
  int id;
  void* ptr;
  bool inner = false;
};
void run(const Planned& p, const std::vector<ArgPtr>& ptrs, char* scratch);
// Runs argument `id`'s reorder of p alone, between flx's layout at `plain`
// and the primitive's at `inner`: into `inner` for an input, out of it for
// an output.
void reorder_arg(const Planned& p, int id, void* plain, void* inner);

// ---- pieces of a batch on flx's pool ------------------------------------------
// Every primitive is made for one thread, and flx's pool runs pieces of the
// batch in parallel (cpu_dnn_engine.cpp says why).

// At most this many pieces: enough for the threads of most machines, and
// few enough for the sums of a filter's gradient to stay a small part of
// its cost.
inline constexpr int64_t kMaxPieces = 16;
// Work (multiply-adds, or their worth) a piece should have at least:
// each call of a primitive costs some microseconds of its own (reorders,
// memory objects), so small layers take fewer, larger pieces.
inline constexpr int64_t kPieceWork = int64_t(1) << 22;

// The pieces of a batch, fixed by its size and the work of one image
// alone: `count` of them (at most most_pieces), the first `longer` one
// image longer than the rest.
struct BatchPieces {
  int64_t count, shorter, longer;
  BatchPieces(int64_t batch, int64_t work_per_image, int64_t most_pieces = kMaxPieces)
      : count(std::clamp(batch * std::max<int64_t>(work_per_image, 1) / kPieceWork, int64_t(1),
                         std::clamp(most_pieces, int64_t(1), std::min(batch, kMaxPieces)))),
        shorter(batch / count),
        longer(batch % count) {}
  int64_t first(int64_t k) const { return k * shorter + std::min(k, longer); }
};

// A call's plans for the pieces of a batch (one per piece size) and their
// host scratch, each piece's after the one before.
struct PiecePlans {
  BatchPieces pieces;
  std::shared_ptr<const Planned> plan[2];  // for pieces of size shorter + 1, of size shorter
  uint64_t scratch_each = 0;
  bool refused = false;  // oneDNN refused a piece's shape

  const Planned& of(int64_t k) const { return *plan[k < pieces.longer ? 0 : 1]; }
  uint64_t scratch_at(int64_t k) const { return uint64_t(k) * scratch_each; }
  uint64_t bytes() const { return scratch_at(pieces.count); }
};

// The plans for `pieces`: plan_for(n) gives the (cached) plan for a piece
// of n images, made for one thread.
template <class PlanFor>
PiecePlans piece_plans(const BatchPieces& pieces, PlanFor&& plan_for) {
  PiecePlans p{pieces, {}};
  use_threads(1);
  for (int i = 0; i < 2; ++i) {
    const int64_t n = p.pieces.shorter + (i == 0 ? 1 : 0);
    if (n == 0 || (i == 0 && p.pieces.longer == 0)) continue;  // no pieces of that size
    p.plan[i] = plan_for(n);
    if (p.plan[i]->refused) p.refused = true;
    else p.scratch_each = std::max(p.scratch_each, aligned(p.plan[i]->scratch_bytes));
  }
  return p;
}

// Runs body(k, first image of piece k) for every piece, in parallel on
// flx's pool, with oneDNN on one thread; rethrows the first exception a
// piece threw once all have run.
void run_pieces(const BatchPieces& pieces, const std::function<void(int64_t, int64_t)>& body);

// The pieces' partial sums added (a filter's or an LSTM's weight
// gradients): dst[i] = part(0)[i] + part(1)[i] + ... + part(count - 1)[i],
// in that order, so that each element's bits do not depend on the threads;
// over blocks of elements piece by piece, in loops that vectorise.
template <class Part>
void add_pieces(float* dst, int64_t n, int64_t count, Part part) {
  parallel_for(n, grain_of(count), [&](int64_t lo, int64_t hi) {
    const float* first = part(0);
    for (int64_t i = lo; i < hi; ++i) dst[i] = first[i];
    for (int64_t k = 1; k < count; ++k) {
      const float* p = part(k);
      for (int64_t i = lo; i < hi; ++i) dst[i] += p[i];
    }
  });
}

int status_of(dnnl_status_t s);

// Runs f (returning a status), turning what it throws into a status and a
// message naming `call`: nothing crosses the ABI, nothing aborts.
template <class F>
int guarded(const char* call, F&& f) noexcept {
  try {
    return f();
  } catch (const dnnl::error& e) {
    return fail(status_of(e.status), std::string(call) + ": oneDNN failed: " + e.what());
  } catch (const std::bad_alloc&) {
    return fail(FLX_ERR_OUT_OF_MEMORY, std::string(call) + ": out of host memory for oneDNN's buffers");
  } catch (const std::exception& e) {
    return fail(FLX_ERR_DEVICE, std::string(call) + ": " + e.what());
  } catch (...) {
    return fail(FLX_ERR_DEVICE, std::string(call) + ": an unknown exception");
  }
}

}  // namespace flx::cpu_backend::onednn
