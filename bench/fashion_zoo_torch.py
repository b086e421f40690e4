#!/usr/bin/env python3
"""The model zoo's Fashion-MNIST U-Net and VAE in PyTorch, for bench/compare_zoo.py.

The same data, models, optimiser, batch size and steps as examples/unet.cpp
and examples/vae.cpp; the initialisations are PyTorch's own (flx's are
Flux's: Glorot-uniform weights, zero biases), and the random numbers (the
batches' order, the noise, ε) are each library's own:

- unet: noisy images (clean + 0.5 N(0, 1)) in, clean images out, mean
  squared error, Adam 1e-3, batches of 32 (shuffled, the short last one
  dropped). Each level: two 3×3 convolutions (padding 1), each followed by
  GroupNorm(4 groups) and relu; 1 => 16 at 28×28, MaxPool 2, 16 => 32 at
  14×14, MaxPool 2, 32 => 64 at 7×7, Upsample(2, nearest) and a 3×3
  convolution 64 => 32, concatenated with the 14×14 level's input along the
  channels, 64 => 32, Upsample and 32 => 16, concatenated with the 28×28
  input, 32 => 16, a 1×1 convolution 16 => 1. Reports test_mse: the MSE of
  the first 1000 test images denoised, their noise drawn from seed + 1.
- vae: Flux's model-zoo vae_mnist: Linear(784, 500) tanh, heads Linear(500, 2)
  for μ and log σ, z = μ + ε exp(log σ), decoder Linear(2, 500) tanh,
  Linear(500, 784) to logits; loss: binary cross-entropy with logits summed
  over the pixels plus KL, per image, plus 0.01 times the sum of the
  decoder's squared weights and biases; Adam 1e-3, batches of 128. Reports
  test_neg_elbo: cross-entropy plus KL per image over the 10000 test images.

Prints one JSON line: model, steps, seconds (training only), and the metric.

  python3 bench/fashion_zoo_torch.py --model unet --steps 400
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fashion_mnist_torch import default_data, read_idx  # noqa: E402


def images(root, split):
    """[N, 1, 28, 28] float32 in [0, 1]."""
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz")).astype(np.float32) / 255
    return torch.from_numpy(x).unsqueeze(1)


def block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(4, cout), nn.ReLU(),
                         nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(4, cout), nn.ReLU())


class Skip(nn.Module):
    """cat(inner(x), x) along the channels (Flux's SkipConnection with cat)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return torch.cat([self.inner(x), x], dim=1)


def level(inner, inner_out, out):
    return nn.Sequential(nn.MaxPool2d(2), inner, nn.Upsample(scale_factor=2, mode="nearest"),
                         nn.Conv2d(inner_out, out, 3, padding=1))


def unet(c=16):
    bottom = block(2 * c, 4 * c)
    middle = nn.Sequential(block(c, 2 * c), Skip(level(bottom, 4 * c, 2 * c)), block(4 * c, 2 * c))
    return nn.Sequential(block(1, c), Skip(level(middle, 2 * c, c)), block(2 * c, c), nn.Conv2d(c, 1, 1))


class VAE(nn.Module):
    def __init__(self, inp=784, latent=2, hidden=500):
        super().__init__()
        self.linear, self.mu, self.logsigma = nn.Linear(inp, hidden), nn.Linear(hidden, latent), nn.Linear(hidden, latent)
        self.decoder = nn.Sequential(nn.Linear(latent, hidden), nn.Tanh(), nn.Linear(hidden, inp))

    def neg_elbo(self, x):
        """(cross-entropy, KL), each per image."""
        h = torch.tanh(self.linear(x))
        mu, logsigma = self.mu(h), self.logsigma(h)
        z = mu + torch.randn_like(logsigma) * torch.exp(logsigma)
        n = x.shape[0]
        kl = 0.5 * torch.sum(torch.exp(2 * logsigma) + mu ** 2 - 1 - 2 * logsigma) / n
        bce = F.binary_cross_entropy_with_logits(self.decoder(z), x, reduction="sum") / n
        return bce, kl


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["unet", "vae"], required=True)
    p.add_argument("--steps", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    a = p.parse_args()
    if a.steps is None:
        a.steps = 300 if a.model == "unet" else 2000
    if a.batch is None:
        a.batch = 32 if a.model == "unet" else 128
    dev = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    root = default_data()
    train, test = images(root, "train"), images(root, "test")
    if a.model == "vae":
        train, test = train.reshape(-1, 784), test.reshape(-1, 784)
    model = (unet() if a.model == "unet" else VAE()).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(a.seed)
    sync()
    t0 = time.perf_counter()
    step = 0
    while step < a.steps:
        order = torch.randperm(len(train), generator=g)
        for i in range(0, len(order) - a.batch + 1, a.batch):
            x = train[order[i:i + a.batch]].to(dev)
            if a.model == "unet":
                loss = F.mse_loss(model(x + 0.5 * torch.randn_like(x)), x)
            else:
                bce, kl = model.neg_elbo(x)
                reg = sum(torch.sum(w ** 2) for w in model.decoder.parameters())
                loss = bce + kl + 0.01 * reg
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            if step == a.steps:
                break
    sync()
    seconds = time.perf_counter() - t0
    torch.manual_seed(a.seed + 1)
    with torch.no_grad():
        if a.model == "unet":
            err = 0.0
            for i in range(0, 1000, 250):
                x = test[i:i + 250].to(dev)
                err += float(F.mse_loss(model(x + 0.5 * torch.randn_like(x)), x)) * 250
            result = {"test_mse": err / 1000}
        else:
            bce, kl = model.neg_elbo(test.to(dev))
            result = {"test_neg_elbo": float(bce + kl), "bce": float(bce), "kl": float(kl)}
    print(json.dumps({"model": a.model, "steps": a.steps, "seconds": seconds, **result}))


if __name__ == "__main__":
    main()
