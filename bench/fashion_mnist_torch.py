#!/usr/bin/env python3
"""The Fashion-MNIST MLP of flx-train, in PyTorch, for bench/compare_train.py.

Batches are drawn as a PyTorch user who cares about speed would: a fresh
permutation per epoch and one indexing of the tensors per batch
(--torch-loader uses torch.utils.data.DataLoader instead).

Same model (784→256→256→10, relu, or the CNN), loss (cross-entropy on logits), optimiser and
learning-rate schedule (flx-train's recipe for each model: Adam, lr 1e-3 decayed by 0.75 each epoch for
the MLP; lr 3e-3 with 0.3 epochs of linear warm-up and a cosine decay per step for the CNN), batch size,
epochs and shuffling, on the CPU with the given
thread count, or on a GPU with --device cuda[:N] (the data then lives on the GPU, the running loss stays
there, and each epoch's time ends with torch.cuda.synchronize()). Prints one JSON line per epoch: epoch, seconds, samples_per_s,
loss, test_accuracy.
"""
import argparse
import gzip
import json
import math
import os
import time

import numpy as np
import torch


def read_idx(path):
    opener = gzip.open if os.path.exists(path) or not os.path.exists(path[:-3]) else open
    with opener(path if opener is gzip.open else path[:-3], "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(root, split):
    prefix = "train" if split == "train" else "t10k"
    x = read_idx(os.path.join(root, f"{prefix}-images-idx3-ubyte.gz")).reshape(-1, 784).astype(np.float32) / 255
    y = read_idx(os.path.join(root, f"{prefix}-labels-idx1-ubyte.gz")).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def default_data():
    """Where flx looks: $FLX_DATA/fashion-mnist (FLX_DATA is flx's datasets root), else Debian's place, else the
    package unpacked by scripts/gpu-carry.sh on a GPU machine."""
    root = os.environ.get("FLX_DATA")
    cands = ([os.path.join(root, "fashion-mnist"), root] if root else []) + [
        "/usr/share/datasets/fashion-mnist", "/opt/gpu-deps/usr/share/datasets/fashion-mnist"]
    return next((c for c in cands if os.path.isdir(c)), cands[0])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batchsize", type=int, default=64)
    p.add_argument("--schedule", choices=["exp", "cosine"], help="default: the model's recipe (as flx-train's)")
    p.add_argument("--lr", type=float, help="default: mlp 1e-3, cnn 3e-3")
    p.add_argument("--decay", type=float, default=0.75, help="exp's learning rate factor per epoch")
    p.add_argument("--warmup", type=float, help="epochs of linear warm-up (default: mlp 0, cnn 0.3)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda[:N]")
    p.add_argument("--model", default="mlp", choices=["mlp", "cnn"],
                   help="flx-train's models: the MLP, or the CNN of --model cnn (the same layers in PyTorch)")
    p.add_argument("--data", default=default_data())
    p.add_argument("--torch-loader", action="store_true",
                   help="batch with torch.utils.data.DataLoader (per-sample indexing and collation, much slower) "
                        "instead of indexing the tensors with a fresh permutation per epoch")
    a = p.parse_args()
    cnn = a.model == "cnn"
    a.schedule = a.schedule or ("cosine" if cnn else "exp")
    a.lr = a.lr if a.lr is not None else (3e-3 if cnn else 1e-3)
    a.warmup = a.warmup if a.warmup is not None else (0.3 if cnn else 0.0)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "test")
    if a.model == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(784, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                    torch.nn.ReLU(), torch.nn.Linear(256, 10))
    else:  # flx-train's cnn: flx's (784, N) columns are PyTorch's (N, 1, 28, 28) rows
        nn = torch.nn
        model = nn.Sequential(nn.Unflatten(1, (1, 28, 28)), nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32),
                              nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64),
                              nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
                              nn.Linear(128, 10))
    dev = torch.device(a.device)
    gpu = dev.type != "cpu"
    if gpu:  # the model initialised on the CPU as there (same numbers), then moved with the data
        model = model.to(dev)
        xtr, ytr, xte, yte = xtr.to(dev), ytr.to(dev), xte.to(dev), yte.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    def batches():
        if a.torch_loader:
            yield from torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xtr, ytr), batch_size=a.batchsize,
                                                   shuffle=True)
            return
        perm = torch.randperm(len(ytr))
        if gpu:
            perm = perm.to(dev)
        for i in range(0, len(ytr), a.batchsize):
            idx = perm[i:i + a.batchsize]
            yield xtr[idx], ytr[idx]

    steps = (len(ytr) + a.batchsize - 1) // a.batchsize

    def learning_rate(epoch, batch):  # flx-train's schedule.hpp
        t, warm = (epoch - 1) * steps + batch, a.warmup * steps
        if t < warm:
            return a.lr * (t + 1) / warm
        if a.schedule == "cosine":
            return a.lr * 0.5 * (1 + math.cos(math.pi * t / (a.epochs * steps)))
        return a.lr * a.decay ** (epoch - 1)

    for epoch in range(1, a.epochs + 1):
        t0 = time.perf_counter()
        total, n = 0.0, 0
        model.train()
        for batch, (x, y) in enumerate(batches()):
            for g in opt.param_groups:
                g["lr"] = learning_rate(epoch, batch)
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            if gpu:  # no .item() per step: it would wait for the GPU each step
                total += loss.detach() * len(y)
            else:
                total += loss.item() * len(y)
            n += len(y)
        if gpu:
            torch.cuda.synchronize(dev)
            total = total.item()
        seconds = time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            acc = (model(xte).argmax(1) == yte).float().mean().item()
        print(json.dumps({"epoch": epoch, "seconds": seconds, "samples_per_s": n / seconds, "loss": total / n,
                          "test_accuracy": acc}), flush=True)


if __name__ == "__main__":
    main()
