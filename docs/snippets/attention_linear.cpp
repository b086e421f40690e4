#include <flx/flx.hpp>

#include <cmath>
#include <iostream>

using namespace flx;

int main() {
  set_seed(1);
  // Model dim 256 in 8 heads of 32, sequences of 512, batch 2: (256, 512, 2).
  Tensor q = rand(256, 512, 2), k = rand(256, 512, 2), v = rand(256, 512, 2);
  auto [y, alpha] = dot_product_attention(q, k, v, 8, {.causal = true, .scores = false});
  std::cout << y.shape() << "\n";         // (256×512×2)
  std::cout << alpha.defined() << "\n";   // 0

  // ALiBi: each head h adds -m_h (i - j) to query i's logit for key j, a
  // (kv_len, q_len, nheads) bias that broadcasts over the batch.
  const int64_t n = 512, heads = 8;
  std::vector<float> b(size_t(n * n * heads));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) b[size_t(j + n * (i + n * h))] = -std::exp2(-8.0f * float(h + 1) / float(heads)) * float(i - j);
  const Tensor alibi = tensor(b, {n, n, heads});
  auto [z, none] = dot_product_attention(q, k, v, heads, {.causal = true, .bias = alibi, .scores = false});
  std::cout << z.shape() << "\n";  // (256×512×2)

  // Gradients flow to q, k, v and the bias; the weights are never held.
  auto [dq, dbias] = gradient([&](const Tensor& qq, const Tensor& bb) {
    return sum(dot_product_attention(qq, k, v, heads, {.causal = true, .bias = bb, .scores = false}).first);
  }, q, alibi);
  std::cout << dbias.shape() << "\n";  // (512×512×8)

  // MultiHeadAttention takes the same options.
  MultiHeadAttention mha(256, {.nheads = 8});
  auto [out, weights] = mha(q, {.causal = true, .scores = false});
  std::cout << out.shape() << " " << weights.defined() << "\n";  // (256×512×2) 0
}
