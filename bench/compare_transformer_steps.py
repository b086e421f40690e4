#!/usr/bin/env python3
"""The char-transformer in flx and in PyTorch, step by step, from one set of
initial weights on the same batches (issue 27, item 14).

Builds bench/char_models_torch.py's CharTransformer (PyTorch's
initialisation, or Flux's with --init flux), saves its state_dict, draws
--steps batches of the zoo's training windows as char_models_torch.py draws
them, and trains it --steps Adam steps in PyTorch and, through
build/bench/transformer_steps (which loads the same state_dict through
docs/checkpoints.md's key maps), in flx, both in --dtype (f64 first, to
separate definitions from rounding; then f32). Then prints, step by step,
the two losses, the worst relative difference among the gradients and the
one among the parameters after the update (max |flx - torch| / max |torch|
of each tensor), and names the first step, and the tensor, where they part
beyond --tol (1e-9 in f64, 1e-3 in f32). With --val, both sides also
report the validation loss (char_models_torch.py's 32 validation windows)
after the last step.

  python3 bench/compare_transformer_steps.py --build build --dtype f64 --steps 20
  python3 bench/compare_transformer_steps.py --build build --dtype f32 --steps 1000 --dump 0 --val

--fixture DIR writes a small case (the init, the batches and PyTorch's
losses, gradients and parameters: tests/data/transformer_steps/) that
tests/bench/check_transformer_steps.py checks flx against without torch.
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from safetensors.numpy import load_file, save_file
from safetensors.torch import save_file as save_torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from char_models_torch import CharTransformer, flux_init_, load_text, validation_windows  # noqa: E402


def find_tool(build):
    for root in ([Path(build)] if build else []) + [Path("build"), HERE.parent / "build"]:
        if (root / "bench" / "transformer_steps").is_file():
            return root / "bench" / "transformer_steps"
    sys.exit("compare_transformer_steps: bench/transformer_steps not found; build it first "
             "(cmake --build build --target transformer_steps)")


def flx_names(model):
    """PyTorch's parameters as flx names them and shapes them (as safetensors
    holds them): {flx name: function of a PyTorch tensor -> numpy array}."""
    out = {}
    for name, _ in model.named_parameters():
        if name in ("emb.weight", "pos.weight"):
            out[("tokens" if name == "emb.weight" else "positions") + ".weight"] = (name, lambda t: t.T, None)
        elif name.endswith("attn.in_proj_weight"):
            pre = name[:-len("in_proj_weight")]
            for i, p in enumerate(("q_proj", "k_proj", "v_proj")):
                out[pre + p + ".weight"] = (name, None, i)
        else:
            k = name.replace(".mlp.0.", ".up.").replace(".mlp.2.", ".down.")
            if k == "ln.weight" or ((".ln1." in k or ".ln2." in k) and k.endswith(".weight")):
                k = k[:-len("weight")] + "scale"
            out[k] = (name, None, None)
    return out


def as_flx(names, tensors):
    """{torch name: tensor} -> {flx name: numpy array in flx's file layout}."""
    out = {}
    for k, (name, f, third) in names.items():
        t = tensors[name].detach()
        if third is not None:
            e = t.shape[0] // 3
            t = t[third * e:(third + 1) * e]
        out[k] = (f(t) if f else t).contiguous().numpy().copy()  # a copy: the optimiser steps in place
    return out


def load_flx_state(model, names, flx):
    """Loads a state saved under flx's names (transformer_steps --write-init)
    into the PyTorch model: as_flx backwards."""
    sd = {}
    for k, (name, f, third) in names.items():
        t = torch.from_numpy(flx[k].copy())
        t = t.T if f else t
        if third is not None:
            sd.setdefault(name, [None, None, None])[third] = t
        else:
            sd[name] = t
    sd = {n: torch.cat(t) if isinstance(t, list) else t for n, t in sd.items()}
    model.load_state_dict(sd)


def batches(train, steps, batch, seq, seed):
    """char_models_torch.py's training windows: its generator and draws."""
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for _ in range(steps):
        starts = rng.integers(0, len(train) - seq - 1, batch)
        xs.append(np.stack([train[s:s + seq] for s in starts]))
        ys.append(np.stack([train[s + 1:s + seq + 1] for s in starts]))
    return np.stack(xs), np.stack(ys)


def train_torch(model, xs, ys, lr, dump, names, val=None):
    v = model.out.out_features
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    lossf = torch.nn.CrossEntropyLoss()
    losses, snaps = [], []
    model.train()
    for s in range(len(xs)):
        x, y = torch.from_numpy(xs[s]), torch.from_numpy(ys[s])
        loss = lossf(model(x).reshape(-1, v), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        losses.append(loss.item())
        grads = as_flx(names, {n: p.grad for n, p in model.named_parameters()}) if s < dump else None
        opt.step()
        if s < dump:
            snaps.append((grads, as_flx(names, dict(model.named_parameters()))))
    val_loss = None
    if val is not None:
        model.eval()
        with torch.no_grad():
            val_loss = float(lossf(model(val[0]).reshape(-1, v), val[1].reshape(-1)))
    return np.array(losses), snaps, val_loss


def rel(a, b):
    scale = np.max(np.abs(b))
    return float(np.max(np.abs(a - b)) / (scale if scale > 0 else 1.0))


def compare(flx, losses, snaps, tol, quiet=False):
    """Prints the table; returns (first step beyond tol or None, what)."""
    first = None
    if not quiet:
        print(f"{'step':>5} {'flx loss':>12} {'torch loss':>12} {'rel diff':>9}  {'worst gradient':>40}  "
              f"{'worst parameter':>40}")
    for s, lt in enumerate(losses):
        lf = float(flx["loss"][s])
        dl = abs(lf - lt) / abs(lt)
        gw = pw = (0.0, "")
        if s < len(snaps):
            grads, params = snaps[s]
            gw = max((rel(flx[f"grad.{s}.{k}"], g), k) for k, g in grads.items())
            pw = max((rel(flx[f"param.{s}.{k}"], p), k) for k, p in params.items())
        worst = max(dl, gw[0], pw[0])
        if first is None and worst > tol:
            what = "loss" if worst == dl else (f"gradient of {gw[1]}" if worst == gw[0] else f"parameter {pw[1]}")
            first = (s, what, worst)
        if not quiet and (s < 30 or s % 50 == 0 or s == len(losses) - 1):
            print(f"{s:5d} {lf:12.8f} {lt:12.8f} {dl:9.2e}  {gw[1]:>30} {gw[0]:9.2e}  {pw[1]:>30} {pw[0]:9.2e}")
    return first


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build")
    ap.add_argument("--dtype", choices=["f32", "f64"], default="f64")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--dump", type=int, default=None, help="steps whose gradients and parameters are compared "
                    "(default: every step)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--init", choices=["torch", "flux", "flx"], default="torch",
                    help="the initial weights: PyTorch's, PyTorch's model with Flux's initialisation "
                    "(char_models_torch.flux_init_), or flx's own (examples/char_transformer's for --seed)")
    ap.add_argument("--batches", choices=["numpy", "flx"], default="numpy",
                    help="the training windows: char_models_torch.py's draws, or examples/char_transformer's")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tol", type=float)
    ap.add_argument("--val", action="store_true", help="also compare the validation loss after the last step")
    ap.add_argument("--workdir", help="keep the files here (default: a temporary directory)")
    ap.add_argument("--only", choices=["flx", "torch"],
                    help="run one side alone (they agree: the validation loss of a configuration)")
    ap.add_argument("--fixture", help="write a test fixture into this directory instead of comparing")
    a = ap.parse_args()
    dump = 0 if a.only else (a.steps if a.dump is None else a.dump)
    tol = a.tol if a.tol is not None else (1e-9 if a.dtype == "f64" else 1e-3)
    dt = torch.float64 if a.dtype == "f64" else torch.float32
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    vocab, train, valid = load_text()
    model = CharTransformer(len(vocab), a.seq, a.dim, a.heads, a.layers)  # as char_models_torch.py builds it
    if a.init == "flux":
        flux_init_(model)
    names = flx_names(model)
    work = a.fixture or a.workdir or tempfile.mkdtemp(prefix="transformer_steps.")
    os.makedirs(work, exist_ok=True)
    shape = ["--seq", str(a.seq), "--dim", str(a.dim), "--heads", str(a.heads), "--layers", str(a.layers)]
    if a.init == "flx":
        path = os.path.join(work, "flx_init.safetensors")
        subprocess.run([str(find_tool(a.build)), "--write-init", path, "--seed", str(a.seed)] + shape, check=True)
        load_flx_state(model, names, load_file(path))
    model = model.to(dt)
    if a.batches == "flx":
        path = os.path.join(work, "flx_batches.safetensors")
        subprocess.run([str(find_tool(a.build)), "--write-batches", path, "--seed", str(a.seed), "--steps",
                        str(a.steps), "--batch", str(a.batch), "--seq", str(a.seq)], check=True)
        b = load_file(path)
        xs, ys = b["x"], b["y"]
    else:
        xs, ys = batches(train, a.steps, a.batch, a.seq, a.seed)
    data = {"x": xs, "y": ys}
    val = None
    if a.val:
        vx, vy = validation_windows(valid, a.seq)
        val = (vx, vy)
        data.update(val_x=vx.numpy(), val_y=vy.numpy())

    init_path, data_path = os.path.join(work, "init.safetensors"), os.path.join(work, "batches.safetensors")
    save_torch({k: t.detach().contiguous() for k, t in model.state_dict().items()}, init_path)
    save_file(data, data_path)
    if a.only == "torch":
        losses, _, val_torch = train_torch(model, xs, ys, a.lr, 0, names, val)
        print(f"PyTorch alone: loss at step {a.steps - 1} {losses[-1]:.6f}"
              + (f", validation loss {val_torch:.6f}" if val is not None else ""))
        return
    losses, snaps, val_torch = (None, None, None) if a.only == "flx" else train_torch(model, xs, ys, a.lr, dump,
                                                                                     names, val)
    if a.fixture:
        expect = {"loss": losses}
        for s, (g, p) in enumerate(snaps):
            expect.update({f"grad.{s}.{k}": v for k, v in g.items()})
            expect.update({f"param.{s}.{k}": v for k, v in p.items()})
        save_file(expect, os.path.join(work, "torch.safetensors"),
                  metadata={"dtype": a.dtype, "dim": str(a.dim), "heads": str(a.heads), "layers": str(a.layers),
                            "lr": repr(a.lr), "steps": str(a.steps), "dump": str(dump)})
        print(f"fixture in {work}: " + ", ".join(f"{n} {os.path.getsize(os.path.join(work, n))} bytes"
                                                 for n in sorted(os.listdir(work))))
        return

    out_path = os.path.join(work, "flx.safetensors")
    env = dict(os.environ, FLX_NUM_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads))
    cmd = [str(find_tool(a.build)), "--init", init_path, "--batches", data_path, "--out", out_path,
           "--dtype", a.dtype, "--dim", str(a.dim), "--heads", str(a.heads), "--layers", str(a.layers),
           "--lr", repr(a.lr), "--dump", str(dump)]
    subprocess.run(cmd, check=True, env=env)
    flx = load_file(out_path)
    if a.only == "flx":
        print(f"flx alone: loss at step {a.steps - 1} {float(flx['loss'][-1]):.6f}"
              + (f", validation loss {float(flx['val_loss']):.6f}" if val is not None else ""))
        return
    first = compare(flx, losses, snaps, tol)
    if val is not None:
        vf = float(flx["val_loss"])
        print(f"validation loss after {a.steps} steps: flx {vf:.6f}, PyTorch {val_torch:.6f} "
              f"(flx / PyTorch - 1 = {vf / val_torch - 1:+.2%})")
    if first is None:
        print(f"flx and PyTorch agree within {tol:g} at every step ({a.dtype}, {a.init} initialisation, "
              f"{a.batches} batches)")
    else:
        s, what, d = first
        print(f"first step beyond {tol:g}: step {s} ({what}, relative difference {d:.3g})")


if __name__ == "__main__":
    main()
