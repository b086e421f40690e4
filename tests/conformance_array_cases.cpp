// The conformance cases of the array operations (run by
// Conformance.ArrayOpsMatchTheCpuForwardAndBackward in test_conformance.cpp:
// every device against the CPU, forward and backward, in Float32, Float64,
// Float16 and BFloat16), and their half tolerances.
#include "conformance_case.hpp"

namespace flx::testing {

using V = std::vector<Tensor>;

std::vector<Case> array_op_cases() {
  return {
      // Concatenation: along the last dim, copies; along others, scatter_add
      // onto -0.0; each gradient a slice (a view, or a strided copy).
      {"cat_dim0", {{2, 3}, {1, 3}}, [](const V& v) { return cat({v[0], v[1], v[0]}, 0); }},
      {"hcat", {{2, 3}, {2, 2}}, [](const V& v) { return hcat(v[0], v[1]); }},
      {"cat_bool", {{2, 3}, {2, 3}}, [](const V& v) { return cat({v[0] > 0.0, v[1] > 0.0}, 0).to(v[0].dtype()); }, false},
      {"stack_dim1", {{3, 2}, {3, 2}, {3, 2}}, [](const V& v) { return stack({v[0], v[1], v[2]}, 1); }},
      {"unstack", {{3, 4}}, [](const V& v) {
         const auto parts = unstack(v[0], 0);
         return vcat(parts[2], parts[0] * 2.0);
       }},
      {"chunk_dim0", {{5, 3}}, [](const V& v) {
         const auto parts = chunk(v[0], 2, 0);
         return vcat(parts[1] * 2.0, parts[0]);
       }},
      {"chunk_last", {{3, 5}}, [](const V& v) {
         const auto parts = chunk(v[0], 2);
         return hcat(parts[1], parts[0] * 3.0);
       }},
      {"selectdim", {{3, 4, 2}}, [](const V& v) { return selectdim(v[0], 1, 2); }},
      {"slice", {{3, 4, 2}}, [](const V& v) { return slice(v[0], 0, 1, 3); }},
      {"slice_view", {{3, 4}}, [](const V& v) { return slice(v[0], 1, 1, 3) * 2.0; }},
      {"repeat", {{2, 3}}, [](const V& v) { return repeat(v[0], {2, 1, 2}); }},
      {"reverse", {{3, 4}}, [](const V& v) { return reverse(v[0], 0); }},
      // 37 elements: six passes of the scan; the middle dim: permuted first.
      {"cumsum", {{37, 3}}, [](const V& v) { return cumsum(v[0], 0); }},
      {"cumsum_middle", {{2, 9, 3}}, [](const V& v) { return cumsum(v[0], 1); }},
      {"pad_zeros", {{3, 4, 2}}, [](const V& v) { return pad_zeros(v[0], {1, 2, 0, 1}); }},
      {"pad_constant", {{3, 4}}, [](const V& v) { return pad_constant(v[0], {2, 0, 1, 1}, -1.5); }},
      {"pad_reflect", {{4, 3}}, [](const V& v) { return pad_reflect(v[0], {2, 3, 1, 2}); }},
      {"pad_symmetric", {{4, 3}}, [](const V& v) { return pad_symmetric(v[0], {2, 3, 1, 3}); }},
      {"pad_repeat", {{3, 2, 2}}, [](const V& v) { return pad_repeat(v[0], {2, 1, 0, 2}); }},
      {"pad_circular", {{4, 3}}, [](const V& v) { return pad_circular(v[0], {1, 4, 3, 2}); }},
      {"sin", {{8}}, [](const V& v) { return flx::sin(v[0]); }, true, -3, 3},
      {"cos", {{8}}, [](const V& v) { return flx::cos(v[0]); }, true, -3, 3},
      {"erf", {{8}}, [](const V& v) { return flx::erf(v[0]); }, true, -2, 2},
      {"logsumexp", {{4, 5}}, [](const V& v) { return logsumexp(v[0], {1}); }, true, -3, 3},
      {"logsumexp_all", {{3, 4}}, [](const V& v) { return logsumexp(v[0]); }, true, -3, 3},
      {"var", {{4, 5}}, [](const V& v) { return var(v[0], {1}); }},
      {"var_all", {{3, 4}}, [](const V& v) { return var(v[0]); }},
      {"std", {{4, 5}}, [](const V& v) { return flx::std(v[0], {0}, false); }},
      {"batched_mul", {{3, 4, 2}, {4, 5, 2}}, [](const V& v) { return batched_mul(v[0], v[1]); }},
      {"batched_mul_shared", {{3, 4}, {4, 2, 3}}, [](const V& v) { return batched_mul(v[0], v[1]); }},
      {"upsample_nearest", {{3, 2, 2, 1}}, [](const V& v) { return upsample_nearest(v[0], {.scale = {2, 3}}); }},
      {"upsample_bilinear", {{3, 4, 2, 1}}, [](const V& v) { return upsample_bilinear(v[0], {.scale = {2, 1.5}}); }},
      {"upsample_bilinear_unaligned", {{3, 2, 1, 2}},
       [](const V& v) { return upsample_bilinear(v[0], {.size = {5, 3}, .align_corners = false}); }},
      {"pixel_shuffle", {{2, 3, 8, 1}}, [](const V& v) { return pixel_shuffle(v[0], 2); }},
  };
}

// Float16 and BFloat16, as test_conformance.cpp's half_ulps argues:
//  - 0 ulps (every case not listed): copies, gathers and permutes move
//    elements unchanged; the backward rules that add (scatter_add of
//    repeated indices, the reductions of repeat and upsample_nearest, the
//    scan's additions) add in float and round each result once, in the
//    same order on every device (scatter_add in index order, reductions in
//    double where these short sums of halves are exact). cumsum's scan and
//    upsample_bilinear's weighted sum are separate correctly rounded maps,
//    never contracted into fused multiply-adds; var is a mean, a
//    difference, squares, a sum and a scaling, each rounded once alike.
//  - kLibm: sin, cos, erf (a math library's function), and std (a square
//    root, then its gradient divides by it): 1 ulp forward, 4 backward.
//  - kProducts: batched_mul, a GEMM summing in each device's order.
//  - kComposed: logsumexp, a log of a sum of exponentials (each 1 ulp from
//    the library), and backward exp(x - m) / sum, which divides by it.
const std::map<std::string, HalfUlps>& array_op_half_ulps() {
  const HalfUlps kLibm{{1}, {4, true}}, kProducts{{1, true}, {4, true}}, kComposed{{2, true}, {8, true}};
  static const std::map<std::string, HalfUlps> m = {
      {"sin", kLibm},          {"cos", kLibm},           {"erf", kLibm},
      {"std", kLibm},          {"batched_mul", kProducts}, {"batched_mul_shared", kProducts},
      {"logsumexp", kComposed}, {"logsumexp_all", kComposed}};
  return m;
}

}  // namespace flx::testing
