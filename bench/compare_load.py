#!/usr/bin/env python3
"""flx and PyTorch training steps on a quiet CPU and with one core busy (issue 8).

A shared machine is the normal case: a data-loading thread, a compiler or
another job keeps a core busy. This runs, in each of --rounds interleaved
rounds:

  flx quiet        bench_flx at --threads threads
  flx loaded       the same, with a competing thread spinning inside the
                   benchmark process (bench_flx --busy 1)
  flx one thread   bench_flx with FLX_NUM_THREADS=1, quiet
  PyTorch quiet    the same training step in PyTorch, torch.set_num_threads(--threads)
  PyTorch loaded   the same, with a competing process spinning beside it (a
                   busy Python *thread* would hold the GIL and stall PyTorch's
                   Python side, which is not the case being measured)

and prints, per benchmark, the median over rounds of each run's median step
time, and the ratios against the targets:

  loaded:  flx <= 0.5x PyTorch at batch 32, <= 0.8x at batch 512,
           flx <= 1.5x flx's own one-thread time
  quiet:   flx no worse than before (compare with an earlier build: --baseline)

  python3 bench/compare_load.py --build build --rounds 5
  python3 bench/compare_load.py --build build --baseline /tmp/old/bench_flx   # also time an older build
                                 # (its libflx.so.0 copied beside it)
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import compare_pytorch as cp  # noqa: E402

BENCHES = ["mlp_step_b32", "mlp_step_b512"]
LOADED_TARGET = {"mlp_step_b32": 0.5, "mlp_step_b512": 0.8}
ONE_THREAD_TARGET = 1.5


@contextlib.contextmanager
def busy_process():
    """A process spinning on one core for as long as the block runs."""
    p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        p.kill()
        p.wait()


def flx_times(binary, threads, args, env=(), extra=()):
    res = cp.run_flx(binary, threads, args.repeats, args.min_time, "mlp_step", False, list(env), list(extra))
    return {n: res[n]["ns_per_iter"] for n in BENCHES if n in res}


def torch_times(threads, args, loaded):
    with busy_process() if loaded else contextlib.nullcontext():
        res, version = cp.run_torch(threads, args.repeats, args.min_time, BENCHES, False)
    return {n: res[n]["ns_per_iter"] for n in BENCHES}, version


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", help="CMake build directory holding bench/bench_flx (default: ./build)")
    ap.add_argument("--binary", help="path of the flx benchmark binary (overrides --build)")
    ap.add_argument("--baseline", help="an older bench_flx to time too (quiet and loaded), e.g. before a change")
    ap.add_argument("--threads", type=int, default=2, help="threads for flx and PyTorch (default 2)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds; medians over them (default 5)")
    ap.add_argument("--repeats", type=int, default=7, help="timed runs per benchmark and round (default 7)")
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds per timed run (default 0.2)")
    ap.add_argument("--json", help="also write all results to this JSON file")
    args = ap.parse_args()
    binary = cp.find_binary(args)

    runs = {k: [] for k in ("flx quiet", "flx loaded", "flx 1 thread", "PyTorch quiet", "PyTorch loaded",
                            "baseline quiet", "baseline loaded")}
    version = "?"
    for r in range(args.rounds):
        print(f"round {r + 1}/{args.rounds} ...", file=sys.stderr, flush=True)
        runs["flx quiet"].append(flx_times(binary, args.threads, args))
        runs["flx loaded"].append(flx_times(binary, args.threads, args, extra=["--busy", "1"]))
        runs["flx 1 thread"].append(flx_times(binary, 1, args))
        t, version = torch_times(args.threads, args, loaded=False)
        runs["PyTorch quiet"].append(t)
        runs["PyTorch loaded"].append(torch_times(args.threads, args, loaded=True)[0])
        if args.baseline:  # an older build may lack --busy: its competitor is a process
            base = Path(args.baseline)
            env = [f"LD_LIBRARY_PATH={base.parent}"]  # its own libflx, if copied beside it
            runs["baseline quiet"].append(flx_times(base, args.threads, args, env=env))
            with busy_process():
                runs["baseline loaded"].append(flx_times(base, args.threads, args, env=env))

    med = {k: {n: statistics.median(x[n] for x in v) for n in BENCHES} for k, v in runs.items() if v}
    spread = {k: {n: (min(x[n] for x in v), max(x[n] for x in v)) for n in BENCHES} for k, v in runs.items() if v}
    print(f"flx: {binary}   PyTorch {version}   threads {args.threads}   median of {args.rounds} interleaved rounds "
          f"(each the median of {args.repeats} runs of ~{args.min_time}s); loaded = one competing busy thread "
          f"(flx) / process (PyTorch)")
    cols = [k for k in med]
    print("step time in ms: median over rounds, then min..max over rounds")
    print(f"{'':15}" + "".join(f"{c:>16}" for c in cols))
    for n in BENCHES:
        print(f"{n:15}" + "".join(f"{med[c][n] / 1e6:16.3f}" for c in cols))
        print(f"{'':15}" + "".join(f"{spread[c][n][0] / 1e6:>9.2f}..{spread[c][n][1] / 1e6:<5.2f}" for c in cols))
    print()
    summary = {}
    for n in BENCHES:
        q = med["flx quiet"][n] / med["PyTorch quiet"][n]
        l = med["flx loaded"][n] / med["PyTorch loaded"][n]
        one = med["flx loaded"][n] / med["flx 1 thread"][n]
        ok_l, ok_one = l <= LOADED_TARGET[n], one <= ONE_THREAD_TARGET
        line = (f"{n}: flx/PyTorch quiet {q:.2f}, loaded {l:.2f} (target <= {LOADED_TARGET[n]}: "
                f"{'MET' if ok_l else 'MISSED'}); flx loaded / flx one thread {one:.2f} "
                f"(target <= {ONE_THREAD_TARGET}: {'MET' if ok_one else 'MISSED'})")
        if "baseline quiet" in med:
            line += (f"; flx quiet / baseline quiet {med['flx quiet'][n] / med['baseline quiet'][n]:.2f}, "
                     f"loaded / baseline loaded {med['flx loaded'][n] / med['baseline loaded'][n]:.2f}")
        print(line)
        summary[n] = {"quiet_ratio": q, "loaded_ratio": l, "loaded_over_one_thread": one}
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"threads": args.threads, "pytorch_version": version, "medians_ns": med, "runs": runs,
                       "summary": summary}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
