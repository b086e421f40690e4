#!/usr/bin/env python3
"""Compare flx with PyTorch on the benchmarks of issue item 11.

Runs the already-built flx benchmark binary (it builds nothing), runs the same
benchmarks in PyTorch on the CPU with the same thread count, and prints a
table of times and ratios flx / PyTorch against the targets:

  (a) add_f32_100    a + b on two 100-element Float32 tensors:
                     flx <= 1 us and >= 5x faster than PyTorch
  (b) mlp_step_b32   one training step (forward, backward, Adam) of
      mlp_step_b512  Chain(Dense(784,256,relu), Dense(256,256,relu), Dense(256,10))
                     with logitcrossentropy(model(x), onehotbatch(labels, 10)):
                     flx <= 0.6x PyTorch at batch 32, <= 0.95x at batch 512

Missed targets are reported, not treated as failures (exit status 0).

  python3 bench/compare_pytorch.py --build build
  python3 bench/compare_pytorch.py --binary build/bench/bench_flx --threads 2
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGETS = {
    # name: (description, absolute limit in ns or None, max ratio flx/torch)
    "add_f32_100": ("(a) a + b, 2x100 Float32", 1000.0, 1.0 / 5.0),
    "mlp_step_b32": ("(b) MLP train step, batch 32", None, 0.60),
    "mlp_step_b512": ("(b) MLP train step, batch 512", None, 0.95),
}


def find_binary(args):
    if args.binary:
        p = Path(args.binary)
        if not p.is_file():
            sys.exit(f"compare_pytorch: no flx benchmark binary at {p}")
        return p
    roots = [Path(args.build)] if args.build else []
    repo = Path(__file__).resolve().parent.parent
    roots += [Path("build"), repo / "build"]
    for r in roots:
        for cand in (r / "bench" / "bench_flx", r / "bench_flx"):
            if cand.is_file():
                return cand
    sys.exit("compare_pytorch: bench_flx not found; build it first "
             "(cmake -S . -B build -G Ninja && ninja -C build bench_flx) "
             "or pass --binary PATH")


def run_flx(binary, threads, repeats, min_time, filt, steady, extra_env, extra_args=()):
    env = dict(os.environ)
    env["FLX_NUM_THREADS"] = str(threads)
    env["OMP_NUM_THREADS"] = str(threads)  # what flx builds before issue 8 read
    for kv in extra_env:
        k, _, v = kv.partition("=")
        env[k] = v
    cmd = [str(binary), "--repeats", str(repeats), "--min-time", str(min_time)]
    if steady:
        cmd.append("--steady")
    if filt:
        cmd += ["--filter", filt]
    cmd += list(extra_args)
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            rec = json.loads(line)
            res[rec["name"]] = rec
    return res


# ---- PyTorch side ----------------------------------------------------------

def time_torch(make, repeats, min_time, reset):
    """Median ns per call over `repeats` runs of a calibrated iteration count.

    Mirrors bench_flx: warm-up, calibration from the fastest pass, then timed
    runs; with reset, fresh state (untimed) and 3 untimed calls before each.
    """
    fn = make()
    t_end = time.perf_counter() + 0.5 * min_time
    n = 0
    while time.perf_counter() < t_end or n < 3:
        fn()
        n += 1
    iters, best = 1, float("inf")
    while True:
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            fn()
        dt = time.perf_counter_ns() - t0
        best = min(best, dt / iters)
        if dt >= 0.5e9 * min_time:
            break
        iters *= 4
    iters = max(1, int(min_time * 1e9 / best))
    per = []
    for _ in range(repeats):
        if reset:
            fn = None
            fn = make()
            for _ in range(3):
                fn()
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            fn()
        per.append((time.perf_counter_ns() - t0) / iters)
    return {"ns_per_iter": statistics.median(per), "min_ns": min(per), "max_ns": max(per),
            "repeats": repeats, "iters": iters}


POOL = 8  # distinct batches cycled through, as in bench_flx


def run_torch(threads, repeats, min_time, names, steady):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.set_num_threads(threads)
    res = {}

    if "add_f32_100" in names:
        def make_add():
            a = torch.rand(100, dtype=torch.float32)
            b = torch.rand(100, dtype=torch.float32)
            return lambda: a + b
        res["add_f32_100"] = time_torch(make_add, repeats, min_time, reset=False)

    def make_step(batch):
        torch.manual_seed(42)
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(),
                              nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        # flx holds x as (784, batch) column-major: the same bytes as (batch, 784) row-major.
        xs = [torch.rand(batch, 784) for _ in range(POOL)]
        labels = [torch.randint(0, 10, (batch,), dtype=torch.int64) for _ in range(POOL)]
        k = [0]

        def step():
            i = k[0]
            k[0] = (i + 1) % POOL
            opt.zero_grad(set_to_none=True)
            # Same work as flx: one-hot targets, mean over the batch of
            # -sum(y * logsoftmax(logits)) (Flux's logitcrossentropy).
            y = F.one_hot(labels[i], 10).to(torch.float32)
            loss = F.cross_entropy(model(xs[i]), y)
            loss.backward()
            opt.step()
            return loss
        return step

    for batch in (32, 512):
        name = f"mlp_step_b{batch}"
        if name in names:
            res[name] = time_torch(lambda: make_step(batch), repeats, min_time, reset=not steady)
    return res, torch.__version__


def fmt_time(ns):
    if ns < 1e3:
        return f"{ns:8.1f} ns"
    if ns < 1e6:
        return f"{ns / 1e3:8.2f} us"
    return f"{ns / 1e6:8.3f} ms"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", help="CMake build directory holding bench/bench_flx (default: ./build)")
    ap.add_argument("--binary", help="path of the flx benchmark binary (overrides --build)")
    ap.add_argument("--threads", type=int, default=2, help="threads for both flx and PyTorch (default 2)")
    ap.add_argument("--repeats", type=int, default=15, help="timed runs per benchmark; the median is reported")
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds per timed run (default 0.2)")
    ap.add_argument("--filter", default="", help="only benchmarks whose name contains this")
    ap.add_argument("--steady", action="store_true",
                    help="training benchmarks: keep training one model across timed runs "
                         "(default: fresh model and optimiser before each timed run)")
    ap.add_argument("--flx-env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment for the flx binary, e.g. FLX_ADAPTIVE_THREADS=0 (repeatable)")
    ap.add_argument("--json", help="also write all results to this JSON file")
    ap.add_argument("--train", action="store_true",
                    help="also train the Fashion-MNIST MLP in flx-train and in PyTorch (bench/compare_train.py) "
                         "and compare epoch times and accuracies")
    ap.add_argument("--epochs", type=int, default=10, help="epochs for --train (default 10)")
    ap.add_argument("--batchsize", type=int, default=64, help="batch size for --train (default 64)")
    args = ap.parse_args()

    binary = find_binary(args)
    names = [n for n in TARGETS if args.filter in n]
    flx = run_flx(binary, args.threads, args.repeats, args.min_time, args.filter, args.steady, args.flx_env)
    torch_res, torch_version = run_torch(args.threads, args.repeats, args.min_time, names, args.steady)

    extra = f"   flx env: {' '.join(args.flx_env)}" if args.flx_env else ""
    print(f"flx binary: {binary}   PyTorch {torch_version}   threads: {args.threads}   "
          f"median of {args.repeats} runs of ~{args.min_time}s{'   steady' if args.steady else ''}{extra}")
    hdr = f"{'benchmark':32} {'flx':>12} {'PyTorch':>12} {'flx/PyTorch':>12}  target"
    print(hdr)
    print("-" * (len(hdr) + 30))
    summary = {}
    for name in names:
        desc, limit, max_ratio = TARGETS[name]
        f = flx.get(name)
        t = torch_res.get(name)
        if f is None or t is None:
            print(f"{desc:32} {'missing':>12}")
            continue
        fns, tns = f["ns_per_iter"], t["ns_per_iter"]
        ratio = fns / tns
        ok = ratio <= max_ratio and (limit is None or fns <= limit)
        if limit is not None:
            target = f"<= {limit / 1e3:g} us and >= {1 / max_ratio:g}x faster (ratio <= {max_ratio:.2f})"
            speed = f"  [{tns / fns:.2f}x faster]" if fns < tns else f"  [{fns / tns:.2f}x slower]"
        else:
            target = f"ratio <= {max_ratio:.2f}"
            speed = ""
        print(f"{desc:32} {fmt_time(fns):>12} {fmt_time(tns):>12} {ratio:12.3f}  "
              f"{target}: {'MET' if ok else 'MISSED'}{speed}")
        print(f"{'':32} {'[' + fmt_time(f['min_ns']).strip() + ' .. ' + fmt_time(f['max_ns']).strip() + ']':>24}"
              f"  (flx min..max)   [{fmt_time(t['min_ns']).strip()} .. {fmt_time(t['max_ns']).strip()}] (PyTorch)")
        summary[name] = {"flx": f, "pytorch": t, "ratio": ratio, "target_met": ok}
    training = None
    if args.train:
        import compare_train  # beside this script
        print()
        training = compare_train.compare(compare_train.find_exe(args.build), args.epochs, args.batchsize, args.threads)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": args.threads, "pytorch_version": torch_version, "steady": args.steady,
                       "flx_env": args.flx_env, "results": summary, "training": training}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
