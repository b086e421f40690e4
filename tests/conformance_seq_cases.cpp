// The conformance cases of the sequence layers added with GRUv3 (run by
// Conformance.SequenceLayersMatchTheCpu in test_conformance.cpp: every device
// against the CPU, forward and backward, in Float32, Float64, Float16 and
// BFloat16): GRUv3Cell and GRUv3, Recurrence (of a built-in cell, which runs
// as the fused op, and of GRUv3Cell, step by step), EmbeddingBag (bags as
// columns, ragged bags by offsets; mean, sum and maximum), WeightNorm and
// MultiHeadAttention's additive bias; and their half tolerances.
#include "conformance_case.hpp"

namespace flx::testing {

using V = std::vector<Tensor>;

namespace {
Tensor indices(std::vector<int64_t> v, Shape s, const Tensor& like) { return tensor(v, s).to(like.device()); }
}  // namespace

std::vector<Case> sequence_layer_cases() {
  return {
      {"gruv3_cell", {{6, 3}, {6, 2}, {6}, {2, 2}, {3, 5}, {2, 5}},
       [](const V& v) { return GRUv3Cell(v[0], v[1], v[2], v[3])(v[4], v[5]).output; }},
      {"gruv3", {{9, 3}, {9, 3}, {9}, {3, 3}, {3, 6, 5}, {3, 5}}, [](const V& v) {
         auto [y, h] = GRUv3(GRUv3Cell(v[0], v[1], v[2], v[3])).with_state(v[4], v[5]);
         return y + reshape(h, {3, 1, 5});
       }},
      {"gruv3_unbatched_no_bias", {{9, 3}, {9, 3}, {3, 3}, {3, 6}},
       [](const V& v) { return GRUv3(GRUv3Cell(v[0], v[1], Tensor{}, v[2]))(v[3]); }},
      {"recurrence_lstm", {{12, 3}, {12, 3}, {12}, {3, 6, 5}, {3, 5}, {3, 5}}, [](const V& v) {
         auto [y, s] = Recurrence(LSTMCell(v[0], v[1], v[2])).with_state(v[3], LSTMState{v[4], v[5]});
         return y + reshape(s.c, {3, 1, 5});
       }},
      {"recurrence_gruv3", {{6, 3}, {6, 2}, {6}, {2, 2}, {3, 4, 2}},
       [](const V& v) { return Recurrence(GRUv3Cell(v[0], v[1], v[2], v[3]))(v[4]); }},
      {"embedding_bag_mean", {{3, 5}}, [](const V& v) {
         return EmbeddingBag(v[0])(indices({4, 0, 4, 2, 4, 1, 3, 3, 0}, {3, 3}, v[0]));
       }},
      {"embedding_bag_sum", {{3, 5}}, [](const V& v) {
         return EmbeddingBag(v[0], BagReduction::Sum)(indices({4, 0, 4, 2, 4, 1, 3, 3, 0}, {3, 3}, v[0]));
       }},
      {"embedding_bag_max", {{3, 5}}, [](const V& v) {
         return EmbeddingBag(v[0], BagReduction::Max)(indices({4, 0, 1, 2, 3, 1, 3, 2, 0}, {3, 3}, v[0]));
       }},
      {"embedding_bag_offsets_mean", {{3, 6}}, [](const V& v) {
         return EmbeddingBag(v[0])(indices({5, 0, 2, 2, 1, 4, 3}, {7}, v[0]), indices({0, 3, 4}, {3}, v[0]));
       }},
      {"embedding_bag_offsets_max", {{3, 6}}, [](const V& v) {
         return EmbeddingBag(v[0], BagReduction::Max)(indices({5, 0, 2, 3, 1, 4, 3}, {7}, v[0]),
                                                       indices({0, 3, 4}, {3}, v[0]));
       }},
      {"weightnorm_dense", {{4, 3}, {4}, {4, 1}, {3, 5}}, [](const V& v) {
         WeightNorm wd(Dense(v[0], v[1], flx::tanh));
         wd.g = v[2];
         return wd(v[3]);
       }},
      {"mha_bias", {{4, 4}, {4, 4}, {6, 4}, {3, 6}, {5, 5, 2, 1}, {4, 5, 2}}, [](const V& v) {
         MultiHeadAttention m(AttentionDims{4, 4, 4, 4, 6, 3}, {.nheads = 2});
         m.q_proj.weight = v[0];
         m.k_proj.weight = v[1];
         m.v_proj.weight = v[2];
         m.out_proj.weight = v[3];
         auto [y, alpha] = m(v[5], v[5], v[5], v[4], {.causal = true});
         return y + sum(square(alpha));
       }},
  };
}

// Float16 and BFloat16 (test_conformance.cpp's half_ulps argues the kinds):
// the recurrent cases as the other recurrent layers (several steps, each
// rounding the state: 4 ulps forward, 8 backward, normwise); EmbeddingBag's
// sums and maxima gather and add halves as the CPU does (the sums of a few
// halves in float are exact), its mean divides once (1 ulp, then 4 back);
// WeightNorm a square root and a division, then a product and tanh
// (composed: 2 and 8); the attention with a bias as the other attention.
const std::map<std::string, HalfUlps>& sequence_layer_half_ulps() {
  const HalfUlps recurrent{{4, true}, {8, true}}, exact{}, divided{{1}, {4, true}}, composed{{2, true}, {8, true}};
  static const std::map<std::string, HalfUlps> m = {
      {"gruv3_cell", recurrent},          {"gruv3", recurrent},
      {"gruv3_unbatched_no_bias", recurrent}, {"recurrence_lstm", recurrent},
      {"recurrence_gruv3", recurrent},    {"embedding_bag_mean", divided},
      {"embedding_bag_sum", exact},       {"embedding_bag_max", exact},
      {"embedding_bag_offsets_mean", divided}, {"embedding_bag_offsets_max", exact},
      {"weightnorm_dense", composed},     {"mha_bias", composed}};
  return m;
}

}  // namespace flx::testing
