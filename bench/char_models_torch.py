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
  LayerNorm, Linear(64, V); Adam 1e-3;
- gpt (examples/char_gpt.cpp; defaults --dim 128 --heads 4 --layers 4
  --seq 128 --batch 16): nanoGPT's model: Embedding(V, d) + a learned
  position embedding, N pre-norm blocks (LayerNorm, causal self-attention
  with one bias-free Linear(d, 3d) for q, k and v and
  scaled_dot_product_attention(is_causal=True), a bias-free output Linear,
  LayerNorm, Linear(d, 4d), GELU (tanh), Linear(4d, d)), LayerNorm, a
  bias-free Linear(d, V); GPT-2's initialisation (weights truncated normal,
  std 0.02 cut at 2 std, the residual projections 0.02 / sqrt(2N), biases
  zero); AdamW(1e-3, betas (0.9, 0.95), weight decay 0.1 on every
  parameter). flx draws other numbers from the same distributions.

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


def trunc_(w, std):
    nn.init.trunc_normal_(w, std=std, a=-2 * std, b=2 * std)


class GPTBlock(nn.Module):
    def __init__(self, d, heads, layers):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.proj = nn.Linear(d, d, bias=False)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.gelu = nn.GELU(approximate="tanh")
        for w in (self.qkv.weight, self.up.weight):
            trunc_(w, 0.02)
        for w in (self.proj.weight, self.down.weight):
            trunc_(w, 0.02 / math.sqrt(2 * layers))
        nn.init.zeros_(self.up.bias)
        nn.init.zeros_(self.down.bias)

    def forward(self, x):  # [B, T, d]
        b, t, d = x.shape
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2)
                   for z in self.qkv(self.ln1(x)).split(d, dim=2))
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.down(self.gelu(self.up(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, v, seq, d=128, heads=4, layers=4):
        super().__init__()
        self.emb, self.pos = nn.Embedding(v, d), nn.Embedding(seq, d)
        self.blocks = nn.Sequential(*[GPTBlock(d, heads, layers) for _ in range(layers)])
        self.ln, self.head = nn.LayerNorm(d), nn.Linear(d, v, bias=False)
        for w in (self.emb.weight, self.pos.weight, self.head.weight):
            trunc_(w, 0.02)

    def forward(self, x):
        t = x.shape[1]
        return self.head(self.ln(self.blocks(self.emb(x) + self.pos(torch.arange(t, device=x.device)))))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", choices=["lstm", "transformer", "gpt"], required=True)
    p.add_argument("--steps", type=int)
    p.add_argument("--batch", type=int)
    p.add_argument("--seq", type=int)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--precision", choices=["f32", "bf16", "f16"], default="f32")
    p.add_argument("--dim", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--layers", type=int)
    p.add_argument("--init", choices=["torch", "flux", "flx"], default="torch",
                   help="flux: Flux's (and flx's) initialisation of the Linear and attention weights (flux_init_); "
                   "flx: the very weights examples/char_transformer draws for --seed (flx_random.py)")
    p.add_argument("--windows", choices=["numpy", "flx"], default="numpy",
                   help="flx: the training windows the flx example draws for --seed (std::mt19937_64, flx_random.py)")
    a = p.parse_args()
    # the examples' defaults: char_gpt's, or char_lstm's and char_transformer's
    defaults = dict(steps=400, batch=16, seq=128, dim=128, heads=4, layers=4) if a.model == "gpt" else \
        dict(steps=300, batch=32, seq=64, dim=64, heads=4, layers=2)
    for k, v in defaults.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    dev = torch.device(a.device)
    # flx computes in full Float32 on CUDA (TF32 only when asked for): so does PyTorch here
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    vocab, train, valid = load_text()
    v = len(vocab)
    if a.model == "gpt":
        if a.init != "torch":
            p.error("--init: the lstm and transformer only (the gpt has GPT-2's initialisation)")
        model = GPT(v, a.seq, a.dim, a.heads, a.layers).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
    else:
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
