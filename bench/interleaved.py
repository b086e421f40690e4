"""What compare_cnn.py and compare_rnn.py share: finding and running a
bench_* program (bench_interleaved.hpp: one JSON line per benchmark), timing
the same work in PyTorch the way those programs time theirs, and the
interleaved rounds.
"""
import json
import subprocess
import sys
import time
from pathlib import Path


def find(build, name, caller, targets):
    """build/bench/NAME (or build/NAME) under --build, ./build or the repository's build."""
    repo = Path(__file__).resolve().parent.parent
    for r in ([Path(build)] if build else []) + [Path("build"), repo / "build"]:
        for cand in (r / "bench" / name, r / name):
            if cand.is_file():
                return cand
    sys.exit(f"{caller}: {name} not found; build it first (ninja -C build {targets}) or pass --build DIR")


def run_json(cmd, env):
    """The program's JSON lines, by benchmark name."""
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    return {d["name"]: d for d in (json.loads(line) for line in out.splitlines() if line.startswith("{"))}


def torch_time(torch, dev, body, min_time, iters=None):
    """ns per call of body over one run of `iters` calls; without iters, a
    warm-up and a calibration first, as bench_interleaved.hpp does. Returns
    (ns, iters)."""
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

    def run(n):
        sync()
        t0 = time.perf_counter()
        for _ in range(n):
            body()
        sync()
        return (time.perf_counter() - t0) * 1e9 / n
    if iters is None:
        best, spent, k = 1e300, 0.0, 0
        while k < 2 or (spent < 0.5e9 * min_time and k < 1000):
            ns = run(1)
            best, spent, k = min(best, ns), spent + ns, k + 1
        iters = max(1, int(min_time * 1e9 / best))
    return run(iters), iters


def run_rounds(rounds, order):
    """Each round calls the functions of `order`, forwards in even rounds and
    backwards in odd ones, so neither side always runs first."""
    t0 = time.time()
    for r in range(rounds):
        for f in (order if r % 2 == 0 else order[::-1]):
            f()
        print(f"round {r + 1}/{rounds} done ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)


def threads_in_use_note(flx, threads):
    """The line on how many threads flx still used at the end of its runs
    (the `NAME:threads_in_use` entries)."""
    tiu = sorted(set(v for k, vs in flx.items() if k.endswith(":threads_in_use") for v in vs))
    return (f"flx's threads in use at the end of its runs: {tiu} (fewer than {threads}: flx gave cores "
            "to other load; FLX_ADAPTIVE_THREADS=0 turns that off)")
