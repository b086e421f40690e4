// GEMMs in oneDNN's own kernels: half products where the CPU has the
// instructions (cpu_native_halves.hpp says when), Float32 products of a
// megaflop or more (cpu_gemm_onednn.hpp says why). A BFloat16 product runs
// as oneDNN matmuls over BFloat16 operands, accumulating in Float32 and
// rounding each output once (with alpha and beta applied before that
// rounding: output scales and a sum post-op), on the same tiles as every
// CPU GEMM (cpu_gemm_tiles.hpp: fixed by the shape,
// each tile one single-threaded call over the whole inner dimension, the
// pool choosing only which thread runs it), so the bits stay the same at
// any thread count.
//
// flx's column-major C = op(A) op(B) is oneDNN's row-major
// Cᵀ = op(B)ᵀ op(A)ᵀ: a tile of C (rows m0:m1, columns n0:n1) is a matmul
// whose src is the tile's columns of op(B)ᵀ (n1 - n0 by k), whose weights
// are its rows of op(A)ᵀ (k by m1 - m0) and whose dst is n1 - n0 by m1 - m0,
// each a strided view of flx's buffers (the leading dimensions as strides,
// a transpose as swapped strides): nothing is copied but what oneDNN packs.
#include <algorithm>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu_common.hpp"
#include "cpu_dnn_engine.hpp"
#include "cpu_gemm_onednn.hpp"
#include "cpu_gemm_tiles.hpp"
#include "cpu_native_halves.hpp"
#include "backend_common/env_switch.hpp"

namespace flx::cpu_backend {
namespace {

using namespace onednn;
using md = dnnl::memory::desc;

// A tile's matmul, or why oneDNN's kernels do not take it natively.
struct TilePlan {
  std::string refused;  // "" when made and native
  std::string impl;     // what runs it (describe())
  dnnl::matmul prim;
  md src, weights, dst, scratchpad;
};

struct TileShape {
  int64_t tm, tn;
};

TilePlan make_tile_plan(const flx_gemm_desc& d, TileShape s) {
  const auto t = data_type(d.dtype);
  const int64_t k = d.k;
  const md src({s.tn, k}, t, d.trans_b ? dims{1, d.ldb} : dims{d.ldb, 1});
  const md weights({k, s.tm}, t, d.trans_a ? dims{1, d.lda} : dims{d.lda, 1});
  const md dst({s.tn, s.tm}, t, dims{d.ldc, 1});
  dnnl::primitive_attr attr = user_scratchpad();
  if (d.alpha != 1) attr.set_output_scales(0, {float(d.alpha)});
  if (d.beta != 0) {
    dnnl::post_ops po;
    po.append_sum(float(d.beta));
    attr.set_post_ops(po);
  }
  TilePlan p;
  try {
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(src, weights, dst), attr, engine());
    if (d.dtype == FLX_F32) {
      const std::string impl = pd.impl_info_str();
      if (impl.rfind("ref", 0) == 0) p.refused = "oneDNN has only its reference implementation (" + impl + ")";
    } else {
      p.refused = emulation_reason(pd, d.dtype);
    }
    p.impl = describe(pd);
    if (!p.refused.empty()) return p;
    p.prim = dnnl::matmul(pd);
    p.src = src;
    p.weights = weights;
    p.dst = dst;
    p.scratchpad = pd.scratchpad_desc();
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_out_of_memory) throw;
    p.refused = no_kernel("matmul", d.dtype, e);
  }
  return p;
}

Cache<TilePlan>& cache() {
  static Cache<TilePlan>& c = *new Cache<TilePlan>(kCacheEntries);  // never destroyed, as the engine
  return c;
}

// The cached plan of a tile of s of d's product, made for one thread.
std::shared_ptr<const TilePlan> tile_plan(const flx_gemm_desc& d, TileShape s) {
  Key key("matmul");
  key.add(d.dtype).add(d.trans_a).add(d.trans_b).add(s.tm).add(s.tn).add(d.k);
  key.add(d.lda).add(d.ldb).add(d.ldc).add(d.alpha).add(d.beta);
  use_threads(1);
  return cache().get(key, [&] { return make_tile_plan(d, s); });
}

// Host scratch for a matmul's scratchpad, one buffer per thread, grown as
// needed (a primitive may run on several threads at once: each brings its own).
char* thread_scratch(size_t bytes) {
  struct Buffer {
    char* p = nullptr;
    size_t size = 0;
    ~Buffer() { ::operator delete(p, std::align_val_t(64)); }
  };
  thread_local Buffer b;
  if (bytes > b.size) {
    ::operator delete(b.p, std::align_val_t(64));
    b.p = nullptr;
    b.size = 0;
    b.p = static_cast<char*>(::operator new(bytes, std::align_val_t(64)));
    b.size = bytes;
  }
  return b.p;
}

// Below this many flops a GEMM runs on the calling thread, as cpu_gemm.cpp's.
constexpr double kParallelGemmFlops = 1e6;

}  // namespace

namespace {

// d's product on oneDNN tiles (with hooks' fills and finishes around each,
// where given): false, with nothing written, when oneDNN would not run one
// of its tiles natively.
bool gemm_onednn_tiles(const flx_gemm_desc& d, const GemmTileHooks* hooks) {
  if (d.k <= 0) return false;
  const GemmTiles tiles = gemm_tiles(d.m, d.n, d.k, d.batch);
  // The tiles' distinct shapes (one to four, a few more where the cuts
  // align unevenly), each planned before any runs: if oneDNN would emulate
  // one of them, the whole product takes the Float32 path.
  struct Shaped {
    TileShape s;
    std::shared_ptr<const TilePlan> plan;
  };
  std::vector<Shaped> shapes;
  auto plan_of = [&](const GemmTiles::Tile& t) -> const TilePlan& {
    const TileShape s{t.m1 - t.m0, t.n1 - t.n0};
    for (const Shaped& x : shapes)
      if (x.s.tm == s.tm && x.s.tn == s.tn) return *x.plan;
    return *shapes.emplace_back(Shaped{s, tile_plan(d, s)}).plan;
  };
  for (int64_t i = 0; i < tiles.rows * tiles.cols; ++i)
    if (!plan_of(tiles.tile(i)).refused.empty()) return false;

  const size_t es = d.dtype == FLX_F32 ? 4 : 2;
  char* const A = addr(d.a);
  char* const B = addr(d.b);
  char* const C = addr(d.c);
  auto run_tiles = [&](int64_t lo, int64_t hi) {
    use_threads(1);
    dnnl::stream& s = stream();
    for (int64_t i = lo; i < hi; ++i) {
      const GemmTiles::Tile t = tiles.tile(i);
      const TilePlan* p = nullptr;
      for (const Shaped& x : shapes)
        if (x.s.tm == t.m1 - t.m0 && x.s.tn == t.n1 - t.n0) p = x.plan.get();
      const int64_t a_off = t.product * d.stride_a + (d.trans_a ? t.m0 * d.lda : t.m0);
      const int64_t b_off = t.product * d.stride_b + (d.trans_b ? t.n0 : t.n0 * d.ldb);
      const int64_t c_off = t.product * d.stride_c + t.m0 + t.n0 * d.ldc;
      std::unordered_map<int, dnnl::memory> args{
          {DNNL_ARG_SRC, wrap(p->src, B + size_t(b_off) * es)},
          {DNNL_ARG_WEIGHTS, wrap(p->weights, A + size_t(a_off) * es)},
          {DNNL_ARG_DST, wrap(p->dst, C + size_t(c_off) * es)}};
      if (const size_t bytes = p->scratchpad.get_size())
        args.emplace(DNNL_ARG_SCRATCHPAD, wrap(p->scratchpad, thread_scratch(bytes)));
      float* const tile_c = reinterpret_cast<float*>(C + size_t(c_off) * es);  // (hooks: Float32 only)
      if (hooks) hooks->before(tile_c, d.ldc, t.m0, t.m1, t.n1 - t.n0);
      p->prim.execute(s, args);
      s.wait();
      if (hooks) hooks->after(tile_c, d.ldc, t.m0, t.m1, t.n1 - t.n0);
    }
  };
  std::exception_ptr error;  // parallel_for's bodies must not throw: the first is rethrown
  std::mutex error_mutex;
  auto run = [&](int64_t lo, int64_t hi) {
    try {
      run_tiles(lo, hi);
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  const double flops = 2.0 * double(d.m) * double(d.n) * double(d.k) * double(d.batch);
  if (flops < kParallelGemmFlops) run_tiles(0, tiles.count());
  else parallel_for(tiles.count(), 1, run);
  if (error) std::rethrow_exception(error);
  return true;
}

}  // namespace

bool gemm_half_native(const flx_gemm_desc& d) { return native_halves_enabled() && gemm_onednn_tiles(d, nullptr); }

bool f32_gemm_on_onednn(const flx_gemm_desc& d) {
  static const bool enabled = backend_common::env_choice("FLX_CPU_F32_GEMM", {"onednn", "openblas"}, 0) == 0;
  return enabled && 2.0 * double(d.m) * double(d.n) * double(d.k) >= kOnednnF32Flops;
}

bool gemm_f32_onednn(const flx_gemm_desc& d, const GemmTileHooks* hooks) {
  return d.dtype == FLX_F32 && gemm_onednn_tiles(d, hooks);
}

HalfPath gemm_half_path(int32_t dtype) {
  if (!native_halves_enabled()) return {false, "FLX_CPU_NATIVE_HALVES=0"};
  // The first tile of a Dense layer's product, 256 outputs by a batch of
  // 64 over 784 inputs, as gemm_half_native would plan it (other shapes
  // may get another of oneDNN's kernels, on the same ISA).
  flx_gemm_desc d{};
  d.dtype = dtype;
  d.m = 256;
  d.n = 64;
  d.k = 784;
  d.alpha = 1;
  d.lda = d.m;
  d.ldb = d.k;
  d.ldc = d.m;
  d.batch = 1;
  const GemmTiles::Tile t = gemm_tiles(d.m, d.n, d.k, d.batch).tile(0);
  const auto p = tile_plan(d, {t.m1 - t.m0, t.n1 - t.n0});
  return {p->refused.empty(), p->refused.empty() ? p->impl : p->refused};
}

}  // namespace flx::cpu_backend
