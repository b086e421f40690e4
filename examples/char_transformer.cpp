// The model zoo's small character-level transformer on Debian's license
// texts (docs/zoo.md): token and position embeddings, two pre-norm blocks
// of causal MultiHeadAttention and a GELU MLP with residual connections,
// LayerNorm, and a Dense layer to the next byte's logits. Trains with Adam,
// reports the validation loss and samples text. --dim, --heads and --layers
// size it (64, 4 and 2 by default; a GPT-sized one: --dim 384 --heads 6
// --layers 6 --seq 256); --precision bf16 or f16 trains it in BFloat16 or
// Float16 (bf16(model), Adam inside MixedPrecision(Float32, ...), and for
// f16 a LossScaler: docs/precision.md).
//
//   char_transformer [--steps 300] [--batch 32] [--seq 64] [--seed 1] [--device NAME]
//                    [--precision f32|bf16|f16] [--dim 64] [--heads 4] [--layers 2]
//
// Prints "step N: loss L" lines, then one JSON line: model, steps,
// seconds (training only), val_loss, sample. bench/char_models_torch.py
// trains the same model in PyTorch.
#include <flx/flx.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>

#include "char_text.hpp"
#include "zoo_args.hpp"

using namespace flx;

namespace {

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

  // Members are made in their order, each drawing its initial weights.
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

}  // namespace

int main(int argc, char** argv) {
  const zoo::Args a = zoo::parse_args(argc, argv, "char_transformer", /*with_precision=*/true, /*with_size=*/true);
  try {
    if (a.dim % a.heads != 0) {
      std::fprintf(stderr, "char_transformer: --heads %lld must divide --dim %lld\n", (long long)a.heads,
                   (long long)a.dim);
      return 2;
    }
    set_seed(a.seed);
    const zoo::CharText text = zoo::load_licenses();
    const Device dev = a.device.empty() ? get_device() : get_device(a.device);
    const DType precision = a.precision == "bf16" ? BFloat16 : a.precision == "f16" ? Float16 : Float32;
    auto model = to_precision(CharTransformer(int64_t(text.vocab.size()), a.seq, a.dim, a.heads, a.layers),
                              precision) |
                 dev;
    // Low precision: Float32 copies of the weights in the optimiser state,
    // and for Float16 the loss scaled (the loss itself is Float32).
    OptState opt = a.precision == "f32" ? setup(Adam(1e-3), model) : setup(MixedPrecision(Float32, Adam(1e-3)), model);
    LossScaler scaler({.enabled = a.precision == "f16"});
    std::mt19937_64 rng(a.seed);
    const auto t0 = std::chrono::steady_clock::now();
    for (int step = 1; step <= a.steps; ++step) {
      auto [x, y] = zoo::windows(text.train, zoo::random_starts(text.train.size(), a.seq, a.batch, rng), a.seq);
      x = x | dev;
      y = y | dev;
      const double scale = scaler.scale();
      auto [l, g] =
          withgradient([&](const CharTransformer& m) { return scaler.scale(zoo::char_loss(m(x), y)); }, model);
      scaler.update(opt, model, std::get<0>(g));  // for f16: skips a step whose gradients overflowed
      if (step % 50 == 0 || step == a.steps)
        std::fprintf(stderr, "step %d: loss %.4f\n", step, l.item<double>() / scale);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto [vx, vy] = zoo::windows(text.valid, zoo::validation_starts(text.valid.size(), a.seq), a.seq);
    const double val = zoo::char_loss(model(vx | dev), vy | dev).item<double>();
    const std::string s = zoo::sample(model, text, "The ", 200, a.seq, a.seed, dev);
    std::cout << zoo::result_json("transformer", a.steps, seconds, val, s) << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "char_transformer: %s\n", e.what());
    return 1;
  }
}
