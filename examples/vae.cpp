// The model zoo's variational autoencoder (Flux's model-zoo vae_mnist.jl) on
// Fashion-MNIST (docs/zoo.md): an Encoder struct, Dense(784 => 500, tanh)
// then two Dense(500 => 2) heads for μ and log σ; the reparametrisation
// z = μ + ε exp(log σ), ε ~ N(0, 1); a Chain decoder, Dense(2 => 500, tanh),
// Dense(500 => 784) to the pixels' logits. The loss is the zoo's: the
// negative ELBO per image, the reconstruction's binary cross-entropy with
// logits (summed over the pixels) plus the KL divergence of N(μ, σ²) from
// N(0, 1), plus 0.01 times the decoder's squared weights; Adam 1e-3,
// batches of 128.
//
// Reports the negative ELBO per image (the cross-entropy and the KL, without
// the regulariser) on the 10000 test images (ε drawn from --seed) after
// --steps steps. With --tb DIR, logs the loss and, at the end, images
// decoded from a 12×12 grid of latent points over [-2, 2]² (sigmoid of the
// logits), 16 test images and their reconstructions
// (TensorBoardLogger::log_image).
//
//   vae [--steps 2000] [--batch 128] [--seed 1] [--device NAME] [--tb DIR]
//
// The data come from $FLX_DATA or /usr/share/datasets/fashion-mnist; without
// them the example says so and exits with 77. Prints "step N: loss L" lines
// on stderr, then one JSON line: model, steps, seconds (training only),
// test_neg_elbo. bench/fashion_zoo_torch.py --model vae is the same in
// PyTorch.
#include <flx/flx.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>
#include <utility>

#include "zoo_args.hpp"

using namespace flx;

namespace {

constexpr int64_t kInput = 784, kHidden = 500, kLatent = 2;
constexpr double kLambda = 0.01;  // the decoder's L2 regularisation

struct Encoder {
  Dense linear, mu, logsigma;
  Encoder(int64_t input, int64_t latent, int64_t hidden)
      : linear(input, hidden, flx::tanh), mu(hidden, latent), logsigma(hidden, latent) {}
  std::pair<Tensor, Tensor> operator()(const Tensor& x) const {
    const Tensor h = linear(x);
    return {mu(h), logsigma(h)};
  }
};
FLX_FUNCTOR(Encoder, linear, mu, logsigma)

auto Decoder(int64_t input, int64_t latent, int64_t hidden) {
  return Chain(Dense(latent, hidden, flx::tanh), Dense(hidden, input));
}
using DecoderT = decltype(Decoder(0, 0, 0));

struct VAE {
  Encoder encoder;
  DecoderT decoder;
};
FLX_FUNCTOR(VAE, encoder, decoder)

// The negative ELBO per image of x (784, n): cross-entropy and KL, each
// summed and divided by n; ε from the global generator.
std::pair<Tensor, Tensor> neg_elbo(const VAE& m, const Tensor& x) {
  const auto [mu, logsigma] = m.encoder(x);
  const Tensor z = mu + (randn(logsigma.shape()) | x.device()) * exp(logsigma);
  const double n = double(x.shape()[1]);
  const Tensor kl = 0.5 * sum(exp(2.0 * logsigma) + mu * mu - 1.0 - 2.0 * logsigma) / n;
  return {logitbinarycrossentropy(m.decoder(z), x, {.agg = Agg::sum}) / n, kl};
}

Tensor squares(const Dense& d) { return sum(d.weight * d.weight) + sum(d.bias * d.bias); }

}  // namespace

int main(int argc, char** argv) {
  zoo::Args defaults;
  defaults.steps = 2000;
  defaults.batch = 128;
  const zoo::Args a = zoo::parse_args(argc, argv, "vae", false, false, defaults, /*with_tb=*/true);
  datasets::Dataset train, test;
  try {
    train = datasets::fashion_mnist("train", UInt8);
    test = datasets::fashion_mnist("test", UInt8);
  } catch (const Error& e) {
    std::printf("vae: no Fashion-MNIST here, nothing to learn (%s)\n", e.what());
    return 77;
  }
  try {
    set_seed(a.seed);
    const Device dev = a.device.empty() ? get_device() : get_device(a.device);
    auto model = VAE{Encoder(kInput, kLatent, kHidden), Decoder(kInput, kLatent, kHidden)} | dev;
    auto opt = setup(Adam(1e-3), model);
    std::optional<TensorBoardLogger> tb;
    if (!a.tb.empty()) tb.emplace(a.tb);

    // Batches of flattened images (784, batch) in [0, 1], shuffled.
    auto flat = [](const Tensor& x) { return flatten(datasets::scaled_pixels(x)); };
    DataLoader loader(mapobs(flat, train.features),
                      {.batchsize = a.batch, .shuffle = true, .partial = false, .seed = a.seed});
    const auto t0 = std::chrono::steady_clock::now();
    int step = 0;
    while (step < a.steps) {
      for (const Tensor& x : loader | dev) {
        auto [l, g] = withgradient(
            [&](const VAE& m) {
              const auto [bce, kl] = neg_elbo(m, x);
              return bce + kl + kLambda * (squares(std::get<0>(m.decoder.layers)) + squares(std::get<1>(m.decoder.layers)));
            },
            model);
        update(opt, model, std::get<0>(g));
        if (++step % 100 == 0 || step == a.steps) {
          std::fprintf(stderr, "step %d: loss %.3f\n", step, l.item<double>());
          if (tb) tb->log_scalar("loss", l.item<double>(), step);
        }
        if (step == a.steps) break;
      }
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // The test images, ε drawn from seed + 1.
    set_seed(a.seed + 1);
    const Tensor x = flat(test.features) | dev;
    const auto [bce, kl] = neg_elbo(model, x);
    const double elbo = (bce + kl).item<double>();
    std::fprintf(stderr, "test: negative ELBO %.3f per image (cross-entropy %.3f, KL %.3f)\n", elbo,
                 bce.item<double>(), kl.item<double>());
    if (tb) {
      tb->log_scalar("test_neg_elbo", elbo, step);
      // The decoder over a 12×12 grid of latent points, (2, 144): z1 across, z2 down.
      std::vector<float> grid;
      for (int j = 0; j < 12; ++j)
        for (int i = 0; i < 12; ++i) grid.insert(grid.end(), {-2.0f + 4.0f * float(i) / 11, 2.0f - 4.0f * float(j) / 11});
      const Tensor z = tensor(grid, Shape{kLatent, 144}) | dev;
      tb->log_image("samples/latent_grid", reshape(sigmoid(model.decoder(z)), {28, 28, 1, 144}), step,
                    {.columns = 12, .padding = 0});
      const Tensor x16 = slice(x, 1, 0, 16);
      const Tensor recon = sigmoid(model.decoder(model.encoder(x16).first));  // the means' decodings
      tb->log_image("test/images", reshape(x16, {28, 28, 1, 16}), step);
      tb->log_image("test/reconstructions", reshape(recon, {28, 28, 1, 16}), step);
    }
    std::cout << zoo::metric_json("vae", a.steps, seconds, "test_neg_elbo", elbo) << std::endl;
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "vae: %s\n", e.what());
    return 1;
  }
}
