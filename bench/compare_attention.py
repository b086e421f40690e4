#!/usr/bin/env python3
"""Compare flx's attention with PyTorch's (issue 30).

Runs the already-built build/bench/bench_attention, times the same work in
PyTorch in this process, and prints the medians over --rounds interleaved
rounds (each round: flx, then PyTorch, the order alternating from round to
round; one timed run of about --min-time seconds each, after a warm-up), the
peak memory of one step of each, and the ratios against the issue's targets:

  linear_L<n>  a forward and backward pass of attention at sequence length n
               (256, 1024, 4096, 8192), model dim 256 in 8 heads, batch 4:
               the loss sum(o .* c), its gradients for q, k and v. flx:
               dot_product_attention(q, k, v, 8, {.scores = false}); PyTorch:
               torch.nn.functional.scaled_dot_product_attention on
               (batch, heads, n, 32) tensors (its flash-attention kernel on
               the CPU). Targets: flx / PyTorch time <= 1.0, peak memory
               <= 1.2x PyTorch's, growing linearly with n.
  scores_L<n>  the same with the weights materialised (flx: .scores = true;
               PyTorch: softmax(q kᵀ / √32) v), up to n = 4096 (no target).

Memory, measured alike on both sides: each benchmark runs once in a fresh
process (flx: bench_attention --memory NAME; PyTorch: this script with
--torch-memory NAME), which builds the inputs and then runs one step; the
figure is the growth of the process's peak resident set during that step
(Linux's VmHWM, restarted at VmRSS just before the step by writing 5 to
/proc/self/clear_refs), which on the CPU counts every allocation of either
library, its allocator's slack included. flx's own
counter (memory_stats: bytes of tensors in use at the peak) is printed
beside it. On --device cuda: flx's memory_stats peak and PyTorch's
torch.cuda.max_memory_allocated, each from a reset before the step (flx's
backend's scratch memory is not in its figure; its allocator's
reserved_peak is printed too).

Both use the same number of threads (flx: FLX_NUM_THREADS, PyTorch:
torch.set_num_threads). Missed targets are reported, not failures (exit
status 0). PyTorch need not be installed for flx's tests: this script runs
by hand.

  python3 bench/compare_attention.py --build build --rounds 3       # --threads 2, Float32
  python3 bench/compare_attention.py --build build --dtype bf16
  python3 bench/compare_attention.py --build build --device cuda    # flx on CUDA:0, PyTorch on cuda
  python3 bench/compare_attention.py --build build --small --rounds 1   # a check that everything runs
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from interleaved import find, run_json, run_rounds, threads_in_use_note, torch_time

SIZE = dict(dim=256, heads=8, batch=4, lengths=[256, 1024, 4096, 8192])
SMALL = dict(dim=16, heads=2, batch=2, lengths=[16, 40])
LONGEST_WITH_SCORES = 4096
TIME_TARGET, MEMORY_TARGET = 1.0, 1.2


def names(small):
    """Benchmark names (by the full size's lengths, as bench_attention's) and the length each runs at."""
    out = {}
    full, run = SIZE["lengths"], (SMALL if small else SIZE)["lengths"]
    for scores in (False, True):
        for i, n in enumerate(full):
            if scores and n > LONGEST_WITH_SCORES:
                continue
            out[("scores_L" if scores else "linear_L") + str(n)] = run[min(i, len(run) - 1)]
    return out


# ---- PyTorch side ----------------------------------------------------------

def torch_dtype(torch, name):
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16, "f64": torch.float64}[name]


def torch_step(torch, dev, dtype, causal, small, name, n):
    """The step of benchmark `name` at length n: a function running it once."""
    s = SMALL if small else SIZE
    b, h, d = s["batch"], s["heads"], s["dim"] // s["heads"]
    g = torch.Generator().manual_seed(1234)
    q, k, v, c = [(torch.rand(b, h, n, d, generator=g) - 0.5).to(dtype).to(dev) for _ in range(4)]
    for t in (q, k, v):
        t.requires_grad_(True)
    F = torch.nn.functional
    mask = torch.ones(n, n, dtype=torch.bool, device=dev).tril() if causal and name.startswith("scores") else None

    def attention():
        if name.startswith("linear"):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        logits = q @ k.transpose(-2, -1) * d ** -0.5
        if mask is not None:
            logits = logits.masked_fill(~mask, float("-inf"))
        return torch.softmax(logits, -1) @ v

    def body():
        for t in (q, k, v):
            t.grad = None
        (attention() * c).sum().backward()
    return body


def status_bytes(key):
    """A "Key:   N kB" line of /proc/self/status, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    return -1


def restart_rss_peak():
    """Starts a new peak of the resident set (5 to clear_refs sets VmHWM to
    VmRSS) and returns the resident set now. getrusage's ru_maxrss would not
    do: a child keeps the peak of the process it was forked from."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return status_bytes("VmRSS:")


def torch_memory(args):
    """--torch-memory NAME: one step in this fresh process; prints its JSON line."""
    import torch
    torch.set_num_threads(args.threads)
    n = names(args.small)[args.torch_memory]
    dev = args.device
    step = torch_step(torch, dev, torch_dtype(torch, args.dtype), args.causal, args.small, args.torch_memory, n)
    if dev == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    rss = restart_rss_peak()
    step()
    if dev == "cuda":
        torch.cuda.synchronize()
    out = {"name": args.torch_memory, "rss_growth_bytes": status_bytes("VmHWM:") - rss}
    if dev == "cuda":
        out["peak_bytes"] = torch.cuda.max_memory_allocated() - base
    print(json.dumps(out))


# ---- the comparison ----------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--dtype", choices=["f32", "bf16", "f16", "f64"], default="f32")
    ap.add_argument("--causal", action="store_true", help="causal attention (is_causal=True)")
    ap.add_argument("--filter", default="", help="only the benchmarks whose name contains this")
    ap.add_argument("--small", action="store_true", help="tiny sizes (a check that everything runs)")
    ap.add_argument("--no-memory", action="store_true", help="times only")
    ap.add_argument("--json", default=None, help="write the medians and ratios here")
    ap.add_argument("--flx-env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment for flx only, e.g. FLX_ATTENTION_LIBRARY=0")
    ap.add_argument("--torch-memory", default=None, help=argparse.SUPPRESS)  # the fresh process's mode
    args = ap.parse_args()
    if args.torch_memory:
        return torch_memory(args)

    import torch
    torch.set_num_threads(args.threads)
    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        sys.exit("compare_attention: --device cuda, but PyTorch sees no GPU")
    torch.backends.cuda.matmul.allow_tf32 = False  # full Float32 on both sides
    bench = find(args.build, "bench_attention", "compare_attention", "bench_attention")
    env = dict(os.environ, FLX_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    flx_env = dict(env, **dict(kv.partition("=")[::2] for kv in args.flx_env))
    common = ["--dtype", args.dtype] + (["--causal"] if args.causal else []) + (["--small"] if args.small else [])
    flx_dev = "CUDA:0" if dev == "cuda" else "CPU"
    flx_cmd = [str(bench), "--device", flx_dev, "--repeats", "1", "--min-time", str(args.min_time)] + common
    if args.filter:
        flx_cmd += ["--filter", args.filter]
    chosen = {k: v for k, v in names(args.small).items() if args.filter in k}

    tb = {name: torch_step(torch, dev, torch_dtype(torch, args.dtype), args.causal, args.small, name, n)
          for name, n in chosen.items()}
    titers, flx, pt = {}, {}, {}

    def add(store, name, value):
        store.setdefault(name, []).append(value)

    def do_flx():
        for name, d in run_json(flx_cmd, flx_env).items():
            add(flx, name, d["ns_per_iter"])
            add(flx, name + ":threads_in_use", d["threads_in_use"])

    def do_torch():
        for name, body in tb.items():
            ns, titers[name] = torch_time(torch, dev, body, args.min_time, titers.get(name))
            add(pt, name, ns)

    run_rounds(args.rounds, [do_flx, do_torch])
    del tb  # PyTorch's inputs: the memory runs below are other processes

    mem = {}
    if not args.no_memory:
        for name in chosen:
            f = run_json([str(bench), "--memory", name, "--device", flx_dev] + common, flx_env)[name]
            cmd = [sys.executable, __file__, "--torch-memory", name, "--device", dev, "--dtype", args.dtype,
                   "--threads", str(args.threads)] + (["--causal"] if args.causal else []) + \
                  (["--small"] if args.small else [])
            p = json.loads(subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            mem[name] = (f, p)
            print(f"memory of {name} measured", file=sys.stderr, flush=True)

    med = statistics.median
    s = SMALL if args.small else SIZE
    mb = lambda b: f"{b / 2**20:.1f}"  # noqa: E731
    print(f"flx {bench} vs PyTorch {torch.__version__} on {dev}, {args.dtype}, {args.threads} threads, medians of "
          f"{args.rounds} interleaved rounds; model dim {s['dim']} in {s['heads']} heads, batch {s['batch']}"
          f"{', causal' if args.causal else ''}{' (--small)' if args.small else ''}"
          f"{' flx env ' + ' '.join(args.flx_env) if args.flx_env else ''}")
    print(threads_in_use_note(flx, args.threads))
    mem_kind = "peak allocated" if dev == "cuda" else "peak RSS growth"
    print(f"{'benchmark':<14}{'flx ms':>10}{'PyTorch ms':>12}{'ratio':>8}  met  "
          f"{'flx MiB':>9}{'PyTorch MiB':>13}{'ratio':>8}  met  {'flx tensors MiB':>16}   ({mem_kind})")
    result = {"rounds": args.rounds, "threads": args.threads, "device": dev, "dtype": args.dtype,
              "causal": args.causal, "torch": torch.__version__, "small": args.small}
    for name in chosen:
        if name not in flx or name not in pt:
            continue
        f, p = med(flx[name]), med(pt[name])
        target = name.startswith("linear")
        tmet = ("yes" if f / p <= TIME_TARGET else "NO ") if target else "-  "
        line = f"{name:<14}{f / 1e6:>10.1f}{p / 1e6:>12.1f}{f / p:>8.3f}  {tmet}  "
        entry = {"flx_ns": f, "torch_ns": p, "time_ratio": f / p}
        if name in mem:
            fm, pm = mem[name]
            fb = fm["peak_bytes"] if dev == "cuda" else fm["rss_growth_bytes"]
            pb = pm["peak_bytes"] if dev == "cuda" else pm["rss_growth_bytes"]
            ratio = fb / pb if pb > 0 else float("inf")
            mmet = ("yes" if ratio <= MEMORY_TARGET else "NO ") if target else "-  "
            line += f"{mb(fb):>9}{mb(pb):>13}{ratio:>8.2f}  {mmet}  {mb(fm['peak_bytes']):>16}"
            entry.update(flx_bytes=fb, torch_bytes=pb, memory_ratio=ratio, flx_tensor_peak_bytes=fm["peak_bytes"],
                         flx_reserved_peak_bytes=fm.get("reserved_peak_bytes"))
        print(line)
        result[name] = entry
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
