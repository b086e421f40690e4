// The model zoo's small character-level transformer on Debian's license
// texts (docs/zoo.md): token and position embeddings, two pre-norm blocks
// of causal MultiHeadAttention and a GELU MLP with residual connections,
// LayerNorm, and a Dense layer to the next byte's logits. Trains with Adam,
// reports the validation loss and samples text.
//
//   char_transformer [--steps 300] [--batch 32] [--seq 64] [--seed 1] [--device NAME]
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

// x + attention(LayerNorm(x)), then h + MLP(LayerNorm(h)), on (64, t, batch).
// The attention weights are not needed: `.scores = false` never holds them,
// so memory grows linearly with the sequence (docs/attention.md).
struct Block {
  LayerNorm ln1{64}, ln2{64};
  MultiHeadAttention attn{64, {.nheads = 4}};
  Dense up{64, 256, gelu}, down{256, 64};

  Tensor operator()(const Tensor& x) const {
    const Tensor h = x + attn(ln1(x), {.causal = true, .scores = false}).first;
    return h + down(up(ln2(h)));
  }
};
FLX_FUNCTOR(Block, ln1, ln2, attn, up, down)

struct CharTransformer {
  Embedding tokens, positions;
  Block b1, b2;
  LayerNorm ln{64};
  Dense out;

  CharTransformer(int64_t vocab, int64_t seq) : tokens(vocab, 64), positions(seq, 64), out(64, vocab) {}
  // ids (t, batch) Int64 -> logits (vocab, t, batch)
  Tensor operator()(const Tensor& ids) const {
    const int64_t t = ids.shape()[0];
    std::vector<int64_t> at(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) at[size_t(i)] = i;
    // (64, t) positions broadcast over the batch
    const Tensor h = tokens(ids) + positions(tensor(at, Shape{t}).to(ids.device()));
    return out(ln(b2(b1(h))));
  }
};
FLX_FUNCTOR(CharTransformer, tokens, positions, b1, b2, ln, out)

}  // namespace

int main(int argc, char** argv) {
  const zoo::Args a = zoo::parse_args(argc, argv, "char_transformer");
  try {
    set_seed(a.seed);
    const zoo::CharText text = zoo::load_licenses();
    const Device dev = a.device.empty() ? get_device() : get_device(a.device);
    auto model = CharTransformer(int64_t(text.vocab.size()), a.seq) | dev;
    OptState opt = setup(Adam(1e-3), model);
    std::mt19937_64 rng(a.seed);
    const auto t0 = std::chrono::steady_clock::now();
    for (int step = 1; step <= a.steps; ++step) {
      auto [x, y] = zoo::windows(text.train, zoo::random_starts(text.train.size(), a.seq, a.batch, rng), a.seq);
      x = x | dev;
      y = y | dev;
      auto [l, g] = withgradient([&](const CharTransformer& m) { return zoo::char_loss(m(x), y); }, model);
      update(opt, model, std::get<0>(g));
      if (step % 50 == 0 || step == a.steps) std::fprintf(stderr, "step %d: loss %.4f\n", step, l.item<double>());
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
