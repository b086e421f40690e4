// The model zoo's small U-Net, learning to denoise Fashion-MNIST (docs/zoo.md):
// images with Gaussian noise of std 0.5 added in, the clean images out,
// mean squared error, Adam. Written as Flux's model zoo writes a U-Net: each
// level a block of two 3×3 convolutions with GroupNorm and relu, a
// SkipConnection around the level below whose output is concatenated with
// its input along the channels (`cat`), MaxPool on the way down and
// Upsample (nearest) with a 3×3 convolution on the way up:
//
//   28×28×1 -> 16 ──────────────────────────────────────── cat -> 16 -> 1
//                  └ 14×14: 32 ──────────────── cat -> 32 ┘
//                              └ 7×7: 64 ─ up ┘
//
// Reports the test images' denoising MSE (1000 test images, noise drawn
// from --seed) after --steps steps, against the noisy images' own MSE
// (about 0.25). With --tb DIR, logs the loss and, at the end, 16 test
// images clean, noisy and denoised (TensorBoardLogger::log_image).
//
//   unet [--steps 300] [--batch 32] [--seed 1] [--device NAME] [--tb DIR]
//
// The data come from $FLX_DATA or /usr/share/datasets/fashion-mnist; without
// them the example says so and exits with 77. Prints "step N: loss L" lines
// on stderr, then one JSON line: model, steps, seconds (training only),
// test_mse. bench/fashion_zoo_torch.py --model unet is the same in PyTorch.
#include <flx/flx.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

#include "zoo_args.hpp"

using namespace flx;

namespace {

constexpr double kNoise = 0.5;  // the std of the noise added to the images

// Flux's (mx, x) -> cat(mx, x; dims = 3): the level below's output and the
// level's input, along the channels of (W, H, C, N).
struct CatChannels {
  Tensor operator()(const Tensor& mx, const Tensor& x) const { return cat({mx, x}, 2); }
  static const char* name() { return "cat_channels"; }
};

// Two 3×3 convolutions, each followed by GroupNorm (4 groups) and relu.
auto block(int64_t in, int64_t out) {
  return Chain(Conv({3, 3}, in, out, {.pad = 1}), GroupNorm(out, 4, relu), Conv({3, 3}, out, out, {.pad = 1}),
               GroupNorm(out, 4, relu));
}

// Down to half the size, `inner`, back up to twice its size with `out` channels.
template <class Inner>
auto level(Inner inner, int64_t inner_out, int64_t out) {
  return Chain(MaxPool({2, 2}), std::move(inner), Upsample(2), Conv({3, 3}, inner_out, out, {.pad = 1}));
}

auto unet(int64_t c = 16) {
  auto bottom = block(2 * c, 4 * c);                                              // 7×7
  auto middle = Chain(block(c, 2 * c), SkipConnection(level(std::move(bottom), 4 * c, 2 * c), CatChannels{}),
                      block(4 * c, 2 * c));                                        // 14×14
  return Chain(block(1, c), SkipConnection(level(std::move(middle), 2 * c, c), CatChannels{}), block(2 * c, c),
               Conv({1, 1}, c, 1));                                                // 28×28
}

}  // namespace

int main(int argc, char** argv) {
  zoo::Args defaults;
  defaults.steps = 300;
  defaults.batch = 32;
  const zoo::Args a = zoo::parse_args(argc, argv, "unet", false, false, defaults, /*with_tb=*/true);
  datasets::Dataset train, test;
  try {
    train = datasets::fashion_mnist("train", UInt8);
    test = datasets::fashion_mnist("test", UInt8);
  } catch (const Error& e) {
    std::printf("unet: no Fashion-MNIST here, nothing to learn (%s)\n", e.what());
    return 77;
  }
  try {
    set_seed(a.seed);
    const Device dev = a.device.empty() ? get_device() : get_device(a.device);
    auto model = unet() | dev;
    auto opt = setup(Adam(1e-3), model);
    std::optional<TensorBoardLogger> tb;
    if (!a.tb.empty()) tb.emplace(a.tb);

    // Batches of clean images in [0, 1], shuffled; the noise is drawn per step.
    DataLoader loader(mapobs([](const Tensor& x) { return datasets::scaled_pixels(x); }, train.features),
                      {.batchsize = a.batch, .shuffle = true, .partial = false, .seed = a.seed});
    const auto t0 = std::chrono::steady_clock::now();
    int step = 0;
    while (step < a.steps) {
      for (const Tensor& clean : loader | dev) {
        const Tensor noisy = clean + (randn(clean.shape()) * kNoise | dev);
        auto [l, g] = withgradient([&](const auto& m) { return mse(m(noisy), clean); }, model);
        update(opt, model, std::get<0>(g));
        if (++step % 50 == 0 || step == a.steps) {
          std::fprintf(stderr, "step %d: loss %.5f\n", step, l.item<double>());
          if (tb) tb->log_scalar("loss", l.item<double>(), step);
        }
        if (step == a.steps) break;
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // The first 1000 test images with noise drawn from seed + 1.
    set_seed(a.seed + 1);
    double err = 0, noisy_err = 0;
    const int64_t n = 1000, b = 250;
    for (int64_t i = 0; i < n; i += b) {
      const Tensor clean = datasets::scaled_pixels(getobs(test.features, i, i + b)) | dev;
      const Tensor noisy = clean + (randn(clean.shape()) * kNoise | dev);
      const Tensor out = model(noisy);
      err += mse(out, clean).item<double>() * double(b);
      noisy_err += mse(noisy, clean).item<double>() * double(b);
      if (tb && i == 0) {
        const auto first16 = [](const Tensor& x) { return slice(x, 3, 0, 16); };
        tb->log_image("test/clean", first16(clean), step);
        tb->log_image("test/noisy", first16(noisy), step);
        tb->log_image("test/denoised", first16(out), step);
      }
    }
    std::fprintf(stderr, "test MSE: noisy %.5f, denoised %.5f\n", noisy_err / double(n), err / double(n));
    if (tb) tb->log_scalar("test_mse", err / double(n), step);
    std::cout << zoo::metric_json("unet", a.steps, seconds, "test_mse", err / double(n)) << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "unet: %s\n", e.what());
    return 1;
  }
}
