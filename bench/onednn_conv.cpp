// oneDNN's own figure for bench_cnn's 3×3 convolution (issue 19): the same
// convolution (N=32, C=64 -> 64, 56×56, pad 1, stride 1, no bias, f32) with
// oneDNN's primitives used directly, at their best: every tensor in the
// layout the primitive chose (format_tag::any, so no reorder is timed),
// convolution_direct (as flx's CPU backend asks for), forward_training.
// Prints JSON lines as bench_cnn does (names onednn_conv3x3_fwd, _bwd_data,
// _bwd_weights, _bwd = data + weights, _fwd_bwd = all three), medians of
// interleaved timed runs; bench/compare_cnn.py divides flx's GFLOP/s by these.
// _fwd_plain and _bwd_plain add reorders from and to plain layouts (nchw,
// oihw) at each call (dnnl::reorder made at each call: its primitive cache
// keeps that cheap), dy once for each backward primitive. flx's CPU backend
// reorders the same operands, but dy once for both (conv_backward).
//
//   onednn_conv [--threads N] [--repeats N] [--min-time S] [--small]
//
// --threads sets omp_set_num_threads (default: FLX_NUM_THREADS, else
// OpenMP's own default); --small: N=2, C=8 -> 8, 12×12 (a smoke test).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "dnnl.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using dnnl::memory;
using tag = dnnl::memory::format_tag;
using dt = dnnl::memory::data_type;

memory filled(const memory::desc& md, const dnnl::engine& eng, uint64_t seed) {
  memory m(md, eng);
  float* p = static_cast<float*>(m.get_data_handle());
  const size_t n = md.get_size() / sizeof(float);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  for (size_t i = 0; i < n; ++i) p[i] = d(rng);  // padding of blocked layouts too: any finite value
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 0, repeats = 7;
  double min_time = 0.3;
  bool small = false;
  if (const char* e = std::getenv("FLX_NUM_THREADS")) threads = std::atoi(e);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "onednn_conv: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--threads") threads = std::atoi(next().c_str());
    else if (a == "--repeats") repeats = std::max(1, std::atoi(next().c_str()));
    else if (a == "--min-time") min_time = std::atof(next().c_str());
    else if (a == "--small") small = true;
    else {
      std::fprintf(stderr, "usage: onednn_conv [--threads N] [--repeats N] [--min-time S] [--small]\n");
      return 2;
    }
  }
  if (threads > 0) omp_set_num_threads(threads);
  const memory::dim N = small ? 2 : 32, C = small ? 8 : 64, K = small ? 8 : 64, HW = small ? 12 : 56;

  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const memory::desc src_any({N, C, HW, HW}, dt::f32, tag::any), wei_any({K, C, 3, 3}, dt::f32, tag::any),
      dst_any({N, K, HW, HW}, dt::f32, tag::any);
  const memory::dims strides{1, 1}, pad{1, 1};

  const dnnl::convolution_forward::primitive_desc fwd_pd(
      dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct, src_any,
                                      wei_any, dst_any, strides, pad, pad),
      eng);
  const dnnl::convolution_backward_data::primitive_desc bwd_data_pd(
      dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, src_any, wei_any, dst_any, strides,
                                            pad, pad),
      eng, fwd_pd);
  const dnnl::convolution_backward_weights::primitive_desc bwd_w_pd(
      dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, src_any, wei_any, dst_any,
                                               strides, pad, pad),
      eng, fwd_pd);

  // Each primitive's operands in its own chosen layout.
  memory src = filled(fwd_pd.src_desc(), eng, 1), wei = filled(fwd_pd.weights_desc(), eng, 2),
         dst(fwd_pd.dst_desc(), eng);
  memory bd_ddst = filled(bwd_data_pd.diff_dst_desc(), eng, 3), bd_wei = filled(bwd_data_pd.weights_desc(), eng, 4),
         bd_dsrc(bwd_data_pd.diff_src_desc(), eng);
  memory bw_src = filled(bwd_w_pd.src_desc(), eng, 5), bw_ddst = filled(bwd_w_pd.diff_dst_desc(), eng, 6),
         bw_dwei(bwd_w_pd.diff_weights_desc(), eng);

  dnnl::convolution_forward fwd(fwd_pd);
  dnnl::convolution_backward_data bwd_data(bwd_data_pd);
  dnnl::convolution_backward_weights bwd_w(bwd_w_pd);
  auto run_fwd = [&] { fwd.execute(s, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst}}); };
  auto run_bd = [&] {
    bwd_data.execute(s, {{DNNL_ARG_DIFF_DST, bd_ddst}, {DNNL_ARG_WEIGHTS, bd_wei}, {DNNL_ARG_DIFF_SRC, bd_dsrc}});
  };
  auto run_bw = [&] {
    bwd_w.execute(s, {{DNNL_ARG_SRC, bw_src}, {DNNL_ARG_DIFF_DST, bw_ddst}, {DNNL_ARG_DIFF_WEIGHTS, bw_dwei}});
  };

  // What flx's CPU backend does around the same primitives: operands in the
  // plain layouts (flx's WHCN is oneDNN's nchw, its weights oihw), reordered
  // into the primitive's layouts and its outputs reordered back.
  const memory::desc x_md({N, C, HW, HW}, dt::f32, tag::nchw), w_md({K, C, 3, 3}, dt::f32, tag::oihw),
      y_md({N, K, HW, HW}, dt::f32, tag::nchw);
  memory x_pl = filled(x_md, eng, 1), w_pl = filled(w_md, eng, 2), y_pl(y_md, eng), dy_pl = filled(y_md, eng, 3),
         dx_pl(x_md, eng), dw_pl(w_md, eng);
  auto copy = [&](memory& from, memory& to) {
    if (from.get_desc() != to.get_desc()) dnnl::reorder(from, to).execute(s, from, to);
  };
  auto run_fwd_plain = [&] {
    copy(x_pl, src), copy(w_pl, wei), run_fwd(), copy(dst, y_pl);
  };
  auto run_bwd_plain = [&] {
    copy(dy_pl, bd_ddst), copy(w_pl, bd_wei), run_bd(), copy(bd_dsrc, dx_pl);
    copy(x_pl, bw_src), copy(dy_pl, bw_ddst), run_bw(), copy(bw_dwei, dw_pl);
  };

  const double f = 2.0 * double(N * K * C * 9 * HW * HW);
  struct B {
    const char* name;
    std::function<void()> body;
    double flops;
    std::string impl;
    int64_t iters = 1;
    std::vector<double> ns;
  };
  std::vector<B> bs = {
      {"onednn_conv3x3_fwd", run_fwd, f, fwd_pd.impl_info_str()},
      {"onednn_conv3x3_bwd_data", run_bd, f, bwd_data_pd.impl_info_str()},
      {"onednn_conv3x3_bwd_weights", run_bw, f, bwd_w_pd.impl_info_str()},
      {"onednn_conv3x3_bwd", [&] { run_bd(), run_bw(); }, 2 * f, ""},
      {"onednn_conv3x3_fwd_bwd", [&] { run_fwd(), run_bd(), run_bw(); }, 3 * f, ""},
      {"onednn_conv3x3_fwd_plain", run_fwd_plain, f, "reorders from/to nchw, oihw"},
      {"onednn_conv3x3_bwd_plain", run_bwd_plain, 2 * f, "reorders from/to nchw, oihw"},
  };
  auto time_ns = [&](B& b, int64_t iters) {
    s.wait();
    auto t0 = Clock::now();
    for (int64_t i = 0; i < iters; ++i) b.body();
    s.wait();
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(iters);
  };
  for (B& b : bs) {  // warm-up and calibration
    double best = 1e300, spent = 0;
    for (int k = 0; k < 2 || (spent < 0.5e9 * min_time && k < 1000); ++k) {
      const double ns = time_ns(b, 1);
      best = std::min(best, ns), spent += ns;
    }
    b.iters = std::max<int64_t>(1, int64_t(min_time * 1e9 / best));
  }
  for (int r = 0; r < repeats; ++r)
    for (B& b : bs) b.ns.push_back(time_ns(b, b.iters));
  for (B& b : bs) {
    std::sort(b.ns.begin(), b.ns.end());
    const size_t n = b.ns.size();
    const double median = n % 2 ? b.ns[n / 2] : 0.5 * (b.ns[n / 2 - 1] + b.ns[n / 2]);
    std::printf(
        "{\"name\": \"%s\", \"ns_per_iter\": %.1f, \"min_ns\": %.1f, \"max_ns\": %.1f, \"repeats\": %zu, "
        "\"iters\": %lld, \"device\": \"CPU\", \"threads\": %d, \"small\": %s, \"flops\": %.0f, \"gflops\": %.3f, "
        "\"impl\": \"%s\"}\n",
        b.name, median, b.ns.front(), b.ns.back(), n, static_cast<long long>(b.iters), omp_get_max_threads(),
        small ? "true" : "false", b.flops, b.flops / median,
        b.impl.c_str());
  }
  std::fflush(stdout);
  return 0;
}
