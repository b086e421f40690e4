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
#include "char_transformer_model.hpp"
#include "zoo_args.hpp"

using namespace flx;


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
    auto model = to_precision(zoo::CharTransformer(int64_t(text.vocab.size()), a.seq, a.dim, a.heads, a.layers),
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
          withgradient([&](const zoo::CharTransformer& m) { return scaler.scale(zoo::char_loss(m(x), y)); }, model);
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
