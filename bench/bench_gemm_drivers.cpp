// The Float32 GEMM drivers that could run the CPU backend's products,
// measured against each other on the MLP's training step (issue 30, item 2:
// "Float32 GEMM, packed once"; the target: the step at batch 512 within
// 1.05x of its GEMMs alone, each as one multi-threaded OpenBLAS call).
//
//   mlp_step           one training step of bench_flx's MLP, Chain(Dense(784,
//                      256, relu), Dense(256, 256, relu), Dense(256, 10)):
//                      withgradient of logitcrossentropy, then Adam's update
//   gemms_openblas_mt  the step's 8 products (3 forward, 3 weight gradients,
//                      2 input gradients: the data needs none), each one
//                      OpenBLAS call on --threads threads: the target's reference
//   gemms_flx          the same products through flx::matmul: the CPU backend's
//                      tiles, fixed by the shape, each one single-threaded
//                      OpenBLAS call that packs its own panels
//   gemms_onednn       oneDNN's f32 matmul primitives (made once), on OpenMP
//   gemms_blis         BLIS (Debian's libblis, pthreads: one call whose threads
//                      share each packed panel), its small-matrix ("sup") path
//                      off; only where BLIS was found at configure time
//
// Each runs in interleaved rounds (median of --repeats, as bench_cnn). Then
// each driver computes the 8 products at 1, 2, 3 and max(4, --threads)
// threads, and the line "bits" says whether every product came out the same
// bits at every count: the CPU backend promises that (README), whatever the
// load, so a driver that splits the sum differently by thread count cannot
// replace the tiles however fast it is.
//
//   bench_gemm_drivers [--batch N] [--threads N] [--repeats N] [--min-time S] [--small]
#include <cblas.h>
#include <omp.h>

#include <flx/flx.hpp>

#include <array>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_interleaved.hpp"
#include "dnnl.hpp"
#include "mlp_step.hpp"
#if FLX_BENCH_HAVE_BLIS
#include <blis.h>
#endif

extern "C" void openblas_set_num_threads(int);

namespace {

using namespace flx;
using flx_bench::keep;
using flx_bench::Runner;

// One product C (m×n) = op(A) (m×k) · op(B) (k×n), column-major, with its operands.
struct Product {
  int64_t m, n, k;
  bool ta, tb;
  std::vector<float> a, b;
  int64_t lda() const { return ta ? k : m; }
  int64_t ldb() const { return tb ? n : k; }
};

std::vector<Product> mlp_products(int64_t batch) {
  const int64_t dims[][2] = {{784, 256}, {256, 256}, {256, 10}};  // (in, out)
  std::vector<Product> ps;
  for (auto [in, out] : dims) ps.push_back({out, batch, in, false, false, {}, {}});  // W x
  for (auto [in, out] : dims) ps.push_back({out, in, batch, false, true, {}, {}});   // dY xᵀ
  for (int i = 1; i < 3; ++i) ps.push_back({dims[i][0], batch, dims[i][1], true, false, {}, {}});  // Wᵀ dY
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  for (Product& p : ps) {
    p.a.resize(size_t(p.m * p.k));
    p.b.resize(size_t(p.k * p.n));
    for (float& x : p.a) x = u(rng);
    for (float& x : p.b) x = u(rng);
  }
  return ps;
}

double flops_of(const std::vector<Product>& ps) {
  double f = 0;
  for (const Product& p : ps) f += 2.0 * double(p.m * p.n * p.k);
  return f;
}

// A driver: run(products, outputs, threads) computes every product; into
// outputs[i] where outputs is not empty (flx's matmul makes its own tensors:
// copying them out would be timed too, so the timing passes none).
using Outputs = std::vector<std::vector<float>>;
struct Driver {
  std::string name;
  std::function<void(const std::vector<Product>&, Outputs&, int threads)> run;
};
Outputs scratch_for(const std::vector<Product>& ps) {
  Outputs out;
  for (const Product& p : ps) out.emplace_back(size_t(p.m * p.n), 0.f);
  return out;
}

void openblas_mt(const std::vector<Product>& ps, Outputs& out, int threads) {
  openblas_set_num_threads(threads);
  for (size_t i = 0; i < ps.size(); ++i) {
    const Product& p = ps[i];
    cblas_sgemm(CblasColMajor, p.ta ? CblasTrans : CblasNoTrans, p.tb ? CblasTrans : CblasNoTrans, int(p.m), int(p.n),
                int(p.k), 1.f, p.a.data(), int(p.lda()), p.b.data(), int(p.ldb()), 0.f, out[i].data(), int(p.m));
  }
  openblas_set_num_threads(1);  // the CPU backend calls OpenBLAS single-threaded from its pool
}

// flx's path: tensors made once, matmul of (lazily) transposed views.
struct FlxOperands {
  std::vector<std::pair<Tensor, Tensor>> ab;
};
std::shared_ptr<FlxOperands> flx_operands(const std::vector<Product>& ps) {
  auto ops = std::make_shared<FlxOperands>();
  for (const Product& p : ps) {
    Tensor a = tensor(p.a, Shape{p.ta ? p.k : p.m, p.ta ? p.m : p.k});
    Tensor b = tensor(p.b, Shape{p.tb ? p.n : p.k, p.tb ? p.k : p.n});
    ops->ab.emplace_back(p.ta ? transpose(a) : a, p.tb ? transpose(b) : b);
  }
  return ops;
}

// oneDNN is row-major: C (m×n, column-major) is Cᵀ (n×m, row-major) =
// op(B)ᵀ op(A)ᵀ, so src = op(B)ᵀ (n×k), weights = op(A)ᵀ (k×m).
struct OnednnProducts {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  std::vector<dnnl::matmul> prims;
  std::vector<dnnl::memory::desc> src, wei, dst;
};
std::shared_ptr<OnednnProducts> onednn_products(const std::vector<Product>& ps) {
  using dims = dnnl::memory::dims;
  using tag = dnnl::memory::format_tag;
  auto o = std::make_shared<OnednnProducts>();
  for (const Product& p : ps) {
    // B stored k×n column-major (tb: n×k) is, row-major, n×k (tb: k×n):
    // src = op(B)ᵀ (n×k) is B row-major as stored ("ab"), or transposed ("ba").
    dnnl::memory::desc s(dims{p.n, p.k}, dnnl::memory::data_type::f32, p.tb ? tag::ba : tag::ab);
    dnnl::memory::desc w(dims{p.k, p.m}, dnnl::memory::data_type::f32, p.ta ? tag::ba : tag::ab);
    dnnl::memory::desc d(dims{p.n, p.m}, dnnl::memory::data_type::f32, tag::ab);
    o->prims.emplace_back(dnnl::matmul::primitive_desc(dnnl::matmul::desc(s, w, d), o->eng));
    o->src.push_back(s);
    o->wei.push_back(w);
    o->dst.push_back(d);
  }
  return o;
}

Driver onednn_driver(const std::vector<Product>& products) {
  auto o = onednn_products(products);
  return {"gemms_onednn", [o](const std::vector<Product>& ps, Outputs& out, int threads) {
            omp_set_num_threads(threads);
            for (size_t i = 0; i < ps.size(); ++i) {
              dnnl::memory s(o->src[i], o->eng, const_cast<float*>(ps[i].b.data()));
              dnnl::memory w(o->wei[i], o->eng, const_cast<float*>(ps[i].a.data()));
              dnnl::memory d(o->dst[i], o->eng, out[i].data());
              o->prims[i].execute(o->strm, {{DNNL_ARG_SRC, s}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, d}});
            }
            o->strm.wait();
          }};
}

#if FLX_BENCH_HAVE_BLIS
void blis(const std::vector<Product>& ps, Outputs& out, int threads) {
  rntm_t rntm = BLIS_RNTM_INITIALIZER;
  bli_rntm_set_num_threads(threads, &rntm);
  // Its small-matrix path picks kernels by the pieces each thread gets (the
  // bits changed with the thread count for skinny products); the packed path
  // splits only m and n, each element summed over the whole k by one kernel.
  bli_rntm_disable_l3_sup(&rntm);
  float one = 1, zero = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    const Product& p = ps[i];
    bli_sgemm_ex(p.ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, p.tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, p.m, p.n, p.k,
                 &one, const_cast<float*>(p.a.data()), 1, p.lda(), const_cast<float*>(p.b.data()), 1, p.ldb(), &zero,
                 out[i].data(), 1, p.m, nullptr, &rntm);
  }
}
#endif

}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 512;
  int threads = flx::num_threads(), repeats = 7;
  double min_time = 0.3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&] { return flx_bench::option_value("bench_gemm_drivers", argc, argv, &i); };
    if (a == "--batch") batch = std::max(1, std::atoi(next().c_str()));
    else if (a == "--threads") threads = std::max(1, std::atoi(next().c_str()));
    else if (a == "--repeats") repeats = std::max(1, std::atoi(next().c_str()));
    else if (a == "--min-time") min_time = std::atof(next().c_str());
    else if (a == "--small") batch = 16, repeats = 1, min_time = 0.01;
    else if (a == "-h" || a == "--help") {
      std::printf("usage: bench_gemm_drivers [--batch N] [--threads N] [--repeats N] [--min-time S] [--small]\n");
      return 0;
    } else {
      std::fprintf(stderr, "bench_gemm_drivers: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  try {
    flx::set_num_threads(threads);
    const auto products = std::make_shared<std::vector<Product>>(mlp_products(batch));
    const double flops = flops_of(*products);
    auto fresh_outputs = [&] { return scratch_for(*products); };
    auto flx_ops = flx_operands(*products);
    std::vector<Driver> drivers = {
        {"gemms_openblas_mt", openblas_mt},
        {"gemms_flx",
         [flx_ops](const std::vector<Product>&, Outputs& out, int t) {
           flx::set_num_threads(t);
           for (size_t i = 0; i < flx_ops->ab.size(); ++i) {
             Tensor c = matmul(flx_ops->ab[i].first, flx_ops->ab[i].second);
             if (out.empty()) keep(c);
             else out[i] = c.to_vector<float>();
           }
         }},
        onednn_driver(*products),
#if FLX_BENCH_HAVE_BLIS
        {"gemms_blis", blis},
#endif
    };

    // Timing: every driver on --threads threads, and the step, interleaved.
    std::vector<std::string> names = {"mlp_step"};
    std::vector<Runner> runners = {{flx_bench::mlp_training_step(batch), 0}};
    for (const Driver& d : drivers) {
      names.push_back(d.name);
      auto out = std::make_shared<Outputs>(d.name == "gemms_flx" ? Outputs{} : fresh_outputs());
      runners.push_back({[d, products, out, threads] { d.run(*products, *out, threads); }, flops});
    }
    const Device cpu = Device::cpu();
    std::vector<int64_t> iters;
    for (Runner& r : runners) iters.push_back(flx_bench::calibrate(r, cpu, min_time));
    std::vector<std::vector<double>> ns(runners.size());
    for (int r = 0; r < repeats; ++r)
      for (size_t i = 0; i < runners.size(); ++i) ns[i].push_back(flx_bench::run_ns(runners[i], cpu, iters[i]));
    std::vector<double> medians;
    for (size_t i = 0; i < runners.size(); ++i) {
      std::vector<double> v = ns[i];
      std::sort(v.begin(), v.end());
      const size_t n = v.size();
      medians.push_back(n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]));
      std::printf("{\"name\": \"%s\", \"batch\": %lld, \"ns_per_iter\": %.1f, \"min_ns\": %.1f, \"max_ns\": %.1f, "
                  "\"repeats\": %zu, \"threads\": %d, \"gflops\": %.2f}\n",
                  names[i].c_str(), static_cast<long long>(batch), medians.back(), v.front(), v.back(), n, threads,
                  runners[i].flops > 0 ? runners[i].flops / medians.back() : 0.0);
    }
    std::printf("{\"name\": \"ratio\", \"mlp_step_over_gemms_openblas_mt\": %.3f", medians[0] / medians[1]);
    for (size_t i = 2; i < runners.size(); ++i)
      std::printf(", \"%s_over_gemms_openblas_mt\": %.3f", names[i].c_str(), medians[i] / medians[1]);
    std::printf("}\n");

    // The same bits at any thread count?
    const std::vector<int> counts = {1, 2, 3, std::max(4, threads)};
    for (const Driver& d : drivers) {
      Outputs first = fresh_outputs();
      d.run(*products, first, counts[0]);
      int differing = 0;
      std::string where;
      for (size_t c = 1; c < counts.size(); ++c) {
        Outputs again = fresh_outputs();
        d.run(*products, again, counts[c]);
        for (size_t i = 0; i < again.size(); ++i)
          if (std::memcmp(first[i].data(), again[i].data(), first[i].size() * sizeof(float)) != 0) {
            ++differing;
            const Product& p = (*products)[i];
            where += (where.empty() ? "" : ", ") + std::to_string(p.m) + "x" + std::to_string(p.n) + "x" +
                     std::to_string(p.k) + " at " + std::to_string(counts[c]) + " threads";
          }
      }
      std::printf("{\"name\": \"bits\", \"driver\": \"%s\", \"same_at_1_2_3_%d_threads\": %s, \"differing\": \"%s\"}\n",
                  d.name.c_str(), counts.back(), differing == 0 ? "true" : "false", where.c_str());
    }
    flx::set_num_threads(threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gemm_drivers: %s\n", e.what());
    return 1;
  }
  return 0;
}
