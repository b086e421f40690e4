#!/usr/bin/env python3
"""The model zoo's models against the same in PyTorch (issues 20, 28).

Runs build/examples/char_<model> (lstm, transformer, gpt) and
bench/char_models_torch.py, or build/examples/<model> (unet, vae) and
bench/fashion_zoo_torch.py (the same
data, model, optimiser, batch, sequence length and steps) on the CPU with
the same thread count, or with --device cuda both on the GPU:

  --rounds R   R interleaved rounds of --steps steps each (the order
               alternating), and prints the median training time per step of
               each side and the ratio flx / PyTorch (target <= 1.0);
  --long N     then one run of N steps each (per seed of --seeds; "default":
               each example's own budget), and prints both validation
               losses (the U-Net's test MSE, the VAE's negative ELBO),
               training times and samples, and with several seeds each
               side's mean and their ratio.
  --rounds 0   leaves the timing out.

PyTorch draws its own initial weights and training windows; --torch-init
flux gives it Flux's initialisation, and --torch-init flx --torch-windows flx
the very weights and windows of the flx program for the same seed (replayed
by flx_random.py: the transformer's weights; both models' windows), so
that the validation losses differ by rounding alone.

  python3 bench/compare_zoo.py --build build --models transformer --rounds 5 --steps 50 --long 1000
  python3 bench/compare_zoo.py --build build --models transformer --rounds 0 --long 1000 --seeds 1,2,3 \
      --torch-init flx --torch-windows flx
  python3 bench/compare_zoo.py --build build --models gpt --rounds 5 --steps 20 --long default
  python3 bench/compare_zoo.py --build build --models unet --rounds 5 --steps 20 --long default
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from interleaved import run_rounds

HERE = Path(__file__).resolve().parent
# The Fashion-MNIST models: their program, PyTorch script and metric.
IMAGE_MODELS = {"unet": "test_mse", "vae": "test_neg_elbo"}


def find(build, name):
    for root in ([Path(build)] if build else []) + [Path("build"), HERE.parent / "build"]:
        if (root / "examples" / name).is_file():
            return root / "examples" / name
    sys.exit(f"compare_zoo: examples/{name} not found; build it first (cmake --build build --target {name})")


def json_line(cmd, env):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"compare_zoo: {' '.join(map(str, cmd))} failed:\n{p.stderr}")
    return json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build")
    ap.add_argument("--models", default="lstm,transformer")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--long", default="0",
                    help="N steps, or 'default': each example's own budget (char_gpt 400, unet 300, vae 2000)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: both sides on the GPU (flx's CUDA:0, PyTorch's cuda)")
    ap.add_argument("--precision", choices=["f32", "bf16", "f16"], default="f32",
                    help="bf16/f16: flx's bf16(model) with MixedPrecision(Float32, Adam) against torch.autocast")
    ap.add_argument("--size", default="",
                    help="the transformer's (or gpt's) --dim,--heads,--layers,--seq,--batch (e.g. 384,6,6,256,8: GPT-sized)")
    ap.add_argument("--seeds", default="1", help="the seeds of the --long runs, comma-separated")
    ap.add_argument("--torch-init", choices=["torch", "flux", "flx"], default="torch",
                    help="PyTorch's initial weights (char_models_torch.py --init)")
    ap.add_argument("--torch-windows", choices=["numpy", "flx"], default="numpy",
                    help="PyTorch's training windows (char_models_torch.py --windows)")
    ap.add_argument("--json")
    a = ap.parse_args()
    env = dict(os.environ, FLX_NUM_THREADS=str(a.threads), OMP_NUM_THREADS=str(a.threads),
               FLX_SILENCE_WARN_NO_GPU="1")
    result = {"device": a.device, "threads": a.threads, "rounds": a.rounds, "steps": a.steps, "precision": a.precision,
              "size": a.size}
    for model in a.models.split(","):
        image = model in IMAGE_MODELS
        flx_cmd = [str(find(a.build, model if image else f"char_{model}")), "--device",
                   "CUDA" if a.device == "cuda" else "CPU"]
        torch_cmd = [sys.executable, str(HERE / ("fashion_zoo_torch.py" if image else "char_models_torch.py")),
                     "--model", model, "--threads", str(a.threads), "--device", a.device]
        if not image:
            torch_cmd += ["--windows", a.torch_windows]
        if a.torch_init != "torch":
            torch_cmd += ["--init", a.torch_init]
        shared = ["--precision", a.precision] if a.precision != "f32" else []
        if a.size and model in ("transformer", "gpt"):
            for flag, v in zip(["--dim", "--heads", "--layers", "--seq", "--batch"], a.size.split(",")):
                shared += [flag, v]
        flx_cmd += shared
        torch_cmd += shared
        per_step = {"flx": [], "torch": []}
        entry = {}

        def timed(side, cmd):
            return lambda: per_step[side].append(json_line(cmd + ["--steps", str(a.steps)], env)["seconds"] / a.steps)
        if a.rounds > 0:
            run_rounds(a.rounds, [timed("flx", flx_cmd), timed("torch", torch_cmd)])
            timing(model, a, per_step, entry)
        if a.long != "0":
            long_runs(model, a, flx_cmd, torch_cmd, env, entry)
        result[model] = entry
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1) + "\n")


def timing(model, a, per_step, entry):
    f, t = statistics.median(per_step["flx"]), statistics.median(per_step["torch"])
    label = model + (f" {a.precision}" if a.precision != "f32" else "") + (f" ({a.size})" if a.size else "")
    print(f"{label}: training step, median of {a.rounds} interleaved rounds of {a.steps} steps, "
          f"{f'{a.threads} threads' if a.device == 'cpu' else 'on the GPU'}: flx {f * 1e3:.1f} ms, PyTorch {t * 1e3:.1f} ms, flx/PyTorch {f / t:.3f} "
          f"(target <= 1.0: {'met' if f / t <= 1.0 else 'MISSED'}); "
          f"ranges {min(per_step['flx']) * 1e3:.1f}..{max(per_step['flx']) * 1e3:.1f} / "
          f"{min(per_step['torch']) * 1e3:.1f}..{max(per_step['torch']) * 1e3:.1f} ms")
    entry.update(flx_step_s=f, torch_step_s=t, ratio=f / t)


def long_runs(model, a, flx_cmd, torch_cmd, env, entry):
    """One run of --long steps a side per seed; the validation losses (or the image models' metric), and
    their means over the seeds."""
    image = model in IMAGE_MODELS
    metric = IMAGE_MODELS.get(model, "val_loss")
    budget = [] if a.long == "default" else ["--steps", a.long]
    vf, vt = [], []
    for seed in [int(s) for s in a.seeds.split(",")]:
        lf = json_line(flx_cmd + budget + ["--seed", str(seed)], env)
        lt = json_line(torch_cmd + budget + ["--seed", str(seed)], env)
        assert lf["steps"] == lt["steps"], (lf["steps"], lt["steps"])
        vf.append(lf[metric])
        vt.append(lt[metric])
        print(f"{model}, {lf['steps']} steps, seed {seed}: {metric} flx {lf[metric]:.4f} in "
              f"{lf['seconds']:.1f} s, PyTorch {lt[metric]:.4f} in {lt['seconds']:.1f} s"
              + ("" if image else f" (init {a.torch_init}, windows {a.torch_windows})"))
        if not image:
            print(f"  flx's sample:     {lf['sample'][:120]!r}")
            print(f"  PyTorch's sample: {lt['sample'][:120]!r}")
        entry.update(long_steps=lf["steps"], metric=metric, flx_value=lf[metric], torch_value=lt[metric],
                     flx_seconds=lf["seconds"], torch_seconds=lt["seconds"])
    if len(vf) > 1:
        mf, mt = statistics.mean(vf), statistics.mean(vt)
        print(f"{model}, mean of {len(vf)} seeds: {metric} flx {mf:.4f}, PyTorch {mt:.4f}, "
              f"flx / PyTorch - 1 = {mf / mt - 1:+.2%}")
        entry.update(seeds=a.seeds, flx_values=vf, torch_values=vt, flx_mean=mf, torch_mean=mt)


if __name__ == "__main__":
    main()
