// The model zoo's GPT-style character model on Debian's license texts
// (docs/zoo.md), as nanoGPT builds one: token and position embeddings, N
// pre-norm blocks (LayerNorm, causal MultiHeadAttention, LayerNorm, a GELU
// MLP of 4× the width, each with a residual connection) in a Chain of
// run-time length, a final LayerNorm and a bias-free Dense head. GPT-2's
// initialisation: every weight truncated-normal with std 0.02, the two
// projections that write into the residual stream (attention's output, the
// MLP's second layer) with 0.02 / sqrt(2N), biases zero. AdamW (1e-3,
// betas 0.9 and 0.95, decay 0.1 on every parameter). The attention
// is linear in memory (`.scores = false`, flash-style): its weights are
// never held. Reports the validation loss and the training time, and
// samples text from the last position of each context (selectdim).
// --precision bf16 or f16 trains it in BFloat16 or Float16 (the model
// converted, AdamW under MixedPrecision; for f16 a LossScaler:
// docs/precision.md), as bench/char_models_torch.py trains PyTorch's under
// torch.autocast.
//
//   char_gpt [--steps 400] [--batch 16] [--seq 128] [--seed 1] [--device NAME]
//            [--precision f32|bf16|f16] [--dim 128] [--heads 4] [--layers 4]
//
// Prints "step N: loss L" lines, then one JSON line: model, steps, seconds
// (training only), val_loss, sample. bench/char_models_torch.py --model gpt
// trains the same model in PyTorch.
#include <flx/flx.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>

#include "char_text.hpp"
#include "zoo_args.hpp"

using namespace flx;

namespace {

// GPT-2's initialiser: truncated normal, std 0.02 (or `std`), cut at ±2 std.
InitFn gpt_init(double std = 0.02) {
  return [std](const Shape& s) { return truncated_normal(s, {.std = std, .lo = -2 * std, .hi = 2 * std}); };
}

// x + attention(LayerNorm(x)), then h + MLP(LayerNorm(h)), on (dim, t, batch).
struct Block {
  LayerNorm ln1, ln2;
  MultiHeadAttention attn;
  Dense up, down;

  Block(int64_t dim, int64_t heads, int64_t layers)
      : ln1(dim),
        ln2(dim),
        attn(dim, {.nheads = heads}),
        up(dim, 4 * dim, gelu, {.init = gpt_init()}),
        down(4 * dim, dim, {.init = gpt_init(0.02 / std::sqrt(2.0 * double(layers)))}) {
    // MultiHeadAttention's projections are Dense layers: GPT-2's weights for them.
    attn.q_proj = Dense(dim, dim, {.init = gpt_init(), .bias = false});
    attn.k_proj = Dense(dim, dim, {.init = gpt_init(), .bias = false});
    attn.v_proj = Dense(dim, dim, {.init = gpt_init(), .bias = false});
    attn.out_proj = Dense(dim, dim, {.init = gpt_init(0.02 / std::sqrt(2.0 * double(layers))), .bias = false});
  }
  Tensor operator()(const Tensor& x) const {
    const Tensor h = x + attn(ln1(x), {.causal = true, .scores = false}).first;
    return h + down(up(ln2(h)));
  }
};
FLX_FUNCTOR(Block, ln1, ln2, attn, up, down)

std::vector<Block> stack(int64_t dim, int64_t heads, int64_t layers) {
  std::vector<Block> b;
  for (int64_t i = 0; i < layers; ++i) b.emplace_back(dim, heads, layers);
  return b;
}

struct GPT {
  Embedding tokens, positions;
  Chain<std::vector<Block>> blocks;  // as many as --layers: a Chain of run-time length
  LayerNorm ln;
  Dense head;

  GPT(int64_t vocab, int64_t seq, int64_t dim, int64_t heads, int64_t layers)
      : tokens(vocab, dim, {.init = gpt_init()}),
        positions(seq, dim, {.init = gpt_init()}),
        blocks(stack(dim, heads, layers)),
        ln(dim),
        head(dim, vocab, {.init = gpt_init(), .bias = false}) {}
  // ids (t, batch) Int64 -> logits (vocab, t, batch)
  Tensor operator()(const Tensor& ids) const {
    const int64_t t = ids.shape()[0];
    std::vector<int64_t> at(static_cast<size_t>(t));
    for (int64_t i = 0; i < t; ++i) at[size_t(i)] = i;
    return head(ln(blocks(tokens(ids) + positions(tensor(at, Shape{t}).to(ids.device())))));
  }
};
FLX_FUNCTOR(GPT, tokens, positions, blocks, ln, head)

// `n` bytes after `prompt` at temperature 1: the context is the last `seq`
// bytes, and the next byte is drawn from the logits of its last position,
// selectdim(logits, 1, t - 1) (vocab, 1).
std::string generate(const GPT& model, const zoo::CharText& text, const std::string& prompt, int n, int64_t seq,
                     uint64_t seed, Device dev) {
  std::vector<int64_t> ids;
  for (unsigned char c : prompt)
    ids.push_back(int64_t(std::find(text.vocab.begin(), text.vocab.end(), c) - text.vocab.begin()));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < n; ++i) {
    const int64_t t = std::min<int64_t>(seq, int64_t(ids.size()));
    const Tensor logits = model(tensor(std::vector<int64_t>(ids.end() - t, ids.end()), Shape{t, 1}).to(dev));
    const std::vector<double> p = softmax(selectdim(logits, 1, t - 1)).to(Device::cpu()).to_vector<double>();
    ids.push_back(std::discrete_distribution<int64_t>(p.begin(), p.end())(rng));
  }
  std::string out;
  for (int64_t id : ids) out.push_back(char(text.vocab[size_t(id)]));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  zoo::Args defaults;
  defaults.steps = 400;
  defaults.batch = 16;
  defaults.seq = 128;
  defaults.dim = 128;
  defaults.heads = 4;
  defaults.layers = 4;
  const zoo::Args a = zoo::parse_args(argc, argv, "char_gpt", /*with_precision=*/true, /*with_size=*/true, defaults);
  try {
    if (a.dim % a.heads != 0) {
      std::fprintf(stderr, "char_gpt: --heads %lld must divide --dim %lld\n", (long long)a.heads, (long long)a.dim);
      return 2;
    }
    set_seed(a.seed);
    const zoo::CharText text = zoo::load_licenses();
    const Device dev = a.device.empty() ? get_device() : get_device(a.device);
    const DType precision = a.precision == "bf16" ? BFloat16 : a.precision == "f16" ? Float16 : Float32;
    auto model = to_precision(GPT(int64_t(text.vocab.size()), a.seq, a.dim, a.heads, a.layers), precision) | dev;
    // Low precision: Float32 copies of the weights in the optimiser state,
    // and for Float16 the loss scaled (the loss itself is Float32).
    const AdamW rule(1e-3, {0.9, 0.95}, 0.1);
    OptState opt = a.precision == "f32" ? setup(rule, model) : setup(MixedPrecision(Float32, rule), model);
    LossScaler scaler({.enabled = a.precision == "f16"});
    std::mt19937_64 rng(a.seed);
    const auto t0 = std::chrono::steady_clock::now();
    for (int step = 1; step <= a.steps; ++step) {
      auto [x, y] = zoo::windows(text.train, zoo::random_starts(text.train.size(), a.seq, a.batch, rng), a.seq);
      x = x | dev;
      y = y | dev;
      const double scale = scaler.scale();
      auto [l, g] = withgradient([&](const GPT& m) { return scaler.scale(zoo::char_loss(m(x), y)); }, model);
      scaler.update(opt, model, std::get<0>(g));  // for f16: skips a step whose gradients overflowed
      if (step % 50 == 0 || step == a.steps)
        std::fprintf(stderr, "step %d: loss %.4f\n", step, l.item<double>() / scale);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    auto [vx, vy] = zoo::windows(text.valid, zoo::validation_starts(text.valid.size(), a.seq), a.seq);
    const double val = zoo::char_loss(model(vx | dev), vy | dev).item<double>();
    const std::string s = generate(model, text, "The ", 200, a.seq, a.seed, dev);
    std::cout << zoo::result_json("gpt", a.steps, seconds, val, s) << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "char_gpt: %s\n", e.what());
    return 1;
  }
}
