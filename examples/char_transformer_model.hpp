// The model zoo's character-level transformer (docs/zoo.md), shared by
// examples/char_transformer.cpp and bench/transformer_steps.cpp (which
// trains it step by step against PyTorch's): token and position
// embeddings, pre-norm blocks of causal MultiHeadAttention and a GELU MLP
// with residual connections, LayerNorm, and a Dense layer to the logits.
#pragma once

#include <flx/flx.hpp>

#include <cstdint>
#include <vector>

namespace zoo {

using flx::Dense;
using flx::Embedding;
using flx::LayerNorm;
using flx::MultiHeadAttention;
using flx::Shape;
using flx::Tensor;
using flx::gelu;
using flx::tensor;

// x + attention(LayerNorm(x)), then h + MLP(LayerNorm(h)), on (dim, t, batch).
// The attention weights are not needed: `.scores = false` never holds them,
// so memory grows linearly with the sequence (docs/attention.md).
struct Block {
  LayerNorm ln1, ln2;
  MultiHeadAttention attn;
  Dense up, down;

  Block(int64_t dim, int64_t heads)
      : ln1(dim), ln2(dim), attn(dim, {.nheads = heads}), up(dim, 4 * dim, gelu), down(4 * dim, dim) {}
  Tensor operator()(const Tensor& x) const {
    const Tensor h = x + attn(ln1(x), {.causal = true, .scores = false}).first;
    return h + down(up(ln2(h)));
  }
};
FLX_FUNCTOR(Block, ln1, ln2, attn, up, down)

struct CharTransformer {
  Embedding tokens, positions;
  std::vector<Block> blocks;
  LayerNorm ln;
  Dense out;

  // Members are made in their order, each drawing its initial weights:
  // set_seed(s) then this gives the example's model for seed s.
  CharTransformer(int64_t vocab, int64_t seq, int64_t dim, int64_t heads, int64_t layers)
      : tokens(vocab, dim), positions(seq, dim), blocks(stack(dim, heads, layers)), ln(dim), out(dim, vocab) {}
  static std::vector<Block> stack(int64_t dim, int64_t heads, int64_t layers) {
    std::vector<Block> b;
    for (int64_t i = 0; i < layers; ++i) b.emplace_back(dim, heads);
    return b;
  }
  // ids (t, batch) Int64 -> logits (vocab, t, batch)
  Tensor operator()(const Tensor& ids) const {
    const int64_t t = ids.shape()[0];
    std::vector<int64_t> at(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) at[size_t(i)] = i;
    // (dim, t) positions broadcast over the batch
    Tensor h = tokens(ids) + positions(tensor(at, Shape{t}).to(ids.device()));
    for (const Block& b : blocks) h = b(h);
    return out(ln(h));
  }
};
FLX_FUNCTOR(CharTransformer, tokens, positions, blocks, ln, out)

}  // namespace zoo

