#!/usr/bin/env python3
"""The model zoo's character-level models in PyTorch, for bench/compare_zoo.py.

The same data, models, optimiser, batch size, sequence length and steps as
examples/char_lstm.cpp and examples/char_transformer.cpp:

- the text: Debian's license texts (base-files' /usr/share/common-licenses;
  the regular files, by name, symlinks left out) as bytes; the vocabulary
  is the sorted distinct bytes; the first 90 % trains, the last 10 %
  validates;
- a step: `--batch` windows of `--seq` + 1 bytes at random places of the
  training text (the inputs and the next bytes), cross-entropy over every
  position, Adam;
- the validation loss: the mean cross-entropy over 32 windows spread evenly
  over the validation text;
- lstm: Embedding(V, 64), LSTM(64 => 256), Linear(256, V); Adam 2e-3;
- transformer: Embedding(V, 64) + a learned position embedding (seq, 64),
  2 pre-norm blocks (LayerNorm, causal MultiheadAttention(64, 4 heads, no
  biases, as Flux's default), LayerNorm, Linear(64, 256), GELU (tanh), Linear(256, 64)),
  LayerNorm, Linear(64, V); Adam 1e-3.

--device cuda runs it on the GPU, in full Float32 (TF32 off, as flx).
--init flux gives the Linear and attention weights Flux's initialisation
(flx's) instead of PyTorch's; --init flx starts from the very weights
examples/char_transformer.cpp draws for the same --seed, and --windows flx
trains on the windows the flx examples draw (both replayed by flx_random.py),
so that the two programs differ by rounding alone.
--precision bf16 (or f16) trains under torch.autocast of that dtype (f16
with torch.amp.GradScaler), the counterpart of flx's bf16(model) with
MixedPrecision(Float32, Adam); --dim, --heads and --layers size the
transformer (a GPT-sized one: --dim 384 --heads 6 --layers 6 --seq 256).

Prints one JSON line: model, steps, seconds (training only), val_loss,
sample (200 bytes sampled from "The " at temperature 1, seeded).
"""
import argparse
import json
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn

import flx_random

LICENSES = "/usr/share/common-licenses"


def load_text(root=LICENSES):
    names = sorted(n for n in os.listdir(root)
                   if os.path.isfile(os.path.join(root, n)) and not os.path.islink(os.path.join(root, n)))
    data = b"".join(open(os.path.join(root, n), "rb").read() for n in names)
    vocab = sorted(set(data))
    index = {b: i for i, b in enumerate(vocab)}
    ids = np.array([index[b] for b in data], dtype=np.int64)
    cut = len(ids) * 9 // 10
    return vocab, ids[:cut], ids[cut:]


def validation_windows(valid, seq, n=32):
    starts = np.linspace(0, len(valid) - seq - 1, n).astype(np.int64)
    x = np.stack([valid[s:s + seq] for s in starts])
    y = np.stack([valid[s + 1:s + seq + 1] for s in starts])
    return torch.from_numpy(x), torch.from_numpy(y)


class CharLSTM(nn.Module):
    def __init__(self, v):
        super().__init__()
        self.emb = nn.Embedding(v, 64)
        self.lstm = nn.LSTM(64, 256, batch_first=True)
        self.out = nn.Linear(256, v)

    def forward(self, x):  # [B, T] -> [B, T, V]
        return self.out(self.lstm(self.emb(x))[0])


class Block(nn.Module):
    def __init__(self, d=64, heads=4):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, bias=False, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class CharTransformer(nn.Module):
    def __init__(self, v, seq, d=64, heads=4, layers=2):
        super().__init__()
        self.emb, self.pos = nn.Embedding(v, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList([Block(d, heads) for _ in range(layers)])
        self.ln, self.out = nn.LayerNorm(d), nn.Linear(d, v)

    def forward(self, x):
        t = x.shape[1]
        h = self.emb(x) + self.pos(torch.arange(t, device=x.device))
        mask = ~torch.tril(torch.ones(t, t, dtype=torch.bool, device=x.device))
        for b in self.blocks:
            h = b(h, mask)
        return self.out(self.ln(h))


def flux_init_(model):
    """Flux's initialisation, in place: every nn.Linear Glorot-uniform with a
    zero bias, and each of nn.MultiheadAttention's q, k and v projections
    Glorot-uniform on its own fan (E => E), as flx's MultiHeadAttention
    (Flux's) has three Dense layers where PyTorch stacks them in one [3E, E]
    matrix. Embeddings (N(0, 1)) and layer norms (1, 0) are the same in both."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.Linear):  # out_proj included (a NonDynamicallyQuantizableLinear)
                nn.init.xavier_uniform_(m.weight)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.MultiheadAttention):
                e = m.embed_dim
                for i in range(3):
                    nn.init.xavier_uniform_(m.in_proj_weight[i * e:(i + 1) * e])
                if m.in_proj_bias is not None:
                    nn.init.zeros_(m.in_proj_bias)
    return model


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["lstm", "transformer"], required=True)
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--precision", choices=["f32", "bf16", "f16"], default="f32")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--init", choices=["torch", "flux", "flx"], default="torch",
                   help="flux: Flux's (and flx's) initialisation of the Linear and attention weights (flux_init_); "
                   "flx: the very weights examples/char_transformer draws for --seed (flx_random.py)")
    p.add_argument("--windows", choices=["numpy", "flx"], default="numpy",
                   help="flx: the training windows the flx example draws for --seed (std::mt19937_64, flx_random.py)")
    a = p.parse_args()
    dev = torch.device(a.device)
    # flx computes in full Float32 on CUDA (TF32 only when asked for): so does PyTorch here
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    vocab, train, valid = load_text()
    v = len(vocab)
    model = CharLSTM(v) if a.model == "lstm" else CharTransformer(v, a.seq, a.dim, a.heads, a.layers)
    if a.init == "flux":
        flux_init_(model)
    elif a.init == "flx":
        if a.model != "transformer":
            p.error("--init flx: the transformer only")
        init = flx_random.char_transformer_init(a.seed, v, a.seq, a.dim, a.layers)
        model.load_state_dict({k: torch.from_numpy(t) for k, t in init.items()})
    model = model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3 if a.model == "lstm" else 1e-3)
    low = {"bf16": torch.bfloat16, "f16": torch.float16}.get(a.precision)
    autocast = lambda: torch.autocast(a.device, dtype=low, enabled=low is not None)  # noqa: E731
    scaler = torch.amp.GradScaler(a.device, enabled=a.precision == "f16")
    rng = np.random.default_rng(a.seed)
    windows = flx_random.Windows(a.seed)
    lossf = nn.CrossEntropyLoss()
    sync()
    t0 = time.perf_counter()
    model.train()
    for _ in range(a.steps):
        if a.windows == "flx":
            starts = windows.starts(len(train), a.seq, a.batch)
        else:
            starts = rng.integers(0, len(train) - a.seq - 1, a.batch)
        x = torch.from_numpy(np.stack([train[s:s + a.seq] for s in starts])).to(dev)
        y = torch.from_numpy(np.stack([train[s + 1:s + a.seq + 1] for s in starts])).to(dev)
        with autocast():
            loss = lossf(model(x).reshape(-1, v), y.reshape(-1))
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    sync()
    seconds = time.perf_counter() - t0
    model.eval()
    vx, vy = (t.to(dev) for t in validation_windows(valid, a.seq))
    with torch.no_grad(), autocast():
        val = float(lossf(model(vx).reshape(-1, v), vy.reshape(-1)))
        g = torch.Generator().manual_seed(a.seed)
        ids = [vocab.index(c) for c in b"The "]
        for _ in range(200):
            ctx = torch.tensor([ids[-a.seq:]], device=dev)
            probs = torch.softmax(model(ctx)[0, -1].float(), dim=0)
            ids.append(int(torch.multinomial(probs.cpu(), 1, generator=g)))
    print(json.dumps({"model": a.model, "steps": a.steps, "seconds": seconds, "val_loss": val, "precision": a.precision,
                      "sample": bytes(vocab[i] for i in ids).decode("latin-1")}))


if __name__ == "__main__":
    main()
